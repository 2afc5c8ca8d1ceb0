//! Tunnel devices in a fresh namespace: made with exactly their attributes as `ip -d link` reports
//! them, left alone by a second call, made again when an attribute fixed at creation changes.

mod common;
mod overlay;

use std::process::Command;

use common::*;
use netplug_dataplane::{IpipDevice, VxlanDevice, delete_link, ensure_ipip_device, ensure_vxlan_device};
use overlay::*;

#[test]
fn vxlan_device_is_made_exactly_then_left_alone_and_made_again_when_its_vni_changes() {
    let ns = TestNs::new();
    underlay(&ns);
    let made =
        in_ns(&ns, |rtnl| ensure_vxlan_device(rtnl, &vxlan("vxnp", 4096, Some(MAC_A), Some("10.244.7.0")))).unwrap();
    assert_eq!(made.mac, MAC_A.to_vec());

    let shown = link(Some(&ns), "vxnp").expect("vxnp exists");
    assert_eq!(shown["linkinfo"]["info_kind"], "vxlan");
    let data = &shown["linkinfo"]["info_data"];
    assert_eq!((data["id"].as_u64(), data["port"].as_u64()), (Some(4096), Some(4789)));
    assert_eq!(data["local"], "192.168.50.1");
    assert_eq!(data["learning"], false);
    assert_eq!(shown["mtu"], 1410);
    assert_eq!(shown["address"], "66:0a:00:00:00:0a");
    assert!(shown["flags"].as_array().unwrap().iter().any(|f| f == "UP"), "up: {}", shown["flags"]);
    assert_eq!(shown["ifindex"].as_u64(), Some(u64::from(made.index)));
    assert_eq!(v4_addresses(&ns, "vxnp"), ["10.244.7.0/32"]);

    let again =
        in_ns(&ns, |rtnl| ensure_vxlan_device(rtnl, &vxlan("vxnp", 4096, Some(MAC_A), Some("10.244.7.0")))).unwrap();
    assert_eq!(again, made, "a second call finds the device as it is");
    assert_eq!(link(Some(&ns), "vxnp").unwrap(), shown, "and changes nothing");

    ip_in(&ns, &["addr", "add", "10.9.9.9/24", "dev", "vxnp"]);
    let mut moved = vxlan("vxnp", 4096, Some(MAC_B), Some("10.244.7.1"));
    moved.mtu = Some(1400);
    let changed = in_ns(&ns, move |rtnl| ensure_vxlan_device(rtnl, &moved)).unwrap();
    assert_eq!(changed.index, made.index, "MTU, MAC and address change in place");
    assert_eq!(v4_addresses(&ns, "vxnp"), ["10.244.7.1/32"], "the address is set exactly");
    let shown = link(Some(&ns), "vxnp").unwrap();
    assert_eq!((shown["mtu"].as_u64(), shown["address"].as_str()), (Some(1400), Some("66:0a:00:00:00:0b")));
    assert!(shown["flags"].as_array().unwrap().iter().any(|f| f == "UP"), "up again after the MAC change");

    let remade =
        in_ns(&ns, |rtnl| ensure_vxlan_device(rtnl, &vxlan("vxnp", 4097, Some(MAC_B), Some("10.244.7.1")))).unwrap();
    assert_ne!(remade.index, made.index, "another VNI is another device");
    let shown = link(Some(&ns), "vxnp").unwrap();
    assert_eq!(shown["linkinfo"]["info_data"]["id"].as_u64(), Some(4097));
    assert_eq!(shown["address"], "66:0a:00:00:00:0b", "the given MAC is kept");
    assert_eq!(v4_addresses(&ns, "vxnp"), ["10.244.7.1/32"]);

    let kernel_mac = in_ns(&ns, |rtnl| ensure_vxlan_device(rtnl, &vxlan("vxnp2", 4098, None, None))).unwrap();
    assert_eq!(
        link(Some(&ns), "vxnp2").unwrap()["address"].as_str().unwrap(),
        netplug_dataplane::spec::format_mac(&kernel_mac.mac),
        "without a MAC, the kernel's is reported"
    );

    assert!(in_ns(&ns, |rtnl| delete_link(rtnl, "vxnp")).unwrap());
    assert!(link(Some(&ns), "vxnp").is_none());
    assert!(!in_ns(&ns, |rtnl| delete_link(rtnl, "vxnp")).unwrap(), "a second delete finds nothing");
}

/// Whether this kernel can make IP-in-IP devices, asked of iproute2 in a namespace of its own.
fn kernel_has_ipip() -> bool {
    let probe = TestNs::new();
    let out = Command::new("ip").args(["-n", &probe.name, "link", "add", "tunl0", "type", "ipip"]).output().unwrap();
    out.status.success() || String::from_utf8_lossy(&out.stderr).contains("File exists")
}

#[test]
fn ipip_device_without_remote_or_a_clear_error_where_the_kernel_has_no_ipip() {
    let ns = TestNs::new();
    let spec = IpipDevice { name: "tunl0".into(), mtu: Some(1440), address: Some("10.244.9.0".parse().unwrap()) };
    let outcome = in_ns(&ns, {
        let spec = spec.clone();
        move |rtnl| ensure_ipip_device(rtnl, &spec)
    });
    if !kernel_has_ipip() {
        let err = outcome.unwrap_err();
        assert_eq!(err.code(), "EOPNOTSUPP");
        assert!(err.to_string().contains("no ipip (CONFIG_NET_IPIP) driver"), "{err}");
        assert!(link(Some(&ns), "tunl0").is_none(), "nothing is left behind");
        return;
    }
    let made = outcome.unwrap();
    let shown = link(Some(&ns), "tunl0").unwrap();
    assert_eq!(shown["linkinfo"]["info_kind"], "ipip");
    assert_eq!(shown["mtu"], 1440);
    assert!(shown["flags"].as_array().unwrap().iter().any(|f| f == "UP"));
    let data = &shown["linkinfo"]["info_data"];
    assert!(data["remote"].is_null() || data["remote"] == "any", "no fixed remote: {data}");
    assert_eq!(v4_addresses(&ns, "tunl0"), ["10.244.9.0/32"]);
    let again = in_ns(&ns, move |rtnl| ensure_ipip_device(rtnl, &spec)).unwrap();
    assert_eq!(again, made);
    assert_eq!(link(Some(&ns), "tunl0").unwrap(), shown, "a second call changes nothing");

    assert!(in_ns(&ns, |rtnl| delete_link(rtnl, "tunl0")).unwrap());
    let left = link(Some(&ns), "tunl0").unwrap();
    assert!(!left["flags"].as_array().unwrap().iter().any(|f| f == "UP"), "the fallback tunnel stays, down");
    assert!(v4_addresses(&ns, "tunl0").is_empty(), "and without its address");
}

#[test]
fn ipip_device_refuses_an_ipv6_address_before_touching_the_kernel() {
    let ns = TestNs::new();
    let spec = IpipDevice { name: "tunl0".into(), mtu: None, address: Some("fd00::1".parse().unwrap()) };
    let err = in_ns(&ns, move |rtnl| ensure_ipip_device(rtnl, &spec)).unwrap_err();
    assert_eq!(err.code(), "EINVAL");
    assert!(err.detail.contains("address \"fd00::1\" is not IPv4"), "{err}");
}
#[test]
fn vxlan_device_over_ipv6_with_an_ipv6_address() {
    let ns = TestNs::new();
    underlay(&ns);
    let spec = VxlanDevice {
        name: "vxnp6".into(),
        vni: 4096,
        port: 4789,
        local: "fd00:50::1".parse().unwrap(),
        mtu: Some(1430),
        mac: Some(MAC_C),
        address: Some("fd00:244::1".parse().unwrap()),
    };
    let made = in_ns(&ns, {
        let spec = spec.clone();
        move |rtnl| ensure_vxlan_device(rtnl, &spec)
    })
    .unwrap();
    let shown = link(Some(&ns), "vxnp6").unwrap();
    assert_eq!(shown["linkinfo"]["info_data"]["local6"], "fd00:50::1");
    assert_eq!(shown["mtu"], 1430);
    let v6: Vec<String> =
        addresses(Some(&ns), "vxnp6").into_iter().map(|(a, _)| a).filter(|a| !a.starts_with("fe80")).collect();
    assert_eq!(v6, ["fd00:244::1/128"]);
    assert_eq!(
        in_ns(&ns, move |rtnl| ensure_vxlan_device(rtnl, &spec)).unwrap(),
        made,
        "a second call finds it as it is"
    );
}
