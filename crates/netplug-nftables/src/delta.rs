//! A change to the committed table given as what changed: chains added or rewritten, chains,
//! sets, maps and counters added or removed, and element changes of the sets and maps kept.
//! The caller built its new description from the one it gave before, so it knows what changed
//! (the policy compiler keeps an unchanged chain's object): the writer then checks, encodes and
//! sends that alone, where a whole description costs its parse, check and comparison at every
//! size (about 100 ms at a thousand policies).

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::batch::Batch;
use crate::check::{check_name, map_elements, rule_label, scope_of, set_elements};
use crate::compile::{CompiledRule, compile_rule};
use crate::elements::{Encoded, KeyLayout};
use crate::model::{Chain, ElementChanges, Map, Set, Table, Verdict};
use crate::update::{self, Edit, SetIndexes};

/// What changed since the description last committed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TableDelta {
    /// Chains added, or whose rules changed (given whole; a base chain keeps its hook).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<Chain>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete_chains: Vec<String>,
    /// Sets added, with their elements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<Set>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete_sets: Vec<String>,
    /// Maps added, with their elements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maps: Vec<Map>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete_maps: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete_counters: Vec<String>,
    /// Element changes of sets and maps that were there before and stay.
    #[serde(default)]
    pub elements: ElementChanges,
}

impl TableDelta {
    pub fn is_empty(&self) -> bool {
        *self == TableDelta::default()
    }
}

/// Parses a delta from JSON; an error names the path of the offending field.
pub fn delta_from_json(text: &str) -> crate::Result<TableDelta> {
    crate::model::from_json("read table changes", text)
}

/// A chain given: its name and its rules compiled, with their comments.
type WrittenChain = (Rc<str>, Vec<(Option<String>, CompiledRule)>);

/// A set or map added: name, key layout, elements (with verdicts for a map), whether a set.
type NewSet = (String, KeyLayout, Vec<(Encoded, Option<Verdict>)>, bool);

/// The delta planned against the committed table: the new table, and what to send.
pub struct Planned {
    pub table: Table,
    /// Chains whose rules were there before (flushed before their new rules are added).
    flushed: Vec<String>,
    /// Chains declared new.
    declared: Vec<String>,
    /// The chains given, their rules compiled (name, base, rules).
    written: Vec<WrittenChain>,
    new_sets: Vec<NewSet>,
    edits: Vec<Edit>,
    delete_sets: Vec<(String, bool)>,
    delete_chains: Vec<String>,
    counters: Vec<String>,
    delete_counters: Vec<String>,
}

/// Applies `delta` to `old` (consumed) and checks what it touches; an error names the object.
/// `indexes` are the sets' element indexes (update.rs), of sets the delta keeps.
pub fn plan(mut table: Table, delta: TableDelta, indexes: &mut SetIndexes) -> Result<Planned, String> {
    // A name both removed and given would be added, then removed by the same transaction.
    let removed: HashSet<&str> = delta
        .delete_chains
        .iter()
        .chain(&delta.delete_sets)
        .chain(&delta.delete_maps)
        .chain(&delta.delete_counters)
        .map(String::as_str)
        .collect();
    let added = delta
        .chains
        .iter()
        .map(|c| &c.name)
        .chain(delta.sets.iter().map(|s| &s.name))
        .chain(delta.maps.iter().map(|m| &m.name));
    if let Some(name) = added.chain(&delta.counters).find(|name| removed.contains(name.as_str())) {
        return Err(format!("\"{name}\" is both removed and given: the table is written whole for that"));
    }
    // Removals first, so that a name removed and added again is a new object.
    let gone_chains: HashSet<&str> = delta.delete_chains.iter().map(String::as_str).collect();
    let mut flushed_gone = Vec::new();
    for name in &delta.delete_chains {
        let chain =
            table.chains.iter().find(|c| c.name == *name).ok_or_else(|| format!("there is no chain \"{name}\""))?;
        if !chain.rules.is_empty() {
            flushed_gone.push(name.clone());
        }
    }
    table.chains.retain(|c| !gone_chains.contains(c.name.as_str()));
    let mut delete_sets = Vec::new();
    for name in &delta.delete_sets {
        let before = table.sets.len();
        table.sets.retain(|s| s.name != *name);
        if table.sets.len() == before {
            return Err(format!("there is no set \"{name}\""));
        }
        delete_sets.push((name.clone(), false));
    }
    for name in &delta.delete_maps {
        let before = table.maps.len();
        table.maps.retain(|m| m.name != *name);
        if table.maps.len() == before {
            return Err(format!("there is no map \"{name}\""));
        }
        delete_sets.push((name.clone(), true));
    }
    for name in &delta.delete_counters {
        if !table.counters.contains(name) {
            return Err(format!("there is no counter \"{name}\""));
        }
    }
    table.counters.retain(|c| !delta.delete_counters.contains(c));

    // Chains given: rewritten in place, or added.
    let index: HashMap<String, usize> = table.chains.iter().enumerate().map(|(i, c)| (c.name.clone(), i)).collect();
    let mut flushed = flushed_gone;
    let mut declared = Vec::new();
    let mut given = Vec::with_capacity(delta.chains.len());
    for chain in delta.chains {
        check_name("chain", &chain.name)?;
        given.push(chain.name.clone());
        match index.get(&chain.name) {
            Some(&i) => {
                let before = &table.chains[i];
                if before.base != chain.base {
                    return Err(format!(
                        "chain \"{}\" changes its hook: the table is written whole for that",
                        chain.name
                    ));
                }
                if !before.rules.is_empty() {
                    flushed.push(chain.name.clone());
                }
                table.chains[i] = chain;
            }
            None => {
                declared.push(chain.name.clone());
                table.chains.push(chain);
            }
        }
    }
    let names: HashSet<&str> =
        table.sets.iter().map(|s| s.name.as_str()).chain(table.maps.iter().map(|m| m.name.as_str())).collect();
    for set in &delta.sets {
        check_name("set", &set.name)?;
        if names.contains(set.name.as_str()) {
            return Err(format!("set \"{}\" is there already", set.name));
        }
    }
    for map in &delta.maps {
        check_name("map", &map.name)?;
        if names.contains(map.name.as_str()) {
            return Err(format!("map \"{}\" is there already", map.name));
        }
    }
    for counter in &delta.counters {
        check_name("counter", counter)?;
        if table.counters.contains(counter) {
            return Err(format!("counter \"{counter}\" is there already"));
        }
    }
    let first_set = table.sets.len();
    let first_map = table.maps.len();
    table.sets.extend(delta.sets);
    table.maps.extend(delta.maps);
    table.counters.extend(delta.counters.iter().cloned());

    // Checked in the new table's scope: a rule may use a set, map or chain added with it.
    let scope = scope_of(&table);
    let mut written = Vec::with_capacity(given.len());
    let given: HashSet<String> = given.into_iter().collect();
    for chain in table.chains.iter().filter(|c| given.contains(&c.name)) {
        let mut rules = Vec::with_capacity(chain.rules.len());
        for (i, rule) in chain.rules.iter().enumerate() {
            let compiled =
                compile_rule(&scope, rule).map_err(|err| format!("{}: {err}", rule_label(&chain.name, i, rule)))?;
            rules.push((rule.comment.clone(), compiled));
        }
        written.push((Rc::from(chain.name.as_str()), rules));
    }
    let mut new_sets = Vec::new();
    for set in &table.sets[first_set..] {
        let (layout, encoded) = set_elements(set).map_err(|err| format!("set \"{}\": {err}", set.name))?;
        new_sets.push((set.name.clone(), layout, encoded.into_iter().map(|e| (e, None)).collect(), true));
    }
    for map in &table.maps[first_map..] {
        let (layout, encoded) = map_elements(&scope, map).map_err(|err| format!("map \"{}\": {err}", map.name))?;
        new_sets.push((map.name.clone(), layout, encoded.into_iter().map(|(e, v)| (e, Some(v))).collect(), false));
    }
    drop(scope);
    let edits = update::plan(&table, &delta.elements, indexes)?;
    Ok(Planned {
        table,
        flushed,
        declared,
        written,
        new_sets,
        edits,
        delete_sets,
        delete_chains: delta.delete_chains,
        counters: delta.counters,
        delete_counters: delta.delete_counters,
    })
}

impl Planned {
    /// The transaction, in the order a whole difference takes (see plan::difference): what is
    /// declared, element deletions, rules, element additions (after the rules: their verdicts
    /// may name new chains), then what goes.
    pub fn write(&self, batch: &mut Batch) {
        for name in &self.declared {
            let chain = self.table.chains.iter().find(|c| c.name == *name).expect("declared chains are in the table");
            batch.add_chain(name, chain.base.as_ref());
        }
        for counter in &self.counters {
            batch.add_counter(counter);
        }
        for (name, layout, _, is_set) in &self.new_sets {
            batch.add_set(name, layout, !is_set);
        }
        update::write_deletions(batch, &self.edits);
        for name in &self.flushed {
            batch.flush_chain(name);
        }
        for (name, rules) in &self.written {
            for (i, (comment, compiled)) in rules.iter().enumerate() {
                batch.add_rule(name, i, comment.as_ref(), compiled);
            }
        }
        for (name, layout, elements, is_set) in &self.new_sets {
            if !elements.is_empty() {
                let label = format!("add elements to {} \"{name}\"", if *is_set { "set" } else { "map" });
                batch.change_elements(name, layout, elements, true, *is_set, &label);
            }
        }
        update::write_additions(batch, &self.edits);
        for (name, map) in &self.delete_sets {
            batch.delete_set(name, *map);
        }
        for name in &self.delete_chains {
            batch.delete_chain(name);
        }
        for counter in &self.delete_counters {
            batch.delete_counter(counter);
        }
    }

    /// The committed table once the transaction committed.
    pub fn committed(self, indexes: &mut SetIndexes) -> Table {
        let mut table = self.table;
        update::apply(&mut table, self.edits, indexes);
        table
    }
}
