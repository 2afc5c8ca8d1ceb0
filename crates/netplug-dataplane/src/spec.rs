//! What a workload's interface should look like, and the checks on that request.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use ipnet::IpNet;
use nix::errno::Errno;

use crate::error::{DataplaneError, Result};

/// MAC of every host-side veth end. Fixed so the pod's neighbour entry for its next hop never
/// goes stale when a veth is recreated, and so the host end's IPv6 link-local address is known.
pub const HOST_MAC: [u8; 6] = [0xee; 6];
/// The pod's IPv4 next hop. Nothing owns it: the host end answers ARP for it by proxy.
pub const IPV4_NEXT_HOP: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 1);
/// The pod's IPv6 next hop: the EUI-64 link-local address derived from [`HOST_MAC`].
pub const IPV6_NEXT_HOP: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0xecee, 0xeeff, 0xfeee, 0xeeee);
/// IPv6's minimum link MTU (RFC 8200): the kernel disables IPv6 on a link below it.
pub const IPV6_MIN_MTU: u32 = 1280;
/// IFNAMSIZ - 1.
pub const MAX_IFNAME_LEN: usize = 15;

/// One workload's interface: the request for set-up, and the expectation for check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadSpec {
    /// The workload's network namespace, as any path to it.
    pub netns: PathBuf,
    /// Interface name inside the namespace (CNI_IFNAME).
    pub container_ifname: String,
    /// Name of the veth end left in the host namespace.
    pub host_ifname: String,
    /// MTU of both ends; the kernel default (1500) when `None`.
    pub mtu: Option<u32>,
    /// Receive and transmit queues of both ends.
    pub num_queues: u32,
    /// The workload's addresses, placed as /32 and /128.
    pub addresses: Vec<IpAddr>,
    /// Destinations routed via the link-local next hop; `None` means the default route of each
    /// address family the workload has. Routes of a family it has no address of are skipped.
    pub routes: Option<Vec<IpNet>>,
    /// `net.ipv4.ip_forward` (and IPv6 forwarding) in the workload: 1 if set, else 0.
    pub allow_ip_forwarding: bool,
    /// The workload end's MAC; the kernel picks a random one when `None`. Chosen by the caller
    /// when it must record the MAC before the interface exists.
    pub container_mac: Option<[u8; 6]>,
    /// Whether set-up adds the host routes (`<ip>/32 dev <host end>`). `false` leaves them to
    /// `add_host_routes`, for a caller that sets the interface up before its addresses are surely
    /// the workload's (while their commit is in flight): until then nothing on the host leads to
    /// them, and a workload that won them in a race keeps its routes.
    pub host_routes: bool,
}

impl WorkloadSpec {
    pub fn has_ipv4(&self) -> bool {
        self.addresses.iter().any(IpAddr::is_ipv4)
    }

    pub fn has_ipv6(&self) -> bool {
        self.addresses.iter().any(IpAddr::is_ipv6)
    }

    /// The container routes to program, after defaults and family filtering.
    pub fn effective_routes(&self) -> Vec<IpNet> {
        let routes = match &self.routes {
            Some(routes) => routes.clone(),
            None => {
                let mut defaults = Vec::new();
                if self.has_ipv4() {
                    defaults.push("0.0.0.0/0".parse().unwrap());
                }
                if self.has_ipv6() {
                    defaults.push("::/0".parse().unwrap());
                }
                defaults
            }
        };
        routes
            .into_iter()
            .map(|route| route.trunc())
            .filter(|route| match route {
                IpNet::V4(_) => self.has_ipv4(),
                IpNet::V6(_) => self.has_ipv6(),
            })
            .collect()
    }

    /// Rejects requests the kernel would refuse or misapply, before touching it.
    pub fn validate(&self) -> Result<()> {
        let op = "validate workload interface";
        validate_ifname("host interface name", &self.host_ifname)?;
        validate_ifname("container interface name", &self.container_ifname)?;
        if self.netns.as_os_str().is_empty() {
            return Err(DataplaneError::invalid(op, "network namespace path is empty"));
        }
        if self.num_queues == 0 {
            return Err(DataplaneError::invalid(op, "num_queues must be at least 1"));
        }
        if let Some(mtu) = self.mtu {
            let min = if self.has_ipv6() { IPV6_MIN_MTU } else { 68 };
            if !(min..=65535).contains(&mtu) {
                return Err(DataplaneError::invalid(op, format!("MTU {mtu} is outside {min}..=65535")));
            }
        }
        if self.addresses.is_empty() {
            return Err(DataplaneError::invalid(op, "no addresses to assign"));
        }
        if let Some(mac) = self.container_mac
            && (mac[0] & 1 == 1 || mac == [0; 6])
        {
            return Err(DataplaneError::invalid(op, format!("MAC {} is not a unicast address", format_mac(&mac))));
        }
        for (i, ip) in self.addresses.iter().enumerate() {
            if ip.is_unspecified() || ip.is_multicast() || ip.is_loopback() {
                return Err(DataplaneError::invalid(op, format!("{ip} cannot be a workload address")));
            }
            if self.addresses[..i].contains(ip) {
                return Err(DataplaneError::invalid(op, format!("address {ip} is listed twice")));
            }
        }
        Ok(())
    }
}

/// Checks a name as the kernel's `dev_valid_name` does, with a message naming the field.
pub fn validate_ifname(field: &str, name: &str) -> Result<()> {
    let op = "validate interface name";
    if name.is_empty() {
        return Err(DataplaneError::invalid(op, format!("{field} is empty")));
    }
    if name.len() > MAX_IFNAME_LEN {
        return Err(DataplaneError::new(
            op,
            Errno::ENAMETOOLONG,
            format!("{field} \"{name}\" is {} bytes long; at most {MAX_IFNAME_LEN} are allowed", name.len()),
        ));
    }
    if name == "." || name == ".." || name.contains(['/', ':']) || name.chars().any(char::is_whitespace) {
        return Err(DataplaneError::invalid(
            op,
            format!("{field} \"{name}\" is not a valid interface name (no '/', ':', whitespace, \".\" or \"..\")"),
        ));
    }
    Ok(())
}

/// `ee:ee:ee:ee:ee:ee`.
pub fn format_mac(mac: &[u8]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The host route of one workload address: /32 or /128.
pub fn host_prefix(ip: &IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}
