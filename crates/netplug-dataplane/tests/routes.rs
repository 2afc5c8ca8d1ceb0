//! Routes between nodes, each test in a fresh namespace: tunnel devices as `ip -d link` reports
//! them, routes synced by protocol (and only that protocol), neighbour and FDB entries, and every
//! call a second time changing nothing.

mod common;

use std::net::IpAddr;
use std::process::Command;

use common::*;
use netplug_dataplane::netlink::Rtnl;
use netplug_dataplane::netns::{self, NetNs};
use netplug_dataplane::{
    EntrySyncCounts, FdbEntry, IpipDevice, NeighborEntry, RouteSyncCounts, VxlanDevice, WantedRoute, delete_link,
    ensure_ipip_device, ensure_vxlan_device, sync_fdb, sync_neighbors, sync_routes,
};
use serde_json::Value;

/// Runs `f` with an rtnetlink socket inside `ns`, on a thread of its own.
fn in_ns<T: Send + 'static>(
    ns: &TestNs,
    f: impl FnOnce(&mut Rtnl) -> netplug_dataplane::Result<T> + Send + 'static,
) -> netplug_dataplane::Result<T> {
    let path = ns.path.clone();
    netns::run(move |thread| {
        thread.enter(&NetNs::open(&path)?)?;
        let mut rtnl = Rtnl::open().map_err(|err| err.into_dataplane("open rtnetlink"))?;
        f(&mut rtnl)
    })
}

fn ip_in(ns: &TestNs, args: &[&str]) -> String {
    let mut full = vec!["-n", ns.name.as_str()];
    full.extend(args);
    run("ip", &full)
}

fn json(program: &str, ns: &TestNs, args: &[&str]) -> Value {
    let out = match program {
        "ip" => {
            let mut full = vec!["-j", "-n", ns.name.as_str()];
            full.extend(args);
            run("ip", &full)
        }
        _ => {
            let mut full = vec!["netns", "exec", ns.name.as_str(), program, "-j"];
            full.extend(args);
            run("ip", &full)
        }
    };
    if out.trim().is_empty() { Value::Array(vec![]) } else { serde_json::from_str(&out).unwrap() }
}

/// An underlay-like link inside `ns`: one end of a veth pair, up, with 192.168.50.1/24 and fd00:50::1/64.
fn underlay(ns: &TestNs) {
    ip_in(ns, &["link", "add", "up0", "type", "veth", "peer", "name", "up1"]);
    ip_in(ns, &["addr", "add", "192.168.50.1/24", "dev", "up0"]);
    ip_in(ns, &["addr", "add", "fd00:50::1/64", "dev", "up0", "nodad"]);
    ip_in(ns, &["link", "set", "up0", "up"]);
    ip_in(ns, &["link", "set", "up1", "up"]);
}

fn vxlan(name: &str, vni: u32, mac: Option<[u8; 6]>, address: Option<&str>) -> VxlanDevice {
    VxlanDevice {
        name: name.into(),
        vni,
        port: 4789,
        local: "192.168.50.1".parse().unwrap(),
        mtu: Some(1410),
        mac,
        address: address.map(|a| a.parse().unwrap()),
    }
}

fn v4_addresses(ns: &TestNs, dev: &str) -> Vec<String> {
    addresses(Some(ns), dev).into_iter().map(|(a, _)| a).filter(|a| a.contains('.')).collect()
}

const MAC_A: [u8; 6] = [0x66, 0x0a, 0, 0, 0, 0xa];
const MAC_B: [u8; 6] = [0x66, 0x0a, 0, 0, 0, 0xb];
const MAC_C: [u8; 6] = [0x66, 0x0a, 0, 0, 0, 0xc];

#[test]
fn vxlan_device_is_made_exactly_then_left_alone_and_made_again_when_its_vni_changes() {
    let ns = TestNs::new();
    underlay(&ns);
    let made =
        in_ns(&ns, |rtnl| ensure_vxlan_device(rtnl, &vxlan("vxnp", 4096, Some(MAC_A), Some("10.244.7.0")))).unwrap();
    assert_eq!(made.mac, MAC_A.to_vec());

    let shown = link(Some(&ns), "vxnp").expect("vxnp exists");
    assert_eq!(shown["linkinfo"]["info_kind"], "vxlan");
    let data = &shown["linkinfo"]["info_data"];
    assert_eq!((data["id"].as_u64(), data["port"].as_u64()), (Some(4096), Some(4789)));
    assert_eq!(data["local"], "192.168.50.1");
    assert_eq!(data["learning"], false);
    assert_eq!(shown["mtu"], 1410);
    assert_eq!(shown["address"], "66:0a:00:00:00:0a");
    assert!(shown["flags"].as_array().unwrap().iter().any(|f| f == "UP"), "up: {}", shown["flags"]);
    assert_eq!(shown["ifindex"].as_u64(), Some(u64::from(made.index)));
    assert_eq!(v4_addresses(&ns, "vxnp"), ["10.244.7.0/32"]);

    let again =
        in_ns(&ns, |rtnl| ensure_vxlan_device(rtnl, &vxlan("vxnp", 4096, Some(MAC_A), Some("10.244.7.0")))).unwrap();
    assert_eq!(again, made, "a second call finds the device as it is");
    assert_eq!(link(Some(&ns), "vxnp").unwrap(), shown, "and changes nothing");

    ip_in(&ns, &["addr", "add", "10.9.9.9/24", "dev", "vxnp"]);
    let mut moved = vxlan("vxnp", 4096, Some(MAC_B), Some("10.244.7.1"));
    moved.mtu = Some(1400);
    let changed = in_ns(&ns, move |rtnl| ensure_vxlan_device(rtnl, &moved)).unwrap();
    assert_eq!(changed.index, made.index, "MTU, MAC and address change in place");
    assert_eq!(v4_addresses(&ns, "vxnp"), ["10.244.7.1/32"], "the address is set exactly");
    let shown = link(Some(&ns), "vxnp").unwrap();
    assert_eq!((shown["mtu"].as_u64(), shown["address"].as_str()), (Some(1400), Some("66:0a:00:00:00:0b")));
    assert!(shown["flags"].as_array().unwrap().iter().any(|f| f == "UP"), "up again after the MAC change");

    let remade =
        in_ns(&ns, |rtnl| ensure_vxlan_device(rtnl, &vxlan("vxnp", 4097, Some(MAC_B), Some("10.244.7.1")))).unwrap();
    assert_ne!(remade.index, made.index, "another VNI is another device");
    let shown = link(Some(&ns), "vxnp").unwrap();
    assert_eq!(shown["linkinfo"]["info_data"]["id"].as_u64(), Some(4097));
    assert_eq!(shown["address"], "66:0a:00:00:00:0b", "the given MAC is kept");
    assert_eq!(v4_addresses(&ns, "vxnp"), ["10.244.7.1/32"]);

    let kernel_mac = in_ns(&ns, |rtnl| ensure_vxlan_device(rtnl, &vxlan("vxnp2", 4098, None, None))).unwrap();
    assert_eq!(
        link(Some(&ns), "vxnp2").unwrap()["address"].as_str().unwrap(),
        netplug_dataplane::spec::format_mac(&kernel_mac.mac),
        "without a MAC, the kernel's is reported"
    );

    assert!(in_ns(&ns, |rtnl| delete_link(rtnl, "vxnp")).unwrap());
    assert!(link(Some(&ns), "vxnp").is_none());
    assert!(!in_ns(&ns, |rtnl| delete_link(rtnl, "vxnp")).unwrap(), "a second delete finds nothing");
}

/// Whether this kernel can make IP-in-IP devices, asked of iproute2 in a namespace of its own.
fn kernel_has_ipip() -> bool {
    let probe = TestNs::new();
    let out = Command::new("ip").args(["-n", &probe.name, "link", "add", "tunl0", "type", "ipip"]).output().unwrap();
    out.status.success() || String::from_utf8_lossy(&out.stderr).contains("File exists")
}

#[test]
fn ipip_device_without_remote_or_a_clear_error_where_the_kernel_has_no_ipip() {
    let ns = TestNs::new();
    let spec = IpipDevice { name: "tunl0".into(), mtu: Some(1440), address: Some("10.244.9.0".parse().unwrap()) };
    let outcome = in_ns(&ns, {
        let spec = spec.clone();
        move |rtnl| ensure_ipip_device(rtnl, &spec)
    });
    if !kernel_has_ipip() {
        let err = outcome.unwrap_err();
        assert_eq!(err.code(), "EOPNOTSUPP");
        assert!(err.to_string().contains("no ipip (CONFIG_NET_IPIP) driver"), "{err}");
        assert!(link(Some(&ns), "tunl0").is_none(), "nothing is left behind");
        return;
    }
    let made = outcome.unwrap();
    let shown = link(Some(&ns), "tunl0").unwrap();
    assert_eq!(shown["linkinfo"]["info_kind"], "ipip");
    assert_eq!(shown["mtu"], 1440);
    assert!(shown["flags"].as_array().unwrap().iter().any(|f| f == "UP"));
    let data = &shown["linkinfo"]["info_data"];
    assert!(data["remote"].is_null() || data["remote"] == "any", "no fixed remote: {data}");
    assert_eq!(v4_addresses(&ns, "tunl0"), ["10.244.9.0/32"]);
    let again = in_ns(&ns, move |rtnl| ensure_ipip_device(rtnl, &spec)).unwrap();
    assert_eq!(again, made);
    assert_eq!(link(Some(&ns), "tunl0").unwrap(), shown, "a second call changes nothing");

    assert!(in_ns(&ns, |rtnl| delete_link(rtnl, "tunl0")).unwrap());
    let left = link(Some(&ns), "tunl0").unwrap();
    assert!(!left["flags"].as_array().unwrap().iter().any(|f| f == "UP"), "the fallback tunnel stays, down");
    assert!(v4_addresses(&ns, "tunl0").is_empty(), "and without its address");
}

#[test]
fn ipip_device_refuses_an_ipv6_address_before_touching_the_kernel() {
    let ns = TestNs::new();
    let spec = IpipDevice { name: "tunl0".into(), mtu: None, address: Some("fd00::1".parse().unwrap()) };
    let err = in_ns(&ns, move |rtnl| ensure_ipip_device(rtnl, &spec)).unwrap_err();
    assert_eq!(err.code(), "EINVAL");
    assert!(err.detail.contains("address \"fd00::1\" is not IPv4"), "{err}");
}

fn route(dst: &str, via: Option<&str>, dev: &str, onlink: bool) -> WantedRoute {
    WantedRoute {
        destination: dst.parse().unwrap(),
        gateway: via.map(|v| v.parse().unwrap()),
        device: dev.into(),
        onlink,
        source: None,
    }
}

fn sync(ns: &TestNs, wanted: Vec<WantedRoute>) -> netplug_dataplane::Result<RouteSyncCounts> {
    in_ns(ns, move |rtnl| sync_routes(rtnl, 80, &wanted))
}

/// `dst [via gw] dev d [onlink]` of the routes of one protocol, both families, sorted.
fn routes_of(ns: &TestNs, protocol: &str) -> Vec<String> {
    let mut shown = Vec::new();
    for family in ["-4", "-6"] {
        let listed = json("ip", ns, &[family, "route", "show", "table", "main", "proto", protocol]);
        for r in listed.as_array().unwrap() {
            let mut text = r["dst"].as_str().unwrap().to_string();
            if let Some(gateway) = r["gateway"].as_str() {
                text.push_str(&format!(" via {gateway}"));
            }
            text.push_str(&format!(" dev {}", r["dev"].as_str().unwrap()));
            if r["flags"].as_array().is_some_and(|flags| flags.iter().any(|f| f == "onlink")) {
                text.push_str(" onlink");
            }
            if let Some(source) = r["prefsrc"].as_str() {
                text.push_str(&format!(" src {source}"));
            }
            shown.push(text);
        }
    }
    shown.sort();
    shown
}

#[test]
fn routes_of_one_protocol_are_synced_exactly_and_no_other_route_is_touched() {
    let ns = TestNs::new();
    underlay(&ns);
    ip_in(&ns, &["route", "add", "10.99.0.0/24", "via", "192.168.50.9", "dev", "up0", "proto", "static"]);
    ip_in(&ns, &["route", "add", "10.98.0.0/24", "via", "192.168.50.9", "dev", "up0", "proto", "80"]);
    let statics = routes_of(&ns, "static");
    let wanted = vec![
        route("10.244.1.0/26", Some("192.168.50.2"), "up0", false),
        route("10.244.2.0/26", Some("172.16.0.5"), "up0", true),
        route("10.244.3.0/26", None, "up0", false),
        route("fd00:244:1::/122", Some("fd00:50::2"), "up0", false),
    ];
    let counts = sync(&ns, wanted.clone()).unwrap();
    assert_eq!(counts, RouteSyncCounts { added: 4, replaced: 0, removed: 1, unchanged: 0 });
    assert_eq!(
        routes_of(&ns, "80"),
        [
            "10.244.1.0/26 via 192.168.50.2 dev up0",
            "10.244.2.0/26 via 172.16.0.5 dev up0 onlink",
            "10.244.3.0/26 dev up0",
            "fd00:244:1::/122 via fd00:50::2 dev up0",
        ],
        "the stale 10.98.0.0/24 of protocol 80 is gone"
    );
    assert!(routes(Some(&ns), false).iter().any(|r| r.0 == "10.244.3.0/26" && r.3.as_deref() == Some("link")));

    let counts = sync(&ns, wanted.clone()).unwrap();
    assert_eq!(
        counts,
        RouteSyncCounts { added: 0, replaced: 0, removed: 0, unchanged: 4 },
        "the second sync changes nothing"
    );

    let mut changed = wanted.clone();
    changed[0].gateway = Some("192.168.50.3".parse().unwrap());
    changed[3].source = Some("fd00:50::1".parse().unwrap());
    changed.remove(2);
    let counts = sync(&ns, changed).unwrap();
    assert_eq!(counts, RouteSyncCounts { added: 0, replaced: 2, removed: 1, unchanged: 1 });
    assert_eq!(
        routes_of(&ns, "80"),
        [
            "10.244.1.0/26 via 192.168.50.3 dev up0",
            "10.244.2.0/26 via 172.16.0.5 dev up0 onlink",
            "fd00:244:1::/122 via fd00:50::2 dev up0 src fd00:50::1",
        ]
    );

    // A wanted route where another protocol's route is: that route stays, the others are synced,
    // and the error names the conflict.
    let err =
        sync(&ns, vec![route("10.99.0.0/24", Some("192.168.50.2"), "up0", false), wanted[0].clone()]).unwrap_err();
    assert_eq!(err.code(), "EEXIST");
    assert!(err.detail.contains("route to 10.99.0.0/24 exists with another protocol; left alone"), "{err}");
    assert_eq!(routes_of(&ns, "80"), ["10.244.1.0/26 via 192.168.50.2 dev up0"]);

    assert_eq!(sync(&ns, vec![]).unwrap(), RouteSyncCounts { added: 0, replaced: 0, removed: 1, unchanged: 0 });
    assert!(routes_of(&ns, "80").is_empty());
    assert_eq!(routes_of(&ns, "static"), statics, "the static route was never touched");
}

#[test]
fn route_sync_input_errors_name_the_field_and_change_nothing() {
    let ns = TestNs::new();
    underlay(&ns);
    ip_in(&ns, &["route", "add", "10.98.0.0/24", "via", "192.168.50.9", "dev", "up0", "proto", "80"]);
    let before = routes_of(&ns, "80");

    let err = sync(&ns, vec![route("10.244.1.0/26", Some("192.168.50.2"), "nope0", false)]).unwrap_err();
    assert_eq!(err.code(), "ENODEV");
    assert_eq!(err.detail, "routes[0].dev \"nope0\": no such device");

    let err = sync(&ns, vec![route("10.244.1.0/26", Some("fd00:50::2"), "up0", false)]).unwrap_err();
    assert_eq!(err.detail, "routes[0].via \"fd00:50::2\" is not of dst 10.244.1.0/26's family");

    let twice = vec![route("10.244.1.0/26", None, "up0", false), route("10.244.1.0/26", None, "up0", false)];
    assert_eq!(sync(&ns, twice).unwrap_err().detail, "routes[1].dst 10.244.1.0/26 is listed twice");

    let err = sync(&ns, vec![route("10.244.1.0/26", None, "up0", true)]).unwrap_err();
    assert_eq!(err.detail, "routes[0].onlink needs a via address");

    let err = in_ns(&ns, |rtnl| sync_routes(rtnl, 2, &[])).unwrap_err();
    assert_eq!(err.code(), "EINVAL");
    assert!(err.detail.starts_with("protocol 2 is reserved"), "{err}");
    assert_eq!(routes_of(&ns, "80"), before, "no input error changed a route");
}

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

#[test]
fn a_route_the_kernel_refuses_is_named_and_the_others_are_still_synced() {
    let ns = TestNs::new();
    underlay(&ns);
    let wanted = vec![
        route("10.244.2.0/26", Some("172.16.0.5"), "up0", false),
        route("10.244.1.0/26", Some("192.168.50.2"), "up0", false),
    ];
    let err = sync(&ns, wanted).unwrap_err();
    assert_eq!(err.code(), "ENETUNREACH");
    assert!(err.detail.starts_with("route to 10.244.2.0/26 via 172.16.0.5 dev up0: "), "{err}");
    assert_eq!(routes_of(&ns, "80"), ["10.244.1.0/26 via 192.168.50.2 dev up0"]);
}

#[test]
fn vxlan_device_over_ipv6_with_an_ipv6_address() {
    let ns = TestNs::new();
    underlay(&ns);
    let spec = VxlanDevice {
        name: "vxnp6".into(),
        vni: 4096,
        port: 4789,
        local: "fd00:50::1".parse().unwrap(),
        mtu: Some(1430),
        mac: Some(MAC_C),
        address: Some("fd00:244::1".parse().unwrap()),
    };
    let made = in_ns(&ns, {
        let spec = spec.clone();
        move |rtnl| ensure_vxlan_device(rtnl, &spec)
    })
    .unwrap();
    let shown = link(Some(&ns), "vxnp6").unwrap();
    assert_eq!(shown["linkinfo"]["info_data"]["local6"], "fd00:50::1");
    assert_eq!(shown["mtu"], 1430);
    let v6: Vec<String> =
        addresses(Some(&ns), "vxnp6").into_iter().map(|(a, _)| a).filter(|a| !a.starts_with("fe80")).collect();
    assert_eq!(v6, ["fd00:244::1/128"]);
    assert_eq!(
        in_ns(&ns, move |rtnl| ensure_vxlan_device(rtnl, &spec)).unwrap(),
        made,
        "a second call finds it as it is"
    );
}
