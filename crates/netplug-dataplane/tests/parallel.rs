//! Many workloads set up at once, each on its own namespace thread.

mod common;

use common::*;
use netplug_dataplane::{Teardown, netns, setup_workload, teardown_workload};

#[test]
fn fifty_pods_set_up_in_parallel_all_succeed_and_answer() {
    let namespaces: Vec<TestNs> = (0..50).map(|_| TestNs::new()).collect();
    let specs: Vec<_> = namespaces.iter().map(|ns| spec(ns, vec![unique_v4(), unique_v6()])).collect();

    let handles: Vec<_> =
        specs.iter().cloned().map(|spec| netns::spawn(move |thread| setup_workload(thread, &spec)).unwrap()).collect();
    for (handle, spec) in handles.into_iter().zip(&specs) {
        let made = handle.join().unwrap().unwrap_or_else(|e| panic!("{}: {e}", spec.host_ifname));
        assert_eq!(made.host.name, spec.host_ifname);
    }
    for spec in &specs {
        assert!(ping(&spec.addresses[0]), "{} answers", spec.addresses[0]);
    }

    let handles: Vec<_> = namespaces
        .iter()
        .map(|ns| {
            let path = ns.path.clone();
            netns::spawn(move |thread| teardown_workload(thread, &path, "eth0")).unwrap()
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().unwrap().unwrap(), Teardown::Removed);
    }
    for spec in &specs {
        assert!(link(None, &spec.host_ifname).is_none());
    }
}
