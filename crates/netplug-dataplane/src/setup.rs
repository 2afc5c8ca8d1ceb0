//! Setting up a workload's interface: the veth pair, sysctls, addresses and routes, all or nothing.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use nix::errno::Errno;

use crate::address::{self, add_address, list_addresses};
use crate::error::{DataplaneError, Result};
use crate::link::{self, Link, VethPair, create_veth, delete_link, get_link, set_up};
use crate::netlink::{NetlinkError, Rtnl};
use crate::netns::{NamespaceThread, NetNs};
use crate::route::{Route, add_route, list_routes};
use crate::spec::{HOST_MAC, IPV4_NEXT_HOP, IPV6_MIN_MTU, IPV6_NEXT_HOP, WorkloadSpec, format_mac, host_prefix};
use crate::sysctl;

/// How long to wait for the host end's IPv6 link-local address (the pod's IPv6 next hop).
pub const LINK_LOCAL_TIMEOUT: Duration = Duration::from_secs(5);

/// RTMGRP_IPV6_IFADDR: notifications of IPv6 address changes.
const IPV6_ADDRESS_GROUP: u32 = 0x100;

/// One end of the pair as created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceInfo {
    pub name: String,
    pub index: u32,
    pub mac: String,
}

/// A route programmed in the workload: destination via next hop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgrammedRoute {
    pub destination: IpNet,
    pub gateway: IpAddr,
}

/// Both ends of a workload's veth pair, and the routes given to the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadInterfaces {
    pub host: InterfaceInfo,
    pub container: InterfaceInfo,
    pub mtu: u32,
    pub routes: Vec<ProgrammedRoute>,
}

/// Creates and configures the workload's interface. Moves the calling thread into the
/// workload's namespace. On any failure after the veth exists, the veth is deleted again, which
/// also removes every route and address made through it: no partial state is left.
pub fn setup_workload(thread: &mut NamespaceThread, spec: &WorkloadSpec) -> Result<WorkloadInterfaces> {
    spec.validate()?;
    let netns = NetNs::open(&spec.netns)?;
    if netns.is_current()? {
        return Err(DataplaneError::invalid(
            "set up workload interface",
            format!("{} is the host's own network namespace", spec.netns.display()),
        ));
    }
    let mut host = Rtnl::open().map_err(|e| e.into_dataplane("open rtnetlink socket in the host namespace"))?;
    replace_stale_host_link(&mut host, &spec.host_ifname)?;

    let pair = VethPair {
        name: &spec.host_ifname,
        mac: Some(HOST_MAC),
        peer_name: &spec.container_ifname,
        peer_mac: spec.container_mac,
        peer_netns_fd: netns.raw_fd(),
        mtu: spec.mtu,
        queues: spec.num_queues,
    };
    let create_op = || {
        format!(
            "create veth \"{}\" with peer \"{}\" in {}",
            spec.host_ifname,
            spec.container_ifname,
            spec.netns.display()
        )
    };
    if let Err(err) = create_veth(&mut host, &pair) {
        return Err(explain_create_failure(thread, err, &netns, spec, create_op()));
    }
    let host_link = get_link(&mut host, &spec.host_ifname)
        .map_err(|e| e.into_dataplane(format!("look up host interface \"{}\"", spec.host_ifname)))?
        .ok_or_else(|| DataplaneError::new(create_op(), Errno::ENODEV, "the new host end vanished"))?;

    configure(thread, &mut host, &host_link, &netns, spec).map_err(|err| {
        match delete_link(&mut host, host_link.index) {
            Ok(_) => err,
            Err(rollback) => DataplaneError {
                detail: format!(
                    "{}; removing the half-made veth \"{}\" also failed: {}",
                    err.detail, spec.host_ifname, rollback.errno
                ),
                ..err
            },
        }
    })
}

/// A host link left by an earlier sandbox of the same workload is replaced; any other kind of
/// link holding the name is someone else's and is left alone.
fn replace_stale_host_link(host: &mut Rtnl, name: &str) -> Result<()> {
    let op = || format!("replace stale host interface \"{name}\"");
    let Some(existing) = get_link(host, name).map_err(|e| e.into_dataplane(op()))? else {
        return Ok(());
    };
    if !existing.is_veth() {
        let kind = existing.kind.as_deref().unwrap_or("device without a link kind");
        return Err(DataplaneError::new(
            op(),
            Errno::EEXIST,
            format!("\"{name}\" is held by a {kind} link, not a veth; refusing to replace it"),
        ));
    }
    delete_link(host, existing.index).map(|_| ()).map_err(|e| e.into_dataplane(op()))
}

/// Turns a failed creation into a message that says which name was taken.
fn explain_create_failure(
    thread: &mut NamespaceThread,
    err: NetlinkError,
    netns: &NetNs,
    spec: &WorkloadSpec,
    op: String,
) -> DataplaneError {
    if err.errno != Errno::EEXIST {
        return err.into_dataplane(op);
    }
    // Look inside the namespace; this thread is discarded afterwards anyway.
    let container_has_it = thread.enter(netns).is_ok()
        && Rtnl::open().ok().and_then(|mut ns| get_link(&mut ns, &spec.container_ifname).ok().flatten()).is_some();
    let detail = if container_has_it {
        format!("interface \"{}\" already exists in {}", spec.container_ifname, spec.netns.display())
    } else {
        format!("interface \"{}\" appeared in the host namespace concurrently", spec.host_ifname)
    };
    DataplaneError::new(op, Errno::EEXIST, detail)
}

fn configure(
    thread: &mut NamespaceThread,
    host: &mut Rtnl,
    host_link: &Link,
    netns: &NetNs,
    spec: &WorkloadSpec,
) -> Result<WorkloadInterfaces> {
    let host_name = &spec.host_ifname;
    for (key, value) in host_sysctls(spec) {
        sysctl::write(&key, value)?;
    }
    set_up(host, host_link.index).map_err(|e| e.into_dataplane(format!("bring up host interface \"{host_name}\"")))?;
    if spec.host_routes {
        for ip in &spec.addresses {
            add_host_route(host, host_link, *ip)?;
        }
    }
    // Subscribe before the pod end comes up: its carrier is what makes the kernel assign the host
    // end's link-local address, and we must not miss that notification.
    let mut address_watch = match spec.has_ipv6() {
        true => Some(
            Rtnl::open_with_groups(IPV6_ADDRESS_GROUP)
                .map_err(|e| e.into_dataplane("subscribe to IPv6 address changes"))?,
        ),
        false => None,
    };

    thread.enter(netns)?;
    let ifname = &spec.container_ifname;
    let mut pod = Rtnl::open().map_err(|e| e.into_dataplane("open rtnetlink socket in the workload namespace"))?;
    let pod_link = get_link(&mut pod, ifname)
        .map_err(|e| e.into_dataplane(format!("look up \"{ifname}\" in {}", spec.netns.display())))?
        .ok_or_else(|| {
            DataplaneError::new(format!("look up \"{ifname}\""), Errno::ENODEV, "the new pod end vanished")
        })?;
    if spec.has_ipv6() {
        sysctl::write(&format!("net/ipv6/conf/{ifname}/accept_dad"), "0")?;
        for scope in ["all", "default", "lo"] {
            sysctl::write(&format!("net/ipv6/conf/{scope}/disable_ipv6"), "0")?;
        }
    }
    set_up(&mut pod, pod_link.index).map_err(|e| e.into_dataplane(format!("bring up \"{ifname}\"")))?;
    for ip in &spec.addresses {
        add_address(&mut pod, pod_link.index, *ip, host_prefix(ip))
            .map_err(|e| e.into_dataplane(format!("add address {ip}/{} to \"{ifname}\"", host_prefix(ip))))?;
    }
    let routes = spec.effective_routes();
    if spec.has_ipv4() {
        let next_hop = Route {
            destination: IpNet::new(IpAddr::V4(IPV4_NEXT_HOP), 32).unwrap(),
            gateway: None,
            output_index: Some(pod_link.index),
            scope_link: true,
        };
        add_route(&mut pod, &next_hop)
            .map_err(|e| e.into_dataplane(format!("add route {IPV4_NEXT_HOP}/32 scope link dev \"{ifname}\"")))?;
        add_routes_via(&mut pod, &pod_link, &routes, IpAddr::V4(IPV4_NEXT_HOP))?;
    }
    if let Some(watch) = address_watch.as_mut() {
        wait_for_link_local(host, watch, host_link, LINK_LOCAL_TIMEOUT)?;
        add_routes_via(&mut pod, &pod_link, &routes, IpAddr::V6(IPV6_NEXT_HOP))?;
    }
    let forwarding = if spec.allow_ip_forwarding { "1" } else { "0" };
    if spec.has_ipv4() {
        sysctl::write("net/ipv4/ip_forward", forwarding)?;
    }
    if spec.has_ipv6() {
        sysctl::write("net/ipv6/conf/all/forwarding", forwarding)?;
    }
    Ok(WorkloadInterfaces {
        host: InterfaceInfo { name: host_name.clone(), index: host_link.index, mac: format_mac(&HOST_MAC) },
        container: InterfaceInfo {
            name: ifname.clone(),
            index: pod_link.index,
            mac: pod_link.mac.as_deref().map(format_mac).unwrap_or_default(),
        },
        mtu: pod_link.mtu,
        routes: routes
            .iter()
            .map(|destination| ProgrammedRoute {
                destination: *destination,
                gateway: if destination.addr().is_ipv4() {
                    IpAddr::V4(IPV4_NEXT_HOP)
                } else {
                    IpAddr::V6(IPV6_NEXT_HOP)
                },
            })
            .collect(),
    })
}

/// The host end's sysctls, by address family (as the policy agent and the reference expect).
pub fn host_sysctls(spec: &WorkloadSpec) -> Vec<(String, &'static str)> {
    let name = &spec.host_ifname;
    let mut keys = Vec::new();
    if spec.has_ipv4() {
        keys.push((format!("net/ipv4/conf/{name}/route_localnet"), "1"));
        keys.push((format!("net/ipv4/neigh/{name}/proxy_delay"), "0"));
        keys.push((format!("net/ipv4/conf/{name}/proxy_arp"), "1"));
        keys.push((format!("net/ipv4/conf/{name}/forwarding"), "1"));
    }
    if spec.has_ipv6() {
        // DAD off and EUI-64 addressing, set before the link comes up, make the link-local
        // address exactly fe80::ecee:eeff:feee:eeee and usable at once.
        keys.push((format!("net/ipv6/conf/{name}/disable_ipv6"), "0"));
        keys.push((format!("net/ipv6/conf/{name}/accept_dad"), "0"));
        keys.push((format!("net/ipv6/conf/{name}/addr_gen_mode"), "0"));
        keys.push((format!("net/ipv6/conf/{name}/proxy_ndp"), "1"));
        keys.push((format!("net/ipv6/conf/{name}/forwarding"), "1"));
    }
    // Router advertisements are ignored on any host end that has IPv6. Below IPv6's minimum MTU
    // the kernel gives a link no IPv6 at all (no net.ipv6.conf.<name>): nothing to set, and
    // setting it would fail an IPv4 pod's ADD (a dual-stack spec never gets here: validate()
    // refuses an MTU under 1280 with IPv6).
    if spec.mtu.is_none_or(|mtu| mtu >= IPV6_MIN_MTU) {
        keys.push((format!("net/ipv6/conf/{name}/accept_ra"), "0"));
    }
    keys
}

/// `<ip>/32` (or /128) `dev <host end> scope link`. A route that already leads to this very
/// interface is accepted (the policy agent may have programmed it); one that leads elsewhere is
/// a conflict with another workload and fails.
pub(crate) fn add_host_route(host: &mut Rtnl, host_link: &Link, ip: IpAddr) -> Result<()> {
    let destination = IpNet::new(ip, host_prefix(&ip)).unwrap();
    let op = || format!("add host route {destination} dev \"{}\"", host_link.name);
    let route = Route { destination, gateway: None, output_index: Some(host_link.index), scope_link: ip.is_ipv4() };
    match add_route(host, &route) {
        Ok(()) => Ok(()),
        Err(err) if err.errno == Errno::EEXIST => {
            let existing = list_routes(host, ip.is_ipv6()).map_err(|e| e.into_dataplane(op()))?;
            let holder = existing.iter().find(|r| r.destination == destination).and_then(|r| r.output_index);
            match holder {
                Some(index) if index == host_link.index => Ok(()),
                other => {
                    let via = match other {
                        Some(index) => link::get_link_by_index(host, index)
                            .ok()
                            .flatten()
                            .map(|l| format!("interface \"{}\"", l.name))
                            .unwrap_or_else(|| format!("interface index {index}")),
                        None => "another route type".to_string(),
                    };
                    Err(DataplaneError::new(
                        op(),
                        Errno::EEXIST,
                        format!("a route to {destination} already exists via {via}"),
                    ))
                }
            }
        }
        Err(err) => Err(err.into_dataplane(op())),
    }
}

fn add_routes_via(pod: &mut Rtnl, pod_link: &Link, routes: &[IpNet], gateway: IpAddr) -> Result<()> {
    for destination in routes.iter().filter(|r| r.addr().is_ipv4() == gateway.is_ipv4()) {
        let route = Route {
            destination: *destination,
            gateway: Some(gateway),
            output_index: Some(pod_link.index),
            scope_link: false,
        };
        add_route(pod, &route).map_err(|e| {
            e.into_dataplane(format!("add route {destination} via {gateway} dev \"{}\"", pod_link.name))
        })?;
    }
    Ok(())
}

/// Waits until the host end has its usable link-local address, the pod's IPv6 next hop.
fn wait_for_link_local(host: &mut Rtnl, watch: &mut Rtnl, host_link: &Link, timeout: Duration) -> Result<()> {
    let op = || format!("wait for {IPV6_NEXT_HOP} on host interface \"{}\"", host_link.name);
    let deadline = Instant::now() + timeout;
    let present =
        |addresses: &[address::Address]| addresses.iter().any(|a| a.ip == IpAddr::V6(IPV6_NEXT_HOP) && !a.tentative);
    let mut look = true;
    loop {
        if look && present(&list_addresses(host, host_link.index).map_err(|e| e.into_dataplane(op()))?) {
            return Ok(());
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(DataplaneError::new(
                op(),
                Errno::ETIMEDOUT,
                format!("no usable link-local address after {timeout:?}"),
            ));
        }
        let mut pollfd = libc::pollfd { fd: watch.raw_fd(), events: libc::POLLIN, revents: 0 };
        let millis = remaining.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        if unsafe { libc::poll(&mut pollfd, 1, millis) } <= 0 {
            look = true;
            continue;
        }
        look = match watch.receive_notifications() {
            Ok(messages) => {
                let ours: Vec<_> = messages
                    .into_iter()
                    .filter_map(|m| match m {
                        netlink_packet_route::RouteNetlinkMessage::NewAddress(a)
                            if a.header.index == host_link.index =>
                        {
                            address::parse(a)
                        }
                        _ => None,
                    })
                    .collect();
                if present(&ours) {
                    return Ok(());
                }
                false
            }
            // Notifications were dropped (ENOBUFS under a burst): fall back to asking.
            Err(_) => true,
        };
    }
}
