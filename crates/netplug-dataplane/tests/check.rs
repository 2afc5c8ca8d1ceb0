//! Check reads the kernel back and reports each difference from what set-up produces.

mod common;

use common::*;
use netplug_dataplane::{Difference, WorkloadSpec, check_workload, netns, setup_workload};

fn differences(spec: &WorkloadSpec) -> Vec<Difference> {
    let spec = spec.clone();
    netns::run(move |thread| check_workload(thread, &spec)).unwrap()
}

fn subjects(found: &[Difference]) -> Vec<&str> {
    found.iter().map(|d| d.subject.as_str()).collect()
}

fn set_up(spec: &WorkloadSpec) {
    let spec = spec.clone();
    netns::run(move |thread| setup_workload(thread, &spec)).unwrap();
}

#[test]
fn each_change_to_what_set_up_made_is_reported() {
    let ns = TestNs::new();
    let v4 = unique_v4();
    let spec = WorkloadSpec { mtu: Some(1400), ..spec(&ns, vec![v4]) };
    let host = spec.host_ifname.clone();
    set_up(&spec);
    assert_eq!(differences(&spec), vec![]);

    run("ip", &["-n", &ns.name, "route", "del", "default"]);
    let found = differences(&spec);
    assert_eq!(
        found,
        vec![Difference {
            subject: format!("route to 0.0.0.0/0 in {}", ns.path.display()),
            expected: "0.0.0.0/0 via 169.254.1.1 dev \"eth0\"".into(),
            actual: "missing".into(),
        }]
    );

    run("ip", &["netns", "exec", &ns.name, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
    run("ip", &["-n", &ns.name, "addr", "del", &format!("{v4}/32"), "dev", "eth0"]);
    std::fs::write(format!("/proc/sys/net/ipv4/conf/{host}/proxy_arp"), "0").unwrap();
    let found = differences(&spec);
    let listed = subjects(&found);
    assert!(listed.contains(&format!("net.ipv4.conf.{host}.proxy_arp").as_str()), "{found:?}");
    assert!(
        listed.contains(&format!("address {v4} on interface \"eth0\" in {}", ns.path.display()).as_str()),
        "{found:?}"
    );
    assert!(listed.contains(&format!("net.ipv4.ip_forward in {}", ns.path.display()).as_str()), "{found:?}");
    // The host route lives on the host side and is unaffected.
    assert!(!listed.iter().any(|s| s.starts_with("host route")), "{found:?}");
}

#[test]
fn a_different_expectation_or_a_missing_link_is_reported() {
    let ns = TestNs::new();
    let spec = spec(&ns, vec![unique_v4()]);
    set_up(&spec);
    let found = differences(&WorkloadSpec { mtu: Some(9000), num_queues: 2, ..spec.clone() });
    let listed = subjects(&found);
    assert!(listed.contains(&format!("host interface \"{}\" MTU", spec.host_ifname).as_str()), "{found:?}");
    assert!(
        listed.contains(&format!("interface \"eth0\" in {} transmit queues", ns.path.display()).as_str()),
        "{found:?}"
    );

    run("ip", &["-n", &ns.name, "link", "del", "eth0"]);
    let found = differences(&spec);
    assert!(
        found.contains(&Difference {
            subject: format!("host interface \"{}\"", spec.host_ifname),
            expected: "a veth".into(),
            actual: "missing".into()
        }),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|d| d.subject == format!("interface \"eth0\" in {}", ns.path.display()) && d.actual == "missing"),
        "{found:?}"
    );
}
