//! Teardown of an attachment removes only its own interface: the workload end of the veth whose
//! host end is the attachment's. Another attachment's interface, `lo`, or any other link is left.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use netplug_dataplane::{Teardown, netns, setup_workload, teardown_attachment};

fn tear_down(netns_path: &Path, ifname: &str, host_ifname: &str) -> Teardown {
    let (path, ifname, host_ifname): (PathBuf, _, _) = (netns_path.into(), ifname.to_string(), host_ifname.to_string());
    netns::run(move |thread| teardown_attachment(thread, &path, &ifname, &host_ifname)).unwrap()
}

#[test]
fn only_the_peer_of_the_attachments_host_end_is_removed() {
    let ns = TestNs::new();
    let spec = spec(&ns, vec![unique_v4()]);
    let host = spec.host_ifname.clone();
    netns::run(move |thread| setup_workload(thread, &spec)).unwrap();

    assert_eq!(tear_down(&ns.path, "eth0", "cali00000000000"), Teardown::Foreign, "another attachment's host end");
    assert!(link(Some(&ns), "eth0").is_some(), "eth0 is left");
    assert_eq!(tear_down(&ns.path, "lo", &host), Teardown::Foreign, "lo is never an attachment's");
    assert!(link(Some(&ns), "lo").is_some());
    assert_eq!(tear_down(&ns.path, "eth0", &host), Teardown::Removed);
    assert!(link(None, &host).is_none(), "host end gone");
    assert_eq!(tear_down(&ns.path, "eth0", &host), Teardown::LinkGone, "a second teardown succeeds");
    assert_eq!(tear_down(Path::new(""), "eth0", &host), Teardown::NamespaceGone);
}
