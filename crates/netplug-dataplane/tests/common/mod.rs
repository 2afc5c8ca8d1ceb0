//! Test fixtures: real namespaces made with iproute2, and readers of the kernel state through
//! iproute2's JSON output, an observer independent of the code under test.
#![allow(dead_code)]

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use netplug_dataplane::WorkloadSpec;
use serde_json::Value;

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn next() -> u32 {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// These tests need root: failing here, rather than skipping, keeps CI honest.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "the data-plane tests create network namespaces and must run as root");
}

/// A fresh network namespace, deleted (with everything in it) when dropped.
pub struct TestNs {
    pub name: String,
    pub path: PathBuf,
}

impl TestNs {
    pub fn new() -> Self {
        require_root();
        let name = format!("nptest-{}-{}", std::process::id(), next());
        run("ip", &["netns", "add", &name]);
        let path = PathBuf::from(format!("/run/netns/{name}"));
        Self { name, path }
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// A host link deleted when dropped (for links a test makes in the host namespace itself).
pub struct HostLink(pub String);

impl Drop for HostLink {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).output();
    }
}

/// A host interface name no other test uses: `npt` + pid + counter, at most 15 bytes.
pub fn host_ifname() -> String {
    format!("npt{:04x}{:03}", std::process::id() & 0xffff, next() % 1000)
}

/// An IPv4 address no concurrently running test uses.
pub fn unique_v4() -> IpAddr {
    let n = next();
    format!("10.{}.{}.{}", 200 + std::process::id() % 50, n / 250, n % 250 + 1).parse().unwrap()
}

/// An IPv6 address no concurrently running test uses.
pub fn unique_v6() -> IpAddr {
    format!("fd00:7e57:{:x}::{:x}", std::process::id() & 0xffff, next() + 1).parse().unwrap()
}

pub fn spec(ns: &TestNs, addresses: Vec<IpAddr>) -> WorkloadSpec {
    WorkloadSpec {
        netns: ns.path.clone(),
        container_ifname: "eth0".into(),
        host_ifname: host_ifname(),
        mtu: None,
        num_queues: 1,
        addresses,
        routes: None,
        allow_ip_forwarding: false,
        container_mac: None,
        host_routes: true,
    }
}

pub fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    assert!(out.status.success(), "{program} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `ip -j <args>` parsed; `ns` runs it inside a namespace.
pub fn ip_json(ns: Option<&TestNs>, args: &[&str]) -> Value {
    let mut full = vec!["-j"];
    if let Some(ns) = ns {
        full.extend(["-n", ns.name.as_str()]);
    }
    full.extend(args);
    let out = run("ip", &full);
    if out.trim().is_empty() { Value::Array(vec![]) } else { serde_json::from_str(&out).unwrap() }
}

/// The one link called `name`, with details (`-d`), or `None`.
pub fn link(ns: Option<&TestNs>, name: &str) -> Option<Value> {
    let mut full = vec!["-j", "-d"];
    if let Some(ns) = ns {
        full.extend(["-n", ns.name.as_str()]);
    }
    full.extend(["link", "show", "dev", name]);
    let out = Command::new("ip").args(&full).output().unwrap();
    if !out.status.success() {
        return None;
    }
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    parsed.as_array().and_then(|links| links.first().cloned())
}

/// `ip addr` of one interface as `ip/prefix` strings with their flags.
pub fn addresses(ns: Option<&TestNs>, dev: &str) -> Vec<(String, Vec<String>)> {
    let json = ip_json(ns, &["addr", "show", "dev", dev]);
    json[0]["addr_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let flags = ["tentative", "dadfailed", "nodad"]
                .into_iter()
                .filter(|f| a[*f].as_bool() == Some(true))
                .map(String::from)
                .collect();
            (format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]), flags)
        })
        .collect()
}

/// Routes as iproute2 shows them: `(dst, gateway, dev, scope)`.
pub fn routes(ns: Option<&TestNs>, ipv6: bool) -> Vec<(String, Option<String>, String, Option<String>)> {
    let family = if ipv6 { "-6" } else { "-4" };
    let mut full = vec!["-j", family];
    if let Some(ns) = ns {
        full.extend(["-n", ns.name.as_str()]);
    }
    full.extend(["route", "show", "table", "main"]);
    let parsed: Value = serde_json::from_str(&run("ip", &full)).unwrap();
    parsed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["dst"].as_str().unwrap().to_string(),
                r["gateway"].as_str().map(String::from),
                r["dev"].as_str().unwrap_or_default().to_string(),
                r["scope"].as_str().map(String::from),
            )
        })
        .collect()
}

/// A sysctl read in the host (`ns` = None) or inside a namespace.
pub fn sysctl(ns: Option<&TestNs>, key: &str) -> String {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    match ns {
        None => std::fs::read_to_string(path).unwrap().trim().to_string(),
        Some(ns) => run("ip", &["netns", "exec", &ns.name, "cat", &path]).trim().to_string(),
    }
}

/// Queue directories in `/sys/class/net/<dev>/queues` (`ip netns exec` remounts /sys).
pub fn queues(ns: Option<&TestNs>, dev: &str) -> Vec<String> {
    let path = format!("/sys/class/net/{dev}/queues");
    let listing = match ns {
        None => run("ls", &[&path]),
        Some(ns) => run("ip", &["netns", "exec", &ns.name, "ls", &path]),
    };
    let mut names: Vec<String> = listing.split_whitespace().map(String::from).collect();
    names.sort();
    names
}

pub fn ping(ip: &IpAddr) -> bool {
    let family = if ip.is_ipv4() { "-4" } else { "-6" };
    Command::new("ping").args([family, "-c", "1", "-W", "2", &ip.to_string()]).output().unwrap().status.success()
}
