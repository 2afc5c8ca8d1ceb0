//! Devices the agent owns in the node's namespace (tunnels): their details as the kernel reports
//! them, their settable attributes, a device's one address of a family, and removal by name.

use std::net::IpAddr;

use netlink_packet_route::AddressFamily;
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{InfoData, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use nix::errno::Errno;

use crate::address::{self, list_addresses};
use crate::error::{DataplaneError, Result};
use crate::netlink::Rtnl;
use crate::spec::host_prefix;

/// A link with its kind-specific data (`IFLA_INFO_DATA`).
#[derive(Debug, Clone)]
pub struct DeviceDetails {
    pub index: u32,
    pub kind: Option<String>,
    pub mac: Option<Vec<u8>>,
    pub mtu: u32,
    pub up: bool,
    pub data: Option<InfoData>,
}

/// The link called `name` with its details, or `None`.
pub fn device_details(rtnl: &mut Rtnl, name: &str) -> Result<Option<DeviceDetails>> {
    let mut request = LinkMessage::default();
    request.attributes.push(LinkAttribute::IfName(name.to_string()));
    let message = match rtnl.get(RouteNetlinkMessage::GetLink(request)) {
        Ok(RouteNetlinkMessage::NewLink(message)) => message,
        Ok(_) => return Ok(None),
        Err(err) if err.errno == Errno::ENODEV => return Ok(None),
        Err(err) => return Err(err.into_dataplane(format!("look up device \"{name}\""))),
    };
    let mut details = DeviceDetails {
        index: message.header.index,
        kind: None,
        mac: None,
        mtu: 0,
        up: message.header.flags.contains(LinkFlags::Up),
        data: None,
    };
    for attribute in message.attributes {
        match attribute {
            LinkAttribute::Address(mac) => details.mac = Some(mac),
            LinkAttribute::Mtu(mtu) => details.mtu = mtu,
            LinkAttribute::LinkInfo(infos) => {
                for info in infos {
                    match info {
                        LinkInfo::Kind(kind) => details.kind = Some(kind.to_string()),
                        LinkInfo::Data(data) => details.data = Some(data),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Some(details))
}

/// The device `name`, which must exist: `ENODEV` naming `field` otherwise.
pub fn existing_device(rtnl: &mut Rtnl, op: &str, field: &str, name: &str) -> Result<DeviceDetails> {
    crate::spec::validate_ifname(field, name)?;
    device_details(rtnl, name)?
        .ok_or_else(|| DataplaneError::new(op, Errno::ENODEV, format!("{field} \"{name}\": no such device")))
}

/// Sets the MTU (when given and different) and the MAC (likewise), then brings the device up.
/// A MAC change takes the device down first: not every driver changes it live.
pub fn configure(
    rtnl: &mut Rtnl,
    name: &str,
    device: &DeviceDetails,
    mtu: Option<u32>,
    mac: Option<[u8; 6]>,
) -> Result<()> {
    let op = |what: &str| format!("set {what} of device \"{name}\"");
    if let Some(mtu) = mtu.filter(|mtu| *mtu != device.mtu) {
        let mut request = LinkMessage::default();
        request.header.index = device.index;
        request.attributes.push(LinkAttribute::Mtu(mtu));
        rtnl.execute(RouteNetlinkMessage::SetLink(request), 0)
            .map_err(|err| err.into_dataplane(op(&format!("MTU {mtu}"))))?;
    }
    let mut up = device.up;
    if let Some(mac) = mac.filter(|mac| device.mac.as_deref() != Some(&mac[..])) {
        if up {
            set_up_flag(rtnl, device.index, false).map_err(|err| err.into_dataplane(op("state down")))?;
            up = false;
        }
        let mut request = LinkMessage::default();
        request.header.index = device.index;
        request.attributes.push(LinkAttribute::Address(mac.to_vec()));
        rtnl.execute(RouteNetlinkMessage::SetLink(request), 0)
            .map_err(|err| err.into_dataplane(op(&format!("MAC {}", crate::spec::format_mac(&mac)))))?;
    }
    if !up {
        set_up_flag(rtnl, device.index, true).map_err(|err| err.into_dataplane(op("state up")))?;
    }
    Ok(())
}

fn set_up_flag(rtnl: &mut Rtnl, index: u32, up: bool) -> crate::netlink::NetlinkResult<()> {
    let mut request = LinkMessage::default();
    request.header.index = index;
    request.header.flags = if up { LinkFlags::Up } else { LinkFlags::empty() };
    request.header.change_mask = LinkFlags::Up;
    rtnl.execute(RouteNetlinkMessage::SetLink(request), 0)
}

/// Makes `ip` (as a /32 or /128) the device's only address of its family; IPv6 link-local
/// addresses, which the kernel manages, stay.
pub fn set_only_address(rtnl: &mut Rtnl, name: &str, index: u32, ip: IpAddr) -> Result<()> {
    let prefix = host_prefix(&ip);
    let listed = list_addresses(rtnl, index)
        .map_err(|err| err.into_dataplane(format!("list addresses of device \"{name}\"")))?;
    let mut present = false;
    for existing in listed.into_iter().filter(|a| a.ip.is_ipv4() == ip.is_ipv4() && !is_link_local(&a.ip)) {
        if existing.ip == ip && existing.prefix_len == prefix {
            present = true;
        } else {
            delete_address(rtnl, index, existing.ip, existing.prefix_len).map_err(|err| {
                err.into_dataplane(format!(
                    "remove address {}/{} from device \"{name}\"",
                    existing.ip, existing.prefix_len
                ))
            })?;
        }
    }
    if !present {
        address::add_address(rtnl, index, ip, prefix)
            .map_err(|err| err.into_dataplane(format!("add address {ip}/{prefix} to device \"{name}\"")))?;
    }
    Ok(())
}

fn is_link_local(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80)
}

fn delete_address(rtnl: &mut Rtnl, index: u32, ip: IpAddr, prefix_len: u8) -> crate::netlink::NetlinkResult<()> {
    let mut request = AddressMessage::default();
    request.header.family = if ip.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
    request.header.prefix_len = prefix_len;
    request.header.index = index;
    request.attributes.push(AddressAttribute::Local(ip));
    match rtnl.execute(RouteNetlinkMessage::DelAddress(request), 0) {
        Err(err) if err.errno == Errno::EADDRNOTAVAIL => Ok(()), // gone meanwhile
        other => other,
    }
}

/// Removes the link `name`; `false` when there was none. The kernel's fallback tunnels (`tunl0`
/// and its kin) survive a deletion: such a device is brought down and loses its addresses, which
/// takes it out of use just the same.
pub fn delete_link(rtnl: &mut Rtnl, name: &str) -> Result<bool> {
    crate::spec::validate_ifname("name", name)?;
    let op = format!("delete device \"{name}\"");
    let Some(device) = device_details(rtnl, name)? else { return Ok(false) };
    match crate::link::delete_link(rtnl, device.index) {
        Ok(false) => return Ok(false),
        Ok(true) => {}
        Err(err) => return Err(err.into_dataplane(op)),
    }
    if crate::link::get_link_by_index(rtnl, device.index).map_err(|err| err.into_dataplane(op.clone()))?.is_some() {
        set_up_flag(rtnl, device.index, false).map_err(|err| err.into_dataplane(op.clone()))?;
        let listed = list_addresses(rtnl, device.index).map_err(|err| err.into_dataplane(op.clone()))?;
        for existing in listed.into_iter().filter(|a| !is_link_local(&a.ip)) {
            delete_address(rtnl, device.index, existing.ip, existing.prefix_len)
                .map_err(|err| err.into_dataplane(op.clone()))?;
        }
    }
    Ok(true)
}
