//! Times the table writer on a policy-shaped table in a private network namespace (run as root):
//! `cargo run --release -p netplug-nftables --example apply-bench [policies] [--no-named-sets]
//! [--no-anonymous-sets]`, or on a table description of one's own: `--table <file.json>`.
//!
//! The table: one forward chain dispatching through a verdict map to 250 endpoint chains, each
//! jumping to 4 policy chains; per policy a named set of 20 peers and 4 rules (a peer-set match
//! with an anonymous port set, a concatenated named-port lookup, a CIDR match, a logged drop).
//! Without named sets the peer match is a CIDR; without anonymous sets the ports are one port.

use std::time::Instant;

use netplug_nftables::TableWriter;
use netplug_nftables::model::{ElementChanges, Family, Table};
use serde_json::json;

struct Shape {
    policies: usize,
    named_sets: bool,
    anonymous_sets: bool,
}

fn policy_table(shape: &Shape) -> Table {
    let policies = shape.policies;
    let endpoints = 250;
    let mut chains = vec![json!({
        "name": "forward",
        "base": { "type": "filter", "hook": "forward", "priority": 10 },
        "rules": [
            { "matches": [{ "key": "ct state", "value": ["established", "related"] }], "verdict": "accept" },
            { "verdict": { "vmap": { "key": "oifname", "map": "to-wl" } } },
            { "matches": [{ "key": "oifname", "value": "cali*" }], "verdict": "drop" }
        ]
    })];
    let mut sets = vec![json!({ "name": "named-ports", "type": ["ipv4_addr", "inet_proto", "inet_service"] })];
    let mut map = Vec::new();
    for e in 0..endpoints {
        let jumps: Vec<_> =
            (0..4).map(|k| json!({ "verdict": { "jump": format!("pi-{}", (e * 4 + k) % policies) } })).collect();
        chains.push(json!({ "name": format!("tw-{e}"), "rules": jumps }));
        map.push(json!({ "key": format!("cali{e:011x}"), "verdict": { "goto": format!("tw-{e}") } }));
    }
    for p in 0..policies {
        let peers: Vec<String> = (0..20).map(|i| format!("10.{}.{}.{}", p / 250, p % 250, i + 1)).collect();
        if shape.named_sets {
            sets.push(json!({ "name": format!("peers-{p}"), "type": "ipv4_addr", "elements": peers }));
        }
        chains.push(json!({
            "name": format!("pi-{p}"),
            "rules": [
                { "matches": [{ "key": "ip saddr", "value": if shape.named_sets { json!({ "set": format!("peers-{p}") }) } else { json!("10.0.0.0/8") } }, { "key": "meta l4proto", "value": "tcp" }, { "key": "th dport", "value": if shape.anonymous_sets { json!([80, 443, "8000-8080"]) } else { json!(80) } }], "verdict": "accept", "comment": format!("policy ns/p{p}") },
                { "matches": [{ "key": ["ip saddr", "meta l4proto", "th dport"], "value": { "set": "named-ports" } }], "verdict": "accept" },
                { "matches": [{ "key": "ip saddr", "value": format!("172.{}.0.0/16", 16 + p % 16) }, { "key": "meta l4proto", "value": "udp" }, { "key": "th dport", "value": 53 }], "verdict": "accept" },
                { "statements": [{ "limit": { "rate": 10, "per": "second" } }, { "log": { "prefix": format!("deny p{p}: "), "group": 1 } }] }
            ]
        }));
    }
    serde_json::from_value(json!({
        "family": "inet", "name": "netplug", "chains": chains, "sets": sets,
        "maps": [{ "name": "to-wl", "type": "ifname", "elements": map }]
    }))
    .unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let shape = Shape {
        policies: args.iter().find_map(|a| a.parse().ok()).unwrap_or(5000),
        named_sets: !args.iter().any(|a| a == "--no-named-sets"),
        anonymous_sets: !args.iter().any(|a| a == "--no-anonymous-sets"),
    };
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("run as root: a private network namespace");
    let file = args.iter().position(|a| a == "--table").and_then(|i| args.get(i + 1));
    if let Some(file) = file {
        return whole_writes(file);
    }
    let table = policy_table(&shape);
    let policies = shape.policies;
    let rules: usize = table.chains.iter().map(|c| c.rules.len()).sum();
    println!("{} chains, {rules} rules, {} sets ({policies} policies)", table.chains.len(), table.sets.len());
    let start = Instant::now();
    let checked = netplug_nftables::check::check(&table).unwrap();
    let checking = ms(start);
    let start = Instant::now();
    let sealed = netplug_nftables::plan::replace(&checked, 1).seal();
    println!("userspace: check {checking:.1} ms, encode {:.1} ms ({} bytes)", ms(start), sealed.bytes.len());
    let mut writer = TableWriter::new(Family::Inet, "netplug");
    for round in ["first full apply", "full replace"] {
        writer.forget();
        let start = Instant::now();
        let report = writer.apply(table.clone()).unwrap();
        println!("{round}: {:.1} ms ({} messages, {:.1} MB)", ms(start), report.operations, report.bytes as f64 / 1e6);
    }
    let start = Instant::now();
    assert_eq!(writer.apply(table.clone()).unwrap().operations, 0);
    println!("apply of the same table (diff only): {:.1} ms", ms(start));
    let mut samples = Vec::new();
    for i in 0..200 {
        let changes: ElementChanges = serde_json::from_value(json!({
            "sets": [{
                "name": "named-ports",
                "add": [[format!("10.200.0.{}", i % 250), "tcp", 8080]],
                "delete": [[format!("10.200.0.{}", (i + 249) % 250), "tcp", 8080]]
            }]
        }))
        .unwrap();
        let start = Instant::now();
        let report = writer.update_elements(&changes).unwrap();
        samples.push((ms(start), report.operations, report.bytes));
    }
    samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    let median = samples[samples.len() / 2];
    println!(
        "single-element update: median {:.3} ms, p99 {:.3} ms ({} messages, {} bytes)",
        median.0,
        samples[samples.len() * 99 / 100].0,
        median.1,
        median.2
    );
    let mut changed = table.clone();
    let chain = changed.chains.iter_mut().find(|c| c.name == "pi-42").unwrap();
    chain.rules[0].comment = Some("policy ns/p42 v2".into());
    let start = Instant::now();
    let report = writer.apply(changed).unwrap();
    println!("apply with one policy chain changed: {:.1} ms ({} messages)", ms(start), report.operations);
}

/// A table read from a file: its parse, check, encoding and a whole write, three times.
fn whole_writes(file: &str) {
    let text = std::fs::read_to_string(file).expect("the table description");
    let before = rss_mib();
    let held = netplug_nftables::table_from_json(&text).expect("a table description");
    println!("the description held: {:.1} MiB of RSS", rss_mib() - before);
    drop(held);
    for round in 0..3 {
        let start = Instant::now();
        let table = netplug_nftables::table_from_json(&text).expect("a table description");
        let parsing = ms(start);
        let start = Instant::now();
        let checked = netplug_nftables::check::check(&table).unwrap();
        let checking = ms(start);
        let start = Instant::now();
        let sealed = netplug_nftables::plan::replace(&checked, 1).seal();
        let encoding = ms(start);
        let mut writer = TableWriter::new(Family::Inet, "netplug");
        let start = Instant::now();
        let report = writer.apply(table).unwrap();
        println!(
            "round {round}: parse {parsing:.1} ms, check {checking:.1} ms, encode {encoding:.1} ms ({} bytes); whole write {:.1} ms ({} messages)",
            sealed.bytes.len(),
            ms(start),
            report.operations
        );
    }
}

/// This process's resident memory.
fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0.0);
    pages * 4096.0 / f64::from(1 << 20)
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}
