//! Test fixtures: private network namespaces, `nft` as an independent observer (listing the
//! kernel's table, and showing the bytes it sends for the same ruleset), and the golden cases.
#![allow(dead_code)]

pub mod listing;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use netplug_nftables::batch::{Batch, Sealed};
use netplug_nftables::check::check;
use netplug_nftables::model::Table;
use netplug_nftables::plan::write_whole;
use serde::Deserialize;

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn next() -> u32 {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// These tests need root: failing here, rather than skipping, keeps CI honest.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "the nftables tests create network namespaces and must run as root");
}

/// A fresh network namespace, deleted (with everything in it) when dropped.
pub struct TestNs {
    pub name: String,
    pub path: PathBuf,
}

impl TestNs {
    pub fn new() -> Self {
        require_root();
        let name = format!("nptest-nft-{}-{}", std::process::id(), next());
        run("ip", &["netns", "add", &name]);
        let path = PathBuf::from(format!("/run/netns/{name}"));
        run_in(&name, "ip", &["link", "set", "lo", "up"]);
        Self { name, path }
    }

    /// Runs `f` on a thread inside this namespace (sockets it opens stay there).
    pub fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = &self.path;
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    let file = std::fs::File::open(path).unwrap();
                    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
                    f()
                })
                .join()
                .unwrap()
        })
    }

    /// `nft <args>` in this namespace; panics on failure.
    pub fn nft(&self, args: &[&str]) -> String {
        run_in(&self.name, nft_binary(), args)
    }

    /// `nft -j list table <family> <name>`, parsed.
    pub fn nft_json(&self, family: &str, table: &str) -> serde_json::Value {
        serde_json::from_str(&self.nft(&["-j", "list", "table", family, table])).unwrap()
    }

    pub fn exec(&self, program: &str, args: &[&str]) -> Output {
        let mut full = vec!["netns", "exec", self.name.as_str(), program];
        full.extend(args);
        Command::new("ip").args(&full).output().unwrap()
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// The nftables `nft` (npm's scripts put node_modules/.bin first on PATH, where another package's
/// `nft` command lives).
pub fn nft_binary() -> &'static str {
    static FOUND: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        let path = std::env::var("PATH").unwrap_or_default();
        path.split(':')
            .filter(|dir| !dir.contains("node_modules"))
            .map(|dir| Path::new(dir).join("nft"))
            .find(|candidate| candidate.is_file())
            .map(|found| found.to_string_lossy().into_owned())
            .unwrap_or_else(|| "/usr/sbin/nft".into())
    })
}

pub fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    assert!(out.status.success(), "{program} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

pub fn run_in(ns: &str, program: &str, args: &[&str]) -> String {
    let mut full = vec!["netns", "exec", ns, program];
    full.extend(args);
    run("ip", &full)
}

/// A golden case: an nft ruleset and the description that means the same.
#[derive(Deserialize)]
pub struct Case {
    pub name: String,
    pub nft: String,
    pub table: Table,
}

/// Read when the test runs (cargo sets it then too), not when it was compiled: the test target
/// directory is shared between clones (scripts/test-rust.sh), and a binary built in a clone since
/// removed would look for its files there.
pub fn golden_dir() -> PathBuf {
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR")).join("tests/golden")
}

pub fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(golden_dir().join("cases.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// One message of a batch: its type and everything after the netlink header.
pub type Message = (u16, Vec<u8>);

/// The messages of a sealed batch.
pub fn messages(sealed: &Sealed) -> Vec<Message> {
    let mut out = Vec::new();
    let mut offset = 0;
    let bytes = &sealed.bytes;
    while offset + 16 <= bytes.len() {
        let len = u32::from_ne_bytes(bytes[offset..offset + 4].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes(bytes[offset + 4..offset + 6].try_into().unwrap());
        out.push((kind, bytes[offset + 16..offset + len].to_vec()));
        offset += (len + 3) & !3;
    }
    out
}

/// What our encoder sends to create the case's table (as `nft -f` of the case's text does).
pub fn encode(table: &Table) -> Vec<Message> {
    let checked = check(table).unwrap_or_else(|err| panic!("{err}"));
    let mut batch = Batch::new(table.family, &table.name, 0, None);
    write_whole(&mut batch, &checked, false);
    messages(&batch.seal())
}

/// The fixture file of a case: one line per message, `type hex`.
pub fn fixture_path(name: &str) -> PathBuf {
    golden_dir().join(format!("{name}.hex"))
}

pub fn read_fixture(name: &str) -> Vec<Message> {
    let text = std::fs::read_to_string(fixture_path(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (kind, hex) = line.split_once(' ').unwrap_or((line, ""));
            (kind.parse().unwrap(), from_hex(hex))
        })
        .collect()
}

pub fn write_fixture(name: &str, messages: &[Message]) {
    let text: String = messages.iter().map(|(kind, body)| format!("{kind} {}\n", to_hex(body))).collect();
    std::fs::write(fixture_path(name), text).unwrap();
}

pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn from_hex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

/// Attribute tree of a message body, one attribute per line, for readable differences.
pub fn describe(body: &[u8]) -> String {
    fn walk(bytes: &[u8], depth: usize, out: &mut String) {
        let mut at = 0;
        while at + 4 <= bytes.len() {
            let len = u16::from_ne_bytes([bytes[at], bytes[at + 1]]) as usize;
            let kind = u16::from_ne_bytes([bytes[at + 2], bytes[at + 3]]);
            if len < 4 || at + len > bytes.len() {
                out.push_str(&format!("{}<bad {}>\n", "  ".repeat(depth), to_hex(&bytes[at..])));
                return;
            }
            let value = &bytes[at + 4..at + len];
            if kind & 0x8000 != 0 {
                out.push_str(&format!("{}{}N\n", "  ".repeat(depth), kind & 0x3fff));
                walk(value, depth + 1, out);
            } else {
                out.push_str(&format!("{}{}: {}\n", "  ".repeat(depth), kind & 0x3fff, to_hex(value)));
            }
            at += (len + 3) & !3;
        }
    }
    let mut out = format!("nfgenmsg {}\n", to_hex(&body[..4.min(body.len())]));
    walk(body.get(4..).unwrap_or(&[]), 1, &mut out);
    out
}

/// Compares two message lists, panicking with the first difference shown attribute by attribute.
pub fn assert_same(case: &str, ours: &[Message], theirs: &[Message]) {
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        if a != b {
            panic!(
                "case {case}: message {i} differs\n--- ours (type {}):\n{}--- nft's (type {}):\n{}",
                a.0,
                describe(&a.1),
                b.0,
                describe(&b.1)
            );
        }
    }
    assert_eq!(ours.len(), theirs.len(), "case {case}: {} messages from us, {} from nft", ours.len(), theirs.len());
}

/// The batch `nft -f` sends for `ruleset` in a fresh namespace, read from `nft --debug=mnl`
/// (libmnl's dump of every message: headers, then each attribute's header and data).
pub fn nft_batch(ruleset: &str) -> Vec<Message> {
    let ns = TestNs::new();
    let file = std::env::temp_dir().join(format!("netplug-golden-{}-{}.nft", std::process::id(), next()));
    std::fs::write(&file, ruleset).unwrap();
    let out = ns.exec(nft_binary(), &["--debug=mnl", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "nft refused the case: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    parse_mnl_dump(&text)
}

/// Parses libmnl's message dump back into bytes, keeping the batch (BATCH_BEGIN to BATCH_END).
pub fn parse_mnl_dump(text: &str) -> Vec<Message> {
    let mut all: Vec<Message> = Vec::new();
    for raw in text.lines() {
        let line = strip_ansi(raw);
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if line.contains("| message length |") {
            all.push((0, Vec::new()));
        } else if line.contains("|  type | flags  |") {
            let kind = cells[1].parse().unwrap();
            all.last_mut().unwrap().0 = kind;
        } else if line.contains("|  extra header  |") || line.contains("|      data      |") {
            all.last_mut().unwrap().1.extend(from_hex(&cells[1].replace(' ', "")));
        } else if line.contains("|len |flags| type|") {
            let len: u16 = cells[1].parse().unwrap();
            let mut kind: u16 = cells[3].parse().unwrap();
            let flags = cells[2];
            if flags.starts_with('N') {
                kind |= 0x8000;
            }
            if flags.ends_with('B') {
                kind |= 0x4000;
            }
            let body = &mut all.last_mut().unwrap().1;
            body.extend(len.to_ne_bytes());
            body.extend(kind.to_ne_bytes());
        }
    }
    let begin = all.iter().position(|(kind, _)| *kind == 0x10).expect("a batch in nft's output");
    let end = all.iter().rposition(|(kind, _)| *kind == 0x11).expect("the batch's end");
    all[begin..=end].to_vec()
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
