//! The description a writer last committed, kept in a file between runs of its program, so that
//! a restarted netplug-node writes only what changed while it was away, as it would have without
//! the restart, rather than its whole table (tens of thousands of rules at thousands of policies,
//! seconds of the kernel's time).
//!
//! The file is trusted only for the table it describes: the same network namespace, the same
//! table (its kernel handle: not deleted and made again), its chains, sets and objects as counted
//! after the write, and an encoder built from the same source (a release whose encoding of a rule
//! changed would otherwise keep the old encoding of every rule whose description did not change).
//! The writer removes the file before every commit and writes it again once asked (when its
//! writes have settled), so a file that exists describes the kernel's table, whatever ended the
//! program. Anything else (no file, another namespace, a table changed by someone else, a file
//! that does not parse) is not an error: the table is written whole, as on a first start.

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::Table;

/// A digest of this crate's source (build.rs): what encoded the kept table.
const ENCODER: &str = env!("NETPLUG_NFTABLES_ENCODER");

/// The kernel's facts about a table that say it is the one a writer last committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelTable {
    /// The table's handle: a table deleted and made again gets another.
    pub handle: u64,
    /// Its count of chains, sets and objects.
    pub use_count: u32,
}

/// What the file holds.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    encoder: String,
    /// The network namespace's inode.
    netns: u64,
    kernel: KernelTable,
    next_anonymous: u32,
    table: Table,
}

/// The same, written from a borrowed description.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KeptRef<'a> {
    encoder: &'a str,
    netns: u64,
    kernel: KernelTable,
    next_anonymous: u32,
    table: &'a Table,
}

/// The last committed description, as a restarted writer takes it over.
pub struct Adopted {
    pub table: Table,
    pub kernel: KernelTable,
    pub next_anonymous: u32,
}

/// A writer's file: where it keeps what it committed, and whether it may be on disk.
pub struct KeptFile {
    path: PathBuf,
    /// Whether a file may be there (one from a previous run, or one this writer wrote): removing
    /// it is then due before the next commit.
    on_disk: bool,
}

impl KeptFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), on_disk: true }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The description the file keeps, if it describes table `family name` as the kernel holds it
    /// now (`kernel`, read by the caller in the calling thread's namespace).
    pub fn adopt(&self, table_of: (&str, &str), kernel: Option<KernelTable>) -> Option<Adopted> {
        let kernel = kernel?;
        let text = fs::read(&self.path).ok()?;
        let kept: Kept = serde_json::from_slice(&text).ok()?;
        let same = kept.encoder == ENCODER
            && Some(kept.netns) == netns()
            && kept.kernel == kernel
            && (kept.table.family.name(), kept.table.name.as_str()) == table_of;
        same.then_some(Adopted { table: kept.table, kernel: kept.kernel, next_anonymous: kept.next_anonymous })
    }

    /// Removes the file before a commit; an error other than its absence is returned (a file
    /// left would describe a table the commit changes).
    pub fn remove(&mut self) -> std::io::Result<()> {
        if !self.on_disk {
            return Ok(());
        }
        match fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err),
        }
        self.on_disk = false;
        Ok(())
    }

    /// Writes the file (a temporary one renamed over it, so a reader sees a whole file or none).
    pub fn write(&mut self, table: &Table, kernel: KernelTable, next_anonymous: u32) -> std::io::Result<()> {
        let Some(netns) = netns() else { return Ok(()) };
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)?;
        }
        let kept = KeptRef { encoder: ENCODER, netns, kernel, next_anonymous, table };
        let temporary = self.path.with_extension("tmp");
        let mut file = std::io::BufWriter::new(fs::File::create(&temporary)?);
        serde_json::to_writer(&mut file, &kept)?;
        file.flush()?;
        drop(file);
        // Marked first: a rename that fails half-way is removed before the next commit all the same.
        self.on_disk = true;
        fs::rename(&temporary, &self.path)
    }
}

/// The inode of the calling thread's network namespace.
fn netns() -> Option<u64> {
    fs::metadata("/proc/thread-self/ns/net").ok().map(|m| m.ino())
}
