//! Interface addresses.

use std::collections::HashMap;
use std::net::IpAddr;

use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
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

/// An address of an interface that is up and running, as node:os's `networkInterfaces()` lists
/// them (libuv skips the others): the interface's name and whether it is a loopback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceAddress {
    pub interface: String,
    pub ip: IpAddr,
    pub prefix_len: u8,
    pub loopback: bool,
}

/// Every address of the interfaces that are up and running in the calling thread's namespace:
/// the links dumped (names, flags), then the addresses, each dump retried if a change interrupted
/// it. An address's own local end (`IFA_LOCAL`) is the address where it differs from the peer's
/// (point-to-point links), as the C library's listing has it.
pub fn list_interface_addresses(rtnl: &mut Rtnl) -> NetlinkResult<Vec<InterfaceAddress>> {
    let mut links = HashMap::new();
    for reply in rtnl.dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))? {
        let RouteNetlinkMessage::NewLink(message) = reply else { continue };
        let flags = message.header.flags;
        if !flags.contains(LinkFlags::Up) || !flags.contains(LinkFlags::Running) {
            continue;
        }
        let name = message.attributes.into_iter().find_map(|attribute| match attribute {
            LinkAttribute::IfName(name) => Some(name),
            _ => None,
        });
        if let Some(name) = name {
            links.insert(message.header.index, (name, flags.contains(LinkFlags::Loopback)));
        }
    }
    let replies = rtnl.dump(RouteNetlinkMessage::GetAddress(AddressMessage::default()))?;
    Ok(replies
        .into_iter()
        .filter_map(|reply| {
            let RouteNetlinkMessage::NewAddress(message) = reply else { return None };
            let (name, loopback) = links.get(&message.header.index)?;
            let (mut local, mut address) = (None, None);
            for attribute in &message.attributes {
                match attribute {
                    AddressAttribute::Local(ip) => local = Some(*ip),
                    AddressAttribute::Address(ip) => address = Some(*ip),
                    _ => {}
                }
            }
            Some(InterfaceAddress {
                interface: name.clone(),
                ip: local.or(address)?,
                prefix_len: message.header.prefix_len,
                loopback: *loopback,
            })
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
