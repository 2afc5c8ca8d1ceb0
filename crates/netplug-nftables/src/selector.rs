//! What each selector of the vocabulary loads, the protocol it depends on, and how nft describes
//! it in the user data of an anonymous set built from it.

use crate::expr::{self, Expr};
use crate::model::{DataType, Selector};
use crate::types::ValueType;

/// Where a selector's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Meta(u32),
    Payload { base: u32, offset: u32, len: u32 },
    Ct(u32),
}

/// The protocol a payload selector needs established first, as nft inserts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    Ipv4,
    Ipv6,
    Icmp,
    Icmpv6,
}

pub const NFPROTO_IPV4: u8 = 2;
pub const NFPROTO_IPV6: u8 = 10;
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_ICMPV6: u8 = 58;

impl Selector {
    pub fn source(self) -> Source {
        use expr::{NETWORK_HEADER as NET, TRANSPORT_HEADER as TH};
        let payload = |base, offset, len| Source::Payload { base, offset, len };
        match self {
            Selector::Iifname => Source::Meta(expr::META_IIFNAME),
            Selector::Oifname => Source::Meta(expr::META_OIFNAME),
            Selector::L4proto => Source::Meta(expr::META_L4PROTO),
            Selector::Nfproto => Source::Meta(expr::META_NFPROTO),
            Selector::Mark => Source::Meta(expr::META_MARK),
            Selector::Skuid => Source::Meta(expr::META_SKUID),
            Selector::IpSaddr => payload(NET, 12, 4),
            Selector::IpDaddr => payload(NET, 16, 4),
            Selector::Ip6Saddr => payload(NET, 8, 16),
            Selector::Ip6Daddr => payload(NET, 24, 16),
            Selector::ThSport => payload(TH, 0, 2),
            Selector::ThDport => payload(TH, 2, 2),
            Selector::IcmpType | Selector::Icmpv6Type => payload(TH, 0, 1),
            Selector::IcmpCode | Selector::Icmpv6Code => payload(TH, 1, 1),
            Selector::CtState => Source::Ct(expr::CT_STATE),
        }
    }

    /// The load of this selector's value into `dreg`.
    pub fn load(self, dreg: u32) -> Expr {
        match self.source() {
            Source::Meta(key) => Expr::Meta { key, dreg },
            Source::Payload { base, offset, len } => Expr::Payload { base, offset, len, dreg },
            Source::Ct(key) => Expr::Ct { key, dreg },
        }
    }

    pub fn value_type(self) -> ValueType {
        match self {
            Selector::Iifname | Selector::Oifname => ValueType::Ifname,
            Selector::L4proto => ValueType::Proto,
            Selector::Nfproto => ValueType::Nfproto,
            Selector::Mark => ValueType::Mark,
            Selector::Skuid => ValueType::Uid,
            Selector::IpSaddr | Selector::IpDaddr => ValueType::Ipv4,
            Selector::Ip6Saddr | Selector::Ip6Daddr => ValueType::Ipv6,
            Selector::ThSport | Selector::ThDport => ValueType::Service,
            Selector::IcmpType => ValueType::IcmpType,
            Selector::IcmpCode => ValueType::IcmpCode,
            Selector::Icmpv6Type => ValueType::Icmpv6Type,
            Selector::Icmpv6Code => ValueType::Icmpv6Code,
            Selector::CtState => ValueType::CtState,
        }
    }

    /// The named-set data type this selector is looked up as, if it can be.
    pub fn data_type(self) -> Option<DataType> {
        Some(match self.value_type() {
            ValueType::Ipv4 => DataType::Ipv4Addr,
            ValueType::Ipv6 => DataType::Ipv6Addr,
            ValueType::Proto => DataType::InetProto,
            ValueType::Service => DataType::InetService,
            ValueType::Ifname => DataType::Ifname,
            ValueType::Mark => DataType::Mark,
            _ => return None,
        })
    }

    pub fn needs(self) -> Needs {
        match self {
            Selector::IpSaddr | Selector::IpDaddr => Needs::Ipv4,
            Selector::Ip6Saddr | Selector::Ip6Daddr => Needs::Ipv6,
            Selector::IcmpType | Selector::IcmpCode => Needs::Icmp,
            Selector::Icmpv6Type | Selector::Icmpv6Code => Needs::Icmpv6,
            _ => Needs::Nothing,
        }
    }

    /// Whether an anonymous set (`{ a, b }`) of this selector's values is in the vocabulary.
    pub fn takes_anonymous_set(self) -> bool {
        !matches!(self, Selector::Nfproto | Selector::Skuid | Selector::CtState)
    }

    /// The user data nft stores with an anonymous set built from this selector: the key's byte
    /// order, for an interval set the auto-merge flag, and the "typeof" description of the key
    /// expression (libnftnl's NFTNL_UDATA_SET_* TLVs), which `nft list` reads back to print it.
    pub fn anonymous_set_userdata(self, interval: bool) -> Vec<u8> {
        const BIG_ENDIAN: u32 = 2;
        const HOST_ENDIAN: u32 = 1;
        const EXPR_PAYLOAD: u32 = 7;
        const EXPR_META: u32 = 9;
        let (order, typeof_expr) = match self.source() {
            Source::Meta(key) => (HOST_ENDIAN, (EXPR_META, tlv_u32(0, key))),
            Source::Payload { .. } => {
                let (desc, field) = self.payload_description();
                let mut data = tlv_u32(0, desc);
                data.extend(tlv_u32(1, field));
                (BIG_ENDIAN, (EXPR_PAYLOAD, data))
            }
            Source::Ct(_) => unreachable!("no anonymous set of ct values"),
        };
        let mut out = tlv_u32(0, order); // NFTNL_UDATA_SET_KEYBYTEORDER
        if interval {
            out.extend(tlv_u32(2, 1)); // NFTNL_UDATA_SET_MERGE_ELEMENTS
        }
        let mut nested = tlv_u32(0, typeof_expr.0); // NFTNL_UDATA_SET_TYPEOF_EXPR
        nested.extend(tlv(1, &typeof_expr.1)); // NFTNL_UDATA_SET_TYPEOF_DATA
        out.extend(tlv(3, &nested)); // NFTNL_UDATA_SET_KEY_TYPEOF
        out
    }

    /// nft's protocol description and field number of a payload selector.
    fn payload_description(self) -> (u32, u32) {
        const ICMP: u32 = 4;
        const TH: u32 = 11;
        const IP: u32 = 12;
        const IP6: u32 = 13;
        const ICMPV6: u32 = 14;
        match self {
            Selector::IpSaddr => (IP, 11),
            Selector::IpDaddr => (IP, 12),
            Selector::Ip6Saddr => (IP6, 8),
            Selector::Ip6Daddr => (IP6, 9),
            Selector::ThSport => (TH, 1),
            Selector::ThDport => (TH, 2),
            Selector::IcmpType => (ICMP, 1),
            Selector::IcmpCode => (ICMP, 2),
            Selector::Icmpv6Type => (ICMPV6, 1),
            Selector::Icmpv6Code => (ICMPV6, 2),
            _ => unreachable!("not a payload selector"),
        }
    }
}

/// A libnftnl user-data TLV: one byte of type, one of length, the value.
pub fn tlv(kind: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![kind, value.len() as u8];
    out.extend_from_slice(value);
    out
}

/// A TLV holding a u32 in host byte order (nftnl_udata_put_u32).
pub fn tlv_u32(kind: u8, value: u32) -> Vec<u8> {
    tlv(kind, &value.to_ne_bytes())
}
