//! Teardown removes everything set-up made and is idempotent.

mod common;

use std::path::PathBuf;

use common::*;
use netplug_dataplane::{Presence, Teardown, interface_presence, netns, setup_workload, teardown_workload};

fn tear_down(netns_path: impl Into<PathBuf>, ifname: &str) -> netplug_dataplane::Result<Teardown> {
    let (path, ifname) = (netns_path.into(), ifname.to_string());
    netns::run(move |thread| teardown_workload(thread, &path, &ifname))
}

#[test]
fn teardown_removes_both_ends_and_the_host_routes_then_is_idempotent() {
    let ns = TestNs::new();
    let (v4, v6) = (unique_v4(), unique_v6());
    let spec = spec(&ns, vec![v4, v6]);
    let host = spec.host_ifname.clone();
    netns::run({
        let spec = spec.clone();
        move |thread| setup_workload(thread, &spec)
    })
    .unwrap();

    assert_eq!(presence(&ns.path, "eth0", &host), Presence::Attached, "eth0 is the peer of the host end after set-up");
    assert_eq!(presence(&ns.path, "eth0", "cali00000000000"), Presence::Foreign, "and not of another host link");
    assert_eq!(tear_down(&ns.path, "eth0").unwrap(), Teardown::Removed);
    assert_eq!(presence(&ns.path, "eth0", &host), Presence::Absent, "and absent after teardown");
    assert!(link(None, &host).is_none(), "host end gone");
    assert!(link(Some(&ns), "eth0").is_none(), "pod end gone");
    assert!(!routes(None, false).iter().any(|r| r.0 == v4.to_string()), "host route to {v4} gone");
    assert!(!routes(None, true).iter().any(|r| r.0 == v6.to_string()), "host route to {v6} gone");

    assert_eq!(tear_down(&ns.path, "eth0").unwrap(), Teardown::LinkGone, "a second teardown succeeds");
}

fn presence(netns_path: &std::path::Path, ifname: &str, host_ifname: &str) -> Presence {
    let (path, ifname, host_ifname) = (netns_path.to_path_buf(), ifname.to_string(), host_ifname.to_string());
    netns::run(move |thread| interface_presence(thread, &path, &ifname, &host_ifname)).unwrap()
}

#[test]
fn a_missing_empty_or_unmounted_namespace_is_success() {
    require_root();
    assert_eq!(
        presence(std::path::Path::new("/run/netns/netplug-never-existed"), "eth0", "cali00000000000"),
        Presence::Absent
    );
    assert_eq!(tear_down("", "eth0").unwrap(), Teardown::NamespaceGone);
    assert_eq!(tear_down("/run/netns/netplug-never-existed", "eth0").unwrap(), Teardown::NamespaceGone);
    // What an unmounted namespace leaves: a plain file where the bind mount was.
    let leftover = std::env::temp_dir().join(format!("netplug-unmounted-{}", std::process::id()));
    std::fs::write(&leftover, b"").unwrap();
    let result = tear_down(&leftover, "eth0");
    std::fs::remove_file(&leftover).unwrap();
    assert_eq!(result.unwrap(), Teardown::NamespaceGone);
    // Paths that cannot name a file: too long for the kernel, or through a regular file.
    let too_long = format!("/run/netns/{}", "n".repeat(5000));
    assert_eq!(tear_down(&too_long, "eth0").unwrap(), Teardown::NamespaceGone);
    assert_eq!(tear_down("/etc/hostname/netns", "eth0").unwrap(), Teardown::NamespaceGone);
}

#[test]
fn a_deleted_namespace_takes_the_veth_with_it_and_teardown_still_succeeds() {
    let ns = TestNs::new();
    let spec = spec(&ns, vec![unique_v4()]);
    let host = spec.host_ifname.clone();
    netns::run(move |thread| setup_workload(thread, &spec)).unwrap();
    let path = ns.path.clone();
    drop(ns);
    // The kernel destroys the pair asynchronously with the namespace.
    for _ in 0..200 {
        if link(None, &host).is_none() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(link(None, &host).is_none());
    assert_eq!(tear_down(&path, "eth0").unwrap(), Teardown::NamespaceGone);
}

#[test]
fn teardown_refuses_the_hosts_own_namespace() {
    require_root();
    let err = tear_down("/proc/self/ns/net", "lo").unwrap_err();
    assert!(err.to_string().contains("is the host's own network namespace"), "{err}");
    assert!(link(None, "lo").is_some());
}
