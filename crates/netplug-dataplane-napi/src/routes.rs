//! Binding of the routes between nodes: tunnel devices, the sync of one protocol's routes, and
//! neighbour and FDB entries. Every call acts on the calling process's network namespace (the
//! node's, for netplug-node) from a thread of its own; text input is parsed here with errors that
//! name the field and the value.

use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;
use netplug_dataplane::netlink::Rtnl;
use netplug_dataplane::spec::format_mac;
use netplug_dataplane::{self as dataplane, DataplaneError, parse};

use crate::{KernelError, kernel_error, on_namespace_thread};

/// An IP-in-IP device without a fixed remote.
#[napi(object)]
pub struct IpipDeviceSpec {
    pub name: String,
    pub mtu: Option<u32>,
    /// A /32, with or without the suffix: the device's only IPv4 address.
    pub address: Option<String>,
}

/// A VXLAN device.
#[napi(object)]
pub struct VxlanDeviceSpec {
    pub name: String,
    pub vni: u32,
    /// UDP destination port.
    pub port: u32,
    /// The underlay address the tunnel's packets leave from.
    pub local: String,
    pub mtu: Option<u32>,
    /// Set when given (so it survives a re-creation); the kernel picks one otherwise.
    pub mac: Option<String>,
    /// A /32 (or /128), with or without the suffix: the device's only address of its family.
    pub address: Option<String>,
}

#[napi(object)]
pub struct DeviceOutcome {
    pub ifindex: Option<u32>,
    /// The device's MAC address (VXLAN).
    pub mac: Option<String>,
    pub error: Option<KernelError>,
}

#[napi(object)]
pub struct DeleteLinkOutcome {
    /// Whether there was a link to remove.
    pub deleted: Option<bool>,
    pub error: Option<KernelError>,
}

/// A main-table route: `dst` (CIDR) through `dev`, via `via` if given.
#[napi(object)]
pub struct SyncRoute {
    pub dst: String,
    pub via: Option<String>,
    pub dev: String,
    pub onlink: Option<bool>,
    pub src: Option<String>,
}

#[napi(object)]
pub struct RouteSyncCounts {
    pub added: u32,
    pub replaced: u32,
    pub removed: u32,
    pub unchanged: u32,
}

#[napi(object)]
pub struct RouteSyncOutcome {
    pub counts: Option<RouteSyncCounts>,
    pub error: Option<KernelError>,
}

/// A permanent neighbour entry: `ip` resolves to `mac`.
#[napi(object)]
pub struct NeighborEntry {
    pub ip: String,
    pub mac: String,
}

/// A bridge FDB entry of a VXLAN device: frames to `mac` go to the underlay address `dst`.
#[napi(object)]
pub struct FdbEntry {
    pub mac: String,
    pub dst: String,
}

#[napi(object)]
pub struct EntrySyncCounts {
    pub added: u32,
    pub removed: u32,
}

#[napi(object)]
pub struct EntrySyncOutcome {
    pub counts: Option<EntrySyncCounts>,
    pub error: Option<KernelError>,
}

/// Makes the IP-in-IP device `spec.name` (no fixed remote, like tunl0) exist, up, with its MTU and address.
#[napi(ts_return_type = "Promise<DeviceOutcome>")]
pub fn ensure_ipip_device(env: &Env, spec: IpipDeviceSpec) -> Result<Object<'_>> {
    on_namespace_thread(env, move |_| {
        let made = (|| {
            let op = format!("ensure IP-in-IP device \"{}\"", spec.name);
            let address = spec.address.as_deref().map(|a| parse::host_address(&op, "address", a)).transpose()?;
            let device = dataplane::IpipDevice { name: spec.name, mtu: spec.mtu, address };
            dataplane::ensure_ipip_device(&mut open(&op)?, &device)
        })();
        device_outcome(made, false)
    })
}

/// Makes the VXLAN device `spec.name` exist with exactly these attributes, learning off, up.
#[napi(ts_return_type = "Promise<DeviceOutcome>")]
pub fn ensure_vxlan_device(env: &Env, spec: VxlanDeviceSpec) -> Result<Object<'_>> {
    on_namespace_thread(env, move |_| {
        let made = (|| {
            let op = format!("ensure VXLAN device \"{}\"", spec.name);
            let port = u16::try_from(spec.port)
                .map_err(|_| DataplaneError::invalid(&op, format!("port {} is not a UDP port (1-65535)", spec.port)))?;
            let device = dataplane::VxlanDevice {
                vni: spec.vni,
                port,
                local: parse::ip(&op, "local", &spec.local)?,
                mtu: spec.mtu,
                mac: spec.mac.as_deref().map(|m| parse::unicast_mac(&op, "mac", m)).transpose()?,
                address: spec.address.as_deref().map(|a| parse::host_address(&op, "address", a)).transpose()?,
                name: spec.name,
            };
            dataplane::ensure_vxlan_device(&mut open(&op)?, &device)
        })();
        device_outcome(made, true)
    })
}

/// Removes the link `name` from the calling process's namespace; `deleted: false` when there was none.
#[napi(ts_return_type = "Promise<DeleteLinkOutcome>")]
pub fn delete_link(env: &Env, name: String) -> Result<Object<'_>> {
    on_namespace_thread(env, move |_| {
        match open(&format!("delete device \"{name}\"")).and_then(|mut rtnl| dataplane::delete_link(&mut rtnl, &name)) {
            Ok(deleted) => DeleteLinkOutcome { deleted: Some(deleted), error: None },
            Err(err) => DeleteLinkOutcome { deleted: None, error: Some(kernel_error(err)) },
        }
    })
}

/// Makes the main table's routes of rtnetlink protocol `protocol` exactly `routes` (IPv4 and IPv6).
#[napi(ts_return_type = "Promise<RouteSyncOutcome>")]
pub fn sync_routes(env: &Env, protocol: u32, routes: Vec<SyncRoute>) -> Result<Object<'_>> {
    on_namespace_thread(env, move |_| {
        let synced = (|| {
            let op = format!("sync routes of protocol {protocol}");
            let protocol = u8::try_from(protocol)
                .map_err(|_| DataplaneError::invalid(&op, format!("protocol {protocol} is out of range (5-255)")))?;
            let wanted = routes
                .iter()
                .enumerate()
                .map(|(i, route)| {
                    let field = |name: &str| format!("routes[{i}].{name}");
                    Ok(dataplane::WantedRoute {
                        destination: parse::cidr(&op, &field("dst"), &route.dst)?,
                        gateway: route.via.as_deref().map(|via| parse::ip(&op, &field("via"), via)).transpose()?,
                        device: route.dev.clone(),
                        onlink: route.onlink.unwrap_or(false),
                        source: route.src.as_deref().map(|src| parse::ip(&op, &field("src"), src)).transpose()?,
                    })
                })
                .collect::<dataplane::Result<Vec<_>>>()?;
            dataplane::sync_routes(&mut open(&op)?, protocol, &wanted)
        })();
        match synced {
            Ok(counts) => RouteSyncOutcome {
                counts: Some(RouteSyncCounts {
                    added: counts.added,
                    replaced: counts.replaced,
                    removed: counts.removed,
                    unchanged: counts.unchanged,
                }),
                error: None,
            },
            Err(err) => RouteSyncOutcome { counts: None, error: Some(kernel_error(err)) },
        }
    })
}

/// Makes the permanent neighbour entries on `dev` exactly `entries`.
#[napi(ts_return_type = "Promise<EntrySyncOutcome>")]
pub fn sync_neighbors(env: &Env, dev: String, entries: Vec<NeighborEntry>) -> Result<Object<'_>> {
    on_namespace_thread(env, move |_| {
        entry_outcome((|| {
            let op = format!("sync neighbour entries on \"{dev}\"");
            let wanted = entries
                .iter()
                .enumerate()
                .map(|(i, entry)| {
                    Ok(dataplane::NeighborEntry {
                        ip: parse::ip(&op, &format!("entries[{i}].ip"), &entry.ip)?,
                        mac: parse::unicast_mac(&op, &format!("entries[{i}].mac"), &entry.mac)?,
                    })
                })
                .collect::<dataplane::Result<Vec<_>>>()?;
            dataplane::sync_neighbors(&mut open(&op)?, &dev, &wanted)
        })())
    })
}

/// Makes the permanent FDB entries of the VXLAN device `dev` exactly `entries`.
#[napi(ts_return_type = "Promise<EntrySyncOutcome>")]
pub fn sync_fdb(env: &Env, dev: String, entries: Vec<FdbEntry>) -> Result<Object<'_>> {
    on_namespace_thread(env, move |_| {
        entry_outcome((|| {
            let op = format!("sync FDB entries of \"{dev}\"");
            let wanted = entries
                .iter()
                .enumerate()
                .map(|(i, entry)| {
                    Ok(dataplane::FdbEntry {
                        mac: parse::unicast_mac(&op, &format!("entries[{i}].mac"), &entry.mac)?,
                        remote: parse::ip(&op, &format!("entries[{i}].dst"), &entry.dst)?,
                    })
                })
                .collect::<dataplane::Result<Vec<_>>>()?;
            dataplane::sync_fdb(&mut open(&op)?, &dev, &wanted)
        })())
    })
}

/// An rtnetlink socket in the namespace of the calling thread (a fresh one: the process's).
fn open(op: &str) -> dataplane::Result<Rtnl> {
    Rtnl::open().map_err(|err| err.into_dataplane(op))
}

fn device_outcome(made: dataplane::Result<dataplane::EnsuredDevice>, with_mac: bool) -> DeviceOutcome {
    match made {
        Ok(device) => {
            DeviceOutcome { ifindex: Some(device.index), mac: with_mac.then(|| format_mac(&device.mac)), error: None }
        }
        Err(err) => DeviceOutcome { ifindex: None, mac: None, error: Some(kernel_error(err)) },
    }
}

fn entry_outcome(synced: dataplane::Result<dataplane::EntrySyncCounts>) -> EntrySyncOutcome {
    match synced {
        Ok(counts) => EntrySyncOutcome {
            counts: Some(EntrySyncCounts { added: counts.added, removed: counts.removed }),
            error: None,
        },
        Err(err) => EntrySyncOutcome { counts: None, error: Some(kernel_error(err)) },
    }
}
