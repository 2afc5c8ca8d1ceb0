//! A description checked whole before anything reaches the kernel: names, references, types and
//! values, every rule compiled and every element encoded. An error names the object and the
//! field; nothing half-written is left behind.

use std::collections::{HashMap, HashSet};

use crate::compile::{CompiledRule, Scope, check_target, compile_rule};
use crate::elements::{Encoded, KeyLayout, type_names};
use crate::error::{NftError, Result};
use crate::model::{BaseChain, ChainType, Element, Hook, KeyType, Map, Rule, Set, Table, Verdict};

/// A table ready to be written.
pub struct Checked<'a> {
    pub table: &'a Table,
    /// Per chain (in the table's order), its rules compiled; by `check_against`, only those of
    /// chains whose rules differ from the committed table's (the others' are empty).
    pub rules: Vec<Vec<CompiledRule>>,
    /// Whether the rules of chains the committed table holds as they are were left out: such a
    /// description can only be written as a difference from that table.
    pub against_committed: bool,
    /// Per set, its key layout and elements (by `check_against`, none for a set the committed
    /// table holds as described).
    pub sets: Vec<(KeyLayout, Vec<Encoded>)>,
    /// Per map, its key layout and elements with their verdicts.
    pub maps: Vec<(KeyLayout, Vec<(Encoded, Verdict)>)>,
}

/// How a rule is named in errors: its position, chain and comment.
pub fn rule_label(chain: &str, index: usize, rule: &Rule) -> String {
    match &rule.comment {
        Some(comment) => format!("rule {} of chain \"{chain}\" (comment \"{comment}\")", index + 1),
        None => format!("rule {} of chain \"{chain}\"", index + 1),
    }
}

pub fn check(table: &Table) -> Result<Checked<'_>> {
    check_against(table, None)
}

/// As `check`, but a chain whose rules equal those of the same chain of `committed` (a table
/// the kernel holds, checked when it was written) is not compiled again: a restarted writer
/// taking over thousands of unchanged chains would otherwise compile every rule of them.
pub fn check_against<'a>(table: &'a Table, committed: Option<&Table>) -> Result<Checked<'a>> {
    let op = format!("check table {} {}", table.family.name(), table.name);
    let invalid = |detail: String| NftError::invalid(&op, detail);
    check_name("table", &table.name).map_err(invalid)?;

    let mut chains = HashMap::new();
    for chain in &table.chains {
        check_name("chain", &chain.name).map_err(invalid)?;
        if chains.insert(chain.name.as_str(), chain.base.is_some()).is_some() {
            return Err(invalid(format!("chain \"{}\" is described twice", chain.name)));
        }
        if let Some(base) = &chain.base {
            check_base(base).map_err(|err| invalid(format!("chain \"{}\": {err}", chain.name)))?;
        }
    }
    let mut names = HashSet::new();
    let mut sets = HashMap::new();
    for set in &table.sets {
        check_name("set", &set.name).map_err(invalid)?;
        if !names.insert(set.name.as_str()) {
            return Err(invalid(format!("set or map \"{}\" is described twice", set.name)));
        }
        sets.insert(set.name.as_str(), set);
    }
    let mut maps = HashMap::new();
    for map in &table.maps {
        check_name("map", &map.name).map_err(invalid)?;
        if !names.insert(map.name.as_str()) {
            return Err(invalid(format!("set or map \"{}\" is described twice", map.name)));
        }
        maps.insert(map.name.as_str(), map);
    }
    let mut counters = HashSet::new();
    for counter in &table.counters {
        check_name("counter", counter).map_err(invalid)?;
        if !counters.insert(counter.as_str()) {
            return Err(invalid(format!("counter \"{counter}\" is described twice")));
        }
    }
    let scope = Scope { family: table.family, chains, sets, maps, counters };

    // A set the committed table holds as described keeps its elements (a difference sends none).
    let committed_sets: HashMap<&str, &Set> =
        committed.map(|old| old.sets.iter().map(|s| (s.name.as_str(), s)).collect()).unwrap_or_default();
    let sets = table
        .sets
        .iter()
        .map(|set| {
            let held = committed_sets.get(set.name.as_str()).is_some_and(|before| *before == set);
            let checked = if held {
                key_layout(&set.key, set.interval()).map(|layout| (layout, Vec::new()))
            } else {
                set_elements(set)
            };
            checked.map_err(|err| invalid(format!("set \"{}\": {err}", set.name)))
        })
        .collect::<Result<Vec<_>>>()?;
    let maps = table
        .maps
        .iter()
        .map(|map| map_elements(&scope, map).map_err(|err| invalid(format!("map \"{}\": {err}", map.name))))
        .collect::<Result<Vec<_>>>()?;
    let unchanged: HashMap<&str, &[Rule]> = committed
        .map(|old| old.chains.iter().map(|c| (c.name.as_str(), c.rules.as_slice())).collect())
        .unwrap_or_default();
    let mut rules = Vec::with_capacity(table.chains.len());
    for chain in &table.chains {
        if unchanged.get(chain.name.as_str()).is_some_and(|before| *before == chain.rules.as_slice()) {
            rules.push(Vec::new());
            continue;
        }
        let compiled = chain
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                compile_rule(&scope, rule)
                    .map_err(|err| invalid(format!("{}: {err}", rule_label(&chain.name, i, rule))))
            })
            .collect::<Result<Vec<_>>>()?;
        rules.push(compiled);
    }
    Ok(Checked { table, rules, sets, maps, against_committed: committed.is_some() })
}

/// Names nft can print and read back: letters, digits, `_`, `-` and `.`, starting with a letter,
/// at most 255 bytes (the kernel's limit less its NUL).
pub fn check_name(kind: &str, name: &str) -> std::result::Result<(), String> {
    let valid = name.len() <= 255
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{kind} name \"{name}\" is not a name nft can print: use letters, digits, '_', '-' and '.', starting with a letter (at most 255)"
        ))
    }
}

fn check_base(base: &BaseChain) -> std::result::Result<(), String> {
    match base.kind {
        ChainType::Nat if base.hook == Hook::Forward => Err("a nat chain cannot hook forward".into()),
        ChainType::Route if base.hook != Hook::Output => Err("a route chain hooks output only".into()),
        _ => Ok(()),
    }
}

pub fn key_layout(key: &KeyType, interval: bool) -> std::result::Result<KeyLayout, String> {
    if key.0.is_empty() {
        return Err("the type names no data type".into());
    }
    Ok(KeyLayout::of(key, interval))
}

/// A set's elements encoded, checked for duplicates and (interval sets) overlaps.
pub fn set_elements(set: &Set) -> std::result::Result<(KeyLayout, Vec<Encoded>), String> {
    let layout = key_layout(&set.key, set.interval())?;
    let encoded = encode_all(&layout, &set.elements)?;
    Ok((layout, encoded))
}

fn encode_all(layout: &KeyLayout, elements: &[Element]) -> std::result::Result<Vec<Encoded>, String> {
    let mut seen = HashSet::new();
    let mut encoded = Vec::with_capacity(elements.len());
    for element in elements {
        let value = layout.encode(element).map_err(|err| format!("element {element}: {err}"))?;
        if !seen.insert(value.clone()) {
            return Err(format!("element {element} is listed twice"));
        }
        encoded.push(value);
    }
    if layout.interval && !layout.concat() {
        let mut sorted: Vec<(&Encoded, &Element)> = encoded.iter().zip(elements).collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        if let Some(pair) = sorted.windows(2).find(|w| w[0].0.overlaps(w[1].0)) {
            return Err(format!("elements {} and {} overlap", pair[0].1, pair[1].1));
        }
        encoded.sort();
    }
    Ok(encoded)
}

pub fn map_elements(scope: &Scope, map: &Map) -> std::result::Result<(KeyLayout, Vec<(Encoded, Verdict)>), String> {
    if map.key.0.len() != 1 {
        return Err(format!("a verdict map is keyed by one data type, not {}", type_names(&map.key.0)));
    }
    let layout = key_layout(&map.key, false)?;
    let keys: Vec<Element> = map.elements.iter().map(|e| e.key.clone()).collect();
    let encoded = encode_all(&layout, &keys)?;
    let mut out = Vec::with_capacity(encoded.len());
    for (key, element) in encoded.into_iter().zip(&map.elements) {
        check_map_verdict(scope, &element.verdict).map_err(|err| format!("element {}: {err}", element.key))?;
        out.push((key, element.verdict.clone()));
    }
    Ok((layout, out))
}

pub fn check_map_verdict(scope: &Scope, verdict: &Verdict) -> std::result::Result<(), String> {
    match verdict {
        Verdict::Vmap { .. } => Err("a map's verdict cannot be another vmap".into()),
        Verdict::Jump { jump: chain } | Verdict::Goto { goto: chain } => check_target(scope, chain),
        Verdict::Simple(_) => Ok(()),
    }
}

/// The scope of a table for checking element changes against it.
pub fn scope_of(table: &Table) -> Scope<'_> {
    Scope {
        family: table.family,
        chains: table.chains.iter().map(|c| (c.name.as_str(), c.base.is_some())).collect(),
        sets: table.sets.iter().map(|s| (s.name.as_str(), s)).collect(),
        maps: table.maps.iter().map(|m| (m.name.as_str(), m)).collect(),
        counters: table.counters.iter().map(String::as_str).collect(),
    }
}
