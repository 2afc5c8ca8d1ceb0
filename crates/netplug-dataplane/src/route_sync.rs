//! Level-triggered sync of the main table's routes of one rtnetlink protocol.
//!
//! The protocol number marks the routes as the caller's (`ip route show proto 80`), so a sync finds
//! its own stale routes after any restart without remembering anything, and never touches a route
//! somebody else made: deletions name the protocol (the kernel matches it), and a wanted route is
//! only ever replaced over one of the same protocol; over another it is refused.

use std::collections::HashMap;
use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_route::route::{
    RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use nix::errno::Errno;

use crate::device::existing_device;
use crate::error::{DataplaneError, Result};
use crate::netlink::{CREATE_EXCL, Rtnl};
use crate::route_table::{KernelRoute, delete_message, dump, route_address};

/// A route the caller wants in the main table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedRoute {
    pub destination: IpNet,
    pub gateway: Option<IpAddr>,
    pub device: String,
    /// `RTNH_F_ONLINK`: the gateway is on the device whatever its addresses say.
    pub onlink: bool,
    /// `RTA_PREFSRC`.
    pub source: Option<IpAddr>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteSyncCounts {
    pub added: u32,
    pub replaced: u32,
    pub removed: u32,
    pub unchanged: u32,
}

/// A wanted route resolved against the kernel: its device's index.
struct Resolved<'a> {
    route: &'a WantedRoute,
    output_index: u32,
}

/// IPv6 gives a route without a metric this one (`IP6_RT_PRIO_USER`); IPv4 gives 0.
const IPV6_DEFAULT_METRIC: u32 = 1024;

/// Makes the main table's routes of `protocol` exactly `wanted`: adds what is missing, replaces
/// what differs, deletes the rest of that protocol. Input is checked whole before any change;
/// a kernel refusal of one route does not stop the others, and the error names each refused route.
pub fn sync_routes(rtnl: &mut Rtnl, protocol: u8, wanted: &[WantedRoute]) -> Result<RouteSyncCounts> {
    let op = format!("sync routes of protocol {protocol}");
    if protocol <= 4 {
        return Err(DataplaneError::invalid(
            &op,
            format!("protocol {protocol} is reserved (0-4: unspec, redirect, kernel, boot, static); use 5-255"),
        ));
    }
    let resolved = resolve(rtnl, &op, wanted)?;
    let mut existing = dump(rtnl, &op, protocol)?;
    let mut counts = RouteSyncCounts::default();
    let mut failures: Vec<(Errno, String)> = Vec::new();

    for wanted in &resolved {
        // The routes of our protocol to this destination: one may stay or be replaced, the rest go.
        let (same_destination, rest): (Vec<_>, Vec<_>) =
            existing.drain(..).partition(|route| route.destination == wanted.route.destination);
        existing = rest;
        if let Some(position) = same_destination.iter().position(|route| matches(route, wanted)) {
            counts.unchanged += 1;
            existing.extend(same_destination.into_iter().enumerate().filter(|(i, _)| *i != position).map(|(_, r)| r));
            continue;
        }
        let default_metric = if wanted.route.destination.addr().is_ipv4() { 0 } else { IPV6_DEFAULT_METRIC };
        let ours_in_place = same_destination.iter().position(|route| route.priority == default_metric);
        let flags = if ours_in_place.is_some() {
            netlink_packet_core::NLM_F_CREATE | netlink_packet_core::NLM_F_REPLACE
        } else {
            CREATE_EXCL
        };
        match rtnl.execute(RouteNetlinkMessage::NewRoute(route_message(protocol, wanted)), flags) {
            Ok(()) if ours_in_place.is_some() => counts.replaced += 1,
            Ok(()) => counts.added += 1,
            Err(err) if err.errno == Errno::EEXIST => failures.push((
                Errno::EEXIST,
                format!("route to {} exists with another protocol; left alone", wanted.route.destination),
            )),
            Err(err) => {
                failures.push((err.errno, format!("{}: {}", describe(wanted.route), err.into_dataplane("").detail)))
            }
        }
        existing.extend(
            same_destination.into_iter().enumerate().filter(|(i, _)| Some(*i) != ours_in_place).map(|(_, r)| r),
        );
    }

    for stale in existing {
        match rtnl.execute(RouteNetlinkMessage::DelRoute(delete_message(protocol, &stale)), 0) {
            Ok(()) => counts.removed += 1,
            Err(err) if err.errno == Errno::ESRCH => {} // gone meanwhile
            Err(err) => failures
                .push((err.errno, format!("remove route to {}: {}", stale.destination, err.into_dataplane("").detail))),
        }
    }

    match failures.first() {
        None => Ok(counts),
        Some((errno, _)) => Err(DataplaneError::new(
            op,
            *errno,
            failures.iter().map(|(_, text)| text.as_str()).collect::<Vec<_>>().join("; "),
        )),
    }
}

fn resolve<'a>(rtnl: &mut Rtnl, op: &str, wanted: &'a [WantedRoute]) -> Result<Vec<Resolved<'a>>> {
    let mut indexes: HashMap<&str, u32> = HashMap::new();
    let mut resolved = Vec::with_capacity(wanted.len());
    for (i, route) in wanted.iter().enumerate() {
        let field = |name: &str| format!("routes[{i}].{name}");
        let ipv4 = route.destination.addr().is_ipv4();
        for (name, address) in [("via", route.gateway), ("src", route.source)] {
            if let Some(address) = address.filter(|a| a.is_ipv4() != ipv4) {
                return Err(DataplaneError::invalid(
                    op,
                    format!("{} \"{address}\" is not of dst {}'s family", field(name), route.destination),
                ));
            }
        }
        if route.onlink && route.gateway.is_none() {
            return Err(DataplaneError::invalid(op, format!("{} needs a via address", field("onlink"))));
        }
        if wanted[..i].iter().any(|other| other.destination == route.destination) {
            return Err(DataplaneError::invalid(op, format!("{} {} is listed twice", field("dst"), route.destination)));
        }
        let output_index = match indexes.get(route.device.as_str()) {
            Some(index) => *index,
            None => {
                let index = existing_device(rtnl, op, &field("dev"), &route.device)?.index;
                indexes.insert(&route.device, index);
                index
            }
        };
        resolved.push(Resolved { route, output_index });
    }
    Ok(resolved)
}

/// The scope `ip route add` gives: link for an IPv4 route without a gateway (IPv6 has none).
fn scope(route: &WantedRoute) -> RouteScope {
    if route.gateway.is_none() && route.destination.addr().is_ipv4() { RouteScope::Link } else { RouteScope::Universe }
}

fn matches(kernel: &KernelRoute, wanted: &Resolved<'_>) -> bool {
    let route = wanted.route;
    let ipv4 = route.destination.addr().is_ipv4();
    kernel.header.kind == RouteType::Unicast
        && !kernel.multipath
        && kernel.priority == if ipv4 { 0 } else { IPV6_DEFAULT_METRIC }
        && kernel.header.tos == 0
        && kernel.header.source_prefix_length == 0
        && (!ipv4 || kernel.header.scope == scope(route))
        && kernel.gateway == route.gateway
        && kernel.output_index == Some(wanted.output_index)
        && kernel.header.flags.contains(RouteFlags::Onlink) == route.onlink
        && kernel.source == route.source
}

fn route_message(protocol: u8, wanted: &Resolved<'_>) -> RouteMessage {
    let route = wanted.route;
    let mut message = RouteMessage::default();
    message.header.address_family =
        if route.destination.addr().is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
    message.header.destination_prefix_length = route.destination.prefix_len();
    message.header.table = RouteHeader::RT_TABLE_MAIN;
    message.header.protocol = RouteProtocol::from(protocol);
    message.header.kind = RouteType::Unicast;
    message.header.scope = scope(route);
    if route.onlink {
        message.header.flags = RouteFlags::Onlink;
    }
    if route.destination.prefix_len() > 0 {
        message.attributes.push(RouteAttribute::Destination(route_address(route.destination.addr())));
    }
    if let Some(gateway) = route.gateway {
        message.attributes.push(RouteAttribute::Gateway(route_address(gateway)));
    }
    message.attributes.push(RouteAttribute::Oif(wanted.output_index));
    if let Some(source) = route.source {
        message.attributes.push(RouteAttribute::PrefSource(route_address(source)));
    }
    message
}

fn describe(route: &WantedRoute) -> String {
    let mut text = format!("route to {}", route.destination);
    if let Some(gateway) = route.gateway {
        text.push_str(&format!(" via {gateway}"));
    }
    text.push_str(&format!(" dev {}", route.device));
    if route.onlink {
        text.push_str(" onlink");
    }
    text
}
