//! Two namespaces standing in for two nodes, joined by a veth pair as by a shared subnet: the
//! VXLAN device, routes, neighbour and FDB entries made by these functions carry a ping between
//! the nodes' tunnel addresses, and after the entries are synced away it no longer gets through.

mod common;
mod overlay;

use std::net::IpAddr;
use std::process::Command;

use common::*;
use netplug_dataplane::{
    FdbEntry, NeighborEntry, VxlanDevice, WantedRoute, ensure_vxlan_device, sync_fdb, sync_neighbors, sync_routes,
};
use overlay::*;

struct Node {
    ns: TestNs,
    underlay: &'static str,
    tunnel: &'static str,
    block: &'static str,
    mac: [u8; 6],
}

/// Programs `node`'s VXLAN overlay towards `peer` (or towards nobody).
fn program(node: &Node, peer: Option<&Node>) {
    let device = VxlanDevice {
        name: "vxnp".into(),
        vni: 4096,
        port: 4789,
        local: node.underlay.parse().unwrap(),
        mtu: Some(1450),
        mac: Some(node.mac),
        address: Some(node.tunnel.parse().unwrap()),
    };
    let routes: Vec<WantedRoute> = peer
        .iter()
        .map(|peer| WantedRoute {
            destination: peer.block.parse().unwrap(),
            gateway: Some(peer.tunnel.parse().unwrap()),
            device: "vxnp".into(),
            onlink: true,
            source: None,
        })
        .collect();
    let neighbours: Vec<NeighborEntry> =
        peer.iter().map(|peer| NeighborEntry { ip: peer.tunnel.parse().unwrap(), mac: peer.mac }).collect();
    let fdb: Vec<FdbEntry> =
        peer.iter().map(|peer| FdbEntry { mac: peer.mac, remote: peer.underlay.parse::<IpAddr>().unwrap() }).collect();
    in_ns(&node.ns, move |rtnl| {
        ensure_vxlan_device(rtnl, &device)?;
        sync_routes(rtnl, 80, &routes)?;
        sync_neighbors(rtnl, "vxnp", &neighbours)?;
        sync_fdb(rtnl, "vxnp", &fdb)
    })
    .unwrap();
}

fn pings(from: &Node, to: &str) -> bool {
    Command::new("ip")
        .args(["netns", "exec", &from.ns.name, "ping", "-c", "1", "-W", "2", "-I", from.tunnel, to])
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn a_vxlan_overlay_made_by_these_functions_carries_traffic_between_two_nodes() {
    let a =
        Node { ns: TestNs::new(), underlay: "192.168.50.1", tunnel: "10.244.1.0", block: "10.244.1.0/26", mac: MAC_A };
    let b =
        Node { ns: TestNs::new(), underlay: "192.168.50.2", tunnel: "10.244.2.0", block: "10.244.2.0/26", mac: MAC_B };
    underlay(&a.ns); // up0 in a, its peer up1 moved to b
    ip_in(&a.ns, &["link", "set", "up1", "netns", &b.ns.name]);
    ip_in(&b.ns, &["addr", "add", "192.168.50.2/24", "dev", "up1"]);
    ip_in(&b.ns, &["link", "set", "up1", "up"]);

    program(&a, Some(&b));
    program(&b, Some(&a));
    assert!(pings(&a, b.tunnel), "a reaches b's tunnel address through VXLAN");
    assert!(pings(&b, a.tunnel), "and b reaches a's");

    program(&a, None);
    assert!(!pings(&a, b.tunnel), "with its routes, neighbours and FDB entries synced away, a no longer does");
}
