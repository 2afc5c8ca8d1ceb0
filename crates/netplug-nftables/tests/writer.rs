//! The table writer against the kernel, each test in a private namespace, the kernel's table read
//! back with `nft -j list table`: whole replacement, changes by difference, element updates,
//! counters, removal, and a refused transaction that leaves the previous table as it was.

mod common;

use common::TestNs;
use common::listing::{canonical, table_from_listing};
use netplug_nftables::TableWriter;
use netplug_nftables::model::{ElementChanges, Table};
use serde_json::json;

fn table(value: serde_json::Value) -> Table {
    serde_json::from_value(value).unwrap()
}

/// A small policy-shaped table: dispatch by interface, endpoint chains, a policy chain with a
/// peer set, counters.
fn policy_table(peers: &[&str], endpoints: &[&str]) -> Table {
    let mut chains = vec![json!({
        "name": "forward",
        "base": { "type": "filter", "hook": "forward", "priority": 10 },
        "rules": [
            { "verdict": { "vmap": { "key": "oifname", "map": "to-wl" } } },
            { "matches": [{ "key": "oifname", "value": "npt*" }], "statements": [{ "counter": { "name": "fail-closed" } }], "verdict": "drop" }
        ]
    })];
    for endpoint in endpoints {
        chains.push(json!({
            "name": format!("tw-{endpoint}"),
            "rules": [
                { "matches": [{ "key": "ct state", "value": ["established", "related"] }], "verdict": "accept" },
                { "verdict": { "jump": "pi-web" } },
                { "verdict": "drop", "comment": format!("end of endpoint {endpoint}") }
            ]
        }));
    }
    chains.push(json!({
        "name": "pi-web",
        "rules": [
            { "matches": [{ "key": "ip saddr", "value": { "set": "web-peers" } }, { "key": "meta l4proto", "value": "tcp" }, { "key": "th dport", "value": [80, 443] }], "verdict": "accept", "comment": "policy default/web" }
        ]
    }));
    let elements: Vec<_> = endpoints
        .iter()
        .map(|e| json!({ "key": format!("npt{e}"), "verdict": { "goto": format!("tw-{e}") } }))
        .collect();
    table(json!({
        "family": "inet",
        "name": "netplug",
        "chains": chains,
        "sets": [{ "name": "web-peers", "type": "ipv4_addr", "flags": ["interval"], "elements": peers }],
        "maps": [{ "name": "to-wl", "type": "ifname", "elements": elements }],
        "counters": ["fail-closed"]
    }))
}

fn listed(ns: &TestNs) -> Table {
    table_from_listing(&ns.nft_json("inet", "netplug"))
}

fn assert_kernel_holds(ns: &TestNs, wanted: &Table) {
    assert_eq!(canonical(&listed(ns)), canonical(wanted), "the kernel's table differs from the description");
}

#[test]
fn later_applies_send_only_the_difference() {
    let ns = TestNs::new();
    let mut writer = TableWriter::new(netplug_nftables::model::Family::Inet, "netplug");
    let first = policy_table(&["10.0.0.0/24", "10.1.0.1"], &["a", "b"]);
    let report = ns.enter(|| writer.apply(first.clone())).unwrap();
    assert!(report.replaced);
    assert_kernel_holds(&ns, &first);

    // The same description again: nothing to send.
    let report = ns.enter(|| writer.apply(first.clone())).unwrap();
    assert_eq!(report.operations, 0);

    // An endpoint goes, another comes, a peer changes, a rule changes.
    let mut second = policy_table(&["10.0.0.0/24", "10.2.0.0/16"], &["a", "c"]);
    second.chains.iter_mut().find(|c| c.name == "pi-web").unwrap().rules[0].comment =
        Some("policy default/web v2".into());
    let report = ns.enter(|| writer.apply(second.clone())).unwrap();
    assert!(!report.replaced);
    // add chain tw-c; delete a peer, a map element; flush pi-web, its rule (with its anonymous
    // set and the set's elements); 3 rules of tw-c; add a peer, a map element; flush and delete tw-b.
    assert_eq!(report.operations, 14, "{report:?}");
    assert_kernel_holds(&ns, &second);

    // A base chain's hook changes: only a whole replacement can do that.
    let mut third = second.clone();
    third.chains[0].base.as_mut().unwrap().priority = 20;
    let report = ns.enter(|| writer.apply(third.clone())).unwrap();
    assert!(report.replaced);
    assert_kernel_holds(&ns, &third);

    // Sets, maps and counters that go.
    let mut fourth = third.clone();
    fourth.chains.retain(|c| c.name == "forward");
    fourth.chains[0].rules.truncate(0);
    fourth.sets.clear();
    fourth.maps.clear();
    fourth.counters.clear();
    let report = ns.enter(|| writer.apply(fourth.clone())).unwrap();
    assert!(!report.replaced);
    assert_kernel_holds(&ns, &fourth);
}

#[test]
fn the_first_apply_replaces_whatever_table_was_there() {
    let ns = TestNs::new();
    let file = std::env::temp_dir().join(format!("netplug-stale-{}.nft", std::process::id()));
    std::fs::write(&file, "table inet netplug {\n set stale { type ipv4_addr; }\n chain leftover { }\n}\n").unwrap();
    ns.nft(&["-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    let mut writer = TableWriter::new(netplug_nftables::model::Family::Inet, "netplug");
    let wanted = policy_table(&["10.0.0.1"], &["a"]);
    assert!(ns.enter(|| writer.apply(wanted.clone())).unwrap().replaced);
    assert_kernel_holds(&ns, &wanted);
}

#[test]
fn element_updates_change_sets_and_maps_in_one_small_batch() {
    let ns = TestNs::new();
    let mut writer = TableWriter::new(netplug_nftables::model::Family::Inet, "netplug");
    let mut wanted = policy_table(&["10.0.0.0/24"], &["a", "b"]);
    ns.enter(|| writer.apply(wanted.clone())).unwrap();

    let changes: ElementChanges = serde_json::from_value(json!({
        "sets": [{ "name": "web-peers", "add": ["10.9.0.0/16", "10.0.0.0/24"], "delete": ["10.0.0.0/24", "192.0.2.1"] }],
        "maps": [{ "name": "to-wl", "add": [{ "key": "npta", "verdict": { "goto": "tw-b" } }], "delete": ["nptb"] }]
    }))
    .unwrap();
    let report = ns.enter(|| writer.update_elements(&changes)).unwrap();
    // Deleted: the map key whose verdict changes and the one removed; added: the /16 and the new
    // verdict. A peer both deleted and added stays (additions come after deletions); 192.0.2.1
    // was not there.
    assert_eq!(report.operations, 3, "{report:?}");
    wanted.sets[0].elements = vec![json!("10.0.0.0/24"), json!("10.9.0.0/16")]
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
    wanted.maps[0].elements =
        vec![serde_json::from_value(json!({ "key": "npta", "verdict": { "goto": "tw-b" } })).unwrap()];
    assert_kernel_holds(&ns, &wanted);
    assert_eq!(canonical(writer.committed().unwrap()), canonical(&wanted), "the writer's copy follows");

    // Nothing to do: nothing sent.
    let again: ElementChanges =
        serde_json::from_value(json!({ "sets": [{ "name": "web-peers", "add": ["10.9.0.0/16"] }] })).unwrap();
    assert_eq!(ns.enter(|| writer.update_elements(&again)).unwrap().operations, 0);

    // The set emptied and filled again; a later apply of the same description sends nothing.
    let refill: ElementChanges = serde_json::from_value(json!({
        "sets": [{ "name": "web-peers", "delete": ["10.9.0.0/16", "10.0.0.0/24"] }]
    }))
    .unwrap();
    ns.enter(|| writer.update_elements(&refill)).unwrap();
    let refill: ElementChanges = serde_json::from_value(json!({
        "sets": [{ "name": "web-peers", "add": ["10.0.0.0/8", "192.168.0.0/16"] }]
    }))
    .unwrap();
    ns.enter(|| writer.update_elements(&refill)).unwrap();
    wanted.sets[0].elements = vec![json!("10.0.0.0/8"), json!("192.168.0.0/16")]
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
    assert_kernel_holds(&ns, &wanted);
    assert_eq!(ns.enter(|| writer.apply(wanted.clone())).unwrap().operations, 0);

    // Bad changes are refused before the kernel, naming the set and the value.
    let bad: ElementChanges =
        serde_json::from_value(json!({ "sets": [{ "name": "web-peers", "add": ["10.1.2.3/8"] }] })).unwrap();
    let err = ns.enter(|| writer.update_elements(&bad)).unwrap_err().to_string();
    assert!(err.contains("set \"web-peers\"") && err.contains("10.1.2.3/8"), "{err}");
    let overlapping: ElementChanges =
        serde_json::from_value(json!({ "sets": [{ "name": "web-peers", "add": ["10.1.0.0/16"] }] })).unwrap();
    let err = ns.enter(|| writer.update_elements(&overlapping)).unwrap_err().to_string();
    assert!(err.contains("overlaps"), "{err}");
    assert_kernel_holds(&ns, &wanted);
}

#[test]
fn a_refused_transaction_changes_nothing_and_names_what_failed() {
    let ns = TestNs::new();
    let mut writer = TableWriter::new(netplug_nftables::model::Family::Inet, "netplug");
    let good = policy_table(&["10.0.0.0/24"], &["a"]);
    ns.enter(|| writer.apply(good.clone())).unwrap();

    // Masquerade in a filter chain passes our checks but not the kernel's.
    let mut bad = policy_table(&["10.0.0.0/24", "10.5.0.0/16"], &["a", "z"]);
    bad.chains.push(
        serde_json::from_value(json!({
            "name": "oops",
            "base": { "type": "filter", "hook": "input", "priority": 0 },
            "rules": [{ "statements": [{ "masquerade": {} }], "comment": "not here" }]
        }))
        .unwrap(),
    );
    let err = ns.enter(|| writer.apply(bad.clone())).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("rule 1 of chain \"oops\" (comment \"not here\")"), "{text}");
    assert!(!text.contains('\n'), "one line: {text}");
    assert_kernel_holds(&ns, &good);

    // After a failure the next apply replaces the table whole.
    let report = ns.enter(|| writer.apply(good.clone())).unwrap();
    assert!(report.replaced);
    assert_kernel_holds(&ns, &good);

    // The same on a first write: nothing is created.
    let fresh = TestNs::new();
    let mut writer = TableWriter::new(netplug_nftables::model::Family::Inet, "netplug");
    assert!(fresh.enter(|| writer.apply(bad.clone())).is_err());
    let listing = fresh.exec(common::nft_binary(), &["list", "table", "inet", "netplug"]);
    assert!(!listing.status.success(), "no table after a refused first write");

    // A description that is wrong in itself never reaches the kernel: the error names the field.
    let mut wrong = good.clone();
    wrong.chains[1].rules[1].verdict = Some(serde_json::from_value(json!({ "jump": "nowhere" })).unwrap());
    let err = ns.enter(|| writer.apply(wrong)).unwrap_err().to_string();
    assert!(err.contains("rule 2 of chain \"tw-a\"") && err.contains("no chain \"nowhere\""), "{err}");
    let mut wrong = good.clone();
    let dnat = serde_json::from_value(json!({ "dnat": { "to": "pod-a" } })).unwrap();
    wrong.chains[1].rules[1].statements.push(dnat);
    let err = ns.enter(|| writer.apply(wrong)).unwrap_err().to_string();
    assert!(
        err.contains("rule 2 of chain \"tw-a\"") && err.contains("dnat to \"pod-a\" is not an IP address"),
        "{err}"
    );
    let err = netplug_nftables::table_from_json(
        r#"{"family":"inet","name":"netplug","chains":[{"name":"c","rules":[{"verdict":"maybe"}]}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("chains[0].rules[0].verdict"), "{err}");
    assert_kernel_holds(&ns, &good);
}

#[test]
fn counters_read_and_the_table_is_removed() {
    let ns = TestNs::new();
    let mut writer = TableWriter::new(netplug_nftables::model::Family::Inet, "netplug");
    ns.enter(|| writer.apply(policy_table(&[], &["a"]))).unwrap();
    let counters = ns.enter(|| writer.counters()).unwrap();
    assert_eq!(counters.len(), 1);
    assert_eq!((counters[0].name.as_str(), counters[0].packets, counters[0].bytes), ("fail-closed", 0, 0));
    assert!(ns.enter(|| writer.remove()).unwrap());
    assert!(!ns.exec(common::nft_binary(), &["list", "table", "inet", "netplug"]).status.success());
    assert!(!ns.enter(|| writer.remove()).unwrap(), "removing what is gone is a no-op");
    let err = ns.enter(|| writer.update_elements(&ElementChanges::default())).unwrap_err();
    assert_eq!(err.code(), "ENOENT");
}

#[test]
fn a_table_changed_behind_the_writers_back_is_written_whole_again() {
    let ns = TestNs::new();
    let mut writer = TableWriter::new(netplug_nftables::model::Family::Inet, "netplug");
    let wanted = policy_table(&["10.0.0.0/24"], &["a", "b"]);
    ns.enter(|| writer.apply(wanted.clone())).unwrap();
    for _ in 0..3 {
        assert_eq!(ns.enter(|| writer.apply(wanted.clone())).unwrap().operations, 0, "nothing changed: nothing sent");
    }
    // Someone adds a chain: the next apply replaces the table, and the chain is gone.
    ns.nft(&["add", "chain", "inet", "netplug", "intruder"]);
    assert!(ns.enter(|| writer.apply(wanted.clone())).unwrap().replaced);
    assert_kernel_holds(&ns, &wanted);
    // Someone deletes the table: it comes back whole.
    ns.nft(&["delete", "table", "inet", "netplug"]);
    assert!(ns.enter(|| writer.apply(wanted.clone())).unwrap().replaced);
    assert_kernel_holds(&ns, &wanted);
    assert_eq!(ns.enter(|| writer.apply(wanted.clone())).unwrap().operations, 0);
}

#[test]
fn large_sets_are_written_across_several_messages() {
    let ns = TestNs::new();
    let mut writer = TableWriter::new(netplug_nftables::model::Family::Inet, "netplug");
    // 6,000 interval elements (two netlink elements each) are far more than one message holds.
    let peers: Vec<String> = (0..6000).map(|i| format!("10.{}.{}.0/24", i / 256, i % 256)).collect();
    let peers: Vec<&str> = peers.iter().map(String::as_str).collect();
    let wanted = policy_table(&peers, &["a"]);
    let report = ns.enter(|| writer.apply(wanted.clone())).unwrap();
    assert!(report.bytes > 100_000, "{report:?}");
    assert_kernel_holds(&ns, &wanted);
}
