//! A rule's expressions written straight into the batch's bytes, as [`Expr::to_attribute`]
//! encodes them through netlink-packet-netfilter's types: those measure every nested level again
//! at each level above it and allocate per attribute, which made encoding a table of 60,000
//! rules cost more than the kernel's handling of it.

use netlink_packet_core::NLA_F_NESTED;

use crate::expr::{self, Expr};

/// A lookup's set and id: given the expression's index, its set's name and id, the ones to send.
pub trait SetOf<'e>: Fn(usize, &'e str, Option<u32>) -> (&'e str, Option<u32>) {}
impl<'e, F: Fn(usize, &'e str, Option<u32>) -> (&'e str, Option<u32>)> SetOf<'e> for F {}

/// NFTA_LIST_ELEM; NFTA_EXPR_NAME and NFTA_EXPR_DATA; NFTA_DATA_VALUE and NFTA_DATA_VERDICT;
/// NFTA_VERDICT_CODE and NFTA_VERDICT_CHAIN.
const LIST_ELEM: u16 = 1;
const EXPR_NAME: u16 = 1;
const EXPR_DATA: u16 = 2;
const DATA_VERDICT: u16 = 2;
const VERDICT_CODE: u16 = 1;
const VERDICT_CHAIN: u16 = 2;
// The attributes of the expressions netlink-packet-netfilter types (include/uapi/linux/netfilter/nf_tables.h).
const META_DREG: u16 = 1;
const META_KEY: u16 = 2;
const META_SREG: u16 = 3;
const PAYLOAD_DREG: u16 = 1;
const PAYLOAD_BASE: u16 = 2;
const PAYLOAD_OFFSET: u16 = 3;
const PAYLOAD_LEN: u16 = 4;
const CMP_SREG: u16 = 1;
const CMP_OP: u16 = 2;
const CMP_DATA: u16 = 3;
const BITWISE_SREG: u16 = 1;
const BITWISE_DREG: u16 = 2;
const BITWISE_LEN: u16 = 3;
const BITWISE_MASK: u16 = 4;
const BITWISE_XOR: u16 = 5;
const BITWISE_OP: u16 = 6;
const LOOKUP_SET: u16 = 1;
const LOOKUP_SREG: u16 = 2;
const LOOKUP_DREG: u16 = 3;
const LOOKUP_SET_ID: u16 = 4;
const LOOKUP_FLAGS: u16 = 5;
const IMMEDIATE_DREG: u16 = 1;
const IMMEDIATE_DATA: u16 = 2;

/// Appends netlink attributes to a buffer.
pub struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Self { out }
    }

    /// An attribute holding `value`, padded to 4 bytes.
    pub fn bytes(&mut self, kind: u16, value: &[u8]) {
        let length = (4 + value.len()) as u16;
        self.out.extend_from_slice(&length.to_ne_bytes());
        self.out.extend_from_slice(&kind.to_ne_bytes());
        self.out.extend_from_slice(value);
        self.pad();
    }

    pub fn u32_be(&mut self, kind: u16, value: u32) {
        self.bytes(kind, &value.to_be_bytes());
    }

    pub fn u64_be(&mut self, kind: u16, value: u64) {
        self.bytes(kind, &value.to_be_bytes());
    }

    /// A NUL-terminated string.
    pub fn string(&mut self, kind: u16, value: &str) {
        let length = (4 + value.len() + 1) as u16;
        self.out.extend_from_slice(&length.to_ne_bytes());
        self.out.extend_from_slice(&kind.to_ne_bytes());
        self.out.extend_from_slice(value.as_bytes());
        self.out.push(0);
        self.pad();
    }

    /// A nested attribute (NLA_F_NESTED set) whose children `fill` writes.
    pub fn nested(&mut self, kind: u16, fill: impl FnOnce(&mut Self)) {
        let start = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        fill(self);
        let length = (self.out.len() - start) as u16;
        self.out[start..start + 2].copy_from_slice(&length.to_ne_bytes());
        self.out[start + 2..start + 4].copy_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
    }

    fn pad(&mut self) {
        let padded = (self.out.len() + 3) & !3;
        self.out.resize(padded, 0);
    }

    /// NFTA_DATA_VALUE inside a nested data attribute.
    fn data(&mut self, kind: u16, value: &[u8]) {
        self.nested(kind, |w| w.bytes(expr::DATA_VALUE, value));
    }

    /// The content of NFTA_RULE_EXPRESSIONS: one list element per expression. A lookup's set
    /// is `set_of`'s answer (the batch's name and id for an anonymous set).
    pub fn expressions<'e>(&mut self, exprs: &'e [Expr], set_of: impl SetOf<'e>) {
        for (index, e) in exprs.iter().enumerate() {
            self.nested(LIST_ELEM, |w| {
                w.string(EXPR_NAME, name(e));
                // notrack has no data; counter's is empty.
                if !matches!(e, Expr::Notrack) {
                    w.nested(EXPR_DATA, |w| w.expression(index, e, &set_of));
                }
            });
        }
    }

    fn expression<'e>(&mut self, index: usize, e: &'e Expr, set_of: &impl SetOf<'e>) {
        use expr::*;
        match e {
            Expr::Meta { key, dreg } => {
                self.u32_be(META_KEY, *key);
                self.u32_be(META_DREG, *dreg);
            }
            Expr::MetaSet { key, sreg } => {
                self.u32_be(META_KEY, *key);
                self.u32_be(META_SREG, *sreg);
            }
            Expr::Payload { base, offset, len, dreg } => {
                self.u32_be(PAYLOAD_DREG, *dreg);
                self.u32_be(PAYLOAD_BASE, *base);
                self.u32_be(PAYLOAD_OFFSET, *offset);
                self.u32_be(PAYLOAD_LEN, *len);
            }
            Expr::Ct { key, dreg } => {
                self.u32_be(CT_KEY, *key);
                self.u32_be(CT_DREG, *dreg);
            }
            Expr::CtSet { key, sreg } => {
                self.u32_be(CT_KEY, *key);
                self.u32_be(CT_SREG, *sreg);
            }
            Expr::Cmp { op, data } => {
                self.u32_be(CMP_SREG, REG_1);
                self.u32_be(
                    CMP_OP,
                    match op {
                        CmpOp::Eq => 0,
                        CmpOp::Ne => 1,
                        CmpOp::Lte => 3,
                        CmpOp::Gte => 5,
                    },
                );
                self.data(CMP_DATA, data);
            }
            Expr::Bitwise { len, mask, xor, with_op } => {
                self.u32_be(BITWISE_SREG, REG_1);
                self.u32_be(BITWISE_DREG, REG_1);
                if *with_op {
                    self.u32_be(BITWISE_OP, 0);
                }
                self.u32_be(BITWISE_LEN, *len);
                self.data(BITWISE_MASK, mask);
                self.data(BITWISE_XOR, xor);
            }
            Expr::Range { negate, from, to } => {
                self.u32_be(RANGE_SREG, REG_1);
                self.u32_be(RANGE_OP, u32::from(*negate));
                self.data(RANGE_FROM, from);
                self.data(RANGE_TO, to);
            }
            Expr::Byteorder { reg, len, size } => {
                self.u32_be(BYTEORDER_SREG, *reg);
                self.u32_be(BYTEORDER_DREG, *reg);
                self.u32_be(BYTEORDER_OP, 1);
                self.u32_be(BYTEORDER_LEN, *len);
                self.u32_be(BYTEORDER_SIZE, *size);
            }
            Expr::Lookup { set, set_id, dreg, negate } => {
                let (name, id) = set_of(index, set, *set_id);
                self.u32_be(LOOKUP_SREG, REG_1);
                if let Some(dreg) = dreg {
                    self.u32_be(LOOKUP_DREG, *dreg);
                }
                self.string(LOOKUP_SET, name);
                if let Some(id) = id {
                    self.u32_be(LOOKUP_SET_ID, id);
                }
                if *negate {
                    self.u32_be(LOOKUP_FLAGS, 1);
                }
            }
            Expr::Verdict { code, chain } => {
                self.u32_be(IMMEDIATE_DREG, REG_VERDICT);
                self.nested(IMMEDIATE_DATA, |w| {
                    w.nested(DATA_VERDICT, |w| {
                        w.u32_be(VERDICT_CODE, *code);
                        if let Some(chain) = chain {
                            w.string(VERDICT_CHAIN, chain);
                        }
                    })
                });
            }
            Expr::Counter | Expr::Notrack => {}
            Expr::Objref { counter } => {
                self.u32_be(OBJREF_IMM_TYPE, OBJECT_COUNTER);
                self.bytes(OBJREF_IMM_NAME, counter.as_bytes());
            }
            Expr::Limit { rate, unit, burst } => {
                self.u64_be(LIMIT_RATE, *rate);
                self.u64_be(LIMIT_UNIT, *unit);
                self.u32_be(LIMIT_BURST, *burst);
                self.u32_be(LIMIT_TYPE, 0);
                self.u32_be(LIMIT_FLAGS, 0);
            }
            Expr::Log { prefix, group, level } => {
                if let Some(prefix) = prefix {
                    self.string(LOG_PREFIX, prefix);
                }
                if let Some(group) = group {
                    self.bytes(LOG_GROUP, &group.to_be_bytes());
                }
                if let Some(level) = level {
                    self.u32_be(LOG_LEVEL, *level);
                }
            }
            Expr::Masq { flags } => {
                if let Some(flags) = flags {
                    self.u32_be(MASQ_FLAGS, *flags);
                }
            }
            Expr::Immediate { dreg, data } => {
                self.u32_be(IMMEDIATE_DREG, *dreg);
                self.data(IMMEDIATE_DATA, data);
            }
            Expr::Nat { kind, family, reg_addr_min } => {
                self.u32_be(NAT_TYPE, *kind);
                self.u32_be(NAT_FAMILY, *family);
                self.u32_be(NAT_REG_ADDR_MIN, *reg_addr_min);
            }
            Expr::Reject { kind, code } => {
                self.u32_be(REJECT_TYPE, *kind);
                self.bytes(REJECT_ICMP_CODE, &[*code]);
            }
        }
    }
}

/// The expression type's name (NFTA_EXPR_NAME).
fn name(e: &Expr) -> &'static str {
    match e {
        Expr::Meta { .. } | Expr::MetaSet { .. } => "meta",
        Expr::Payload { .. } => "payload",
        Expr::Ct { .. } | Expr::CtSet { .. } => "ct",
        Expr::Cmp { .. } => "cmp",
        Expr::Bitwise { .. } => "bitwise",
        Expr::Range { .. } => "range",
        Expr::Byteorder { .. } => "byteorder",
        Expr::Lookup { .. } => "lookup",
        Expr::Verdict { .. } | Expr::Immediate { .. } => "immediate",
        Expr::Counter => "counter",
        Expr::Objref { .. } => "objref",
        Expr::Limit { .. } => "limit",
        Expr::Log { .. } => "log",
        Expr::Masq { .. } => "masq",
        Expr::Nat { .. } => "nat",
        Expr::Notrack => "notrack",
        Expr::Reject { .. } => "reject",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{CmpOp, emit_all};

    fn every_kind() -> Vec<Expr> {
        vec![
            Expr::Meta { key: expr::META_L4PROTO, dreg: 1 },
            Expr::MetaSet { key: expr::META_MARK, sreg: 1 },
            Expr::Payload { base: expr::TRANSPORT_HEADER, offset: 2, len: 2, dreg: 9 },
            Expr::Ct { key: expr::CT_STATE, dreg: 1 },
            Expr::CtSet { key: expr::CT_MARK, sreg: 1 },
            Expr::Cmp { op: CmpOp::Eq, data: vec![6] },
            Expr::Cmp { op: CmpOp::Ne, data: vec![10, 0, 0, 1] },
            Expr::Cmp { op: CmpOp::Lte, data: vec![1, 2] },
            Expr::Cmp { op: CmpOp::Gte, data: vec![1, 2, 3] },
            Expr::Bitwise { len: 4, mask: vec![0, 1, 0, 0], xor: vec![0; 4], with_op: false },
            Expr::Bitwise { len: 4, mask: vec![255; 4], xor: vec![0, 1, 0, 0], with_op: true },
            Expr::Range { negate: true, from: vec![0, 80], to: vec![0, 90] },
            Expr::Byteorder { reg: 9, len: 2, size: 2 },
            Expr::Lookup { set: "peers".into(), set_id: None, dreg: None, negate: false },
            Expr::Lookup { set: "made".into(), set_id: Some(7), dreg: None, negate: true },
            Expr::Lookup { set: "to-wl".into(), set_id: None, dreg: Some(0), negate: false },
            Expr::Lookup { set: "__set%d".into(), set_id: None, dreg: None, negate: false },
            Expr::Verdict { code: expr::NF_ACCEPT, chain: None },
            Expr::Verdict { code: expr::NFT_JUMP, chain: Some("pi-0123456789abcdef".into()) },
            Expr::Verdict { code: expr::NFT_GOTO, chain: Some("tw-cali1".into()) },
            Expr::Counter,
            Expr::Objref { counter: "deny-0123".into() },
            Expr::Limit { rate: 10, unit: 1, burst: 10 },
            Expr::Log { prefix: Some("netplug ns/p ingress rule 0".into()), group: Some(20), level: None },
            Expr::Log { prefix: None, group: None, level: Some(4) },
            Expr::Masq { flags: None },
            Expr::Masq { flags: Some(4) },
            Expr::Immediate { dreg: 1, data: vec![10, 0, 0, 5] },
            Expr::Nat { kind: expr::NAT_DNAT, family: 2, reg_addr_min: 1 },
            Expr::Notrack,
            Expr::Reject { kind: 1, code: 3 },
        ]
    }

    #[test]
    fn writes_what_the_attribute_types_emit() {
        let exprs = every_kind();
        // The lookup at 15 is an anonymous set the batch names; "peers" was made in the batch.
        fn set_of(at: usize, set: &str, id: Option<u32>) -> (&str, Option<u32>) {
            match at {
                15 => ("__set3", Some(12)),
                _ if set == "peers" => (set, Some(2)),
                _ => (set, id),
            }
        }
        let mut expected = exprs.clone();
        for (at, e) in expected.iter_mut().enumerate() {
            if let Expr::Lookup { set, set_id, .. } = e {
                let (name, id) = set_of(at, set.as_str(), *set_id);
                let name = name.to_string();
                (*set, *set_id) = (name, id);
            }
        }
        let attributes: Vec<_> = expected.iter().map(Expr::to_attribute).collect();
        let mut written = Vec::new();
        Writer::new(&mut written).expressions(&exprs, set_of);
        assert_eq!(written, emit_all(&attributes));
    }
}
