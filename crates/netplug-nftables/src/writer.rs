//! The table writer: makes the kernel's table equal a description, remembering what it last
//! committed so that a later description costs only its difference.
//!
//! The first apply, and any after a failure, replaces the table whole in one transaction (add
//! the table so that deleting it cannot fail, delete it, add it and everything in it): packets
//! meet either the old table or the new one, never a half-written one. Later applies send the
//! chains added and removed, the rules of changed chains (flushed and written again), and the
//! elements added to and removed from sets and maps, again in one transaction. A table whose
//! chains, sets or counters someone else changed since (its kernel use count differs) is
//! replaced whole again.
//!
//! A writer given a file (`keep_in`) keeps its last commit there between runs (kept.rs): the
//! first apply of a restarted program then goes by difference from it when the kernel's table
//! is still the one it describes.

use netlink_packet_core::DefaultNla;
use netlink_packet_netfilter::nftables::{NfTablesMessage, TableAttribute, TableMessage};
use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily};
use nix::errno::Errno;

use crate::batch::Batch;
use crate::check::{check, check_against};
use crate::delta::{self, TableDelta};
use crate::error::{NftError, Result};
use crate::expr::{self, string, u32_be};
use crate::kept::{KeptFile, KernelTable};
use crate::model::{ElementChanges, Family, Table};
use crate::plan::{difference, replace};
use crate::socket::NfSocket;
use crate::update::{self, SetIndexes};

/// What an apply sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyReport {
    /// Whether the table was replaced whole (rather than changed by difference).
    pub replaced: bool,
    /// Messages in the transaction (0: the kernel already held the description).
    pub operations: usize,
    /// Bytes sent.
    pub bytes: usize,
}

/// A named counter's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterValue {
    pub name: String,
    pub packets: u64,
    pub bytes: u64,
}

/// Writes one table (`family`, `name`) in the network namespace of the calling thread.
pub struct TableWriter {
    family: Family,
    name: String,
    committed: Option<Table>,
    /// Indexes of the committed table's sets that element updates touched (update.rs).
    indexes: SetIndexes,
    /// The number the next anonymous set gets (the writer names them; see Batch).
    next_anonymous: u32,
    /// Kept open: closing a netfilter netlink socket waits for an RCU grace period (~15 ms
    /// here), which would otherwise be most of a small update's time.
    socket: Option<NfSocket>,
    /// The kernel's count of the table's chains, sets and objects, and its handle, after our
    /// last write: a different count or handle before the next one means someone else changed
    /// (or deleted and made again) the table.
    kernel: Option<KernelTable>,
    /// Where the last commit is kept between runs, if anywhere.
    kept: Option<KeptFile>,
    /// The kept file is yet to be looked at (by the first apply).
    adoption_due: bool,
}

impl TableWriter {
    pub fn new(family: Family, name: &str) -> Self {
        Self {
            family,
            name: name.to_string(),
            committed: None,
            indexes: SetIndexes::new(),
            next_anonymous: 0,
            socket: None,
            kernel: None,
            kept: None,
            adoption_due: false,
        }
    }

    /// Keeps the last commit in `path` between runs: the first apply takes over the table a
    /// previous run left when the file describes it (kept.rs), and `keep` writes the file.
    pub fn keep_in(&mut self, path: impl Into<std::path::PathBuf>) {
        self.kept = Some(KeptFile::new(path));
        self.adoption_due = true;
    }

    /// Writes what was last committed to the file given to `keep_in`; says whether it did
    /// (nothing is committed after a failure).
    pub fn keep(&mut self) -> Result<bool> {
        let label = self.label();
        let (Some(kept), Some(table), Some(kernel)) = (self.kept.as_mut(), self.committed.as_ref(), self.kernel) else {
            return Ok(false);
        };
        kept.write(table, kernel, self.next_anonymous)
            .map_err(|err| NftError::from_io(format!("keep {label} in {}", kept.path().display()), &err))?;
        Ok(true)
    }

    /// Removes the kept file before a commit changes the table it may describe.
    fn unkeep(&mut self, op: &str) -> Result<()> {
        let Some(kept) = self.kept.as_mut() else { return Ok(()) };
        kept.remove().map_err(|err| NftError::from_io(format!("{op}: remove {}", kept.path().display()), &err))
    }

    /// On the first apply: the description a previous run kept, if the kernel's table is the one
    /// it describes.
    fn adopt(&mut self, op: &str) -> Result<()> {
        if !std::mem::take(&mut self.adoption_due) || self.committed.is_some() {
            return Ok(());
        }
        if self.kept.is_none() {
            return Ok(());
        }
        let kernel = self.kernel_table(op)?;
        let of = (self.family.name(), self.name.as_str());
        if let Some(adopted) = self.kept.as_ref().and_then(|kept| kept.adopt(of, kernel)) {
            self.committed = Some(adopted.table);
            self.kernel = Some(adopted.kernel);
            self.next_anonymous = adopted.next_anonymous;
        }
        Ok(())
    }

    fn label(&self) -> String {
        format!("table {} {}", self.family.name(), self.name)
    }

    /// The description the kernel holds since the last successful call, if any.
    pub fn committed(&self) -> Option<&Table> {
        self.committed.as_ref()
    }

    /// Forgets what was committed: the next apply replaces the table whole.
    pub fn forget(&mut self) {
        self.committed = None;
        self.indexes.clear();
    }

    /// The writer's socket, opened in the calling thread's network namespace on first use.
    fn socket(&mut self) -> Result<&mut NfSocket> {
        if self.socket.is_none() {
            self.socket = Some(NfSocket::open()?);
        }
        Ok(self.socket.as_mut().expect("just opened"))
    }

    /// Makes the kernel's table equal `table`, in one transaction.
    pub fn apply(&mut self, table: Table) -> Result<ApplyReport> {
        let op = format!("apply {}", self.label());
        if table.family != self.family || table.name != self.name {
            return Err(NftError::invalid(
                &op,
                format!("the description is of table {} {}, not this writer's", table.family.name(), table.name),
            ));
        }
        // A whole description's sets are not the indexed ones.
        self.indexes.clear();
        self.adopt(&op)?;
        // A table someone else deleted or changed the chains, sets or counters of is written
        // whole again: its difference from our copy would not repair it.
        if self.committed.is_some() && self.kernel_table(&op)? != self.kernel {
            self.committed = None;
        }
        // Checked whole, but for the chains the kernel holds as described (compiled when written).
        let checked = check_against(&table, self.committed.as_ref())?;
        let first = self.socket()?.reserve(0);
        let (batch, replaced) = match self.committed.take() {
            Some(old) => match difference(&old, &checked, first, self.next_anonymous)? {
                Some(batch) => (batch, false),
                None => (replace(&check(&table)?, first), true),
            },
            None => (replace(&checked, first), true),
        };
        let next_anonymous = batch.next_anonymous().unwrap_or(0);
        if batch.is_empty() {
            self.committed = Some(table);
            return Ok(ApplyReport { replaced: false, operations: 0, bytes: 0 });
        }
        self.unkeep(&op)?;
        let sealed = batch.seal();
        let socket = self.socket()?;
        socket.reserve(sealed.labels.len() as u32);
        socket.commit(&sealed, &op)?;
        let report = ApplyReport { replaced, operations: sealed.operations(), bytes: sealed.bytes.len() };
        self.committed = Some(table);
        self.next_anonymous = next_anonymous;
        self.kernel = self.kernel_table(&op)?;
        Ok(report)
    }

    /// The kernel's use count of the table (its chains, sets and objects) and its handle; `None`
    /// when there is no such table.
    fn kernel_table(&mut self, op: &str) -> Result<Option<KernelTable>> {
        let request = NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::from(self.family.nfproto()), 0, 0),
            NfTablesMessage::GetTable(TableMessage { attributes: vec![TableAttribute::Name(self.name.clone())] }),
        );
        let replies = match self.socket()?.request(request, false, op) {
            Ok(replies) => replies,
            Err(err) if err.errno == Errno::ENOENT => return Ok(None),
            Err(err) => return Err(err),
        };
        Ok(replies.into_iter().find_map(|reply| match reply.inner {
            NetfilterMessageInner::NfTables(NfTablesMessage::NewTable(table)) => {
                let (mut use_count, mut handle) = (None, None);
                for attribute in table.attributes {
                    match attribute {
                        TableAttribute::Use(count) => use_count = Some(count),
                        TableAttribute::Handle(value) => handle = Some(value),
                        _ => {}
                    }
                }
                Some(KernelTable { handle: handle?, use_count: use_count? })
            }
            _ => None,
        }))
    }

    /// Changes the committed table by `delta` (what changed since the description last given),
    /// in one transaction. Refused, with nothing sent, when nothing was committed, when someone
    /// else changed the table since, or when the delta does not fit the committed table; after
    /// any failure the next apply replaces the table whole.
    pub fn apply_delta(&mut self, delta: TableDelta) -> Result<ApplyReport> {
        let op = format!("apply changes to {}", self.label());
        if self.committed.is_none() || self.kernel_table(&op)? != self.kernel {
            self.committed = None;
            self.indexes.clear();
            return Err(NftError::new(op, Errno::ESTALE, "the table is not as last written: apply it whole"));
        }
        if delta.is_empty() {
            return Ok(ApplyReport { replaced: false, operations: 0, bytes: 0 });
        }
        self.unkeep(&op)?;
        let table = self.committed.take().expect("checked above");
        for name in delta.delete_sets.iter() {
            self.indexes.remove(name);
        }
        // Until it commits, the copy (and so the indexes) may not be the kernel's.
        let mut indexes = std::mem::take(&mut self.indexes);
        let planned = delta::plan(table, delta, &mut indexes).map_err(|detail| NftError::invalid(&op, detail))?;
        let first = self.socket()?.reserve(0);
        let mut batch = Batch::new(self.family, &self.name, first, None);
        batch.number_anonymous_sets(self.next_anonymous);
        planned.write(&mut batch);
        let next_anonymous = batch.next_anonymous().unwrap_or(self.next_anonymous);
        if batch.is_empty() {
            self.committed = Some(planned.committed(&mut indexes));
            self.indexes = indexes;
            return Ok(ApplyReport { replaced: false, operations: 0, bytes: 0 });
        }
        let sealed = batch.seal();
        let socket = self.socket()?;
        socket.reserve(sealed.labels.len() as u32);
        socket.commit(&sealed, &op)?;
        let report = ApplyReport { replaced: false, operations: sealed.operations(), bytes: sealed.bytes.len() };
        self.committed = Some(planned.committed(&mut indexes));
        self.indexes = indexes;
        self.next_anonymous = next_anonymous;
        self.kernel = self.kernel_table(&op)?;
        Ok(report)
    }

    /// Adds and deletes elements of the committed table's sets and maps, in one transaction.
    /// Adding an element already there or deleting one that is not changes nothing.
    pub fn update_elements(&mut self, changes: &ElementChanges) -> Result<ApplyReport> {
        let op = format!("update elements of {}", self.label());
        let Some(mut table) = self.committed.take() else {
            return Err(NftError::new(
                op,
                Errno::ENOENT,
                "nothing was applied yet (or the last call failed): apply first",
            ));
        };
        let mut indexes = std::mem::take(&mut self.indexes);
        let result = self.write_elements(&mut table, changes, &mut indexes, &op);
        // A change refused before it was sent leaves the kernel as the copy says; one the
        // kernel refused may mean the kernel's table is not what the copy says.
        if !matches!(result, Err((_, true))) {
            self.committed = Some(table);
            self.indexes = indexes;
        }
        result.map_err(|(err, _)| err)
    }

    /// Writes element changes; an error says whether the batch reached the kernel.
    fn write_elements(
        &mut self,
        table: &mut Table,
        changes: &ElementChanges,
        indexes: &mut SetIndexes,
        op: &str,
    ) -> std::result::Result<ApplyReport, (NftError, bool)> {
        let edits = update::plan(table, changes, indexes).map_err(|detail| (NftError::invalid(op, detail), false))?;
        let (family, name) = (self.family, self.name.clone());
        let socket = self.socket().map_err(|err| (err, false))?;
        let mut batch = Batch::new(family, &name, socket.reserve(0), None);
        update::write(&mut batch, &edits);
        if batch.is_empty() {
            return Ok(ApplyReport { replaced: false, operations: 0, bytes: 0 });
        }
        self.unkeep(op).map_err(|err| (err, false))?;
        let socket = self.socket().map_err(|err| (err, false))?;
        let sealed = batch.seal();
        socket.reserve(sealed.labels.len() as u32);
        socket.commit(&sealed, op).map_err(|err| (err, true))?;
        update::apply(table, edits, indexes);
        Ok(ApplyReport { replaced: false, operations: sealed.operations(), bytes: sealed.bytes.len() })
    }
}

impl TableWriter {
    /// The named counters' values, by name.
    pub fn counters(&mut self) -> Result<Vec<CounterValue>> {
        let op = format!("read the counters of {}", self.label());
        let family = self.family;
        let table = self.name.clone();
        let socket = self.socket()?;
        let request = NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::from(family.nfproto()), 0, 0),
            NfTablesMessage::GetObject(vec![string(1, &table), u32_be(3, expr::OBJECT_COUNTER)]),
        );
        let replies = socket.request(request, true, &op)?;
        let mut counters = Vec::new();
        for reply in replies {
            let NetfilterMessageInner::NfTables(NfTablesMessage::NewObject(attributes)) = reply.inner else { continue };
            if let Some(counter) = counter_of(&attributes, &table) {
                counters.push(counter);
            }
        }
        Ok(counters)
    }

    /// Deletes the table if it is there; says whether it was.
    pub fn remove(&mut self) -> Result<bool> {
        let op = format!("remove {}", self.label());
        self.committed = None;
        self.indexes.clear();
        let (family, name) = (self.family, self.name.clone());
        let socket = self.socket()?;
        let request = NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::from(family.nfproto()), 0, 0),
            NfTablesMessage::GetTable(TableMessage { attributes: vec![TableAttribute::Name(name.clone())] }),
        );
        match socket.request(request, false, &op) {
            Ok(_) => {}
            Err(err) if err.errno == Errno::ENOENT => return Ok(false),
            Err(err) => return Err(err),
        }
        self.unkeep(&op)?;
        let socket = self.socket()?;
        let mut batch = Batch::new(family, &name, socket.reserve(0), None);
        batch.add_table();
        batch.delete_table();
        let sealed = batch.seal();
        socket.reserve(sealed.labels.len() as u32);
        socket.commit(&sealed, &op)?;
        Ok(true)
    }
}

fn counter_of(attributes: &[DefaultNla], table: &str) -> Option<CounterValue> {
    use netlink_packet_core::Nla;
    let value = |nla: &DefaultNla| expr::emit_all(std::slice::from_ref(nla))[4..4 + nla.value_len()].to_vec();
    let mut name = None;
    let (mut packets, mut bytes) = (0, 0);
    for nla in attributes {
        let raw = value(nla);
        match nla.kind() & 0x3fff {
            1 if raw.split(|b| *b == 0).next() != Some(table.as_bytes()) => return None,
            2 => name = Some(String::from_utf8_lossy(raw.split(|b| *b == 0).next()?).into_owned()),
            3 if raw.get(..4).map(|b| u32::from_be_bytes(b.try_into().unwrap())) != Some(expr::OBJECT_COUNTER) => {
                return None;
            }
            4 => {
                let mut at = 0;
                while at + 4 <= raw.len() {
                    let len = u16::from_ne_bytes([raw[at], raw[at + 1]]) as usize;
                    let kind = u16::from_ne_bytes([raw[at + 2], raw[at + 3]]) & 0x3fff;
                    if len < 4 || at + len > raw.len() {
                        break;
                    }
                    let number = raw.get(at + 4..at + 12).map(|b| u64::from_be_bytes(b.try_into().unwrap()));
                    match (kind, number) {
                        (1, Some(n)) => bytes = n,
                        (2, Some(n)) => packets = n,
                        _ => {}
                    }
                    at += (len + 3) & !3;
                }
            }
            _ => {}
        }
    }
    Some(CounterValue { name: name?, packets, bytes })
}
