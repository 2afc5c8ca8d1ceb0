//! Routes in the main table.

use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::netlink::{CREATE_EXCL, NetlinkResult, Rtnl};

/// A unicast route in the main table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub destination: IpNet,
    pub gateway: Option<IpAddr>,
    pub output_index: Option<u32>,
    pub scope_link: bool,
}

fn family(net: &IpNet) -> AddressFamily {
    match net {
        IpNet::V4(_) => AddressFamily::Inet,
        IpNet::V6(_) => AddressFamily::Inet6,
    }
}

fn ip_address(ip: IpAddr) -> RouteAddress {
    match ip {
        IpAddr::V4(v4) => RouteAddress::Inet(v4),
        IpAddr::V6(v6) => RouteAddress::Inet6(v6),
    }
}

fn from_route_address(address: RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(v6)),
        _ => None,
    }
}

/// Adds `route`; fails with `EEXIST` if the same destination is already routed.
pub fn add_route(rtnl: &mut Rtnl, route: &Route) -> NetlinkResult<()> {
    let mut request = RouteMessage::default();
    request.header.address_family = family(&route.destination);
    request.header.destination_prefix_length = route.destination.prefix_len();
    request.header.table = RouteHeader::RT_TABLE_MAIN;
    request.header.protocol = RouteProtocol::Boot;
    request.header.kind = RouteType::Unicast;
    request.header.scope = if route.scope_link { RouteScope::Link } else { RouteScope::Universe };
    if route.destination.prefix_len() > 0 {
        request.attributes.push(RouteAttribute::Destination(ip_address(route.destination.network())));
    }
    if let Some(gateway) = route.gateway {
        request.attributes.push(RouteAttribute::Gateway(ip_address(gateway)));
    }
    if let Some(index) = route.output_index {
        request.attributes.push(RouteAttribute::Oif(index));
    }
    rtnl.execute(RouteNetlinkMessage::NewRoute(request), CREATE_EXCL)
}

/// The unicast routes of one family in the main table.
pub fn list_routes(rtnl: &mut Rtnl, ipv6: bool) -> NetlinkResult<Vec<Route>> {
    let mut request = RouteMessage::default();
    request.header.address_family = if ipv6 { AddressFamily::Inet6 } else { AddressFamily::Inet };
    request.header.table = RouteHeader::RT_TABLE_MAIN;
    let replies = rtnl.dump(RouteNetlinkMessage::GetRoute(request))?;
    Ok(replies
        .into_iter()
        .filter_map(|reply| match reply {
            RouteNetlinkMessage::NewRoute(message) => parse(message, ipv6),
            _ => None,
        })
        .collect())
}

fn parse(message: RouteMessage, ipv6: bool) -> Option<Route> {
    let header = &message.header;
    if header.kind != RouteType::Unicast || header.table != RouteHeader::RT_TABLE_MAIN {
        return None;
    }
    let mut destination: IpAddr = if ipv6 { "::".parse().unwrap() } else { "0.0.0.0".parse().unwrap() };
    let mut route = Route {
        destination: IpNet::new(destination, 0).ok()?,
        gateway: None,
        output_index: None,
        scope_link: header.scope == RouteScope::Link,
    };
    let prefix_len = header.destination_prefix_length;
    for attribute in message.attributes {
        match attribute {
            RouteAttribute::Destination(address) => destination = from_route_address(address)?,
            RouteAttribute::Gateway(address) => route.gateway = from_route_address(address),
            RouteAttribute::Oif(index) => route.output_index = Some(index),
            RouteAttribute::Table(table) if table != u32::from(RouteHeader::RT_TABLE_MAIN) => return None,
            _ => {}
        }
    }
    route.destination = IpNet::new(destination, prefix_len).ok()?;
    Some(route)
}
