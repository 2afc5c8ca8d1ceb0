//! Static layer-2 state of an overlay device: permanent neighbour (ARP/NDP) entries, and the
//! bridge FDB entries that tell a VXLAN device which underlay address a MAC lives behind. With
//! learning off these are all the device knows, so each sync makes them exactly the wanted set.

use std::net::IpAddr;

use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use nix::errno::Errno;

use crate::device::existing_device;
use crate::error::{DataplaneError, Result};
use crate::netlink::{NetlinkResult, Rtnl};
use crate::spec::format_mac;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntrySyncCounts {
    /// Entries created, or changed to the wanted MAC or remote.
    pub added: u32,
    pub removed: u32,
}

/// A neighbour entry: `ip` resolves to `mac` on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighborEntry {
    pub ip: IpAddr,
    pub mac: [u8; 6],
}

/// A VXLAN FDB entry: frames for `mac` are sent to the VTEP at `remote`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdbEntry {
    pub mac: [u8; 6],
    pub remote: IpAddr,
}

/// Makes the permanent IPv4 and IPv6 neighbour entries on `dev` exactly `entries`. Entries the
/// kernel learnt (reachable, stale, ...) are its own business and stay, unless one holds a wanted
/// address, which then becomes permanent.
pub fn sync_neighbors(rtnl: &mut Rtnl, dev: &str, entries: &[NeighborEntry]) -> Result<EntrySyncCounts> {
    let op = format!("sync neighbour entries on \"{dev}\"");
    for (i, entry) in entries.iter().enumerate() {
        if entries[..i].iter().any(|other| other.ip == entry.ip) {
            return Err(DataplaneError::invalid(&op, format!("entries[{i}].ip {} is listed twice", entry.ip)));
        }
    }
    let index = existing_device(rtnl, &op, "dev", dev)?.index;
    let mut existing = Vec::new();
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        existing.extend(dump(rtnl, &op, family, index)?.into_iter().filter_map(|message| {
            let permanent = message.header.state == NeighbourState::Permanent;
            let (ip, mac) = parse(&message);
            Some((ip?, mac, permanent))
        }));
    }

    let mut counts = EntrySyncCounts::default();
    for entry in entries {
        let current = existing.iter().find(|(ip, _, _)| *ip == entry.ip);
        if matches!(current, Some((_, Some(mac), true)) if mac[..] == entry.mac[..]) {
            continue;
        }
        let mut message = neighbour(family_of(&entry.ip), index, NeighbourFlags::empty());
        message.attributes.push(NeighbourAttribute::Destination(neighbour_address(entry.ip)));
        message.attributes.push(NeighbourAttribute::LinkLayerAddress(entry.mac.to_vec()));
        rtnl.execute(RouteNetlinkMessage::NewNeighbour(message), NLM_F_CREATE | NLM_F_REPLACE)
            .map_err(|err| err.into_dataplane(format!("{op}: set {} lladdr {}", entry.ip, format_mac(&entry.mac))))?;
        counts.added += 1;
    }
    for (ip, _, _) in existing.iter().filter(|(ip, _, permanent)| *permanent && !entries.iter().any(|e| e.ip == *ip)) {
        let mut message = neighbour(family_of(ip), index, NeighbourFlags::empty());
        message.attributes.push(NeighbourAttribute::Destination(neighbour_address(*ip)));
        if deleted(rtnl.execute(RouteNetlinkMessage::DelNeighbour(message), 0))
            .map_err(|err| err.into_dataplane(format!("{op}: remove {ip}")))?
        {
            counts.removed += 1;
        }
    }
    Ok(counts)
}

/// Makes the permanent FDB entries of the VXLAN device `dev` exactly `entries`, one remote per MAC.
pub fn sync_fdb(rtnl: &mut Rtnl, dev: &str, entries: &[FdbEntry]) -> Result<EntrySyncCounts> {
    let op = format!("sync FDB entries of \"{dev}\"");
    for (i, entry) in entries.iter().enumerate() {
        if entries[..i].iter().any(|other| other.mac == entry.mac) {
            let mac = format_mac(&entry.mac);
            return Err(DataplaneError::invalid(&op, format!("entries[{i}].mac {mac} is listed twice")));
        }
    }
    let device = existing_device(rtnl, &op, "dev", dev)?;
    if device.kind.as_deref() != Some("vxlan") {
        let kind = device.kind.as_deref().unwrap_or("plain");
        return Err(DataplaneError::invalid(&op, format!("dev \"{dev}\" is a {kind} device, not VXLAN")));
    }
    // (mac, remote) of each permanent entry; a MAC may have several remotes (`bridge fdb append`).
    let existing: Vec<([u8; 6], Option<IpAddr>)> = dump(rtnl, &op, AddressFamily::Bridge, device.index)?
        .into_iter()
        .filter(|message| {
            message.header.state == NeighbourState::Permanent && message.header.flags.contains(NeighbourFlags::Own)
        })
        .filter_map(|message| {
            let (remote, mac) = parse(&message);
            Some((<[u8; 6]>::try_from(mac?.as_slice()).ok()?, remote))
        })
        .collect();

    let mut counts = EntrySyncCounts::default();
    // Removals first: replacing a MAC's remote would leave any other remotes it has in place.
    for (mac, remote) in &existing {
        if entries.iter().any(|e| e.mac == *mac && Some(e.remote) == *remote) {
            continue;
        }
        let mut message = neighbour(AddressFamily::Bridge, device.index, NeighbourFlags::Own);
        message.attributes.push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
        if let Some(remote) = remote {
            message.attributes.push(NeighbourAttribute::Destination(neighbour_address(*remote)));
        }
        if deleted(rtnl.execute(RouteNetlinkMessage::DelNeighbour(message), 0))
            .map_err(|err| err.into_dataplane(format!("{op}: remove {}", format_mac(mac))))?
        {
            counts.removed += 1;
        }
    }
    for entry in entries {
        if existing.iter().any(|(mac, remote)| *mac == entry.mac && *remote == Some(entry.remote)) {
            continue;
        }
        let mut message = neighbour(AddressFamily::Bridge, device.index, NeighbourFlags::Own);
        message.attributes.push(NeighbourAttribute::LinkLayerAddress(entry.mac.to_vec()));
        message.attributes.push(NeighbourAttribute::Destination(neighbour_address(entry.remote)));
        rtnl.execute(RouteNetlinkMessage::NewNeighbour(message), NLM_F_CREATE | NLM_F_REPLACE)
            .map_err(|err| err.into_dataplane(format!("{op}: set {} dst {}", format_mac(&entry.mac), entry.remote)))?;
        counts.added += 1;
    }
    Ok(counts)
}

fn neighbour(family: AddressFamily, index: u32, flags: NeighbourFlags) -> NeighbourMessage {
    let mut message = NeighbourMessage::default();
    message.header.family = family;
    message.header.ifindex = index;
    message.header.state = NeighbourState::Permanent;
    message.header.flags = flags;
    message
}

/// The entries of `family` on the device `index`. The kernel filters (strict checking) by the
/// header's index for the bridge family and by `NDA_IFINDEX` for the others, whose header must
/// hold no index; filtered again here for kernels without strict checking.
fn dump(rtnl: &mut Rtnl, op: &str, family: AddressFamily, index: u32) -> Result<Vec<NeighbourMessage>> {
    let mut request = NeighbourMessage::default();
    request.header.family = family;
    if family == AddressFamily::Bridge {
        request.header.ifindex = index;
    } else {
        request.attributes.push(NeighbourAttribute::IfIndex(index));
    }
    let replies = rtnl.dump(RouteNetlinkMessage::GetNeighbour(request)).map_err(|err| err.into_dataplane(op))?;
    Ok(replies
        .into_iter()
        .filter_map(|reply| match reply {
            RouteNetlinkMessage::NewNeighbour(message)
                if message.header.ifindex == index && message.header.family == family =>
            {
                Some(message)
            }
            _ => None,
        })
        .collect())
}

/// The entry's address (for the bridge family, the remote) and link-layer address.
fn parse(message: &NeighbourMessage) -> (Option<IpAddr>, Option<Vec<u8>>) {
    let (mut ip, mut mac) = (None, None);
    for attribute in &message.attributes {
        match attribute {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => ip = Some(IpAddr::V4(*v4)),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => ip = Some(IpAddr::V6(*v6)),
            NeighbourAttribute::Destination(NeighbourAddress::Other(bytes)) => {
                ip = <[u8; 4]>::try_from(bytes.as_slice())
                    .map(IpAddr::from)
                    .or_else(|_| <[u8; 16]>::try_from(bytes.as_slice()).map(IpAddr::from))
                    .ok();
            }
            NeighbourAttribute::LinkLayerAddress(bytes) => mac = Some(bytes.clone()),
            _ => {}
        }
    }
    (ip, mac)
}

fn family_of(ip: &IpAddr) -> AddressFamily {
    if ip.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 }
}

fn neighbour_address(ip: IpAddr) -> NeighbourAddress {
    match ip {
        IpAddr::V4(v4) => NeighbourAddress::Inet(v4),
        IpAddr::V6(v6) => NeighbourAddress::Inet6(v6),
    }
}

/// Whether a deletion removed something; an entry already gone is no error.
fn deleted(result: NetlinkResult<()>) -> NetlinkResult<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(err) if err.errno == Errno::ENOENT => Ok(false),
        Err(err) => Err(err),
    }
}
