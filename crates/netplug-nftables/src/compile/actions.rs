//! The statements and verdicts of a rule, as nft writes them.

use std::net::IpAddr;

use super::Scope;
use crate::elements::type_names;
use crate::expr::{self, Expr, REG_1};
use crate::model::{DataType, Family, MarkChange, SimpleVerdict, Statement, Verdict, VmapKey};

pub(super) fn compile_statement(scope: &Scope, statement: &Statement, exprs: &mut Vec<Expr>) -> Result<(), String> {
    match statement {
        Statement::Counter(counter) => match &counter.name {
            None => exprs.push(Expr::Counter),
            Some(name) if scope.counters.contains(name.as_str()) => exprs.push(Expr::Objref { counter: name.clone() }),
            Some(name) => return Err(format!("there is no counter \"{name}\"")),
        },
        Statement::Limit(limit) => {
            if limit.rate == 0 {
                return Err("limit rate 0 lets nothing through; use a higher rate".into());
            }
            exprs.push(Expr::Limit { rate: limit.rate, unit: limit.per.seconds(), burst: limit.burst });
        }
        Statement::Log(log) => {
            if let Some(prefix) = &log.prefix
                && (prefix.len() > 127 || prefix.contains(['\0', '"']))
            {
                return Err(format!("log prefix \"{prefix}\" is longer than 127 bytes or holds a quote or NUL"));
            }
            if log.group.is_some() && log.level.is_some() {
                return Err("log takes a group (NFLOG) or a level (kernel log), not both".into());
            }
            exprs.push(Expr::Log {
                prefix: log.prefix.clone(),
                group: log.group,
                level: log.level.map(|l| l.number()),
            });
        }
        Statement::Mark(change) => {
            let (mask, xor) = match change {
                MarkChange::Or(bits) => (!bits, *bits),
                MarkChange::Clear(bits) => (!bits, 0),
            };
            exprs.push(Expr::Meta { key: expr::META_MARK, dreg: REG_1 });
            exprs.push(Expr::Bitwise {
                len: 4,
                mask: mask.to_ne_bytes().to_vec(),
                xor: xor.to_ne_bytes().to_vec(),
                with_op: true,
            });
            exprs.push(Expr::MetaSet { key: expr::META_MARK, sreg: REG_1 });
        }
        Statement::Masquerade(masq) => {
            // NF_NAT_RANGE_PROTO_RANDOM_FULLY
            exprs.push(Expr::Masq { flags: masq.fully_random.then_some(0x10) });
        }
        Statement::Dnat(nat) => compile_nat(scope, "dnat", expr::NAT_DNAT, &nat.to, exprs)?,
        Statement::Snat(nat) => compile_nat(scope, "snat", expr::NAT_SNAT, &nat.to, exprs)?,
        Statement::Notrack(_) => exprs.push(Expr::Notrack),
        Statement::CtMark(change) => {
            exprs.push(Expr::Ct { key: expr::CT_MARK, dreg: REG_1 });
            exprs.push(Expr::Bitwise {
                len: 4,
                mask: (!change.clear).to_ne_bytes().to_vec(),
                xor: change.or.to_ne_bytes().to_vec(),
                with_op: true,
            });
            exprs.push(Expr::CtSet { key: expr::CT_MARK, sreg: REG_1 });
        }
        Statement::Reject(_) => exprs.push(match scope.family {
            // NFT_REJECT_ICMPX_UNREACH, NFT_REJECT_ICMPX_PORT_UNREACH
            Family::Inet => Expr::Reject { kind: 2, code: 1 },
            // NFT_REJECT_ICMP_UNREACH with ICMP_PORT_UNREACH / ICMPV6_PORT_UNREACH
            Family::Ip => Expr::Reject { kind: 0, code: 3 },
            Family::Ip6 => Expr::Reject { kind: 0, code: 4 },
        }),
    }
    Ok(())
}

/// A NAT to one address: the address loaded into a register, then the nat expression of its family.
fn compile_nat(scope: &Scope, name: &str, kind: u32, to: &str, exprs: &mut Vec<Expr>) -> Result<(), String> {
    let Ok(address) = to.parse::<IpAddr>() else {
        return Err(format!("{name} to \"{to}\" is not an IP address"));
    };
    let (family, data) = match address {
        IpAddr::V4(v4) => (Family::Ip, v4.octets().to_vec()),
        IpAddr::V6(v6) => (Family::Ip6, v6.octets().to_vec()),
    };
    if scope.family != Family::Inet && scope.family != family {
        return Err(format!("{name} to {address} in a table of family {}", scope.family.name()));
    }
    exprs.push(Expr::Immediate { dreg: REG_1, data });
    exprs.push(Expr::Nat { kind, family: u32::from(family.nfproto()), reg_addr_min: REG_1 });
    Ok(())
}

pub(super) fn compile_verdict(scope: &Scope, verdict: &Verdict, exprs: &mut Vec<Expr>) -> Result<(), String> {
    match verdict {
        Verdict::Simple(simple) => exprs.push(Expr::Verdict {
            code: match simple {
                SimpleVerdict::Accept => expr::NF_ACCEPT,
                SimpleVerdict::Drop => expr::NF_DROP,
                SimpleVerdict::Return => expr::NFT_RETURN,
                SimpleVerdict::Continue => expr::NFT_CONTINUE,
            },
            chain: None,
        }),
        Verdict::Jump { jump: chain } | Verdict::Goto { goto: chain } => {
            check_target(scope, chain)?;
            let code = if matches!(verdict, Verdict::Jump { .. }) { expr::NFT_JUMP } else { expr::NFT_GOTO };
            exprs.push(Expr::Verdict { code, chain: Some(chain.clone()) });
        }
        Verdict::Vmap { vmap } => {
            let Some(map) = scope.maps.get(vmap.map.as_str()) else {
                return Err(format!("there is no map \"{}\"", vmap.map));
            };
            if map.key.0 != [DataType::Ifname] {
                return Err(format!("map \"{}\" is keyed by {}, not ifname", vmap.map, type_names(&map.key.0)));
            }
            let key = match vmap.key {
                VmapKey::Iifname => expr::META_IIFNAME,
                VmapKey::Oifname => expr::META_OIFNAME,
            };
            exprs.push(Expr::Meta { key, dreg: REG_1 });
            exprs.push(Expr::Lookup {
                set: vmap.map.clone(),
                set_id: None,
                dreg: Some(expr::REG_VERDICT),
                negate: false,
            });
        }
    }
    Ok(())
}

/// A jump or goto target: a regular chain of the table.
pub fn check_target(scope: &Scope, chain: &str) -> Result<(), String> {
    match scope.chains.get(chain) {
        None => Err(format!("there is no chain \"{chain}\"")),
        Some(true) => Err(format!("\"{chain}\" is a base chain; jump and goto go to regular chains")),
        Some(false) => Ok(()),
    }
}
