//! Binding of netplug-nftables' conntrack dump, and of the sysctls that make the kernel count
//! and stamp connections. Both act on the calling process's network namespace from a thread of
//! their own and settle a promise; failures arrive as `{ error }` outcomes.

use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;
use netplug_dataplane::sysctl;
use netplug_nftables::conntrack::{self, Direction};

use crate::nftables::nft_error;
use crate::{KernelError, kernel_error, on_thread};

/// One direction of a connection: the addresses and ports its packets carry, and what passed.
#[napi(object)]
pub struct ConntrackDirection {
    pub source: String,
    pub destination: String,
    /// Absent for protocols without ports (ICMP, ...).
    pub source_port: Option<u32>,
    pub destination_port: Option<u32>,
    /// 0 when accounting was off as the connection began. Floating point (exact up to 2^53).
    pub packets: f64,
    /// IP bytes, headers included; 0 when accounting was off as the connection began.
    pub bytes: f64,
}

/// One entry of the connection tracking table.
#[napi(object)]
pub struct ConntrackEntry {
    /// 4 or 6.
    pub family: u32,
    /// IP protocol number.
    pub protocol: u32,
    /// As the first packet went: from the initiator to the responder.
    pub original: ConntrackDirection,
    /// As the answers go (after NAT, to the address the initiator's packets were rewritten to).
    pub reply: ConntrackDirection,
    pub mark: u32,
    /// The kernel's id of the entry, stable for its lifetime.
    pub id: u32,
    /// `ip_conntrack_status` bits: 2 seen reply, 4 assured, 8 confirmed, 16 source NAT, 32
    /// destination NAT, 512 dying.
    pub status: u32,
    /// When the entry was created, ms since the epoch (fractional); with timestamps on only.
    pub start: Option<f64>,
    /// When it ended, ms since the epoch (entries being destroyed only).
    pub stop: Option<f64>,
}

#[napi(object)]
pub struct ConntrackDumpOutcome {
    pub entries: Option<Vec<ConntrackEntry>>,
    pub error: Option<KernelError>,
}

#[napi(object)]
pub struct ConntrackAccountingOutcome {
    pub error: Option<KernelError>,
}

/// Every IPv4 and IPv6 entry of the process's connection tracking table.
#[napi(ts_return_type = "Promise<ConntrackDumpOutcome>")]
pub fn conntrack_dump(env: &Env) -> Result<Object<'_>> {
    on_thread(env, || match conntrack::dump() {
        Ok(entries) => {
            ConntrackDumpOutcome { entries: Some(entries.into_iter().map(entry_object).collect()), error: None }
        }
        Err(err) => ConntrackDumpOutcome { entries: None, error: Some(nft_error(err)) },
    })
}

/// Sets `net.netfilter.nf_conntrack_acct` and `nf_conntrack_timestamp` to 1 in the process's
/// network namespace: connections created from then on are counted and stamped.
#[napi(ts_return_type = "Promise<ConntrackAccountingOutcome>")]
pub fn enable_conntrack_accounting(env: &Env) -> Result<Object<'_>> {
    on_thread(env, || {
        let written = sysctl::write("net/netfilter/nf_conntrack_acct", "1")
            .and_then(|()| sysctl::write("net/netfilter/nf_conntrack_timestamp", "1"));
        ConntrackAccountingOutcome { error: written.err().map(kernel_error) }
    })
}

fn entry_object(entry: conntrack::ConntrackEntry) -> ConntrackEntry {
    let ms = |ns: u64| ns as f64 / 1e6;
    ConntrackEntry {
        family: entry.family.into(),
        protocol: entry.protocol.into(),
        original: direction_object(entry.original),
        reply: direction_object(entry.reply),
        mark: entry.mark,
        id: entry.id,
        status: entry.status,
        start: entry.start.map(ms),
        stop: entry.stop.map(ms),
    }
}

fn direction_object(direction: Direction) -> ConntrackDirection {
    ConntrackDirection {
        source: direction.source.to_string(),
        destination: direction.destination.to_string(),
        source_port: direction.source_port.map(u32::from),
        destination_port: direction.destination_port.map(u32::from),
        packets: direction.packets as f64,
        bytes: direction.bytes as f64,
    }
}
