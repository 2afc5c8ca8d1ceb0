//! Rules into nf_tables expressions, the way nft 1.0 linearizes the same rule: the protocol
//! dependency it inserts before a header field (`meta nfproto ipv4` before `ip saddr` in an inet
//! table), prefixes as a shorter load or a mask, ranges, anonymous sets for `{ ... }`, flag
//! matches for `ct state`, registers for concatenations.

mod actions;
mod special;

use std::collections::{HashMap, HashSet};

pub use actions::check_target;
use actions::{compile_statement, compile_verdict};
use special::{compile_concatenation, compile_ct_state, icmp_type_and_code};

use crate::elements::{Encoded, KeyLayout, type_names};
use crate::expr::{self, CmpOp, Expr, REG_1};
use crate::model::{Family, Map, Match, MatchValue, Op, Rule, Selector, Set};
use crate::selector::{IPPROTO_ICMP, IPPROTO_ICMPV6, NFPROTO_IPV4, NFPROTO_IPV6, Needs, Source};
use crate::types::{Allow, Value, ValueType, prefix_mask};

/// What rules may refer to.
pub struct Scope<'a> {
    pub family: Family,
    /// Chain name → whether it is a base chain.
    pub chains: HashMap<&'a str, bool>,
    pub sets: HashMap<&'a str, &'a Set>,
    pub maps: HashMap<&'a str, &'a Map>,
    pub counters: HashSet<&'a str>,
}

/// The name the kernel completes for an anonymous set (`__set0`, `__set1`, ...).
pub const ANONYMOUS_SET: &str = "__set%d";

/// A rule's expressions and the anonymous sets its lookups use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledRule {
    pub exprs: Vec<Expr>,
    /// Each anonymous set with the index of the lookup in `exprs` that uses it.
    pub anonymous: Vec<(usize, AnonymousSet)>,
    pub userdata: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnonymousSet {
    pub selector: Selector,
    pub interval: bool,
    pub elements: Vec<Encoded>,
}

/// The protocols established so far in the rule (by an explicit match or an inserted dependency).
#[derive(Default)]
pub(super) struct Context {
    nfproto: Option<u8>,
    l4proto: Option<u8>,
}

pub fn compile_rule(scope: &Scope, rule: &Rule) -> Result<CompiledRule, String> {
    let mut out = CompiledRule { exprs: Vec::new(), anonymous: Vec::new(), userdata: None };
    if rule.matches.is_empty() && rule.statements.is_empty() && rule.verdict.is_none() {
        return Err("the rule is empty: give it a match, a statement or a verdict".into());
    }
    let mut ctx = Context {
        nfproto: match scope.family {
            Family::Inet => None,
            Family::Ip => Some(NFPROTO_IPV4),
            Family::Ip6 => Some(NFPROTO_IPV6),
        },
        l4proto: None,
    };
    let mut i = 0;
    while i < rule.matches.len() {
        let m = &rule.matches[i];
        let at = |err: String| {
            let name = m.key.0.iter().map(|s| s.name()).collect::<Vec<_>>().join(" . ");
            format!("match {} ({name}): {err}", i + 1)
        };
        // nft merges an exact ICMP type and code into one two-byte comparison.
        if let Some(next) = rule.matches.get(i + 1)
            && let Some(merged) = icmp_type_and_code(m, next)
        {
            let (needs, bytes) = merged.map_err(at)?;
            depend(&mut ctx, needs, &mut out.exprs).map_err(at)?;
            out.exprs.push(Expr::Payload { base: expr::TRANSPORT_HEADER, offset: 0, len: 2, dreg: REG_1 });
            out.exprs.push(Expr::Cmp { op: CmpOp::Eq, data: bytes });
            i += 2;
            continue;
        }
        compile_match(scope, &mut ctx, m, &mut out).map_err(at)?;
        i += 1;
    }
    for (i, statement) in rule.statements.iter().enumerate() {
        compile_statement(scope, statement, &mut out.exprs).map_err(|err| format!("statement {}: {err}", i + 1))?;
    }
    if let Some(verdict) = &rule.verdict {
        compile_verdict(scope, verdict, &mut out.exprs).map_err(|err| format!("verdict: {err}"))?;
    }
    if let Some(comment) = &rule.comment {
        // nft has no escapes: a quote would end the comment when the ruleset is read back.
        if comment.len() > 127 || comment.contains(['\0', '"']) {
            return Err(format!("comment {comment:?} is longer than 127 bytes or holds a quote or NUL"));
        }
        let mut text = comment.as_bytes().to_vec();
        text.push(0);
        out.userdata = Some(crate::selector::tlv(0, &text)); // NFTNL_UDATA_RULE_COMMENT
    }
    Ok(out)
}

/// Inserts what nft inserts before a header field of a protocol not yet established.
pub(super) fn depend(ctx: &mut Context, needs: Needs, exprs: &mut Vec<Expr>) -> Result<(), String> {
    let (family, l4) = match needs {
        Needs::Nothing => return Ok(()),
        Needs::Ipv4 => (NFPROTO_IPV4, None),
        Needs::Ipv6 => (NFPROTO_IPV6, None),
        Needs::Icmp => (NFPROTO_IPV4, Some(IPPROTO_ICMP)),
        Needs::Icmpv6 => (NFPROTO_IPV6, Some(IPPROTO_ICMPV6)),
    };
    if let Some(l4) = l4 {
        match ctx.l4proto {
            Some(known) if known == l4 => return Ok(()),
            Some(known) => return Err(format!("the rule already matched protocol {known}, not {l4}")),
            None => {}
        }
    }
    match ctx.nfproto {
        Some(known) if known == family => {}
        Some(_) => return Err("the rule already matched the other IP family".into()),
        None => {
            exprs.push(Expr::Meta { key: expr::META_NFPROTO, dreg: REG_1 });
            exprs.push(Expr::Cmp { op: CmpOp::Eq, data: vec![family] });
            ctx.nfproto = Some(family);
        }
    }
    if let Some(l4) = l4 {
        exprs.push(Expr::Meta { key: expr::META_L4PROTO, dreg: REG_1 });
        exprs.push(Expr::Cmp { op: CmpOp::Eq, data: vec![l4] });
        ctx.l4proto = Some(l4);
    }
    Ok(())
}

fn cmp_op(op: Op) -> CmpOp {
    match op {
        Op::Eq => CmpOp::Eq,
        Op::Ne => CmpOp::Ne,
    }
}

fn compile_match(scope: &Scope, ctx: &mut Context, m: &Match, out: &mut CompiledRule) -> Result<(), String> {
    let selectors = &m.key.0;
    if selectors.is_empty() {
        return Err("the key names no selector".into());
    }
    if m.mask.is_some() && selectors.as_slice() != [Selector::Mark] {
        return Err("only meta mark takes a mask".into());
    }
    if selectors.len() > 1 {
        return compile_concatenation(scope, ctx, m, out);
    }
    let selector = selectors[0];
    let value_type = selector.value_type();
    if selector == Selector::CtState {
        return compile_ct_state(m, &mut out.exprs);
    }
    let allow = Allow {
        prefix: matches!(value_type, ValueType::Ipv4 | ValueType::Ipv6),
        range: matches!(value_type, ValueType::Ipv4 | ValueType::Ipv6 | ValueType::Service),
        wildcard: value_type == ValueType::Ifname,
    };
    match &m.value {
        MatchValue::Set(reference) => {
            let set = lookup_set(scope, &reference.set)?;
            let wanted =
                selector.data_type().ok_or_else(|| format!("{} cannot be looked up in a set", selector.name()))?;
            if set.key.0 != [wanted] {
                return Err(format!(
                    "set \"{}\" holds {}, not {}",
                    reference.set,
                    type_names(&set.key.0),
                    wanted.name()
                ));
            }
            depend(ctx, selector.needs(), &mut out.exprs)?;
            out.exprs.push(selector.load(REG_1));
            out.exprs.push(Expr::Lookup {
                set: reference.set.clone(),
                set_id: None,
                dreg: None,
                negate: m.op == Op::Ne,
            });
        }
        MatchValue::List(atoms) => {
            if m.mask.is_some() {
                return Err("a mask takes one value".into());
            }
            if !selector.takes_anonymous_set() {
                return Err(format!("{} takes one value, not a list", selector.name()));
            }
            let mut values = Vec::new();
            for atom in atoms {
                let value = value_type.parse(atom, Allow { wildcard: false, ..allow })?;
                if !values.contains(&value) {
                    values.push(value);
                }
            }
            match values.len() {
                0 => return Err("the list is empty".into()),
                // nft turns a one-element set into a plain comparison.
                1 => return compile_value(ctx, selector, m, values.remove(0), &mut out.exprs),
                _ => {}
            }
            let interval = values.iter().any(|v| matches!(v, Value::Prefix(..) | Value::Range(..)));
            let layout = KeyLayout { fields: vec![value_type], interval };
            let mut elements: Vec<Encoded> = values
                .iter()
                .map(|value| {
                    if interval {
                        let (first, last) = value.bounds();
                        Encoded::Interval { start: first, end: crate::types::successor(&last) }
                    } else {
                        let Value::Exact(bytes) = value else { unreachable!() };
                        Encoded::Key(bytes.clone())
                    }
                })
                .collect();
            if layout.interval {
                elements.sort();
                if elements.windows(2).any(|w| w[0].overlaps(&w[1])) {
                    return Err("the list's prefixes or ranges overlap".into());
                }
            }
            depend(ctx, selector.needs(), &mut out.exprs)?;
            out.exprs.push(selector.load(REG_1));
            let index = out.exprs.len();
            out.exprs.push(Expr::Lookup {
                set: ANONYMOUS_SET.into(),
                set_id: None,
                dreg: None,
                negate: m.op == Op::Ne,
            });
            out.anonymous.push((index, AnonymousSet { selector, interval, elements }));
        }
        MatchValue::One(atom) => {
            let value = value_type.parse(atom, allow)?;
            compile_value(ctx, selector, m, value, &mut out.exprs)?;
        }
    }
    if m.op == Op::Eq
        && let MatchValue::One(atom) = &m.value
        && m.mask.is_none()
    {
        match selector {
            Selector::Nfproto => ctx.nfproto = value_type.parse(atom, allow).ok().and_then(first_byte),
            Selector::L4proto => ctx.l4proto = value_type.parse(atom, allow).ok().and_then(first_byte),
            _ => {}
        }
    }
    Ok(())
}

fn first_byte(value: Value) -> Option<u8> {
    match value {
        Value::Exact(bytes) => bytes.first().copied(),
        _ => None,
    }
}

fn compile_value(
    ctx: &mut Context,
    selector: Selector,
    m: &Match,
    value: Value,
    exprs: &mut Vec<Expr>,
) -> Result<(), String> {
    depend(ctx, selector.needs(), exprs)?;
    let op = cmp_op(m.op);
    match value {
        Value::Exact(bytes) => {
            exprs.push(selector.load(REG_1));
            if let Some(mask) = &m.mask {
                let Value::Exact(mask) = ValueType::Mark.parse(mask, Allow::default())? else { unreachable!() };
                exprs.push(Expr::Bitwise { len: 4, mask, xor: vec![0; 4], with_op: true });
            }
            exprs.push(Expr::Cmp { op, data: bytes });
        }
        Value::Wildcard(prefix) => {
            exprs.push(selector.load(REG_1));
            exprs.push(Expr::Cmp { op, data: prefix });
        }
        Value::Prefix(addr, len) => {
            let Source::Payload { base, offset, len: full } = selector.source() else { unreachable!() };
            if len > 0 && len % 8 == 0 {
                let bytes = (len / 8) as usize;
                exprs.push(Expr::Payload { base, offset, len: bytes as u32, dreg: REG_1 });
                exprs.push(Expr::Cmp { op, data: addr[..bytes].to_vec() });
            } else {
                exprs.push(Expr::Payload { base, offset, len: full, dreg: REG_1 });
                exprs.push(Expr::Bitwise {
                    len: full,
                    mask: prefix_mask(full as usize, len),
                    xor: vec![0; full as usize],
                    with_op: false,
                });
                exprs.push(Expr::Cmp { op, data: addr });
            }
        }
        Value::Range(from, to) => {
            exprs.push(selector.load(REG_1));
            match m.op {
                Op::Eq => {
                    exprs.push(Expr::Cmp { op: CmpOp::Gte, data: from });
                    exprs.push(Expr::Cmp { op: CmpOp::Lte, data: to });
                }
                Op::Ne => exprs.push(Expr::Range { negate: true, from, to }),
            }
        }
    }
    Ok(())
}

pub(super) fn lookup_set<'a>(scope: &Scope<'a>, name: &str) -> Result<&'a Set, String> {
    if scope.maps.contains_key(name) {
        return Err(format!("\"{name}\" is a map; a match looks up a set"));
    }
    scope.sets.get(name).copied().ok_or_else(|| format!("there is no set \"{name}\""))
}
