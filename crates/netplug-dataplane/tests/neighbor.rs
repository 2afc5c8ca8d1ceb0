//! Permanent neighbour and VXLAN FDB entries synced in a fresh namespace.

mod common;
mod overlay;

use std::net::IpAddr;

use common::*;
use netplug_dataplane::{EntrySyncCounts, FdbEntry, NeighborEntry, ensure_vxlan_device, sync_fdb, sync_neighbors};
use overlay::*;

/// `ip neigh` of `dev`: `ip lladdr state`.
fn neighbours(ns: &TestNs, dev: &str) -> Vec<String> {
    let listed = json("ip", ns, &["neigh", "show", "dev", dev]);
    let mut shown: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            format!(
                "{} {} {}",
                n["dst"].as_str().unwrap(),
                n["lladdr"].as_str().unwrap_or("-"),
                n["state"][0].as_str().unwrap()
            )
        })
        .collect();
    shown.sort();
    shown
}

/// `bridge fdb` of `dev`: `mac dst state`.
fn fdb(ns: &TestNs, dev: &str) -> Vec<String> {
    let listed = json("bridge", ns, &["fdb", "show", "dev", dev]);
    let mut shown: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e["mac"].as_str().unwrap(),
                e["dst"].as_str().unwrap_or("-"),
                e["state"].as_str().unwrap_or("-")
            )
        })
        .collect();
    shown.sort();
    shown
}

fn neighbour(ip: &str, mac: [u8; 6]) -> NeighborEntry {
    NeighborEntry { ip: ip.parse().unwrap(), mac }
}

fn fdb_entry(mac: [u8; 6], remote: &str) -> FdbEntry {
    FdbEntry { mac, remote: remote.parse::<IpAddr>().unwrap() }
}

#[test]
fn neighbour_and_fdb_entries_of_a_vxlan_device_are_synced_exactly() {
    let ns = TestNs::new();
    underlay(&ns);
    in_ns(&ns, |rtnl| ensure_vxlan_device(rtnl, &vxlan("vxnp", 4096, Some(MAC_A), Some("10.244.7.0")))).unwrap();
    ip_in(&ns, &["neigh", "add", "10.244.99.0", "lladdr", "66:0a:00:00:00:99", "dev", "vxnp", "nud", "permanent"]);

    let wanted = vec![neighbour("10.244.8.0", MAC_B), neighbour("10.244.9.0", MAC_C), neighbour("fd00:244::8", MAC_B)];
    let synced = {
        let wanted = wanted.clone();
        in_ns(&ns, move |rtnl| sync_neighbors(rtnl, "vxnp", &wanted)).unwrap()
    };
    assert_eq!(synced, EntrySyncCounts { added: 3, removed: 1 });
    assert_eq!(
        neighbours(&ns, "vxnp"),
        [
            "10.244.8.0 66:0a:00:00:00:0b PERMANENT",
            "10.244.9.0 66:0a:00:00:00:0c PERMANENT",
            "fd00:244::8 66:0a:00:00:00:0b PERMANENT",
        ]
    );
    let again = {
        let wanted = wanted.clone();
        in_ns(&ns, move |rtnl| sync_neighbors(rtnl, "vxnp", &wanted)).unwrap()
    };
    assert_eq!(again, EntrySyncCounts { added: 0, removed: 0 }, "the second sync changes nothing");
    let changed = in_ns(&ns, |rtnl| sync_neighbors(rtnl, "vxnp", &[neighbour("10.244.8.0", MAC_C)])).unwrap();
    assert_eq!(changed, EntrySyncCounts { added: 1, removed: 2 });
    assert_eq!(neighbours(&ns, "vxnp"), ["10.244.8.0 66:0a:00:00:00:0c PERMANENT"]);

    let wanted = vec![fdb_entry(MAC_B, "192.168.50.2"), fdb_entry(MAC_C, "192.168.50.3")];
    let synced = {
        let wanted = wanted.clone();
        in_ns(&ns, move |rtnl| sync_fdb(rtnl, "vxnp", &wanted)).unwrap()
    };
    assert_eq!(synced, EntrySyncCounts { added: 2, removed: 0 });
    assert_eq!(
        fdb(&ns, "vxnp"),
        ["66:0a:00:00:00:0b 192.168.50.2 permanent", "66:0a:00:00:00:0c 192.168.50.3 permanent"]
    );
    let again = {
        let wanted = wanted.clone();
        in_ns(&ns, move |rtnl| sync_fdb(rtnl, "vxnp", &wanted)).unwrap()
    };
    assert_eq!(again, EntrySyncCounts { added: 0, removed: 0 }, "the second sync changes nothing");
    let moved = in_ns(&ns, |rtnl| sync_fdb(rtnl, "vxnp", &[fdb_entry(MAC_C, "192.168.50.4")])).unwrap();
    assert_eq!(moved, EntrySyncCounts { added: 1, removed: 2 });
    assert_eq!(fdb(&ns, "vxnp"), ["66:0a:00:00:00:0c 192.168.50.4 permanent"]);

    let err = in_ns(&ns, |rtnl| sync_fdb(rtnl, "up0", &[])).unwrap_err();
    assert_eq!(err.detail, "dev \"up0\" is a veth device, not VXLAN");
    let err = in_ns(&ns, |rtnl| sync_neighbors(rtnl, "nope0", &[])).unwrap_err();
    assert_eq!((err.code().as_str(), err.detail.as_str()), ("ENODEV", "dev \"nope0\": no such device"));
}
