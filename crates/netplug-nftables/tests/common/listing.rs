//! `nft -j list table` read back into a description, and descriptions brought to one canonical
//! form so that two that mean the same ruleset compare equal (element order, `tcp` against 6, a
//! one-element list against its value, the protocol dependency nft hides when it lists a rule).

use std::collections::{BTreeMap, BTreeSet};

use netplug_nftables::elements::{Encoded, KeyLayout};
use netplug_nftables::model::*;
use netplug_nftables::types::{Allow, Value, ValueType};
use serde_json::Value as Json;

/// Reads nft's JSON listing of one table back into a description.
pub fn table_from_listing(listing: &Json) -> Table {
    let items = listing["nftables"].as_array().expect("an nftables array");
    let mut table: Option<Table> = None;
    let mut rules: Vec<(String, Rule)> = Vec::new();
    for item in items {
        let (kind, body) = item.as_object().unwrap().iter().next().unwrap();
        match kind.as_str() {
            "metainfo" => {}
            "table" => {
                table = Some(Table {
                    family: serde_json::from_value(body["family"].clone()).unwrap(),
                    name: body["name"].as_str().unwrap().into(),
                    chains: vec![],
                    sets: vec![],
                    maps: vec![],
                    counters: vec![],
                })
            }
            "chain" => {
                let base = body.get("hook").map(|hook| BaseChain {
                    kind: serde_json::from_value(body["type"].clone()).unwrap(),
                    hook: serde_json::from_value(hook.clone()).unwrap(),
                    priority: body["prio"].as_i64().unwrap() as i32,
                    policy: serde_json::from_value(body["policy"].clone()).unwrap(),
                });
                let name = body["name"].as_str().unwrap().to_string();
                table.as_mut().unwrap().chains.push(Chain { name, base, rules: vec![] });
            }
            "counter" => table.as_mut().unwrap().counters.push(body["name"].as_str().unwrap().into()),
            "set" => {
                let key = key_type(&body["type"]);
                let flags = match body.get("flags") {
                    Some(flags) if flags.as_array().unwrap().iter().any(|f| f == "interval") => vec![SetFlag::Interval],
                    _ => vec![],
                };
                let elements =
                    body.get("elem").map(|e| e.as_array().unwrap().iter().map(element).collect()).unwrap_or_default();
                let name = body["name"].as_str().unwrap().into();
                table.as_mut().unwrap().sets.push(Set { name, key, flags, elements });
            }
            "map" => {
                assert_eq!(body["map"], "verdict");
                let elements = body
                    .get("elem")
                    .map(|e| {
                        e.as_array()
                            .unwrap()
                            .iter()
                            .map(|pair| MapElement { key: element(&pair[0]), verdict: verdict(&pair[1]).unwrap() })
                            .collect()
                    })
                    .unwrap_or_default();
                let name = body["name"].as_str().unwrap().into();
                table.as_mut().unwrap().maps.push(Map { name, key: key_type(&body["type"]), elements });
            }
            "rule" => rules.push((body["chain"].as_str().unwrap().into(), rule(body))),
            other => panic!("unexpected {other} in the listing"),
        }
    }
    let mut table = table.expect("a table in the listing");
    for (chain, rule) in rules {
        table.chains.iter_mut().find(|c| c.name == chain).unwrap().rules.push(rule);
    }
    table
}

fn key_type(json: &Json) -> KeyType {
    serde_json::from_value(json.clone()).unwrap()
}

fn atom(json: &Json) -> Atom {
    match json {
        Json::Number(n) => Atom::Number(n.as_u64().unwrap()),
        Json::String(s) => Atom::Text(s.clone()),
        Json::Object(o) if o.contains_key("prefix") => {
            let prefix = &o["prefix"];
            let addr = match &prefix["addr"] {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            };
            Atom::Text(format!("{addr}/{}", prefix["len"]))
        }
        Json::Object(o) if o.contains_key("range") => {
            let [from, to] = [&o["range"][0], &o["range"][1]].map(|v| match v {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            });
            Atom::Text(format!("{from}-{to}"))
        }
        other => panic!("unexpected value {other}"),
    }
}

fn element(json: &Json) -> Element {
    match json.get("concat") {
        Some(parts) => Element::Concat(parts.as_array().unwrap().iter().map(atom).collect()),
        None => Element::One(atom(json)),
    }
}

fn verdict(json: &Json) -> Option<Verdict> {
    let (kind, body) = json.as_object()?.iter().next()?;
    Some(match kind.as_str() {
        "accept" => Verdict::Simple(SimpleVerdict::Accept),
        "drop" => Verdict::Simple(SimpleVerdict::Drop),
        "return" => Verdict::Simple(SimpleVerdict::Return),
        "continue" => Verdict::Simple(SimpleVerdict::Continue),
        "jump" => Verdict::Jump { jump: body["target"].as_str()?.into() },
        "goto" => Verdict::Goto { goto: body["target"].as_str()?.into() },
        "vmap" => Verdict::Vmap {
            vmap: Vmap {
                key: serde_json::from_value(body["key"]["meta"]["key"].clone()).ok()?,
                map: body["data"].as_str()?.trim_start_matches('@').into(),
            },
        },
        _ => return None,
    })
}

/// The selectors a JSON left-hand side stands for: `tcp dport` is `meta l4proto tcp` and `th dport`.
fn selectors(json: &Json) -> (Vec<Selector>, Option<Atom>) {
    if let Some(parts) = json.get("concat") {
        let mut all = Vec::new();
        for part in parts.as_array().unwrap() {
            let (mut s, proto) = selectors(part);
            assert!(proto.is_none(), "a protocol inside a concatenation");
            all.append(&mut s);
        }
        return (all, None);
    }
    if let Some(meta) = json.get("meta") {
        let name = match meta["key"].as_str().unwrap() {
            key @ ("iifname" | "oifname") => key.to_string(),
            key => format!("meta {key}"),
        };
        return (vec![selector(&name)], None);
    }
    if let Some(ct) = json.get("ct") {
        return (vec![selector(&format!("ct {}", ct["key"].as_str().unwrap()))], None);
    }
    let payload = &json["payload"];
    let protocol = payload["protocol"].as_str().expect("a payload by protocol and field");
    let field = payload["field"].as_str().unwrap();
    match protocol {
        "ip" | "ip6" | "th" | "icmp" | "icmpv6" => (vec![selector(&format!("{protocol} {field}"))], None),
        l4 => (vec![selector(&format!("th {field}"))], Some(Atom::Text(l4.into()))),
    }
}

fn selector(name: &str) -> Selector {
    serde_json::from_value(Json::String(name.into())).unwrap_or_else(|_| panic!("unknown selector {name}"))
}

fn rule(body: &Json) -> Rule {
    let mut rule = Rule { matches: vec![], statements: vec![], verdict: None, comment: None };
    rule.comment = body.get("comment").and_then(|c| c.as_str()).map(String::from);
    for expr in body["expr"].as_array().unwrap() {
        let (kind, value) = expr.as_object().unwrap().iter().next().unwrap();
        match kind.as_str() {
            "match" => {
                let op = match value["op"].as_str().unwrap() {
                    "==" | "in" => Op::Eq,
                    "!=" => Op::Ne,
                    other => panic!("op {other}"),
                };
                let mut left = &value["left"];
                let mut mask = None;
                if let Some(and) = left.get("&") {
                    left = &and[0];
                    mask = Some(atom(&and[1]));
                }
                let (key, protocol) = selectors(left);
                if let Some(proto) = protocol {
                    rule.matches.push(Match {
                        key: Key(vec![Selector::L4proto]),
                        op: Op::Eq,
                        mask: None,
                        value: MatchValue::One(proto),
                    });
                }
                let right = &value["right"];
                let mut value = match right {
                    Json::String(s) if s.starts_with('@') => MatchValue::Set(SetRef { set: s[1..].into() }),
                    Json::Array(items) => MatchValue::List(items.iter().map(atom).collect()),
                    Json::Object(o) if o.contains_key("set") => {
                        MatchValue::List(o["set"].as_array().unwrap().iter().map(atom).collect())
                    }
                    other => MatchValue::One(atom(other)),
                };
                // A mark compared under a prefix mask lists as a prefix of the mark.
                if key == [Selector::Mark]
                    && let MatchValue::One(Atom::Text(text)) = &value
                    && let Some((addr, len)) = text.split_once('/')
                {
                    let len: u32 = len.parse().unwrap();
                    mask = Some(Atom::Number(u64::from(u32::MAX.checked_shl(32 - len).unwrap_or(0))));
                    value = MatchValue::One(Atom::Number(addr.parse().unwrap()));
                }
                rule.matches.push(Match { key: Key(key), op, mask, value });
            }
            "counter" => rule.statements.push(Statement::Counter(Counter { name: value.as_str().map(String::from) })),
            "limit" => rule.statements.push(Statement::Limit(Limit {
                rate: value["rate"].as_u64().unwrap(),
                per: serde_json::from_value(value["per"].clone()).unwrap(),
                burst: value.get("burst").and_then(|b| b.as_u64()).unwrap_or(5) as u32,
            })),
            "log" => rule.statements.push(Statement::Log(Log {
                prefix: value.get("prefix").and_then(|p| p.as_str()).map(String::from),
                group: value.get("group").and_then(|g| g.as_u64()).map(|g| g as u16),
                level: value.get("level").map(|l| serde_json::from_value(l.clone()).unwrap()),
            })),
            "mangle" => {
                let operation = value["value"].as_object().unwrap();
                let (op, args) = operation.iter().next().unwrap();
                let bits = args[1].as_u64().unwrap() as u32;
                rule.statements.push(Statement::Mark(match op.as_str() {
                    "|" => MarkChange::Or(bits),
                    "&" => MarkChange::Clear(!bits),
                    other => panic!("mangle {other}"),
                }));
            }
            "masquerade" => rule.statements.push(Statement::Masquerade(Masquerade {
                fully_random: value.get("flags").is_some_and(|f| f == "fully-random"),
            })),
            "dnat" => {
                rule.statements.push(Statement::Dnat(NatAddress { to: value["addr"].as_str().unwrap().to_string() }))
            }
            "snat" => {
                rule.statements.push(Statement::Snat(NatAddress { to: value["addr"].as_str().unwrap().to_string() }))
            }
            "notrack" => rule.statements.push(Statement::Notrack(Empty {})),
            "reject" => rule.statements.push(Statement::Reject(Empty {})),
            _ => rule.verdict = Some(verdict(expr).unwrap_or_else(|| panic!("unexpected expression {expr}"))),
        }
    }
    rule
}

/// A description in one canonical form.
#[derive(Debug, PartialEq, Eq)]
pub struct Canonical {
    family: Family,
    name: String,
    chains: BTreeMap<String, (Option<BaseChain>, Vec<CanonicalRule>)>,
    sets: BTreeMap<String, (KeyType, bool, BTreeSet<Encoded>)>,
    maps: BTreeMap<String, (KeyType, BTreeMap<Encoded, Verdict>)>,
    counters: BTreeSet<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct CanonicalRule {
    matches: Vec<(Vec<Selector>, Op, Option<Value>, CanonicalValue)>,
    statements: Vec<Statement>,
    verdict: Option<Verdict>,
    comment: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
enum CanonicalValue {
    Set(String),
    One(Value),
    List(BTreeSet<Value>),
}

const ALL: Allow = Allow { prefix: true, range: true, wildcard: true };

pub fn canonical(table: &Table) -> Canonical {
    Canonical {
        family: table.family,
        name: table.name.clone(),
        chains: table
            .chains
            .iter()
            .map(|c| (c.name.clone(), (c.base, c.rules.iter().map(canonical_rule).collect())))
            .collect(),
        sets: table
            .sets
            .iter()
            .map(|s| {
                let layout = KeyLayout::of(&s.key, s.interval());
                let elements = s.elements.iter().map(|e| layout.encode(e).unwrap()).collect();
                (s.name.clone(), (s.key.clone(), s.interval(), elements))
            })
            .collect(),
        maps: table
            .maps
            .iter()
            .map(|m| {
                let layout = KeyLayout::of(&m.key, false);
                let elements = m.elements.iter().map(|e| (layout.encode(&e.key).unwrap(), e.verdict.clone())).collect();
                (m.name.clone(), (m.key.clone(), elements))
            })
            .collect(),
        counters: table.counters.iter().cloned().collect(),
    }
}

fn family_needed(selector: Selector) -> Option<(u8, Option<u8>)> {
    match selector {
        Selector::IpSaddr | Selector::IpDaddr => Some((2, None)),
        Selector::Ip6Saddr | Selector::Ip6Daddr => Some((10, None)),
        Selector::IcmpType | Selector::IcmpCode => Some((2, Some(1))),
        Selector::Icmpv6Type | Selector::Icmpv6Code => Some((10, Some(58))),
        _ => None,
    }
}

fn canonical_rule(rule: &Rule) -> CanonicalRule {
    let mut matches = Vec::new();
    for (i, m) in rule.matches.iter().enumerate() {
        let later = &rule.matches[i + 1..];
        let needed = |f: &dyn Fn((u8, Option<u8>)) -> bool| {
            later.iter().flat_map(|l| l.key.0.iter()).filter_map(|s| family_needed(*s)).any(f)
        };
        // nft lists a family or protocol match that a later header field depends on as that
        // dependency, and so hides it.
        if m.op == Op::Eq
            && m.key.0.len() == 1
            && let MatchValue::One(atom) = &m.value
        {
            let selector = m.key.0[0];
            if let Ok(Value::Exact(bytes)) = selector.value_type().parse(atom, ALL) {
                if selector == Selector::Nfproto && needed(&|(family, _)| family == bytes[0]) {
                    continue;
                }
                if selector == Selector::L4proto && needed(&|(_, l4)| l4 == Some(bytes[0])) {
                    continue;
                }
            }
        }
        let value_type = m.key.0[0].value_type();
        let parse = |atom: &Atom| value_type.parse(atom, ALL).unwrap_or_else(|e| panic!("{e}"));
        let value = match &m.value {
            MatchValue::Set(set) => CanonicalValue::Set(set.set.clone()),
            MatchValue::One(atom) => CanonicalValue::One(parse(atom)),
            MatchValue::List(atoms) if atoms.len() == 1 => CanonicalValue::One(parse(&atoms[0])),
            MatchValue::List(atoms) => CanonicalValue::List(atoms.iter().map(parse).collect()),
        };
        let mask = m.mask.as_ref().map(|mask| ValueType::Mark.parse(mask, ALL).unwrap());
        matches.push((m.key.0.clone(), m.op, mask, value));
    }
    let statements = rule
        .statements
        .iter()
        .map(|s| match s {
            Statement::Log(log) if log.level == Some(LogLevel::Warn) => {
                Statement::Log(Log { level: None, ..log.clone() })
            }
            other => other.clone(),
        })
        .collect();
    CanonicalRule { matches, statements, verdict: rule.verdict.clone(), comment: rule.comment.clone() }
}
