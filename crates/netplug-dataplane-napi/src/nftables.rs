//! Binding of netplug-nftables: the table writer (`NftTableWriter`) and NFLOG subscriptions.
//! Every call acts on the calling process's network namespace from a thread of its own and
//! settles a promise; descriptions and element changes arrive as JSON text (the TypeScript
//! facade serializes its typed descriptions), failures as `{ error }` outcomes naming the
//! operation and the object.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Object;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Error, Result, Status};
use napi_derive::napi;
use netplug_nftables::model::Family;
use netplug_nftables::nflog::{LoggedPacket, NflogReader};
use netplug_nftables::{NftError, TableWriter, changes_from_json, table_from_json};

use crate::{KernelError, on_thread};

/// What an apply or element update sent.
#[napi(object)]
pub struct NftApplyReport {
    /// Whether the table was replaced whole.
    pub replaced: bool,
    /// Messages in the transaction; 0 when the kernel already held the description.
    pub operations: u32,
    pub bytes: u32,
}

#[napi(object)]
pub struct NftApplyOutcome {
    pub report: Option<NftApplyReport>,
    pub error: Option<KernelError>,
}

#[napi(object)]
pub struct NftCounter {
    pub name: String,
    /// Counts as floating-point numbers (exact up to 2^53).
    pub packets: f64,
    pub bytes: f64,
}

#[napi(object)]
pub struct NftCountersOutcome {
    pub counters: Option<Vec<NftCounter>>,
    pub error: Option<KernelError>,
}

#[napi(object)]
pub struct NftRemoveOutcome {
    /// Whether there was a table to remove.
    pub removed: Option<bool>,
    pub error: Option<KernelError>,
}

#[napi(object)]
pub struct NftKeepOutcome {
    /// Whether a description was written (none is committed after a failure).
    pub kept: Option<bool>,
    pub error: Option<KernelError>,
}

#[napi(object)]
pub struct NftLegacyOutcome {
    /// The chains whose rules jumped to the removed chain; absent when there was no chain.
    pub removed_jumps_from: Option<Vec<String>>,
    pub error: Option<KernelError>,
}

/// Writes one nftables table; remembers what it committed, so that later applies send only the
/// difference. Calls are serialized: each waits for the one before it.
#[napi]
pub struct NftTableWriter {
    writer: Arc<Mutex<TableWriter>>,
}

#[napi]
impl NftTableWriter {
    /// A writer of table `name` of `family` (`inet`, `ip` or `ip6`); with `kept_path`, it keeps
    /// its last commit in that file between runs, and its first apply takes over the table a
    /// previous run left there when the file still describes it.
    #[napi(constructor)]
    pub fn new(family: String, name: String, kept_path: Option<String>) -> Result<Self> {
        let family = match family.as_str() {
            "inet" => Family::Inet,
            "ip" => Family::Ip,
            "ip6" => Family::Ip6,
            other => {
                return Err(Error::new(Status::InvalidArg, format!("family \"{other}\" is not inet, ip or ip6")));
            }
        };
        let mut writer = TableWriter::new(family, &name);
        if let Some(path) = kept_path {
            writer.keep_in(path);
        }
        Ok(Self { writer: Arc::new(Mutex::new(writer)) })
    }

    /// Writes the last commit to the writer's file (given to the constructor), for the next run.
    #[napi(ts_return_type = "Promise<NftKeepOutcome>")]
    pub fn keep<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let writer = self.writer.clone();
        on_thread(env, move || match lock(&writer).keep() {
            Ok(kept) => NftKeepOutcome { kept: Some(kept), error: None },
            Err(err) => NftKeepOutcome { kept: None, error: Some(nft_error(err)) },
        })
    }

    /// Makes the kernel's table equal `description` (a table description as JSON).
    #[napi(ts_return_type = "Promise<NftApplyOutcome>")]
    pub fn apply<'env>(&self, env: &'env Env, description: String) -> Result<Object<'env>> {
        let writer = self.writer.clone();
        on_thread(env, move || {
            let applied = table_from_json(&description).and_then(|table| lock(&writer).apply(table));
            release_freed_memory();
            apply_outcome(applied)
        })
    }

    /// Changes the table last applied by a delta (as JSON: what changed since), in one batch;
    /// refused with nothing sent when the table is not as last written (apply it whole then).
    #[napi(ts_return_type = "Promise<NftApplyOutcome>")]
    pub fn apply_delta<'env>(&self, env: &'env Env, delta: String) -> Result<Object<'env>> {
        let writer = self.writer.clone();
        on_thread(env, move || {
            let applied = netplug_nftables::delta_from_json(&delta).and_then(|delta| lock(&writer).apply_delta(delta));
            apply_outcome(applied)
        })
    }

    /// Adds and deletes elements of the table's sets and maps (changes as JSON), in one batch.
    #[napi(ts_return_type = "Promise<NftApplyOutcome>")]
    pub fn update_elements<'env>(&self, env: &'env Env, changes: String) -> Result<Object<'env>> {
        let writer = self.writer.clone();
        on_thread(env, move || {
            let applied = changes_from_json(&changes).and_then(|changes| lock(&writer).update_elements(&changes));
            apply_outcome(applied)
        })
    }

    /// The table's named counters.
    #[napi(ts_return_type = "Promise<NftCountersOutcome>")]
    pub fn counters<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let writer = self.writer.clone();
        on_thread(env, move || match lock(&writer).counters() {
            Ok(counters) => NftCountersOutcome {
                counters: Some(
                    counters
                        .into_iter()
                        .map(|c| NftCounter { name: c.name, packets: c.packets as f64, bytes: c.bytes as f64 })
                        .collect(),
                ),
                error: None,
            },
            Err(err) => NftCountersOutcome { counters: None, error: Some(nft_error(err)) },
        })
    }

    /// Deletes the table if it is there; the next apply writes it whole.
    #[napi(ts_return_type = "Promise<NftRemoveOutcome>")]
    pub fn remove<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let writer = self.writer.clone();
        on_thread(env, move || match lock(&writer).remove() {
            Ok(removed) => NftRemoveOutcome { removed: Some(removed), error: None },
            Err(err) => NftRemoveOutcome { removed: None, error: Some(nft_error(err)) },
        })
    }
}

fn lock(writer: &Mutex<TableWriter>) -> std::sync::MutexGuard<'_, TableWriter> {
    // A panic while holding the lock leaves a writer whose copy may be stale: forget it, so the
    // next apply replaces the table whole.
    writer.lock().unwrap_or_else(|poisoned| {
        let mut guard = poisoned.into_inner();
        guard.forget();
        guard
    })
}

/// A whole table's write allocates its description, compiled rules and batch (tens of MiB at
/// thousands of policies) on a call's thread; glibc keeps what they freed in that thread's arena,
/// which netplug-node's resident memory would then carry. Given back to the system here.
fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free heap memory to the system; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn apply_outcome(applied: netplug_nftables::Result<netplug_nftables::ApplyReport>) -> NftApplyOutcome {
    match applied {
        Ok(report) => NftApplyOutcome {
            report: Some(NftApplyReport {
                replaced: report.replaced,
                operations: u32::try_from(report.operations).unwrap_or(u32::MAX),
                bytes: u32::try_from(report.bytes).unwrap_or(u32::MAX),
            }),
            error: None,
        },
        Err(err) => NftApplyOutcome { report: None, error: Some(nft_error(err)) },
    }
}

/// Removes the chain `chain` an older release left in the IPv4 iptables-nft table `table`, with
/// every rule that jumps to it, in one transaction.
#[napi(ts_return_type = "Promise<NftLegacyOutcome>")]
pub fn remove_iptables_chain(env: &Env, table: String, chain: String) -> Result<Object<'_>> {
    on_thread(env, move || match netplug_nftables::legacy::remove_iptables_chain(&table, &chain) {
        Ok(netplug_nftables::legacy::Removal::Absent) => NftLegacyOutcome { removed_jumps_from: None, error: None },
        Ok(netplug_nftables::legacy::Removal::Removed { jumps }) => {
            NftLegacyOutcome { removed_jumps_from: Some(jumps), error: None }
        }
        Err(err) => NftLegacyOutcome { removed_jumps_from: None, error: Some(nft_error(err)) },
    })
}

/// A packet a rule logged to an NFLOG group.
#[napi(object)]
pub struct NflogPacket {
    pub group: u32,
    pub prefix: String,
    /// 4 or 6.
    pub family: u32,
    pub in_interface: Option<String>,
    pub out_interface: Option<String>,
    /// IP protocol number.
    pub protocol: Option<u32>,
    pub source: Option<String>,
    pub destination: Option<String>,
    pub source_port: Option<u32>,
    pub destination_port: Option<u32>,
    pub icmp_type: Option<u32>,
    pub icmp_code: Option<u32>,
    pub mark: Option<u32>,
    /// The IP packet's length in bytes (from its header; the copy's length when that is cut).
    pub length: u32,
}

type PacketsCallback = ThreadsafeFunction<Vec<NflogPacket>, (), Vec<NflogPacket>, Status, false>;

/// A running NFLOG subscription.
#[napi]
pub struct NflogSubscription {
    reader: Arc<Mutex<Option<NflogReader>>>,
}

#[napi(object, object_from_js = false)]
pub struct NflogSubscribeOutcome {
    pub subscription: Option<NflogSubscription>,
    pub error: Option<KernelError>,
}

#[napi(object)]
pub struct NflogStopOutcome {
    pub error: Option<KernelError>,
}

/// Subscribes to NFLOG group `group` and calls `onPackets` with the packets logged to it, a batch
/// at a time (those the kernel sent together), until the subscription is stopped (it keeps the
/// process alive until then).
#[napi(
    ts_args_type = "group: number, onPackets: (packets: NflogPacket[]) => void",
    ts_return_type = "Promise<NflogSubscribeOutcome>"
)]
pub fn subscribe_nflog(env: &Env, group: u32, on_packets: PacketsCallback) -> Result<Object<'_>> {
    let group = u16::try_from(group)
        .map_err(|_| Error::new(Status::InvalidArg, format!("NFLOG group {group} is out of range (0-65535)")))?;
    on_thread(env, move || {
        let started = NflogReader::start(group, move |packets| {
            on_packets.call(packets.into_iter().map(packet_object).collect(), ThreadsafeFunctionCallMode::NonBlocking);
        });
        match started {
            Ok(reader) => NflogSubscribeOutcome {
                subscription: Some(NflogSubscription { reader: Arc::new(Mutex::new(Some(reader))) }),
                error: None,
            },
            Err(err) => NflogSubscribeOutcome { subscription: None, error: Some(nft_error(err)) },
        }
    })
}

#[napi]
impl NflogSubscription {
    /// Stops the subscription and unbinds the group; stopping twice is a no-op.
    #[napi(ts_return_type = "Promise<NflogStopOutcome>")]
    pub fn stop<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let reader = self.reader.clone();
        on_thread(env, move || {
            let taken = reader.lock().map(|mut r| r.take()).unwrap_or(None);
            match taken.map(NflogReader::stop) {
                Some(Err(err)) => NflogStopOutcome { error: Some(nft_error(err)) },
                _ => NflogStopOutcome { error: None },
            }
        })
    }
}

fn packet_object(packet: LoggedPacket) -> NflogPacket {
    NflogPacket {
        group: packet.group.into(),
        prefix: packet.prefix,
        family: packet.family.into(),
        in_interface: packet.in_interface,
        out_interface: packet.out_interface,
        protocol: packet.protocol.map(u32::from),
        source: packet.source.map(|a| a.to_string()),
        destination: packet.destination.map(|a| a.to_string()),
        source_port: packet.source_port.map(u32::from),
        destination_port: packet.destination_port.map(u32::from),
        icmp_type: packet.icmp.map(|(t, _)| t.into()),
        icmp_code: packet.icmp.map(|(_, c)| c.into()),
        mark: packet.mark,
        length: packet.length,
    }
}

pub(crate) fn nft_error(err: NftError) -> KernelError {
    KernelError { code: err.code(), errno: err.errno as i32, message: err.to_string(), op: err.op }
}
