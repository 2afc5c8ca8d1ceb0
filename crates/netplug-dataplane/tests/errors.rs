//! Bad requests and conflicts: a clear error naming what is wrong, and nothing left behind.

mod common;

use common::*;
use netplug_dataplane::{DataplaneError, WorkloadSpec, netns, setup_workload};

fn set_up(spec: &WorkloadSpec) -> Result<netplug_dataplane::WorkloadInterfaces, DataplaneError> {
    let spec = spec.clone();
    netns::run(move |thread| setup_workload(thread, &spec))
}

fn assert_nothing_left(ns: &TestNs, host: &str) {
    assert!(link(None, host).is_none(), "host end \"{host}\" was removed");
    assert!(link(Some(ns), "eth0").is_none(), "no eth0 left in the namespace");
}

#[test]
fn a_missing_namespace_is_named() {
    let ns = TestNs::new();
    let spec = WorkloadSpec { netns: "/run/netns/netplug-no-such-namespace".into(), ..spec(&ns, vec![unique_v4()]) };
    let err = set_up(&spec).unwrap_err();
    assert_eq!(err.code(), "ENOENT");
    assert!(err.to_string().contains("/run/netns/netplug-no-such-namespace does not exist"), "{err}");
    assert!(link(None, &spec.host_ifname).is_none());
}

#[test]
fn a_name_longer_than_15_bytes_is_refused() {
    let ns = TestNs::new();
    let spec = WorkloadSpec { host_ifname: "netplug-much-too-long".into(), ..spec(&ns, vec![unique_v4()]) };
    let err = set_up(&spec).unwrap_err();
    assert_eq!(err.code(), "ENAMETOOLONG");
    assert!(err.to_string().contains("\"netplug-much-too-long\" is 21 bytes long; at most 15"), "{err}");

    let spec = WorkloadSpec { host_ifname: host_ifname(), container_ifname: "eth0-much-too-long".into(), ..spec };
    let err = set_up(&spec).unwrap_err();
    assert!(err.to_string().contains("container interface name \"eth0-much-too-long\" is 18 bytes long"), "{err}");
}

#[test]
fn a_host_name_held_by_a_non_veth_link_is_left_alone() {
    let ns = TestNs::new();
    let spec = spec(&ns, vec![unique_v4()]);
    let host = spec.host_ifname.clone();
    run("ip", &["link", "add", &host, "type", "bridge"]);
    let _cleanup = HostLink(host.clone());
    let err = set_up(&spec).unwrap_err();
    assert_eq!(err.code(), "EEXIST");
    assert!(err.to_string().contains(&format!("\"{host}\" is held by a bridge link, not a veth")), "{err}");
    assert_eq!(link(None, &host).unwrap()["linkinfo"]["info_kind"], "bridge", "the bridge is untouched");
    assert!(link(Some(&ns), "eth0").is_none());
}

#[test]
fn an_interface_name_taken_in_the_namespace_is_reported_and_the_first_pod_kept() {
    let ns = TestNs::new();
    let first = spec(&ns, vec![unique_v4()]);
    set_up(&first).unwrap();
    let second = spec(&ns, vec![unique_v4()]);
    let err = set_up(&second).unwrap_err();
    assert_eq!(err.code(), "EEXIST");
    assert!(err.to_string().contains(&format!("interface \"eth0\" already exists in {}", ns.path.display())), "{err}");
    assert!(link(None, &second.host_ifname).is_none());
    assert!(ping(&first.addresses[0]), "the first pod still works");
}

#[test]
fn a_host_route_held_by_another_interface_fails_and_rolls_back() {
    let ns = TestNs::new();
    let ip = unique_v4();
    let spec = spec(&ns, vec![ip]);
    let other = host_ifname();
    run("ip", &["link", "add", &other, "type", "bridge"]);
    let _cleanup = HostLink(other.clone());
    run("ip", &["link", "set", &other, "up"]);
    run("ip", &["route", "add", &format!("{ip}/32"), "dev", &other]);

    let err = set_up(&spec).unwrap_err();
    assert_eq!(err.code(), "EEXIST");
    assert!(err.to_string().contains(&format!("a route to {ip}/32 already exists via interface \"{other}\"")), "{err}");
    assert_nothing_left(&ns, &spec.host_ifname);
}

#[test]
fn the_hosts_own_namespace_is_refused() {
    let ns = TestNs::new();
    let spec = WorkloadSpec { netns: "/proc/self/ns/net".into(), ..spec(&ns, vec![unique_v4()]) };
    let err = set_up(&spec).unwrap_err();
    assert_eq!(err.code(), "EINVAL");
    assert!(err.to_string().contains("is the host's own network namespace"), "{err}");
    assert!(link(None, &spec.host_ifname).is_none());
}

#[test]
fn a_path_that_is_not_a_namespace_is_refused() {
    let ns = TestNs::new();
    let spec = WorkloadSpec { netns: "/etc/hostname".into(), ..spec(&ns, vec![unique_v4()]) };
    let err = set_up(&spec).unwrap_err();
    assert!(err.to_string().contains("/etc/hostname is not a network namespace"), "{err}");
}

#[test]
fn invalid_requests_are_refused_before_the_kernel_sees_them() {
    let ns = TestNs::new();
    let base = spec(&ns, vec![unique_v6()]);
    let cases = [
        (WorkloadSpec { addresses: vec![], ..base.clone() }, "no addresses to assign"),
        (WorkloadSpec { num_queues: 0, ..base.clone() }, "num_queues must be at least 1"),
        (WorkloadSpec { mtu: Some(1000), ..base.clone() }, "MTU 1000 is outside 1280..=65535"),
        (
            WorkloadSpec { addresses: vec!["224.0.0.1".parse().unwrap()], ..base.clone() },
            "224.0.0.1 cannot be a workload address",
        ),
        (WorkloadSpec { host_ifname: "a/b".into(), ..base.clone() }, "\"a/b\" is not a valid interface name"),
        (
            WorkloadSpec { container_mac: Some([0x01, 0, 0x5e, 0, 0, 1]), ..base.clone() },
            "MAC 01:00:5e:00:00:01 is not a unicast address",
        ),
    ];
    for (spec, message) in cases {
        let err = set_up(&spec).unwrap_err();
        assert_eq!(err.code(), "EINVAL", "{err}");
        assert!(err.to_string().contains(message), "{err} should say {message}");
        assert_nothing_left(&ns, &spec.host_ifname);
    }
}
