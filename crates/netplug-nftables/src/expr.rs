//! nf_tables expressions, as netlink attributes.
//!
//! A batch writes a rule's expressions through wire.rs, straight into its bytes. `to_attribute`
//! (tests only) encodes them the earlier way, which wire.rs is checked against byte for byte:
//! loads, comparisons, bitwise, lookups and immediates on netlink-packet-netfilter's attribute
//! types; `ct`, `counter`, `objref`, `limit`, `log`, `masq`, `nat`, `notrack`, `reject` and `range`,
//! which that crate has no type for, on netlink-packet-core's NLA types, attribute by attribute as
//! libnftnl lays them out (nft_*.c in the kernel names them).

use netlink_packet_core::{DefaultNla, NLA_F_NESTED};
use netlink_packet_netfilter::nftables::{Verdict, VerdictAttribute};
// The typed encoding (`Expr::to_attribute`), kept as the reference wire.rs is tested against.
#[cfg(test)]
use netlink_packet_netfilter::nftables::{
    Bitwise, Cmp, DataAttribute, ExpressionAttribute, Expressions, Immediate, ListAttribute, Lookup, Meta, MetaKey,
    Operator, Payload, Register,
};

/// NFT_REG_VERDICT and NFT_REG_1 (the 16-byte register nft loads into first).
pub const REG_VERDICT: u32 = 0;
pub const REG_1: u32 = 1;
/// The first 4-byte register (NFT_REG32_00).
pub const REG32_00: u32 = 8;

/// The register `words` 4-byte words past NFT_REG_1, numbered as nft numbers it: a 16-byte
/// register when aligned to one, else a 4-byte register.
pub fn register_at(words: u32) -> u32 {
    if words % 4 == 0 { REG_1 + words / 4 } else { REG32_00 + words }
}

/// Verdict codes (NF_DROP, NF_ACCEPT, NFT_CONTINUE, NFT_JUMP, NFT_GOTO, NFT_RETURN).
pub const NF_DROP: u32 = 0;
pub const NF_ACCEPT: u32 = 1;
pub const NFT_CONTINUE: u32 = -1i32 as u32;
pub const NFT_JUMP: u32 = -3i32 as u32;
pub const NFT_GOTO: u32 = -4i32 as u32;
pub const NFT_RETURN: u32 = -5i32 as u32;

/// Payload bases (NFT_PAYLOAD_NETWORK_HEADER, NFT_PAYLOAD_TRANSPORT_HEADER).
pub const NETWORK_HEADER: u32 = 1;
pub const TRANSPORT_HEADER: u32 = 2;

/// Meta keys (NFT_META_*).
pub const META_MARK: u32 = 3;
pub const META_IIFNAME: u32 = 6;
pub const META_OIFNAME: u32 = 7;
pub const META_SKUID: u32 = 10;
pub const META_NFPROTO: u32 = 15;
pub const META_L4PROTO: u32 = 16;

/// NFT_CT_STATE.
pub const CT_STATE: u32 = 0;
/// NFT_CT_MARK.
pub const CT_MARK: u32 = 3;

/// One expression of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Meta {
        key: u32,
        dreg: u32,
    },
    MetaSet {
        key: u32,
        sreg: u32,
    },
    Payload {
        base: u32,
        offset: u32,
        len: u32,
        dreg: u32,
    },
    Ct {
        key: u32,
        dreg: u32,
    },
    /// `ct <key> set <sreg>`.
    CtSet {
        key: u32,
        sreg: u32,
    },
    Cmp {
        op: CmpOp,
        data: Vec<u8>,
    },
    /// `reg = (reg & mask) ^ xor`; `with_op` adds NFTA_BITWISE_OP (nft sets it for `&`/`|`
    /// written in the rule, not for the masks it derives from prefixes and flag matches).
    Bitwise {
        len: u32,
        mask: Vec<u8>,
        xor: Vec<u8>,
        with_op: bool,
    },
    Range {
        negate: bool,
        from: Vec<u8>,
        to: Vec<u8>,
    },
    /// Host to network byte order in place (nft adds it for host-order fields of a
    /// concatenation looked up in an interval set).
    Byteorder {
        reg: u32,
        len: u32,
        size: u32,
    },
    Lookup {
        set: String,
        set_id: Option<u32>,
        dreg: Option<u32>,
        negate: bool,
    },
    Verdict {
        code: u32,
        chain: Option<String>,
    },
    Counter,
    Objref {
        counter: String,
    },
    Limit {
        rate: u64,
        unit: u64,
        burst: u32,
    },
    Log {
        prefix: Option<String>,
        group: Option<u16>,
        level: Option<u32>,
    },
    Masq {
        flags: Option<u32>,
    },
    /// `immediate reg <dreg> <data>`: a value loaded into a register (a NAT's address).
    Immediate {
        dreg: u32,
        data: Vec<u8>,
    },
    /// `nat dnat|snat <family> addr_min reg <reg>`.
    Nat {
        kind: u32,
        family: u32,
        reg_addr_min: u32,
    },
    Notrack,
    Reject {
        kind: u32,
        code: u8,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lte,
    Gte,
}

impl Expr {
    /// The expression as an element of NFTA_RULE_EXPRESSIONS, through netlink-packet-netfilter's
    /// types: the reference the batch's own encoding (wire.rs) is tested against, byte for byte.
    #[cfg(test)]
    pub fn to_attribute(&self) -> ListAttribute<ExpressionAttribute> {
        let (name, data) = match self {
            Expr::Meta { key, dreg } => {
                ("meta", Expressions::Meta(vec![Meta::Key(MetaKey::from(*key)), Meta::DestinationRegister(reg(*dreg))]))
            }
            Expr::MetaSet { key, sreg } => {
                ("meta", Expressions::Meta(vec![Meta::Key(MetaKey::from(*key)), Meta::SourceRegister(reg(*sreg))]))
            }
            Expr::Payload { base, offset, len, dreg } => (
                "payload",
                Expressions::Payload(vec![
                    Payload::DestinationRegister(reg(*dreg)),
                    Payload::Base(*base),
                    Payload::Offset(*offset),
                    Payload::Len(*len),
                ]),
            ),
            Expr::Ct { key, dreg } => ("ct", other(vec![u32_be(CT_KEY, *key), u32_be(CT_DREG, *dreg)])),
            Expr::CtSet { key, sreg } => ("ct", other(vec![u32_be(CT_KEY, *key), u32_be(CT_SREG, *sreg)])),
            Expr::Cmp { op, data } => (
                "cmp",
                Expressions::Cmp(vec![
                    Cmp::SourceRegister(reg(REG_1)),
                    Cmp::Op(match op {
                        CmpOp::Eq => Operator::Equal,
                        CmpOp::Ne => Operator::NotEqual,
                        CmpOp::Lte => Operator::LessThanEqual,
                        CmpOp::Gte => Operator::GreatherThanEqual,
                    }),
                    Cmp::Data(DataAttribute::Value(data.clone())),
                ]),
            ),
            Expr::Bitwise { len, mask, xor, with_op } => {
                let mut attrs = vec![Bitwise::SourceRegister(reg(REG_1)), Bitwise::DestinationRegister(reg(REG_1))];
                if *with_op {
                    attrs.push(Bitwise::Op(0)); // NFT_BITWISE_BOOL
                }
                attrs.push(Bitwise::Length(*len));
                attrs.push(Bitwise::Mask(DataAttribute::Value(mask.clone())));
                attrs.push(Bitwise::Xor(DataAttribute::Value(xor.clone())));
                ("bitwise", Expressions::Bitwise(attrs))
            }
            Expr::Range { negate, from, to } => (
                "range",
                other(vec![
                    u32_be(RANGE_SREG, REG_1),
                    u32_be(RANGE_OP, u32::from(*negate)),
                    nested(RANGE_FROM, &[bytes(DATA_VALUE, from)]),
                    nested(RANGE_TO, &[bytes(DATA_VALUE, to)]),
                ]),
            ),
            Expr::Byteorder { reg, len, size } => (
                "byteorder",
                other(vec![
                    u32_be(BYTEORDER_SREG, *reg),
                    u32_be(BYTEORDER_DREG, *reg),
                    u32_be(BYTEORDER_OP, 1), // NFT_BYTEORDER_HTON
                    u32_be(BYTEORDER_LEN, *len),
                    u32_be(BYTEORDER_SIZE, *size),
                ]),
            ),
            Expr::Lookup { set, set_id, dreg, negate } => {
                let mut attrs = vec![Lookup::SourceRegister(reg(REG_1))];
                if let Some(dreg) = dreg {
                    attrs.push(Lookup::DestinationRegister(reg(*dreg)));
                }
                attrs.push(Lookup::Set(set.clone()));
                if let Some(id) = set_id {
                    attrs.push(Lookup::SetId(*id));
                }
                if *negate {
                    attrs.push(Lookup::Flags(1)); // NFT_LOOKUP_F_INV
                }
                ("lookup", Expressions::Lookup(attrs))
            }
            Expr::Verdict { code, chain } => (
                "immediate",
                Expressions::Immediate(vec![
                    Immediate::DestinationRegister(reg(REG_VERDICT)),
                    Immediate::Data(DataAttribute::Verdict(verdict_attributes(*code, chain.as_deref()))),
                ]),
            ),
            Expr::Counter => ("counter", other(Vec::new())),
            // libnftnl puts the object's name without its terminating NUL.
            Expr::Objref { counter } => (
                "objref",
                other(vec![u32_be(OBJREF_IMM_TYPE, OBJECT_COUNTER), bytes(OBJREF_IMM_NAME, counter.as_bytes())]),
            ),
            Expr::Limit { rate, unit, burst } => (
                "limit",
                other(vec![
                    u64_be(LIMIT_RATE, *rate),
                    u64_be(LIMIT_UNIT, *unit),
                    u32_be(LIMIT_BURST, *burst),
                    u32_be(LIMIT_TYPE, 0), // NFT_LIMIT_PKTS
                    u32_be(LIMIT_FLAGS, 0),
                ]),
            ),
            Expr::Log { prefix, group, level } => {
                let mut attrs = Vec::new();
                if let Some(prefix) = prefix {
                    attrs.push(string(LOG_PREFIX, prefix));
                }
                if let Some(group) = group {
                    attrs.push(DefaultNla::new(LOG_GROUP, group.to_be_bytes().to_vec()));
                }
                if let Some(level) = level {
                    attrs.push(u32_be(LOG_LEVEL, *level));
                }
                ("log", other(attrs))
            }
            Expr::Masq { flags } => ("masq", other(flags.iter().map(|flags| u32_be(MASQ_FLAGS, *flags)).collect())),
            Expr::Immediate { dreg, data } => (
                "immediate",
                Expressions::Immediate(vec![
                    Immediate::DestinationRegister(reg(*dreg)),
                    Immediate::Data(DataAttribute::Value(data.clone())),
                ]),
            ),
            Expr::Nat { kind, family, reg_addr_min } => (
                "nat",
                other(vec![
                    u32_be(NAT_TYPE, *kind),
                    u32_be(NAT_FAMILY, *family),
                    u32_be(NAT_REG_ADDR_MIN, *reg_addr_min),
                ]),
            ),
            Expr::Notrack => return ListAttribute::Element(vec![ExpressionAttribute::Name("notrack".into())]),
            Expr::Reject { kind, code } => {
                ("reject", other(vec![u32_be(REJECT_TYPE, *kind), DefaultNla::new(REJECT_ICMP_CODE, vec![*code])]))
            }
        };
        ListAttribute::Element(vec![ExpressionAttribute::Name(name.into()), ExpressionAttribute::Data(data)])
    }
}

/// NFTA_DATA_VERDICT's content for a verdict code and, for jump and goto, the chain.
pub fn verdict_attributes(code: u32, chain: Option<&str>) -> Vec<VerdictAttribute> {
    let mut attrs = vec![VerdictAttribute::Code(Verdict::from(code))];
    if let Some(chain) = chain {
        attrs.push(VerdictAttribute::Chain(chain.to_string()));
    }
    attrs
}

#[cfg(test)]
fn reg(number: u32) -> Register {
    Register::from(number)
}

#[cfg(test)]
fn other(attributes: Vec<DefaultNla>) -> Expressions {
    Expressions::Unknown(attributes)
}

// Attribute numbers of the expressions encoded here (include/uapi/linux/netfilter/nf_tables.h).
pub(crate) const CT_DREG: u16 = 1;
pub(crate) const CT_KEY: u16 = 2;
pub(crate) const CT_SREG: u16 = 4;
pub(crate) const OBJREF_IMM_TYPE: u16 = 1;
pub(crate) const OBJREF_IMM_NAME: u16 = 2;
pub const OBJECT_COUNTER: u32 = 1;
pub(crate) const LIMIT_RATE: u16 = 1;
pub(crate) const LIMIT_UNIT: u16 = 2;
pub(crate) const LIMIT_BURST: u16 = 3;
pub(crate) const LIMIT_TYPE: u16 = 4;
pub(crate) const LIMIT_FLAGS: u16 = 5;
pub(crate) const LOG_GROUP: u16 = 1;
pub(crate) const LOG_PREFIX: u16 = 2;
pub(crate) const LOG_LEVEL: u16 = 5;
pub(crate) const MASQ_FLAGS: u16 = 1;
pub(crate) const NAT_TYPE: u16 = 1;
pub(crate) const NAT_FAMILY: u16 = 2;
pub(crate) const NAT_REG_ADDR_MIN: u16 = 3;
/// NFT_NAT_SNAT and NFT_NAT_DNAT.
pub const NAT_SNAT: u32 = 0;
pub const NAT_DNAT: u32 = 1;
pub(crate) const REJECT_TYPE: u16 = 1;
pub(crate) const REJECT_ICMP_CODE: u16 = 2;
pub(crate) const RANGE_SREG: u16 = 1;
pub(crate) const RANGE_OP: u16 = 2;
pub(crate) const RANGE_FROM: u16 = 3;
pub(crate) const RANGE_TO: u16 = 4;
pub(crate) const DATA_VALUE: u16 = 1;
pub(crate) const BYTEORDER_SREG: u16 = 1;
pub(crate) const BYTEORDER_DREG: u16 = 2;
pub(crate) const BYTEORDER_OP: u16 = 3;
pub(crate) const BYTEORDER_LEN: u16 = 4;
pub(crate) const BYTEORDER_SIZE: u16 = 5;

pub fn u32_be(kind: u16, value: u32) -> DefaultNla {
    DefaultNla::new(kind, value.to_be_bytes().to_vec())
}

pub fn u64_be(kind: u16, value: u64) -> DefaultNla {
    DefaultNla::new(kind, value.to_be_bytes().to_vec())
}

pub fn bytes(kind: u16, value: &[u8]) -> DefaultNla {
    DefaultNla::new(kind, value.to_vec())
}

/// A NUL-terminated string attribute.
pub fn string(kind: u16, value: &str) -> DefaultNla {
    let mut bytes = value.as_bytes().to_vec();
    bytes.push(0);
    DefaultNla::new(kind, bytes)
}

/// A nested attribute holding `children`, NLA_F_NESTED set as libmnl sets it.
pub fn nested(kind: u16, children: &[DefaultNla]) -> DefaultNla {
    DefaultNla::new(kind | NLA_F_NESTED, emit_all(children))
}

/// The wire bytes of a list of attributes.
pub fn emit_all<T: netlink_packet_core::Nla>(attrs: &[T]) -> Vec<u8> {
    use netlink_packet_core::Emitable;
    let mut buffer = vec![0; attrs.buffer_len()];
    attrs.emit(&mut buffer);
    buffer
}
