//! An attachment's host routes removed ahead of its veth: the veth stays, only its /32 and /128
//! routes go, and another workload can be given the same addresses at once; never those of a later
//! sandbox that took the same host veth name (a pod's every sandbox has it). And a set-up without
//! host routes (made while the addresses' commit is in flight), its routes added once they are the
//! workload's: never over another workload's.

mod common;

use common::*;
use std::path::{Path, PathBuf};

use netplug_dataplane::{
    Teardown, WorkloadSpec, add_host_routes, netns, remove_host_routes, setup_workload, teardown_workload,
};

/// remove_host_routes on a thread of its own, as the addon runs it.
fn remove(netns: &Path, ifname: &str, host: &str) -> netplug_dataplane::Result<usize> {
    let (netns, ifname, host): (PathBuf, String, String) = (netns.into(), ifname.into(), host.into());
    netns::run(move |thread| remove_host_routes(thread, &netns, &ifname, &host))
}

#[test]
fn the_host_routes_go_the_veth_stays_and_the_addresses_can_be_wired_again_at_once() {
    let ns = TestNs::new();
    let (v4, v6) = (unique_v4(), unique_v6());
    let first = spec(&ns, vec![v4, v6]);
    let host = first.host_ifname.clone();
    netns::run({
        let spec = first.clone();
        move |thread| setup_workload(thread, &spec)
    })
    .unwrap();

    assert_eq!(remove(&ns.path, "eth0", &host).unwrap(), 2, "the /32 and the /128");
    assert!(link(None, &host).is_some(), "the host end stays");
    assert!(!routes(None, false).iter().any(|r| r.0 == v4.to_string()), "host route to {v4} gone");
    assert!(!routes(None, true).iter().any(|r| r.0 == v6.to_string()), "host route to {v6} gone");
    assert_eq!(remove(&ns.path, "eth0", &host).unwrap(), 0, "a second removal finds none");

    // Another workload gets the same addresses while the first one's veth still exists.
    let other = TestNs::new();
    let second = spec(&other, vec![v4, v6]);
    netns::run({
        let spec = second.clone();
        move |thread| setup_workload(thread, &spec)
    })
    .unwrap();
    assert!(routes(None, false).iter().any(|r| r.0 == v4.to_string()), "host route to {v4} via the new veth");

    let path = ns.path.clone();
    assert_eq!(netns::run(move |thread| teardown_workload(thread, &path, "eth0")).unwrap(), Teardown::Removed);
    assert!(
        routes(None, false).iter().any(|r| r.0 == v4.to_string()),
        "the first veth's deletion leaves the new route"
    );
    let path = other.path.clone();
    assert_eq!(netns::run(move |thread| teardown_workload(thread, &path, "eth0")).unwrap(), Teardown::Removed);
}

#[test]
fn no_such_veth_is_success_and_the_host_namespace_is_refused() {
    require_root();
    assert_eq!(remove(Path::new(""), "eth0", "cali00000000000").unwrap(), 0);
    let ns = TestNs::new();
    assert_eq!(remove(&ns.path, "eth0", "cali00000000000").unwrap(), 0);
    let err = remove(Path::new("/proc/self/ns/net"), "eth0", "cali00000000000").unwrap_err();
    assert!(err.to_string().contains("host's own network namespace"), "{err}");
    assert!(remove(Path::new(""), "eth0", "a/b").is_err(), "an invalid name is refused");
    assert!(remove(Path::new(""), "a/b", "cali00000000000").is_err(), "an invalid name is refused");
}

#[test]
fn a_del_of_an_earlier_sandbox_leaves_the_routes_of_the_one_that_took_its_veth_name() {
    // A pod's sandboxes share its host veth name: a new sandbox's set-up replaces the old veth, and
    // the kubelet's garbage collection later sends the old sandbox's DEL, with its namespace still
    // there, or gone (an empty path). Neither removes the new sandbox's routes.
    let (old, current) = (TestNs::new(), TestNs::new());
    let first = spec(&old, vec![unique_v4()]);
    let (v4, v6) = (unique_v4(), unique_v6());
    let second = WorkloadSpec { host_ifname: first.host_ifname.clone(), ..spec(&current, vec![v4, v6]) };
    let host = first.host_ifname.clone();
    for spec in [first, second] {
        netns::run(move |thread| setup_workload(thread, &spec)).unwrap();
    }
    let routed = || routes(None, false).iter().any(|r| r.0 == v4.to_string() && r.2 == host);
    assert!(routed(), "host route to {v4} via the new veth");

    assert_eq!(remove(&old.path, "eth0", &host).unwrap(), 0, "the old namespace's DEL: its eth0 went with its veth");
    assert_eq!(remove(Path::new(""), "eth0", &host).unwrap(), 0, "the old sandbox's DEL once its namespace is gone");
    let gone = old.path.clone();
    drop(old);
    assert_eq!(remove(&gone, "eth0", &host).unwrap(), 0, "a namespace path that no longer exists");
    assert!(routed(), "the new sandbox keeps its route to {v4}");
    assert!(routes(None, true).iter().any(|r| r.0 == v6.to_string()), "and to {v6}");

    assert_eq!(remove(&current.path, "eth0", &host).unwrap(), 2, "its own DEL removes them");
    assert!(!routed(), "host route to {v4} gone");
    let path = current.path.clone();
    assert_eq!(netns::run(move |thread| teardown_workload(thread, &path, "eth0")).unwrap(), Teardown::Removed);
}

#[test]
fn a_set_up_without_host_routes_gets_them_later_and_never_over_another_workloads() {
    let (early, winner) = (TestNs::new(), TestNs::new());
    let (v4, v6) = (unique_v4(), unique_v6());
    // Two workloads set up with the same addresses, neither with host routes (a race for them).
    let first = WorkloadSpec { host_routes: false, ..spec(&early, vec![v4, v6]) };
    let second = WorkloadSpec { host_routes: false, ..spec(&winner, vec![v4, v6]) };
    for spec in [first.clone(), second.clone()] {
        netns::run(move |thread| setup_workload(thread, &spec)).unwrap();
    }
    assert!(!routes(None, false).iter().any(|r| r.0 == v4.to_string()), "no host route to {v4} yet");
    assert!(!routes(None, true).iter().any(|r| r.0 == v6.to_string()), "no host route to {v6} yet");

    // The winner's routes; the loser's attempt names the winner's veth and changes nothing.
    add_host_routes(&second.host_ifname, &[v4, v6]).unwrap();
    add_host_routes(&second.host_ifname, &[v4, v6]).expect("adding them again is success");
    let err = add_host_routes(&first.host_ifname, &[v4]).unwrap_err();
    assert!(err.to_string().contains(&format!("already exists via interface \"{}\"", second.host_ifname)), "{err}");
    let via_winner = routes(None, false).into_iter().find(|r| r.0 == v4.to_string());
    assert!(via_winner.is_some_and(|r| r.2 == second.host_ifname), "the route to {v4} still leads to the winner");
    assert!(add_host_routes("cali00000000000", &[v4]).unwrap_err().to_string().contains("no veth"));

    for ns in [&early, &winner] {
        let path = ns.path.clone();
        assert_eq!(netns::run(move |thread| teardown_workload(thread, &path, "eth0")).unwrap(), Teardown::Removed);
    }
}
