//! A namespace lent by descriptor: a path the calling process cannot see stands for the namespace
//! behind the descriptor (what netplug-node gets from the shim), and what is reported names the path.

mod common;

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use common::*;
use netplug_dataplane::{Presence, Teardown, interface_presence, netns, setup_workload, teardown_attachment};

fn descriptor(ns: &TestNs) -> OwnedFd {
    OwnedFd::from(File::open(&ns.path).unwrap())
}

#[test]
fn a_lent_path_is_the_namespace_behind_its_descriptor_until_the_loan_ends() {
    let ns = TestNs::new();
    let unseen = PathBuf::from(format!("/run/netns/netplug-lent-{}", std::process::id()));
    let loan = netns::lend(&unseen, descriptor(&ns)).unwrap().expect("lent");
    let mut spec = spec(&ns, vec![unique_v4()]);
    spec.netns = unseen.clone();
    let host = spec.host_ifname.clone();
    let made = netns::run({
        let spec = spec.clone();
        move |thread| setup_workload(thread, &spec)
    });
    assert!(made.is_ok(), "{made:?}");
    assert!(link(Some(&ns), "eth0").is_some(), "eth0 is in the namespace behind the descriptor");
    let presence = {
        let (path, host) = (unseen.clone(), host.clone());
        netns::run(move |thread| interface_presence(thread, &path, "eth0", &host)).unwrap()
    };
    assert_eq!(presence, Presence::Attached);

    // Lent again for the same namespace: both loans hold it; for another one, refused.
    let again = netns::lend(&unseen, descriptor(&ns)).unwrap().expect("the same namespace is lent again");
    let other = TestNs::new();
    assert!(netns::lend(&unseen, descriptor(&other)).unwrap().is_none(), "another namespace under the same path");
    drop(loan);
    let removed = {
        let (path, host) = (unseen.clone(), host.clone());
        netns::run(move |thread| teardown_attachment(thread, &path, "eth0", &host)).unwrap()
    };
    assert_eq!(removed, Teardown::Removed);
    drop(again);
    let gone = netns::run(move |thread| interface_presence(thread, &unseen, "eth0", &host)).unwrap();
    assert_eq!(gone, Presence::Absent, "the loan over, the path names nothing again");
}

#[test]
fn what_is_reported_names_the_lent_path() {
    let ns = TestNs::new();
    let unseen = PathBuf::from(format!("/run/netns/netplug-lent-named-{}", std::process::id()));
    let _loan = netns::lend(&unseen, descriptor(&ns)).unwrap().expect("lent");
    let mut spec = spec(&ns, vec![unique_v4()]);
    spec.netns = unseen.clone();
    spec.container_ifname = "lo".into();
    let err = netns::run(move |thread| setup_workload(thread, &spec)).unwrap_err();
    assert!(err.to_string().contains(&unseen.display().to_string()), "{err}");
    assert!(!err.to_string().contains("/proc/"), "{err}");
}
