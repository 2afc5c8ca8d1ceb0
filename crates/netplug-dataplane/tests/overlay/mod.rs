//! Fixtures of the overlay tests (tunnel devices, route sync, neighbour and FDB entries): calls
//! run inside a test namespace, and an underlay link standing in for the node's NIC.
#![allow(dead_code)]

use netplug_dataplane::VxlanDevice;
use netplug_dataplane::netlink::Rtnl;
use netplug_dataplane::netns::{self, NetNs};
use serde_json::Value;

use crate::common::*;

/// Runs `f` with an rtnetlink socket inside `ns`, on a thread of its own.
pub fn in_ns<T: Send + 'static>(
    ns: &TestNs,
    f: impl FnOnce(&mut Rtnl) -> netplug_dataplane::Result<T> + Send + 'static,
) -> netplug_dataplane::Result<T> {
    let path = ns.path.clone();
    netns::run(move |thread| {
        thread.enter(&NetNs::open(&path)?)?;
        let mut rtnl = Rtnl::open().map_err(|err| err.into_dataplane("open rtnetlink"))?;
        f(&mut rtnl)
    })
}

pub fn ip_in(ns: &TestNs, args: &[&str]) -> String {
    let mut full = vec!["-n", ns.name.as_str()];
    full.extend(args);
    run("ip", &full)
}

pub fn json(program: &str, ns: &TestNs, args: &[&str]) -> Value {
    let out = match program {
        "ip" => {
            let mut full = vec!["-j", "-n", ns.name.as_str()];
            full.extend(args);
            run("ip", &full)
        }
        _ => {
            let mut full = vec!["netns", "exec", ns.name.as_str(), program, "-j"];
            full.extend(args);
            run("ip", &full)
        }
    };
    if out.trim().is_empty() { Value::Array(vec![]) } else { serde_json::from_str(&out).unwrap() }
}

/// An underlay-like link inside `ns`: one end of a veth pair, up, with 192.168.50.1/24 and fd00:50::1/64.
pub fn underlay(ns: &TestNs) {
    ip_in(ns, &["link", "add", "up0", "type", "veth", "peer", "name", "up1"]);
    ip_in(ns, &["addr", "add", "192.168.50.1/24", "dev", "up0"]);
    ip_in(ns, &["addr", "add", "fd00:50::1/64", "dev", "up0", "nodad"]);
    ip_in(ns, &["link", "set", "up0", "up"]);
    ip_in(ns, &["link", "set", "up1", "up"]);
}

pub fn vxlan(name: &str, vni: u32, mac: Option<[u8; 6]>, address: Option<&str>) -> VxlanDevice {
    VxlanDevice {
        name: name.into(),
        vni,
        port: 4789,
        local: "192.168.50.1".parse().unwrap(),
        mtu: Some(1410),
        mac,
        address: address.map(|a| a.parse().unwrap()),
    }
}

pub fn v4_addresses(ns: &TestNs, dev: &str) -> Vec<String> {
    addresses(Some(ns), dev).into_iter().map(|(a, _)| a).filter(|a| a.contains('.')).collect()
}

pub const MAC_A: [u8; 6] = [0x66, 0x0a, 0, 0, 0, 0xa];
pub const MAC_B: [u8; 6] = [0x66, 0x0a, 0, 0, 0, 0xb];
pub const MAC_C: [u8; 6] = [0x66, 0x0a, 0, 0, 0, 0xc];
