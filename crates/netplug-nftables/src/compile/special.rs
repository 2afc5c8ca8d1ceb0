//! Matches nft encodes its own way: an ICMP type and code merged into one comparison, conntrack
//! state flags, concatenations looked up in named sets.

use super::{CompiledRule, Context, Scope, depend, lookup_set};
use crate::elements::type_names;
use crate::expr::{self, CmpOp, Expr, REG_1};
use crate::model::{Atom, Match, MatchValue, Op, Selector};
use crate::selector::Needs;
use crate::types::{Allow, CT_STATES, Value, ValueType};

pub(super) fn icmp_type_and_code(first: &Match, second: &Match) -> Option<Result<(Needs, Vec<u8>), String>> {
    let pair = match (first.key.0.as_slice(), second.key.0.as_slice()) {
        ([Selector::IcmpType], [Selector::IcmpCode]) => (ValueType::IcmpType, ValueType::IcmpCode, Needs::Icmp),
        ([Selector::Icmpv6Type], [Selector::Icmpv6Code]) => {
            (ValueType::Icmpv6Type, ValueType::Icmpv6Code, Needs::Icmpv6)
        }
        _ => return None,
    };
    let (MatchValue::One(kind), MatchValue::One(code)) = (&first.value, &second.value) else { return None };
    if first.op != Op::Eq || second.op != Op::Eq || first.mask.is_some() || second.mask.is_some() {
        return None;
    }
    let exact = |t: ValueType, atom: &Atom| match t.parse(atom, Allow::default()) {
        Ok(Value::Exact(bytes)) => Ok(bytes),
        Ok(_) => Err(format!("{atom} is not {}", t.describe())),
        Err(err) => Err(err),
    };
    Some((|| {
        let mut bytes = exact(pair.0, kind)?;
        bytes.extend(exact(pair.1, code)?);
        Ok((pair.2, bytes))
    })())
}

pub(super) fn compile_ct_state(m: &Match, exprs: &mut Vec<Expr>) -> Result<(), String> {
    let atoms: Vec<&Atom> = match &m.value {
        MatchValue::One(atom) => vec![atom],
        MatchValue::List(atoms) => atoms.iter().collect(),
        MatchValue::Set(_) => return Err("ct state takes states, not a set".into()),
    };
    if atoms.is_empty() {
        return Err("the list of states is empty".into());
    }
    let mut bits = 0u32;
    for atom in &atoms {
        let Value::Exact(bytes) = ValueType::CtState.parse(atom, Allow::default())? else { unreachable!() };
        bits |= u32::from_ne_bytes(bytes.try_into().expect("4 bytes"));
    }
    exprs.push(Expr::Ct { key: expr::CT_STATE, dreg: REG_1 });
    match m.op {
        Op::Eq => {
            exprs.push(Expr::Bitwise { len: 4, mask: bits.to_ne_bytes().to_vec(), xor: vec![0; 4], with_op: false });
            exprs.push(Expr::Cmp { op: CmpOp::Ne, data: vec![0; 4] });
        }
        Op::Ne if atoms.len() == 1 => exprs.push(Expr::Cmp { op: CmpOp::Ne, data: bits.to_ne_bytes().to_vec() }),
        Op::Ne => {
            let names: Vec<&str> = CT_STATES.iter().map(|(name, _)| *name).collect();
            return Err(format!("ct state != takes one state ({})", names.join(", ")));
        }
    }
    Ok(())
}

pub(super) fn compile_concatenation(
    scope: &Scope,
    ctx: &mut Context,
    m: &Match,
    out: &mut CompiledRule,
) -> Result<(), String> {
    let MatchValue::Set(reference) = &m.value else {
        return Err("a concatenation is looked up in a named set ({\"set\": \"name\"})".into());
    };
    let mut types = Vec::new();
    for selector in &m.key.0 {
        types.push(
            selector.data_type().ok_or_else(|| format!("{} cannot be part of a concatenation", selector.name()))?,
        );
    }
    let set = lookup_set(scope, &reference.set)?;
    if set.key.0 != types {
        return Err(format!("set \"{}\" holds {}, not {}", reference.set, type_names(&set.key.0), type_names(&types)));
    }
    for selector in &m.key.0 {
        depend(ctx, selector.needs(), &mut out.exprs)?;
    }
    let mut offset = 0;
    for selector in &m.key.0 {
        let reg = expr::register_at((offset / 4) as u32);
        out.exprs.push(selector.load(reg));
        // An interval set compares fields as big-endian numbers: host-order ones are converted.
        if set.interval() {
            match selector.value_type() {
                ValueType::Proto => out.exprs.push(Expr::Byteorder { reg, len: 1, size: 2 }),
                ValueType::Mark => out.exprs.push(Expr::Byteorder { reg, len: 4, size: 4 }),
                _ => {}
            }
        }
        offset += crate::elements::padded(selector.value_type().width());
    }
    out.exprs.push(Expr::Lookup { set: reference.set.clone(), set_id: None, dreg: None, negate: m.op == Op::Ne });
    Ok(())
}
