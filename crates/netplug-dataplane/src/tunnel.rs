//! The tunnel devices that carry pod traffic between nodes: IP-in-IP without a fixed remote (each
//! route names its next hop, like the kernel's `tunl0`) and VXLAN with static forwarding entries.
//! Each `ensure_*` makes one device exist with exactly the given attributes, whatever state it
//! found, and does nothing when it is already so.

use std::net::IpAddr;

use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{InfoData, InfoIpTunnel, InfoKind, InfoVxlan, LinkAttribute, LinkInfo, LinkMessage};
use nix::errno::Errno;

use crate::device::{DeviceDetails, configure, device_details, set_only_address};
use crate::error::{DataplaneError, Result};
use crate::netlink::{CREATE_EXCL, Rtnl};
use crate::spec::validate_ifname;

/// An IP-in-IP device with no fixed local or remote address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpipDevice {
    pub name: String,
    pub mtu: Option<u32>,
    /// The device's only IPv4 address (/32), when given.
    pub address: Option<IpAddr>,
}

/// A VXLAN device forwarding by static FDB entries only (learning off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanDevice {
    pub name: String,
    pub vni: u32,
    pub port: u16,
    pub local: IpAddr,
    pub mtu: Option<u32>,
    pub mac: Option<[u8; 6]>,
    /// The device's only address of its family (/32 or /128), when given.
    pub address: Option<IpAddr>,
}

/// A device as ensured: its index and MAC (empty for IP-in-IP, which has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsuredDevice {
    pub index: u32,
    pub mac: Vec<u8>,
}

const MAX_VNI: u32 = (1 << 24) - 1;

pub fn ensure_ipip_device(rtnl: &mut Rtnl, spec: &IpipDevice) -> Result<EnsuredDevice> {
    let op = format!("ensure IP-in-IP device \"{}\"", spec.name);
    validate_ifname("name", &spec.name)?;
    if let Some(address) = spec.address.filter(|a| !a.is_ipv4()) {
        return Err(DataplaneError::invalid(op, format!("address \"{address}\" is not IPv4: IP-in-IP carries IPv4")));
    }
    let wanted = |device: &DeviceDetails| device.kind.as_deref() == Some("ipip") && ipip_without_endpoints(device);
    let device = match device_details(rtnl, &spec.name)? {
        Some(device) if wanted(&device) => device,
        found => {
            if found.is_some() {
                crate::device::delete_link(rtnl, &spec.name)?;
            }
            let mut request = LinkMessage::default();
            request.attributes.push(LinkAttribute::IfName(spec.name.clone()));
            if let Some(mtu) = spec.mtu {
                request.attributes.push(LinkAttribute::Mtu(mtu));
            }
            request.attributes.push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::IpIp)]));
            create(rtnl, &op, &spec.name, request, "ipip (CONFIG_NET_IPIP)", wanted, || {
                "the kernel allows one IP-in-IP device without endpoints per namespace and makes \"tunl0\" \
                 itself once its ipip module is loaded: name the device tunl0"
                    .to_string()
            })?
        }
    };
    configure(rtnl, &spec.name, &device, spec.mtu, None)?;
    if let Some(address) = spec.address {
        set_only_address(rtnl, &spec.name, device.index, address)?;
    }
    Ok(EnsuredDevice { index: device.index, mac: Vec::new() })
}

fn ipip_without_endpoints(device: &DeviceDetails) -> bool {
    let Some(InfoData::IpTunnel(attributes)) = &device.data else { return true };
    attributes.iter().all(|attribute| match attribute {
        InfoIpTunnel::Local(ip) | InfoIpTunnel::Remote(ip) => ip.is_unspecified(),
        _ => true,
    })
}

pub fn ensure_vxlan_device(rtnl: &mut Rtnl, spec: &VxlanDevice) -> Result<EnsuredDevice> {
    let op = format!("ensure VXLAN device \"{}\"", spec.name);
    validate_ifname("name", &spec.name)?;
    if spec.vni > MAX_VNI {
        return Err(DataplaneError::invalid(op, format!("vni {} is out of range (0-{MAX_VNI})", spec.vni)));
    }
    if spec.port == 0 {
        return Err(DataplaneError::invalid(op, "port 0 is not a UDP port (VXLAN's is 4789)"));
    }
    if spec.local.is_unspecified() || spec.local.is_multicast() {
        return Err(DataplaneError::invalid(op, format!("local \"{}\" is not a unicast address", spec.local)));
    }
    let wanted = |device: &DeviceDetails| device.kind.as_deref() == Some("vxlan") && vxlan_matches(device, spec);
    let device = match device_details(rtnl, &spec.name)? {
        Some(device) if wanted(&device) => device,
        found => {
            // VNI, port and local address are fixed at creation: a device that differs is made again.
            if found.is_some() {
                crate::device::delete_link(rtnl, &spec.name)?;
            }
            let local = match spec.local {
                IpAddr::V4(v4) => InfoVxlan::Local(v4),
                IpAddr::V6(v6) => InfoVxlan::Local6(v6),
            };
            let mut request = LinkMessage::default();
            request.attributes.push(LinkAttribute::IfName(spec.name.clone()));
            if let Some(mtu) = spec.mtu {
                request.attributes.push(LinkAttribute::Mtu(mtu));
            }
            if let Some(mac) = spec.mac {
                request.attributes.push(LinkAttribute::Address(mac.to_vec()));
            }
            request.attributes.push(LinkAttribute::LinkInfo(vec![
                LinkInfo::Kind(InfoKind::Vxlan),
                LinkInfo::Data(InfoData::Vxlan(vec![
                    InfoVxlan::Id(spec.vni),
                    local,
                    InfoVxlan::Port(spec.port),
                    InfoVxlan::Learning(false),
                ])),
            ]));
            create(rtnl, &op, &spec.name, request, "vxlan (CONFIG_VXLAN)", wanted, || {
                "another VXLAN device has this VNI and port".to_string()
            })?
        }
    };
    configure(rtnl, &spec.name, &device, spec.mtu, spec.mac)?;
    if let Some(address) = spec.address {
        set_only_address(rtnl, &spec.name, device.index, address)?;
    }
    let mac = match spec.mac {
        Some(mac) => mac.to_vec(),
        None => device.mac.clone().unwrap_or_default(),
    };
    Ok(EnsuredDevice { index: device.index, mac })
}

fn vxlan_matches(device: &DeviceDetails, spec: &VxlanDevice) -> bool {
    let Some(InfoData::Vxlan(attributes)) = &device.data else { return false };
    let (mut vni, mut port, mut local, mut learning) = (None, None, None, true);
    for attribute in attributes {
        match attribute {
            InfoVxlan::Id(id) => vni = Some(*id),
            InfoVxlan::Port(p) => port = Some(*p),
            InfoVxlan::Local(v4) => local = Some(IpAddr::V4(*v4)),
            InfoVxlan::Local6(v6) => local = Some(IpAddr::V6(*v6)),
            InfoVxlan::Learning(on) => learning = *on,
            _ => {}
        }
    }
    vni == Some(spec.vni) && port == Some(spec.port) && local == Some(spec.local) && !learning
}

/// Creates the device; `EEXIST` on a name that was free means either the kernel made it meanwhile
/// (loading the ipip module makes tunl0 in every namespace) or it clashes with another device;
/// `EOPNOTSUPP`, that the kernel lacks `driver`.
fn create(
    rtnl: &mut Rtnl,
    op: &str,
    name: &str,
    request: LinkMessage,
    driver: &str,
    wanted: impl Fn(&DeviceDetails) -> bool,
    clash: impl Fn() -> String,
) -> Result<DeviceDetails> {
    match rtnl.execute(RouteNetlinkMessage::NewLink(request), CREATE_EXCL) {
        Ok(()) => {}
        Err(err) if err.errno == Errno::EEXIST => {
            return match device_details(rtnl, name)? {
                Some(device) if wanted(&device) => Ok(device),
                _ => Err(DataplaneError::from_errno(op, Errno::EEXIST, Some(&clash()))),
            };
        }
        Err(err) if err.errno == Errno::EOPNOTSUPP => {
            let text = format!("this kernel has no {driver} driver: load its module or build it in");
            return Err(DataplaneError::from_errno(op, Errno::EOPNOTSUPP, Some(&text)));
        }
        Err(err) => return Err(err.into_dataplane(op)),
    }
    device_details(rtnl, name)?
        .ok_or_else(|| DataplaneError::new(op, Errno::ENODEV, format!("device \"{name}\" vanished after its creation")))
}
