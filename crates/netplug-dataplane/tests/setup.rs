//! Set-up in real namespaces, asserted through iproute2, sysfs, procfs and ping.

mod common;

use std::net::IpAddr;
use std::process::{Command, Stdio};

use common::*;
use netplug_dataplane::{ProgrammedRoute, WorkloadSpec, check_workload, netns, setup_workload};

fn set_up(spec: &WorkloadSpec) -> netplug_dataplane::WorkloadInterfaces {
    let spec = spec.clone();
    netns::run(move |thread| setup_workload(thread, &spec)).expect("set-up succeeds")
}

fn differences(spec: &WorkloadSpec) -> Vec<netplug_dataplane::Difference> {
    let spec = spec.clone();
    netns::run(move |thread| check_workload(thread, &spec)).expect("check runs")
}

fn route(
    dst: &str,
    gateway: Option<&str>,
    dev: &str,
    scope: Option<&str>,
) -> (String, Option<String>, String, Option<String>) {
    (dst.into(), gateway.map(String::from), dev.into(), scope.map(String::from))
}

const QUEUES_4: [&str; 8] = ["rx-0", "rx-1", "rx-2", "rx-3", "tx-0", "tx-1", "tx-2", "tx-3"];

#[test]
fn ipv4_pod_gets_veth_queues_mtu_address_link_local_routes_and_sysctls() {
    let ns = TestNs::new();
    let ip = unique_v4();
    let spec = WorkloadSpec { mtu: Some(1400), num_queues: 4, ..spec(&ns, vec![ip]) };
    let host = spec.host_ifname.clone();
    let made = set_up(&spec);
    assert_eq!(made.host.mac, "ee:ee:ee:ee:ee:ee");
    assert_eq!(made.mtu, 1400);
    let default_route =
        ProgrammedRoute { destination: "0.0.0.0/0".parse().unwrap(), gateway: "169.254.1.1".parse().unwrap() };
    assert_eq!(made.routes, vec![default_route], "the routes given to the pod are reported");

    let host_link = link(None, &host).expect("host end exists in the host namespace");
    assert_eq!(host_link["linkinfo"]["info_kind"], "veth");
    assert_eq!(host_link["address"], "ee:ee:ee:ee:ee:ee");
    assert_eq!(host_link["mtu"], 1400);
    assert_eq!(host_link["operstate"], "UP");
    assert_eq!(host_link["num_tx_queues"], 4);
    assert_eq!(host_link["num_rx_queues"], 4);
    assert_eq!(queues(None, &host), QUEUES_4);

    let pod_link = link(Some(&ns), "eth0").expect("eth0 exists in the pod namespace");
    assert_eq!(pod_link["linkinfo"]["info_kind"], "veth");
    assert_eq!(pod_link["mtu"], 1400);
    assert_eq!(pod_link["operstate"], "UP");
    assert_eq!(pod_link["address"], made.container.mac.as_str());
    assert_eq!(pod_link["num_tx_queues"], 4);
    assert_eq!(pod_link["num_rx_queues"], 4);
    assert_eq!(queues(Some(&ns), "eth0"), QUEUES_4);
    assert_eq!(pod_link["link_index"], host_link["ifindex"], "eth0's peer is the host end");

    let ipv4: Vec<_> = addresses(Some(&ns), "eth0").into_iter().filter(|(a, _)| a.contains('.')).collect();
    assert_eq!(ipv4, vec![(format!("{ip}/32"), vec![])]);
    let pod_routes = routes(Some(&ns), false);
    assert!(pod_routes.contains(&route("169.254.1.1", None, "eth0", Some("link"))), "{pod_routes:?}");
    assert!(pod_routes.contains(&route("default", Some("169.254.1.1"), "eth0", None)), "{pod_routes:?}");
    assert_eq!(pod_routes.len(), 2, "{pod_routes:?}");
    assert!(routes(None, false).contains(&route(&ip.to_string(), None, &host, Some("link"))));

    assert_eq!(sysctl(None, &format!("net.ipv4.conf.{host}.proxy_arp")), "1");
    assert_eq!(sysctl(None, &format!("net.ipv4.neigh.{host}.proxy_delay")), "0");
    assert_eq!(sysctl(None, &format!("net.ipv4.conf.{host}.forwarding")), "1");
    assert_eq!(sysctl(None, &format!("net.ipv4.conf.{host}.route_localnet")), "1");
    assert_eq!(sysctl(None, &format!("net.ipv6.conf.{host}.accept_ra")), "0");
    assert_eq!(sysctl(Some(&ns), "net.ipv4.ip_forward"), "0");

    assert!(ping(&ip), "the host reaches the pod across the veth");
    assert_eq!(differences(&spec), vec![]);
}

#[test]
fn ipv6_pod_routes_via_the_host_ends_link_local_address() {
    let ns = TestNs::new();
    let ip = unique_v6();
    let spec = spec(&ns, vec![ip]);
    let host = spec.host_ifname.clone();
    set_up(&spec);

    assert_eq!(
        addresses(Some(&ns), "eth0").iter().find(|(a, _)| a == &format!("{ip}/128")).map(|(_, f)| f.clone()),
        Some(vec!["nodad".to_string()]),
        "the address is usable at once: not tentative"
    );
    let host_addresses = addresses(None, &host);
    assert!(
        host_addresses.iter().any(|(a, f)| a == "fe80::ecee:eeff:feee:eeee/64" && f.is_empty()),
        "{host_addresses:?}"
    );
    let pod_routes = routes(Some(&ns), true);
    assert!(pod_routes.contains(&route("default", Some("fe80::ecee:eeff:feee:eeee"), "eth0", None)), "{pod_routes:?}");
    assert!(routes(Some(&ns), false).is_empty(), "no IPv4 routes for an IPv6-only pod");
    assert!(routes(None, true).contains(&route(&ip.to_string(), None, &host, None)));

    assert_eq!(sysctl(None, &format!("net.ipv6.conf.{host}.proxy_ndp")), "1");
    assert_eq!(sysctl(None, &format!("net.ipv6.conf.{host}.forwarding")), "1");
    assert_eq!(sysctl(None, &format!("net.ipv6.conf.{host}.accept_ra")), "0");
    assert_eq!(sysctl(Some(&ns), "net.ipv6.conf.all.forwarding"), "0");
    assert_eq!(sysctl(Some(&ns), "net.ipv6.conf.eth0.accept_dad"), "0");

    assert!(ping(&ip), "the host reaches the pod over IPv6");
    assert_eq!(differences(&spec), vec![]);
}

#[test]
fn ipv4_pod_with_an_mtu_below_ipv6s_minimum() {
    // Below 1280 the kernel gives the veth no IPv6, so no net.ipv6.conf.<name> to write to.
    for mtu in [68, 576, 1279] {
        let ns = TestNs::new();
        let ip = unique_v4();
        let spec = WorkloadSpec { mtu: Some(mtu), ..spec(&ns, vec![ip]) };
        let host = spec.host_ifname.clone();
        let made = set_up(&spec);
        assert_eq!(made.mtu, mtu);
        assert_eq!(link(None, &host).expect("host end exists")["mtu"], mtu);
        assert_eq!(link(Some(&ns), "eth0").expect("eth0 exists")["mtu"], mtu);
        assert!(
            !std::path::Path::new(&format!("/proc/sys/net/ipv6/conf/{host}")).exists(),
            "no IPv6 on a link below 1280"
        );
        assert_eq!(sysctl(None, &format!("net.ipv4.conf.{host}.proxy_arp")), "1");
        if mtu >= 576 {
            assert!(ping(&ip), "the host reaches the pod across a {mtu}-byte link");
        }
        assert_eq!(differences(&spec), vec![]);
    }
}

#[test]
fn an_mtu_below_1280_with_ipv6_is_refused_before_the_kernel() {
    let ns = TestNs::new();
    let spec = WorkloadSpec { mtu: Some(1279), ..spec(&ns, vec![unique_v4(), unique_v6()]) };
    let run = spec.clone();
    let err = netns::run(move |thread| setup_workload(thread, &run)).expect_err("dual stack needs 1280");
    assert!(err.detail.contains("MTU 1279 is outside 1280..=65535"), "{err:?}");
    assert!(link(None, &spec.host_ifname).is_none(), "nothing made");
}

#[test]
fn dual_stack_pod_with_ip_forwarding_allowed() {
    let ns = TestNs::new();
    let (v4, v6) = (unique_v4(), unique_v6());
    let spec = WorkloadSpec { allow_ip_forwarding: true, ..spec(&ns, vec![v4, v6]) };
    set_up(&spec);

    let pod_addresses: Vec<String> = addresses(Some(&ns), "eth0").into_iter().map(|(a, _)| a).collect();
    assert!(
        pod_addresses.contains(&format!("{v4}/32")) && pod_addresses.contains(&format!("{v6}/128")),
        "{pod_addresses:?}"
    );
    assert!(routes(Some(&ns), false).contains(&route("default", Some("169.254.1.1"), "eth0", None)));
    assert!(routes(Some(&ns), true).contains(&route("default", Some("fe80::ecee:eeff:feee:eeee"), "eth0", None)));
    assert_eq!(sysctl(Some(&ns), "net.ipv4.ip_forward"), "1");
    assert_eq!(sysctl(Some(&ns), "net.ipv6.conf.all.forwarding"), "1");
    assert!(ping(&v4) && ping(&v6));
    assert_eq!(differences(&spec), vec![]);
}

#[test]
fn requested_routes_replace_the_default_routes() {
    let ns = TestNs::new();
    let spec = WorkloadSpec {
        routes: Some(vec!["10.123.0.0/16".parse().unwrap(), "dead:beef::/96".parse().unwrap()]),
        ..spec(&ns, vec![unique_v4(), unique_v6()])
    };
    let reported: Vec<String> =
        set_up(&spec).routes.iter().map(|r| format!("{} via {}", r.destination, r.gateway)).collect();
    assert_eq!(reported, ["10.123.0.0/16 via 169.254.1.1", "dead:beef::/96 via fe80::ecee:eeff:feee:eeee"]);
    let v4 = routes(Some(&ns), false);
    assert!(v4.contains(&route("10.123.0.0/16", Some("169.254.1.1"), "eth0", None)), "{v4:?}");
    assert!(!v4.iter().any(|r| r.0 == "default"), "{v4:?}");
    let v6 = routes(Some(&ns), true);
    assert!(v6.contains(&route("dead:beef::/96", Some("fe80::ecee:eeff:feee:eeee"), "eth0", None)), "{v6:?}");
    assert!(!v6.iter().any(|r| r.0 == "default"), "{v6:?}");
    assert_eq!(differences(&spec), vec![]);
}

#[test]
fn a_stale_host_veth_of_the_same_name_is_replaced() {
    let ns = TestNs::new();
    let spec = spec(&ns, vec![unique_v4()]);
    let host = spec.host_ifname.clone();
    let stale_peer = format!("{host}x");
    run("ip", &["link", "add", &host, "type", "veth", "peer", "name", &stale_peer]);
    let _cleanup = HostLink(host.clone());
    set_up(&spec);
    assert!(link(None, &stale_peer).is_none(), "the old pair is gone");
    assert!(link(None, &host).unwrap()["link_netnsid"].is_number(), "the new host end's peer is in the pod");
    assert_eq!(differences(&spec), vec![]);
}

#[test]
fn a_chosen_container_mac_is_applied_and_checked() {
    let ns = TestNs::new();
    let spec =
        WorkloadSpec { container_mac: Some([0x0a, 0x58, 0x0a, 0xf4, 0x00, 0x05]), ..spec(&ns, vec![unique_v4()]) };
    let _cleanup = HostLink(spec.host_ifname.clone());
    assert_eq!(set_up(&spec).container.mac, "0a:58:0a:f4:00:05");
    assert_eq!(differences(&spec), vec![]);
    let other = WorkloadSpec { container_mac: Some([0x0a, 0x58, 0, 0, 0, 1]), ..spec.clone() };
    let found = differences(&other);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].subject.ends_with("MAC") && found[0].actual == "0a:58:0a:f4:00:05", "{found:?}");
}

#[test]
fn any_namespace_path_form_is_accepted() {
    let ns = TestNs::new();
    // /var/run/netns/<name>: the same namespace through the /var/run link.
    let via_var_run =
        WorkloadSpec { netns: format!("/var/run/netns/{}", ns.name).into(), ..spec(&ns, vec![unique_v4()]) };
    set_up(&via_var_run);
    assert!(link(Some(&ns), "eth0").is_some());

    // /proc/<pid>/ns/net of a process living in a namespace, as `ctr` passes it.
    let other = TestNs::new();
    let mut sleeper =
        Command::new("ip").args(["netns", "exec", &other.name, "sleep", "60"]).stdout(Stdio::null()).spawn().unwrap();
    let proc_path = format!("/proc/{}/ns/net", sleeper.id());
    // `ip netns exec` enters the namespace and then execs sleep under the same pid: wait until
    // the process is inside (its namespace file has the namespace's inode).
    let inode = |path: &str| std::fs::metadata(path).map(|m| std::os::unix::fs::MetadataExt::ino(&m)).ok();
    let target = inode(other.path.to_str().unwrap());
    while inode(&proc_path) != target {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let via_proc = WorkloadSpec { netns: proc_path.into(), ..spec(&other, vec![unique_v4()]) };
    let result = netns::run({
        let spec = via_proc.clone();
        move |thread| setup_workload(thread, &spec)
    });
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    result.expect("set-up through /proc/<pid>/ns/net");
    assert!(link(Some(&other), "eth0").is_some());
}

#[test]
fn host_to_pod_traffic_flows_for_each_pod_of_several() {
    let namespaces: Vec<TestNs> = (0..3).map(|_| TestNs::new()).collect();
    let ips: Vec<IpAddr> = namespaces.iter().map(|_| unique_v4()).collect();
    for (ns, ip) in namespaces.iter().zip(&ips) {
        set_up(&spec(ns, vec![*ip]));
    }
    for ip in &ips {
        assert!(ping(ip), "{ip} answers");
    }
}
