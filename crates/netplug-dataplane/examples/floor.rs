//! The kernel floor for `npm run bench:dataplane`: the minimal netlink sequence that wires and
//! unwires an IPv4 pod like `setup_workload` does, sent straight from Rust. No N-API, no thread
//! per operation, no validation or read-backs, one host socket reused for every pod.
//!
//! Usage: floor --pods N --parallel P --first-octets 10.251 NETNS_PATH...
//! Worker w handles pods w, w+P, ... in namespace w % count (give at least P namespaces). Prints one JSON line:
//! `{"durations_ns":[...]}`, the setup+teardown time of each pod.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use ipnet::IpNet;
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netplug_dataplane::address::add_address;
use netplug_dataplane::link::{VethPair, create_veth, get_link, set_up};
use netplug_dataplane::netlink::Rtnl;
use netplug_dataplane::route::{Route, add_route};
use netplug_dataplane::spec::{HOST_MAC, IPV4_NEXT_HOP};
use netplug_dataplane::sysctl;
use nix::sched::{CloneFlags, setns};

struct Options {
    pods: usize,
    parallel: usize,
    prefix: String,
    namespaces: Vec<String>,
}

fn parse() -> Options {
    let mut args = std::env::args().skip(1);
    let mut options = Options { pods: 100, parallel: 1, prefix: "10.251".into(), namespaces: vec![] };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--pods" => options.pods = args.next().unwrap().parse().unwrap(),
            "--parallel" => options.parallel = args.next().unwrap().parse().unwrap(),
            "--first-octets" => options.prefix = args.next().unwrap(),
            _ => options.namespaces.push(arg),
        }
    }
    assert!(!options.namespaces.is_empty(), "give at least one namespace path");
    options
}

fn main() {
    let options = Arc::new(parse());
    let barrier = Arc::new(Barrier::new(options.parallel));
    let workers: Vec<_> = (0..options.parallel)
        .map(|worker| {
            let (options, barrier) = (options.clone(), barrier.clone());
            std::thread::spawn(move || run_worker(worker, &options, &barrier))
        })
        .collect();
    let (mut setup, mut teardown) = (Vec::new(), Vec::new());
    for worker in workers {
        for (s, t) in worker.join().unwrap() {
            setup.push(s.to_string());
            teardown.push(t.to_string());
        }
    }
    println!("{{\"setup_ns\":[{}],\"teardown_ns\":[{}]}}", setup.join(","), teardown.join(","));
}

fn run_worker(worker: usize, options: &Options, barrier: &Barrier) -> Vec<(u128, u128)> {
    let host_ns = File::open("/proc/thread-self/ns/net").unwrap();
    let mut host = Rtnl::open().unwrap();
    let mut durations = Vec::new();
    barrier.wait();
    for pod in (worker..options.pods).step_by(options.parallel) {
        let netns = File::open(&options.namespaces[worker % options.namespaces.len()]).unwrap();
        let name = format!("npf{worker:02}x{pod:05}");
        let ip = IpAddr::V4(format!("{}.{}.{}", options.prefix, pod / 250, pod % 250 + 1).parse::<Ipv4Addr>().unwrap());
        let started = Instant::now();
        wire(&mut host, &host_ns, &netns, &name, ip);
        let wired = Instant::now();
        unwire(&mut host, &name);
        durations.push(((wired - started).as_nanos(), wired.elapsed().as_nanos()));
    }
    durations
}

fn wire(host: &mut Rtnl, host_ns: &File, netns: &File, name: &str, ip: IpAddr) {
    let pair = VethPair {
        name,
        mac: Some(HOST_MAC),
        peer_name: "eth0",
        peer_mac: None,
        peer_netns_fd: netns.as_raw_fd(),
        mtu: None,
        queues: 1,
    };
    create_veth(host, &pair).unwrap();
    let index = get_link(host, name).unwrap().unwrap().index;
    for (key, value) in [
        ("conf/{}/route_localnet", "1"),
        ("neigh/{}/proxy_delay", "0"),
        ("conf/{}/proxy_arp", "1"),
        ("conf/{}/forwarding", "1"),
    ] {
        sysctl::write(&format!("net/ipv4/{}", key.replace("{}", name)), value).unwrap();
    }
    sysctl::write(&format!("net/ipv6/conf/{name}/accept_ra"), "0").unwrap();
    set_up(host, index).unwrap();
    add_route(
        host,
        &Route { destination: IpNet::new(ip, 32).unwrap(), gateway: None, output_index: Some(index), scope_link: true },
    )
    .unwrap();

    setns(netns.as_fd(), CloneFlags::CLONE_NEWNET).unwrap();
    let mut pod = Rtnl::open().unwrap();
    let pod_index = get_link(&mut pod, "eth0").unwrap().unwrap().index;
    set_up(&mut pod, pod_index).unwrap();
    add_address(&mut pod, pod_index, ip, 32).unwrap();
    let gateway = IpAddr::V4(IPV4_NEXT_HOP);
    add_route(
        &mut pod,
        &Route {
            destination: IpNet::new(gateway, 32).unwrap(),
            gateway: None,
            output_index: Some(pod_index),
            scope_link: true,
        },
    )
    .unwrap();
    add_route(
        &mut pod,
        &Route {
            destination: "0.0.0.0/0".parse().unwrap(),
            gateway: Some(gateway),
            output_index: Some(pod_index),
            scope_link: false,
        },
    )
    .unwrap();
    sysctl::write("net/ipv4/ip_forward", "0").unwrap();
    setns(host_ns.as_fd(), CloneFlags::CLONE_NEWNET).unwrap();
}

/// Deleting the host end by name removes the pair and its routes.
fn unwire(host: &mut Rtnl, name: &str) {
    let mut request = LinkMessage::default();
    request.attributes.push(LinkAttribute::IfName(name.to_string()));
    request.header.flags = LinkFlags::empty();
    host.execute(RouteNetlinkMessage::DelLink(request), 0).unwrap();
}
