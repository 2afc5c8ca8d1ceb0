//! NETPLUG_NFTABLES_ENCODER: a digest of this crate's source, which kept.rs stamps on the table
//! description it keeps between runs: a writer built from other source (another release, whose
//! encoding of a rule may differ) does not take over a table this one wrote.

use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src");
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    files.sort();
    // FNV-1a, 64 bits: stable across Rust releases (std's hasher is not), and a digest, not a defence.
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    for file in files {
        let bytes = fs::read(&file).unwrap_or_default();
        for byte in file.to_string_lossy().as_bytes().iter().chain(&bytes) {
            digest ^= u64::from(*byte);
            digest = digest.wrapping_mul(0x0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=NETPLUG_NFTABLES_ENCODER={}-{digest:016x}", env!("CARGO_PKG_VERSION"));
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}
