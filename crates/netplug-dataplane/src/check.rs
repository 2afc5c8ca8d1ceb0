//! Checking a workload's interface against what set-up would have produced.
//!
//! Reads the kernel state back and lists every difference. Additions made by others (extra
//! routes from chained plugins, extra addresses) are not differences: only what set-up creates
//! is checked.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::address::list_addresses;
use crate::error::Result;
use crate::link::{Link, get_link};
use crate::netlink::Rtnl;
use crate::netns::{NamespaceThread, NetNs, NetNsLookup};
use crate::route::{Route, list_routes};
use crate::setup::host_sysctls;
use crate::spec::{HOST_MAC, IPV4_NEXT_HOP, IPV6_NEXT_HOP, WorkloadSpec, format_mac, host_prefix};
use crate::sysctl;

/// One way the kernel state differs from the expectation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// What is checked: `host interface "np1" MTU`, `route to 0.0.0.0/0 in /run/netns/x`.
    pub subject: String,
    pub expected: String,
    pub actual: String,
}

#[derive(Default)]
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

    fn expect_sysctl(&mut self, subject: impl Into<String>, key: &str, expected: &str) {
        self.expect(subject, expected, sysctl::read(key).unwrap_or_else(|e| e.detail));
    }
}

/// Compares the kernel with `spec`. Moves the calling thread into the workload's namespace.
pub fn check_workload(thread: &mut NamespaceThread, spec: &WorkloadSpec) -> Result<Vec<Difference>> {
    spec.validate()?;
    let mut found = Differences::default();
    let host_link = check_host_side(&mut found, spec)?;
    check_workload_side(thread, &mut found, spec, host_link.as_ref())?;
    Ok(found.0)
}

/// The host end, its sysctls and the host routes; returns the host end if it exists.
fn check_host_side(found: &mut Differences, spec: &WorkloadSpec) -> Result<Option<Link>> {
    let mut host = Rtnl::open().map_err(|e| e.into_dataplane("open rtnetlink socket in the host namespace"))?;
    let name = &spec.host_ifname;
    let subject = format!("host interface \"{name}\"");
    let Some(link) = get_link(&mut host, name).map_err(|e| e.into_dataplane(format!("look up \"{name}\"")))? else {
        found.missing(subject, "a veth");
        return Ok(None);
    };
    check_link(found, &subject, &link, spec);
    found.expect(
        format!("{subject} MAC"),
        format_mac(&HOST_MAC),
        link.mac.as_deref().map(format_mac).unwrap_or_default(),
    );
    for (key, value) in host_sysctls(spec) {
        found.expect_sysctl(key.replace('/', "."), &key, value);
    }
    let routes = routes_by_family(&mut host, spec)?;
    for ip in &spec.addresses {
        let destination = IpNet::new(*ip, host_prefix(ip)).unwrap();
        let (subject, expected) = (format!("host route to {ip}"), format!("{destination} dev \"{name}\""));
        match routes.iter().find(|r| r.destination == destination) {
            None => found.missing(subject, expected),
            Some(route) if route.output_index != Some(link.index) => {
                found.expect(subject, expected, format!("{destination} via interface index {:?}", route.output_index))
            }
            Some(_) => {}
        }
    }
    Ok(Some(link))
}

/// The workload end, its addresses, routes and forwarding sysctls.
fn check_workload_side(
    thread: &mut NamespaceThread,
    found: &mut Differences,
    spec: &WorkloadSpec,
    host_link: Option<&Link>,
) -> Result<()> {
    let place = spec.netns.display();
    let NetNsLookup::Found(netns) = NetNs::lookup(&spec.netns)? else {
        found.missing(format!("network namespace {place}"), "a network namespace");
        return Ok(());
    };
    thread.enter(&netns)?;
    let mut pod = Rtnl::open().map_err(|e| e.into_dataplane("open rtnetlink socket in the workload namespace"))?;
    let ifname = &spec.container_ifname;
    let subject = format!("interface \"{ifname}\" in {place}");
    let Some(link) = get_link(&mut pod, ifname).map_err(|e| e.into_dataplane(format!("look up \"{ifname}\"")))? else {
        found.missing(subject, "a veth");
        return Ok(());
    };
    check_link(found, &subject, &link, spec);
    if let Some(mac) = spec.container_mac {
        found.expect(
            format!("{subject} MAC"),
            format_mac(&mac),
            link.mac.as_deref().map(format_mac).unwrap_or_default(),
        );
    }
    if let Some(host) = host_link {
        let peer = |index: u32| match index == host.index {
            true => format!("host interface \"{}\" (index {index})", host.name),
            false => format!("index {index}"),
        };
        found.expect(format!("{subject} peer"), peer(host.index), link.peer_index.map(peer).unwrap_or("none".into()));
    }

    let addresses = list_addresses(&mut pod, link.index)
        .map_err(|e| e.into_dataplane(format!("list addresses of \"{ifname}\"")))?;
    for ip in &spec.addresses {
        let expected = format!("{ip}/{}", host_prefix(ip));
        match addresses.iter().find(|a| a.ip == *ip) {
            None => found.missing(format!("address {ip} on {subject}"), expected),
            Some(a) => {
                found.expect(format!("address {ip} on {subject}"), expected, format!("{}/{}", a.ip, a.prefix_len))
            }
        }
    }

    check_workload_routes(found, &mut pod, spec, &link)?;

    let forwarding = if spec.allow_ip_forwarding { "1" } else { "0" };
    if spec.has_ipv4() {
        found.expect_sysctl(format!("net.ipv4.ip_forward in {place}"), "net/ipv4/ip_forward", forwarding);
    }
    if spec.has_ipv6() {
        found.expect_sysctl(
            format!("net.ipv6.conf.all.forwarding in {place}"),
            "net/ipv6/conf/all/forwarding",
            forwarding,
        );
    }
    Ok(())
}

/// The next-hop route and each requested route via the link-local next hop.
fn check_workload_routes(found: &mut Differences, pod: &mut Rtnl, spec: &WorkloadSpec, link: &Link) -> Result<()> {
    let routes = routes_by_family(pod, spec)?;
    let describe = |r: &Route| {
        let via = r.gateway.map(|g| format!(" via {g}")).unwrap_or_default();
        let scope = if r.scope_link && r.destination.addr().is_ipv4() { " scope link" } else { "" };
        let dev = match r.output_index {
            Some(i) if i == link.index => format!(" dev \"{}\"", link.name),
            Some(i) => format!(" dev index {i}"),
            None => String::new(),
        };
        format!("{}{via}{dev}{scope}", r.destination)
    };
    let mut expected = Vec::new();
    if spec.has_ipv4() {
        let next_hop = IpNet::new(IpAddr::V4(IPV4_NEXT_HOP), 32).unwrap();
        expected.push(Route { destination: next_hop, gateway: None, output_index: Some(link.index), scope_link: true });
    }
    for destination in spec.effective_routes() {
        let gateway = if destination.addr().is_ipv4() { IpAddr::V4(IPV4_NEXT_HOP) } else { IpAddr::V6(IPV6_NEXT_HOP) };
        expected.push(Route { destination, gateway: Some(gateway), output_index: Some(link.index), scope_link: false });
    }
    for want in expected {
        let subject = format!("route to {} in {}", want.destination, spec.netns.display());
        // Scope is only meaningful for IPv4; the kernel reports IPv6 routes with universe scope.
        let matches = |r: &&Route| {
            r.destination == want.destination
                && r.gateway == want.gateway
                && r.output_index == want.output_index
                && (!want.destination.addr().is_ipv4() || r.scope_link == want.scope_link)
        };
        if routes.iter().any(|r| matches(&r)) {
            continue;
        }
        match routes.iter().find(|r| r.destination == want.destination) {
            Some(other) => found.expect(subject, describe(&want), describe(other)),
            None => found.missing(subject, describe(&want)),
        }
    }
    Ok(())
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
