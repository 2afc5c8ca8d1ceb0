//! Parsing of the text the agent hands over (addresses, CIDRs, MACs), each failure a one-line
//! `EINVAL` naming the field and the value.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::error::{DataplaneError, Result};

/// An IP address: `10.0.0.1`, `fd00::1`.
pub fn ip(op: &str, field: &str, text: &str) -> Result<IpAddr> {
    text.parse().map_err(|_| DataplaneError::invalid(op, format!("{field} \"{text}\" is not an IP address")))
}

/// A network in canonical form (`10.244.1.0/26`); a bare address is a host route (/32, /128).
/// Host bits set are refused, as `ip route` refuses them: the intent is ambiguous.
pub fn cidr(op: &str, field: &str, text: &str) -> Result<IpNet> {
    let net: IpNet = match text.parse::<IpNet>() {
        Ok(net) => net,
        Err(_) => match text.parse::<IpAddr>() {
            Ok(ip) => IpNet::from(ip),
            Err(_) => return Err(DataplaneError::invalid(op, format!("{field} \"{text}\" is not a CIDR"))),
        },
    };
    if net.trunc() != net {
        return Err(DataplaneError::invalid(
            op,
            format!("{field} \"{text}\" has host bits set; the network is {}", net.trunc()),
        ));
    }
    Ok(net)
}

/// A single address for a device: `10.0.0.1`, `10.0.0.1/32`, `fd00::1/128`; any other prefix
/// length is refused.
pub fn host_address(op: &str, field: &str, text: &str) -> Result<IpAddr> {
    let (address, prefix) = match text.split_once('/') {
        Some((address, prefix)) => (address, Some(prefix)),
        None => (text, None),
    };
    let ip = address
        .parse::<IpAddr>()
        .map_err(|_| DataplaneError::invalid(op, format!("{field} \"{text}\" is not an IP address")))?;
    let full = if ip.is_ipv4() { "32" } else { "128" };
    if prefix.is_some_and(|prefix| prefix != full) {
        return Err(DataplaneError::invalid(op, format!("{field} \"{text}\" must be a single address (/{full})")));
    }
    if ip.is_unspecified() || ip.is_multicast() {
        return Err(DataplaneError::invalid(op, format!("{field} \"{text}\" cannot be a device address")));
    }
    Ok(ip)
}

/// A MAC address such as `0a:58:0a:f4:00:05` (case-insensitive).
pub fn mac(op: &str, field: &str, text: &str) -> Result<[u8; 6]> {
    let bytes: Vec<u8> = text
        .split(':')
        .map(|part| if part.len() == 2 { u8::from_str_radix(part, 16).ok() } else { None })
        .collect::<Option<Vec<u8>>>()
        .unwrap_or_default();
    <[u8; 6]>::try_from(bytes).map_err(|_| {
        DataplaneError::invalid(op, format!("{field} \"{text}\" is not a MAC address such as 0a:58:0a:f4:00:05"))
    })
}

/// A unicast MAC (no group bit, not all zeros): one a device or neighbour can have.
pub fn unicast_mac(op: &str, field: &str, text: &str) -> Result<[u8; 6]> {
    let parsed = mac(op, field, text)?;
    if parsed[0] & 1 == 1 || parsed == [0; 6] {
        return Err(DataplaneError::invalid(op, format!("{field} \"{text}\" is not a unicast MAC address")));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_canonical_or_a_bare_address() {
        assert_eq!(cidr("op", "dst", "10.244.1.0/26").unwrap().to_string(), "10.244.1.0/26");
        assert_eq!(cidr("op", "dst", "10.244.1.7").unwrap().to_string(), "10.244.1.7/32");
        assert_eq!(cidr("op", "dst", "fd00::/122").unwrap().to_string(), "fd00::/122");
        let err = cidr("op", "routes[0].dst", "10.244.1.5/26").unwrap_err();
        assert_eq!(err.detail, "routes[0].dst \"10.244.1.5/26\" has host bits set; the network is 10.244.1.0/26");
        let err = cidr("op", "routes[1].dst", "10.0.0.300/24").unwrap_err();
        assert_eq!(err.detail, "routes[1].dst \"10.0.0.300/24\" is not a CIDR");
    }

    #[test]
    fn host_addresses_are_single_addresses() {
        assert_eq!(host_address("op", "address", "10.0.0.1/32").unwrap().to_string(), "10.0.0.1");
        assert_eq!(host_address("op", "address", "fd00::1").unwrap().to_string(), "fd00::1");
        let err = host_address("op", "address", "10.0.0.1/24").unwrap_err();
        assert_eq!(err.detail, "address \"10.0.0.1/24\" must be a single address (/32)");
    }

    #[test]
    fn macs() {
        assert_eq!(mac("op", "mac", "0A:58:0a:f4:00:05").unwrap(), [0x0a, 0x58, 0x0a, 0xf4, 0, 5]);
        assert!(mac("op", "mac", "0a:58:0a:f4:00").is_err());
        assert!(mac("op", "mac", "0a:58:0a:f4:00:0g").is_err());
        let err = unicast_mac("op", "entries[0].mac", "ff:ff:ff:ff:ff:ff").unwrap_err();
        assert_eq!(err.detail, "entries[0].mac \"ff:ff:ff:ff:ff:ff\" is not a unicast MAC address");
    }
}
