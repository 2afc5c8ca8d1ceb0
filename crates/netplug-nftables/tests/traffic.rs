//! Real packets through a table the writer wrote: a client and a server namespace joined by a
//! router namespace (veth pairs), a forward chain that accepts pings to one server address and
//! logs (NFLOG) and drops everything to another; pings and a UDP datagram are sent, then the
//! named counters and the NFLOG records are checked. And a rule marking the connections it
//! allows, counted by the flow tracker from the table and from the events of entries leaving it
//! (of marked entries only: the kernel filters the others out).

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{TestNs, run};
use netplug_nftables::TableWriter;
use netplug_nftables::flow_tracking::{FlowTracker, Taken};
use netplug_nftables::model::{Family, Table};
use netplug_nftables::nflog::{LoggedPacket, NflogReader};
use serde_json::json;

struct Topology {
    client: TestNs,
    router: TestNs,
    server: TestNs,
    /// The router's interface towards the client.
    router_in: String,
}

fn topology() -> Topology {
    let (client, router, server) = (TestNs::new(), TestNs::new(), TestNs::new());
    let tag = std::process::id() % 10000;
    let router_in = format!("nprc{tag}");
    let router_out = format!("nprs{tag}");
    run(
        "ip",
        &[
            "link",
            "add",
            &router_in,
            "netns",
            &router.name,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &client.name,
        ],
    );
    run(
        "ip",
        &[
            "link",
            "add",
            &router_out,
            "netns",
            &router.name,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &server.name,
        ],
    );
    let sh = |ns: &TestNs, script: &str| {
        let out = ns.exec("sh", &["-c", script]);
        assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
    };
    sh(&client, "ip addr add 10.99.1.2/24 dev eth0 && ip link set eth0 up && ip route add default via 10.99.1.1");
    sh(
        &server,
        "ip addr add 10.99.2.2/24 dev eth0 && ip addr add 10.99.2.3/24 dev eth0 && ip link set eth0 up && ip route add default via 10.99.2.1",
    );
    sh(
        &router,
        &format!(
            "ip addr add 10.99.1.1/24 dev {router_in} && ip addr add 10.99.2.1/24 dev {router_out} && ip link set {router_in} up && ip link set {router_out} up && sysctl -qw net.ipv4.ip_forward=1"
        ),
    );
    Topology { client, router, server, router_in }
}

fn table() -> Table {
    serde_json::from_value(json!({
        "family": "inet",
        "name": "netplug",
        "counters": ["pings", "denied"],
        "chains": [{
            "name": "forward",
            "base": { "type": "filter", "hook": "forward", "priority": 10 },
            "rules": [
                { "matches": [{ "key": "ct state", "value": ["established", "related"] }], "verdict": "accept" },
                {
                    "matches": [{ "key": "ip daddr", "value": "10.99.2.3" }],
                    "statements": [{ "counter": { "name": "denied" } }, { "log": { "prefix": "np-deny: ", "group": 5 } }],
                    "verdict": "drop",
                    "comment": "policy test/deny-3"
                },
                {
                    "matches": [{ "key": "ip saddr", "value": "10.99.1.0/24" }, { "key": "icmp type", "value": "echo-request" }],
                    "statements": [{ "counter": { "name": "pings" } }],
                    "verdict": "accept"
                },
                { "verdict": "drop" }
            ]
        }]
    }))
    .unwrap()
}

fn ping(from: &TestNs, to: &str, count: &str) -> bool {
    from.exec("ping", &["-c", count, "-W", "1", "-i", "0.2", to]).status.success()
}

#[test]
fn packets_are_accepted_dropped_counted_and_logged() {
    let net = topology();
    let mut writer = TableWriter::new(Family::Inet, "netplug");
    net.router.enter(|| writer.apply(table())).unwrap();

    let records: Arc<Mutex<Vec<LoggedPacket>>> = Arc::default();
    let sink = records.clone();
    let reader =
        net.router.enter(|| NflogReader::start(5, move |packets| sink.lock().unwrap().extend(packets))).unwrap();
    // A second listener on the same group is refused, clearly.
    let busy = net.router.enter(|| NflogReader::start(5, |_| {})).err().expect("the group is taken");
    assert!(busy.to_string().contains("another listener"), "{busy}");

    assert!(ping(&net.client, "10.99.2.2", "3"), "pings to the allowed address get through");
    assert!(!ping(&net.client, "10.99.2.3", "2"), "pings to the denied address are dropped");
    let udp = net.client.exec("bash", &["-c", "echo hello > /dev/udp/10.99.2.3/5353"]);
    assert!(udp.status.success());

    let counters = net.router.enter(|| writer.counters()).unwrap();
    let count = |name: &str| counters.iter().find(|c| c.name == name).map(|c| c.packets).unwrap();
    // The first echo request of the ping is new; conntrack accepts the two after it (established).
    assert_eq!(count("pings"), 1, "{counters:?}");
    assert_eq!(count("denied"), 3, "{counters:?}");
    assert!(counters.iter().all(|c| c.bytes > 0));

    let deadline = Instant::now() + Duration::from_secs(5);
    while records.lock().unwrap().len() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    reader.stop().unwrap();
    let records = records.lock().unwrap().clone();
    assert_eq!(records.len(), 3, "{records:?}");
    for record in &records {
        assert_eq!(record.prefix, "np-deny: ");
        assert_eq!(record.group, 5);
        assert_eq!(record.family, 4);
        assert_eq!(record.source, Some("10.99.1.2".parse().unwrap()));
        assert_eq!(record.destination, Some("10.99.2.3".parse().unwrap()));
        assert_eq!(record.in_interface.as_deref(), Some(net.router_in.as_str()));
        assert!(record.out_interface.is_some());
    }
    assert_eq!(records[0].protocol, Some(1));
    assert_eq!(records[0].icmp, Some((8, 0)));
    let datagram = &records[2];
    assert_eq!((datagram.protocol, datagram.destination_port), (Some(17), Some(5353)));
    drop(net.server);
}

/// The forward chain of the flow-count test: new pings to the server are allowed with the
/// deciding rule's number in the mark's egress half.
fn labelling_table() -> Table {
    serde_json::from_value(json!({
        "family": "inet",
        "name": "netplug",
        "chains": [{
            "name": "forward",
            "base": { "type": "filter", "hook": "forward", "priority": 10 },
            "rules": [
                { "matches": [{ "key": "ct state", "value": ["established", "related"] }], "verdict": "accept" },
                {
                    "matches": [{ "key": "ip daddr", "value": "10.99.2.2" }, { "key": "icmp type", "value": "echo-request" }],
                    "statements": [{ "ctMark": { "clear": 0xffff_0000_u32, "or": 0x1234_0000_u32 } }],
                    "verdict": "accept"
                },
                { "verdict": "drop" }
            ]
        }]
    }))
    .unwrap()
}

#[test]
fn allowed_flows_are_counted_from_connection_marks_dumps_and_destroy_events() {
    let net = topology();
    let mut writer = TableWriter::new(Family::Inet, "netplug");
    net.router.enter(|| writer.apply(labelling_table())).unwrap();
    let sysctls = net
        .router
        .exec("sysctl", &["-qw", "net.netfilter.nf_conntrack_acct=1", "net.netfilter.nf_conntrack_icmp_timeout=2"]);
    assert!(sysctls.status.success(), "{}", String::from_utf8_lossy(&sysctls.stderr));
    let tracker = net.router.enter(FlowTracker::start).unwrap();
    let egress = |taken: &Taken| {
        taken
            .counts
            .iter()
            .filter(|c| !c.ingress)
            .map(|c| (c.flows, c.packets))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    };

    // Still in the table: counted by the dump, once as a flow, both ways' packets.
    assert!(ping(&net.client, "10.99.2.2", "3"));
    let taken = net.router.enter(|| tracker.take()).unwrap();
    assert_eq!(egress(&taken), (1, 6), "{taken:?}");
    let row = &taken.counts[0];
    assert_eq!(row.decision, 0x1234);
    assert_eq!(
        (row.source.to_string(), row.destination.to_string(), row.protocol),
        ("10.99.1.2".into(), "10.99.2.2".into(), 1)
    );
    assert!(taken.counts.iter().all(|c| !c.ingress), "no rule decided at the destination's end");

    // Gone from the table before the next take: counted by its destroy event. Beside it, a ping
    // of the router's own, which no rule marks: its event never reaches the tracker.
    assert!(ping(&net.client, "10.99.2.2", "2"));
    assert!(ping(&net.router, "10.99.2.2", "1"));
    // Both entries expire (2 s without a packet); the first one's event adds nothing, as all it
    // moved was counted by the dump.
    let deadline = Instant::now() + Duration::from_secs(30);
    while net.router.enter(netplug_nftables::conntrack::dump).unwrap().iter().any(|e| e.protocol == 1) {
        assert!(Instant::now() < deadline, "the pings' entries never left the table");
        std::thread::sleep(Duration::from_millis(200));
    }
    let taken = net.router.enter(|| tracker.take()).unwrap();
    assert_eq!(egress(&taken), (1, 4), "the second ping's connection, from its event: {taken:?}");
    assert_eq!((taken.overruns, taken.followed), (0, 0));
    assert_eq!(taken.events, 2, "the two marked entries' events; the router's unmarked one filtered out in the kernel");
    tracker.stop().unwrap();
}
