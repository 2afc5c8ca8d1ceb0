//! Checking a workload's interface against what set-up would have produced.
//!
//! Reads the kernel state back and lists every difference. Additions made by others (extra
//! routes from chained plugins, extra addresses) are not differences: only what set-up creates
//! is checked.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::address::list_addresses;
use crate::error::Result;
use crate::link::{get_link, Link};
use crate::netlink::Rtnl;
use crate::netns::{NamespaceThread, NetNs, NetNsLookup};
use crate::route::{list_routes, Route};
use crate::setup::host_sysctls;
use crate::spec::{format_mac, host_prefix, WorkloadSpec, HOST_MAC, IPV4_NEXT_HOP, IPV6_NEXT_HOP};
use crate::sysctl;

/// One way the kernel state differs from the expectation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// What is checked: `host interface "np1" MTU`, `route 0.0.0.0/0 in /run/netns/x`.
    pub subject: String,
    pub expected: String,
    pub actual: String,
}

struct Differences(Vec<Difference>);

impl Differences {
    fn expect(&mut self, subject: impl Into<String>, expected: impl ToString, actual: impl ToString) {
        let (expected, actual) = (expected.to_string(), actual.to_string());
        if expected != actual {
            self.0.push(Difference { subject: subject.into(), expected, actual });
        }
    }

    fn missing(&mut self, subject: impl Into<String>, expected: impl ToString) {
        self.0.push(Difference { subject: subject.into(), expected: expected.to_string(), actual: "missing".into() });
    }
}

/// Compares the kernel with `spec`. Moves the calling thread into the workload's namespace.
pub fn check_workload(thread: &mut NamespaceThread, spec: &WorkloadSpec) -> Result<Vec<Difference>> {
    spec.validate()?;
    let mut found = Differences(Vec::new());
    let mut host = Rtnl::open().map_err(|e| e.into_dataplane("open rtnetlink socket in the host namespace"))?;
    let host_name = &spec.host_ifname;
    let host_link = get_link(&mut host, host_name).map_err(|e| e.into_dataplane(format!("look up \"{host_name}\"")))?;
    if let Some(link) = &host_link {
        let subject = format!("host interface \"{host_name}\"");
        check_link(&mut found, &subject, link, spec);
        found.expect(format!("{subject} MAC"), format_mac(&HOST_MAC), link.mac.as_deref().map(format_mac).unwrap_or_default());
        for (key, value) in host_sysctls(spec) {
            found.expect(key.replace('/', "."), value, sysctl::read(&key).unwrap_or_else(|e| e.detail));
        }
        let host_routes = routes_by_family(&mut host, spec)?;
        for ip in &spec.addresses {
            let destination = IpNet::new(*ip, host_prefix(ip)).unwrap();
            let expected = format!("{destination} dev \"{host_name}\"");
            match host_routes.iter().find(|r| r.destination == destination) {
                None => found.missing(format!("host route to {ip}"), expected),
                Some(route) if route.output_index != Some(link.index) => {
                    found.expect(format!("host route to {ip}"), expected, format!("{destination} via interface index {:?}", route.output_index))
                }
                Some(_) => {}
            }
        }
    } else {
        found.missing(format!("host interface \"{host_name}\""), "a veth");
    }

    let netns = match NetNs::lookup(&spec.netns)? {
        NetNsLookup::Found(netns) => netns,
        _ => {
            found.missing(format!("network namespace {}", spec.netns.display()), "a network namespace");
            return Ok(found.0);
        }
    };
    thread.enter(&netns)?;
    let mut pod = Rtnl::open().map_err(|e| e.into_dataplane("open rtnetlink socket in the workload namespace"))?;
    let ifname = &spec.container_ifname;
    let where_ = spec.netns.display();
    let Some(pod_link) = get_link(&mut pod, ifname).map_err(|e| e.into_dataplane(format!("look up \"{ifname}\"")))? else {
        found.missing(format!("interface \"{ifname}\" in {where_}"), "a veth");
        return Ok(found.0);
    };
    let subject = format!("interface \"{ifname}\" in {where_}");
    check_link(&mut found, &subject, &pod_link, spec);
    if let Some(host_link) = &host_link {
        found.expect(format!("{subject} peer"), format!("host interface \"{host_name}\" (index {})", host_link.index),
            match pod_link.peer_index { Some(i) if i == host_link.index => format!("host interface \"{host_name}\" (index {i})"), Some(i) => format!("index {i}"), None => "none".into() });
    }

    let addresses = list_addresses(&mut pod, pod_link.index).map_err(|e| e.into_dataplane(format!("list addresses of \"{ifname}\"")))?;
    for ip in &spec.addresses {
        let prefix = host_prefix(ip);
        match addresses.iter().find(|a| a.ip == *ip) {
            None => found.missing(format!("address {ip} on {subject}"), format!("{ip}/{prefix}")),
            Some(a) => found.expect(format!("address {ip} on {subject}"), format!("{ip}/{prefix}"), format!("{}/{}", a.ip, a.prefix_len)),
        }
    }

    let routes = routes_by_family(&mut pod, spec)?;
    let expect_route = |found: &mut Differences, destination: IpNet, gateway: Option<IpAddr>, scope_link: bool| {
        let expected = Route { destination, gateway, output_index: Some(pod_link.index), scope_link };
        let describe = |r: &Route| {
            let via = r.gateway.map(|g| format!(" via {g}")).unwrap_or_default();
            let scope = if r.scope_link && r.destination.addr().is_ipv4() { " scope link" } else { "" };
            let dev = match r.output_index { Some(i) if i == pod_link.index => format!(" dev \"{ifname}\""), Some(i) => format!(" dev index {i}"), None => String::new() };
            format!("{}{via}{dev}{scope}", r.destination)
        };
        let subject = format!("route to {destination} in {where_}");
        let same_kind = |r: &&Route| r.destination == destination && r.gateway == gateway && r.output_index == Some(pod_link.index);
        match routes.iter().find(same_kind) {
            Some(r) if !destination.addr().is_ipv4() || r.scope_link == scope_link => {}
            Some(r) => found.expect(subject, describe(&expected), describe(r)),
            None => match routes.iter().find(|r| r.destination == destination) {
                Some(r) => found.expect(subject, describe(&expected), describe(r)),
                None => found.missing(subject, describe(&expected)),
            },
        }
    };
    let effective = spec.effective_routes();
    if spec.has_ipv4() {
        expect_route(&mut found, IpNet::new(IpAddr::V4(IPV4_NEXT_HOP), 32).unwrap(), None, true);
    }
    for destination in effective {
        let gateway = if destination.addr().is_ipv4() { IpAddr::V4(IPV4_NEXT_HOP) } else { IpAddr::V6(IPV6_NEXT_HOP) };
        expect_route(&mut found, destination, Some(gateway), false);
    }

    let forwarding = if spec.allow_ip_forwarding { "1" } else { "0" };
    if spec.has_ipv4() {
        found.expect(format!("net.ipv4.ip_forward in {where_}"), forwarding, sysctl::read("net/ipv4/ip_forward").unwrap_or_else(|e| e.detail));
    }
    if spec.has_ipv6() {
        found.expect(format!("net.ipv6.conf.all.forwarding in {where_}"), forwarding, sysctl::read("net/ipv6/conf/all/forwarding").unwrap_or_else(|e| e.detail));
    }
    Ok(found.0)
}

fn check_link(found: &mut Differences, subject: &str, link: &Link, spec: &WorkloadSpec) {
    found.expect(format!("{subject} kind"), "veth", link.kind.as_deref().unwrap_or("none"));
    found.expect(format!("{subject} state"), "up", if link.up { "up" } else { "down" });
    if let Some(mtu) = spec.mtu {
        found.expect(format!("{subject} MTU"), mtu, link.mtu);
    }
    found.expect(format!("{subject} transmit queues"), spec.num_queues, link.num_tx_queues);
    found.expect(format!("{subject} receive queues"), spec.num_queues, link.num_rx_queues);
}

fn routes_by_family(rtnl: &mut Rtnl, spec: &WorkloadSpec) -> Result<Vec<Route>> {
    let mut routes = Vec::new();
    for (ipv6, wanted) in [(false, spec.has_ipv4()), (true, spec.has_ipv6())] {
        if wanted {
            routes.extend(list_routes(rtnl, ipv6).map_err(|e| e.into_dataplane("list routes"))?);
        }
    }
    Ok(routes)
}
