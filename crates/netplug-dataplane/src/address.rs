//! Interface addresses.

use std::net::IpAddr;

use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::netlink::{CREATE_EXCL, NetlinkResult, Rtnl};

/// An address on an interface as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub ip: IpAddr,
    pub prefix_len: u8,
    pub tentative: bool,
}

fn family(ip: &IpAddr) -> AddressFamily {
    if ip.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 }
}

/// Adds `ip/prefix_len` to the interface. IPv6 addresses skip duplicate-address detection: the
/// address is the pod's alone, and DAD would hold it tentative (unusable) for a second or more.
pub fn add_address(rtnl: &mut Rtnl, index: u32, ip: IpAddr, prefix_len: u8) -> NetlinkResult<()> {
    let mut request = AddressMessage::default();
    request.header.family = family(&ip);
    request.header.prefix_len = prefix_len;
    request.header.index = index;
    request.attributes.push(AddressAttribute::Local(ip));
    request.attributes.push(AddressAttribute::Address(ip));
    if ip.is_ipv6() {
        request.attributes.push(AddressAttribute::Flags(AddressFlags::Nodad));
    }
    rtnl.execute(RouteNetlinkMessage::NewAddress(request), CREATE_EXCL)
}

/// The addresses of one interface.
pub fn list_addresses(rtnl: &mut Rtnl, index: u32) -> NetlinkResult<Vec<Address>> {
    let mut request = AddressMessage::default();
    request.header.index = index; // honoured as a filter with strict checking
    let replies = rtnl.dump(RouteNetlinkMessage::GetAddress(request))?;
    Ok(replies
        .into_iter()
        .filter_map(|reply| match reply {
            RouteNetlinkMessage::NewAddress(message) if message.header.index == index => parse(message),
            _ => None,
        })
        .collect())
}

/// Parses an address message (a dump reply or a notification).
pub fn parse(message: AddressMessage) -> Option<Address> {
    let mut ip = None;
    let mut flags = AddressFlags::from_bits_retain(u32::from(message.header.flags.bits()));
    for attribute in message.attributes {
        match attribute {
            AddressAttribute::Address(addr) => ip = Some(addr),
            AddressAttribute::Local(addr) if ip.is_none() => ip = Some(addr),
            AddressAttribute::Flags(all) => flags = all,
            _ => {}
        }
    }
    Some(Address { ip: ip?, prefix_len: message.header.prefix_len, tentative: flags.contains(AddressFlags::Tentative) })
}
