//! The main table as the kernel dumps it, one protocol's routes at a time, and the request that
//! deletes one of them exactly.

use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::error::Result;
use crate::netlink::Rtnl;

/// A main-table route as the kernel dumps it.
#[derive(Debug, Clone)]
pub(crate) struct KernelRoute {
    pub header: RouteHeader,
    pub destination: IpNet,
    pub gateway: Option<IpAddr>,
    pub output_index: Option<u32>,
    pub source: Option<IpAddr>,
    pub priority: u32,
    pub multipath: bool,
}

/// The main table's routes of `protocol`, IPv4 and IPv6.
pub(crate) fn dump(rtnl: &mut Rtnl, op: &str, protocol: u8) -> Result<Vec<KernelRoute>> {
    let mut routes = Vec::new();
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut request = RouteMessage::default();
        request.header.address_family = family;
        request.header.table = RouteHeader::RT_TABLE_MAIN;
        let replies = rtnl.dump(RouteNetlinkMessage::GetRoute(request)).map_err(|err| err.into_dataplane(op))?;
        routes.extend(replies.into_iter().filter_map(|reply| match reply {
            // The family is checked too: without IPv6 the kernel answers an IPv6 dump with all families.
            RouteNetlinkMessage::NewRoute(message)
                if message.header.address_family == family && u8::from(message.header.protocol) == protocol =>
            {
                parse(message)
            }
            _ => None,
        }));
    }
    Ok(routes)
}

fn parse(message: RouteMessage) -> Option<KernelRoute> {
    let header = message.header;
    let mut destination = match header.address_family {
        AddressFamily::Inet => IpAddr::from([0u8; 4]),
        AddressFamily::Inet6 => IpAddr::from([0u8; 16]),
        _ => return None,
    };
    let mut route = KernelRoute {
        header,
        destination: IpNet::new(destination, 0).ok()?,
        gateway: None,
        output_index: None,
        source: None,
        priority: 0,
        multipath: false,
    };
    let mut table = u32::from(route.header.table);
    for attribute in message.attributes {
        match attribute {
            RouteAttribute::Destination(address) => destination = ip(address)?,
            RouteAttribute::Gateway(address) => route.gateway = ip(address),
            RouteAttribute::PrefSource(address) => route.source = ip(address),
            RouteAttribute::Oif(index) => route.output_index = Some(index),
            RouteAttribute::Priority(priority) => route.priority = priority,
            RouteAttribute::MultiPath(_) => route.multipath = true,
            RouteAttribute::Table(id) => table = id,
            _ => {}
        }
    }
    if table != u32::from(RouteHeader::RT_TABLE_MAIN) {
        return None;
    }
    route.destination = IpNet::new(destination, route.header.destination_prefix_length).ok()?;
    Some(route)
}

fn ip(address: RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(v6)),
        _ => None,
    }
}

pub(crate) fn route_address(ip: IpAddr) -> RouteAddress {
    match ip {
        IpAddr::V4(v4) => RouteAddress::Inet(v4),
        IpAddr::V6(v6) => RouteAddress::Inet6(v6),
    }
}

/// A request that deletes exactly `stale`: the kernel matches the protocol, metric, gateway and
/// device given, so a route of another protocol to the same destination is never the one removed.
pub(crate) fn delete_message(protocol: u8, stale: &KernelRoute) -> RouteMessage {
    let mut message = RouteMessage::default();
    message.header.address_family = stale.header.address_family;
    message.header.destination_prefix_length = stale.destination.prefix_len();
    message.header.tos = stale.header.tos;
    message.header.table = RouteHeader::RT_TABLE_MAIN;
    message.header.protocol = RouteProtocol::from(protocol);
    message.header.kind = stale.header.kind;
    message.header.scope = RouteScope::NoWhere;
    if stale.destination.prefix_len() > 0 {
        message.attributes.push(RouteAttribute::Destination(route_address(stale.destination.addr())));
    }
    message.attributes.push(RouteAttribute::Priority(stale.priority));
    if !stale.multipath {
        if let Some(gateway) = stale.gateway {
            message.attributes.push(RouteAttribute::Gateway(route_address(gateway)));
        }
        if let Some(index) = stale.output_index {
            message.attributes.push(RouteAttribute::Oif(index));
        }
    }
    message
}
