//! The data types of the vocabulary: how each value is written in a description, how it is laid
//! out in nf_tables registers and set keys, and the identifiers `nft` stores beside a set so that
//! `nft list` prints its elements as addresses, ports and names rather than raw bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

mod names;

use crate::model::{Atom, DataType};
pub use names::CT_STATES;
use names::{ICMP_CODES, ICMP_TYPES, ICMPV6_CODES, ICMPV6_TYPES, PROTOCOLS};

/// The kind of value a selector compares or a set holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    Ipv4,
    Ipv6,
    Proto,
    Service,
    Ifname,
    Mark,
    Nfproto,
    Uid,
    IcmpType,
    IcmpCode,
    Icmpv6Type,
    Icmpv6Code,
    CtState,
}

/// A parsed value, in the bytes nf_tables compares.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    Exact(Vec<u8>),
    /// An address prefix: the (masked) address and its length in bits.
    Prefix(Vec<u8>, u32),
    /// An inclusive range.
    Range(Vec<u8>, Vec<u8>),
    /// An interface-name prefix (`cali*`): the bytes before the `*`.
    Wildcard(Vec<u8>),
}

impl Value {
    /// The first and the last value covered (inclusive), for interval sets.
    pub fn bounds(&self) -> (Vec<u8>, Vec<u8>) {
        match self {
            Value::Exact(bytes) => (bytes.clone(), bytes.clone()),
            Value::Range(from, to) => (from.clone(), to.clone()),
            Value::Prefix(addr, len) => {
                let mut last = addr.clone();
                for (i, byte) in last.iter_mut().enumerate() {
                    let bit = (i * 8) as u32;
                    if bit + 8 <= *len {
                        continue;
                    }
                    let keep = len.saturating_sub(bit);
                    *byte |= 0xffu8.checked_shr(keep).unwrap_or(0);
                }
                (addr.clone(), last)
            }
            Value::Wildcard(bytes) => (bytes.clone(), bytes.clone()),
        }
    }
}

/// What a value may be besides one exact value.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allow {
    pub prefix: bool,
    pub range: bool,
    pub wildcard: bool,
}

impl ValueType {
    pub fn of(data: DataType) -> ValueType {
        match data {
            DataType::Ipv4Addr => ValueType::Ipv4,
            DataType::Ipv6Addr => ValueType::Ipv6,
            DataType::InetProto => ValueType::Proto,
            DataType::InetService => ValueType::Service,
            DataType::Ifname => ValueType::Ifname,
            DataType::Mark => ValueType::Mark,
        }
    }

    /// Bytes of one value in a register or a set key.
    pub fn width(self) -> usize {
        match self {
            ValueType::Ipv4 | ValueType::Mark | ValueType::Uid | ValueType::CtState => 4,
            ValueType::Ipv6 | ValueType::Ifname => 16,
            ValueType::Service => 2,
            ValueType::Proto
            | ValueType::Nfproto
            | ValueType::IcmpType
            | ValueType::IcmpCode
            | ValueType::Icmpv6Type
            | ValueType::Icmpv6Code => 1,
        }
    }

    /// nft's datatype identifier (stored as a set's key type).
    pub fn nft_type(self) -> u32 {
        match self {
            ValueType::Nfproto => 2,
            ValueType::Ipv4 => 7,
            ValueType::Ipv6 => 8,
            ValueType::Proto => 12,
            ValueType::Service => 13,
            ValueType::IcmpType => 14,
            ValueType::Mark => 19,
            ValueType::Uid => 24,
            ValueType::CtState => 26,
            ValueType::Icmpv6Type => 29,
            ValueType::IcmpCode => 32,
            ValueType::Icmpv6Code => 33,
            ValueType::Ifname => 41,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            ValueType::Ipv4 => "an IPv4 address",
            ValueType::Ipv6 => "an IPv6 address",
            ValueType::Proto => "a protocol (tcp, udp, icmp, icmpv6, sctp or a number 0-255)",
            ValueType::Service => "a port (0-65535)",
            ValueType::Ifname => "an interface name (at most 15 bytes)",
            ValueType::Mark => "a mark (0-0xffffffff)",
            ValueType::Nfproto => "ipv4 or ipv6",
            ValueType::Uid => "a user id",
            ValueType::IcmpType => "an ICMP type (echo-request, ... or 0-255)",
            ValueType::IcmpCode => "an ICMP code (port-unreachable, ... or 0-255)",
            ValueType::Icmpv6Type => "an ICMPv6 type (echo-request, ... or 0-255)",
            ValueType::Icmpv6Code => "an ICMPv6 code (port-unreachable, ... or 0-255)",
            ValueType::CtState => "a conntrack state (new, established, related, invalid, untracked)",
        }
    }

    /// Parses one value; the error says what `atom` is not.
    pub fn parse(self, atom: &Atom, allow: Allow) -> Result<Value, String> {
        let bad = || format!("{atom} is not {}", self.describe());
        match (self, atom) {
            (ValueType::Ipv4 | ValueType::Ipv6, Atom::Text(text)) => parse_address(self, text, allow).ok_or_else(bad),
            (ValueType::Service, _) => {
                if let Atom::Text(text) = atom
                    && let Some((from, to)) = text.split_once('-')
                {
                    let (from, to) = (port(from).ok_or_else(bad)?, port(to).ok_or_else(bad)?);
                    if !allow.range {
                        return Err(format!("{atom}: a port range is not allowed here"));
                    }
                    if from > to {
                        return Err(format!("{atom}: the range ends before it starts"));
                    }
                    return Ok(Value::Range(from.to_be_bytes().to_vec(), to.to_be_bytes().to_vec()));
                }
                let number = number(atom).filter(|n| *n <= 0xffff).ok_or_else(bad)?;
                Ok(Value::Exact((number as u16).to_be_bytes().to_vec()))
            }
            (ValueType::Ifname, Atom::Text(text)) => {
                if let Some(prefix) = text.strip_suffix('*') {
                    if !allow.wildcard {
                        return Err(format!("{atom}: an interface-name wildcard is not allowed here"));
                    }
                    if prefix.is_empty() || prefix.len() > 15 || prefix.contains(['*', '\0']) {
                        return Err(bad());
                    }
                    return Ok(Value::Wildcard(prefix.as_bytes().to_vec()));
                }
                if text.is_empty() || text.len() > 15 || text.contains(['*', '\0']) {
                    return Err(bad());
                }
                let mut bytes = text.as_bytes().to_vec();
                bytes.resize(16, 0);
                Ok(Value::Exact(bytes))
            }
            (ValueType::Mark | ValueType::Uid, _) => {
                let number = number(atom).filter(|n| *n <= u64::from(u32::MAX)).ok_or_else(bad)?;
                Ok(Value::Exact((number as u32).to_ne_bytes().to_vec()))
            }
            (ValueType::CtState, Atom::Text(text)) => {
                let bit = CT_STATES.iter().find(|(name, _)| name == text).map(|(_, bit)| *bit).ok_or_else(bad)?;
                Ok(Value::Exact(bit.to_ne_bytes().to_vec()))
            }
            (ValueType::Nfproto, _) => {
                let value = match atom {
                    Atom::Text(text) if text == "ipv4" => 2,
                    Atom::Text(text) if text == "ipv6" => 10,
                    Atom::Number(n @ (2 | 10)) => *n as u8,
                    _ => return Err(bad()),
                };
                Ok(Value::Exact(vec![value]))
            }
            (ValueType::Proto | ValueType::IcmpType | ValueType::IcmpCode, _)
            | (ValueType::Icmpv6Type | ValueType::Icmpv6Code, _) => {
                let names = self.names();
                let value = match atom {
                    Atom::Text(text) => names.iter().find(|(name, _)| name == text).map(|(_, value)| *value),
                    Atom::Number(n) => u8::try_from(*n).ok(),
                };
                Ok(Value::Exact(vec![value.ok_or_else(bad)?]))
            }
            _ => Err(bad()),
        }
    }

    /// The names nft gives to values of this type (and accepts).
    pub fn names(self) -> &'static [(&'static str, u8)] {
        match self {
            ValueType::Proto => PROTOCOLS,
            ValueType::IcmpType => ICMP_TYPES,
            ValueType::IcmpCode => ICMP_CODES,
            ValueType::Icmpv6Type => ICMPV6_TYPES,
            ValueType::Icmpv6Code => ICMPV6_CODES,
            _ => &[],
        }
    }
}

fn number(atom: &Atom) -> Option<u64> {
    match atom {
        Atom::Number(n) => Some(*n),
        Atom::Text(text) => match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => text.parse().ok(),
        },
    }
}

fn port(text: &str) -> Option<u16> {
    text.trim().parse().ok()
}

fn address_bytes(family: ValueType, text: &str) -> Option<Vec<u8>> {
    match family {
        ValueType::Ipv4 => text.parse::<Ipv4Addr>().ok().map(|a| a.octets().to_vec()),
        _ => text.parse::<Ipv6Addr>().ok().map(|a| a.octets().to_vec()),
    }
}

fn parse_address(family: ValueType, text: &str, allow: Allow) -> Option<Value> {
    let bits = family.width() as u32 * 8;
    if let Some((addr, len)) = text.split_once('/') {
        let bytes = address_bytes(family, addr)?;
        let len: u32 = len.parse().ok().filter(|len| *len <= bits)?;
        if !allow.prefix {
            return None;
        }
        let masked = mask_prefix(&bytes, len);
        if masked != bytes {
            return None; // host bits set: ambiguous
        }
        return Some(if len == bits { Value::Exact(bytes) } else { Value::Prefix(bytes, len) });
    }
    if let Some((from, to)) = text.split_once('-') {
        let (from, to) = (address_bytes(family, from.trim())?, address_bytes(family, to.trim())?);
        if !allow.range || from > to {
            return None;
        }
        return Some(Value::Range(from, to));
    }
    address_bytes(family, text).map(Value::Exact)
}

/// `bytes` with every bit past the first `len` cleared.
pub fn mask_prefix(bytes: &[u8], len: u32) -> Vec<u8> {
    bytes
        .iter()
        .enumerate()
        .map(|(i, byte)| {
            let bit = (i * 8) as u32;
            if bit + 8 <= len {
                *byte
            } else if bit >= len {
                0
            } else {
                byte & (0xffu8 << (8 - (len - bit)))
            }
        })
        .collect()
}

/// The prefix mask of `len` bits over `bytes` bytes.
pub fn prefix_mask(bytes: usize, len: u32) -> Vec<u8> {
    mask_prefix(&vec![0xff; bytes], len)
}

/// `bytes` + 1 as a big-endian number; `None` when it overflows (the value was the last one).
pub fn successor(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut next = bytes.to_vec();
    for byte in next.iter_mut().rev() {
        if *byte == 0xff {
            *byte = 0;
        } else {
            *byte += 1;
            return Some(next);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Allow = Allow { prefix: true, range: true, wildcard: true };

    #[test]
    fn addresses_prefixes_and_ranges() {
        let v = |text: &str| ValueType::Ipv4.parse(&Atom::Text(text.into()), ALL);
        assert_eq!(v("10.0.0.1"), Ok(Value::Exact(vec![10, 0, 0, 1])));
        assert_eq!(v("10.0.0.0/8"), Ok(Value::Prefix(vec![10, 0, 0, 0], 8)));
        assert_eq!(v("10.0.0.1/32"), Ok(Value::Exact(vec![10, 0, 0, 1])));
        assert!(v("10.0.0.1/8").is_err(), "host bits set");
        assert!(v("10.0.0.0/33").is_err());
        assert_eq!(v("10.0.0.1-10.0.0.9"), Ok(Value::Range(vec![10, 0, 0, 1], vec![10, 0, 0, 9])));
        assert_eq!(Value::Prefix(vec![10, 16, 0, 0], 12).bounds().1, vec![10, 31, 255, 255]);
        assert!(ValueType::Ipv6.parse(&Atom::Text("fd00::/64".into()), ALL).is_ok());
    }

    #[test]
    fn ports_names_and_marks() {
        let port = |atom: Atom| ValueType::Service.parse(&atom, ALL);
        assert_eq!(port(Atom::Number(80)), Ok(Value::Exact(vec![0, 80])));
        assert_eq!(port(Atom::Text("1000-2000".into())), Ok(Value::Range(vec![3, 232], vec![7, 208])));
        assert!(port(Atom::Number(70000)).is_err());
        assert_eq!(ValueType::Proto.parse(&Atom::Text("udp".into()), ALL), Ok(Value::Exact(vec![17])));
        assert_eq!(ValueType::IcmpType.parse(&Atom::Text("echo-request".into()), ALL), Ok(Value::Exact(vec![8])));
        assert_eq!(
            ValueType::Mark.parse(&Atom::Text("0x10000".into()), ALL),
            Ok(Value::Exact(0x10000u32.to_ne_bytes().to_vec()))
        );
        let cali = ValueType::Ifname.parse(&Atom::Text("cali*".into()), ALL);
        assert_eq!(cali, Ok(Value::Wildcard(b"cali".to_vec())));
        assert!(ValueType::Ifname.parse(&Atom::Text("a-name-far-too-long".into()), ALL).is_err());
    }

    #[test]
    fn successor_carries_and_overflows() {
        assert_eq!(successor(&[10, 0, 0, 255]), Some(vec![10, 0, 1, 0]));
        assert_eq!(successor(&[255, 255]), None);
    }
}
