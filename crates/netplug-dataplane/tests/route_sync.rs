//! The main table's routes of one protocol synced in a fresh namespace: added, unchanged, replaced,
//! removed, and no route of another protocol ever touched.

mod common;
mod overlay;

use common::*;
use netplug_dataplane::{RouteSyncCounts, WantedRoute, sync_routes};
use overlay::*;

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
