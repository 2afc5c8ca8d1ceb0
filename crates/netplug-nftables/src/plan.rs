//! The transactions the writer sends: a whole table, or the difference between the table it
//! last committed and a new description.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use crate::batch::Batch;
use crate::check::{Checked, scope_of};
use crate::elements::{Encoded, KeyLayout};
use crate::error::Result;
use crate::model::{Chain, Map, Set, Table, Verdict};

/// The whole table in one transaction: add it (so that deleting it cannot fail), delete it, add
/// it with everything in it, in nft's order (chains, counters, sets and maps, rules).
pub fn replace(checked: &Checked, first_sequence: u32) -> Batch {
    assert!(!checked.against_committed, "a whole table is written from a description checked whole");
    let table = checked.table;
    let mut batch = Batch::new(table.family, &table.name, first_sequence, None);
    batch.number_anonymous_sets(0);
    batch.add_table();
    batch.delete_table();
    write_whole(&mut batch, checked, true);
    batch
}

/// Everything of a table into a batch: the table, chains, counters, sets and maps, rules chain
/// by chain, and the sets' and maps' elements, after the rules when `elements_last`. nft sends
/// each set's elements right after the set; the writer sends them last because the kernel, when
/// a rule binds an anonymous set, walks every operation of the transaction so far (one per
/// element among them): elements first made a table of thousands of anonymous sets take tens of
/// seconds to write.
pub fn write_whole(batch: &mut Batch, checked: &Checked, elements_last: bool) {
    assert!(!checked.against_committed, "a whole table is written from a description checked whole");
    let table = checked.table;
    batch.add_table();
    for chain in &table.chains {
        batch.add_chain(&chain.name, chain.base.as_ref());
    }
    for counter in &table.counters {
        batch.add_counter(counter);
    }
    let sets: Vec<Filling> = table
        .sets
        .iter()
        .zip(&checked.sets)
        .map(|(set, (layout, elements))| Filling {
            name: set.name.clone(),
            layout: layout.clone(),
            elements: elements.iter().map(|e| (e.clone(), None)).collect(),
            was_empty: true,
            map: false,
        })
        .chain(table.maps.iter().zip(&checked.maps).map(|(map, (layout, elements))| Filling {
            name: map.name.clone(),
            layout: layout.clone(),
            elements: elements.iter().map(|(e, v)| (e.clone(), Some(v.clone()))).collect(),
            was_empty: true,
            map: true,
        }))
        .collect();
    for set in &sets {
        batch.add_set(&set.name, &set.layout, set.map);
        if !elements_last {
            batch.add_first_elements(&set.name, &set.layout, set.map, &set.elements);
        }
    }
    for (chain, rules) in table.chains.iter().zip(&checked.rules) {
        let name: Rc<str> = Rc::from(chain.name.as_str());
        for (i, (rule, compiled)) in chain.rules.iter().zip(rules).enumerate() {
            batch.add_rule(&name, i, rule.comment.as_ref(), compiled);
        }
    }
    if elements_last {
        for set in &sets {
            batch.add_first_elements(&set.name, &set.layout, set.map, &set.elements);
        }
    }
}

/// Elements to add to a set or map.
struct Filling {
    name: String,
    layout: KeyLayout,
    elements: Elements,
    /// Whether the set has no elements yet (nft then starts an interval set at zero).
    was_empty: bool,
    map: bool,
}

/// The transaction that turns `old` into the checked description, or `None` when only a whole
/// replacement can (a base chain's hook, a set's type changed).
pub fn difference(old: &Table, new: &Checked, first_sequence: u32, next_anonymous: u32) -> Result<Option<Batch>> {
    let table = new.table;
    let old_chains: HashMap<&str, &Chain> = old.chains.iter().map(|c| (c.name.as_str(), c)).collect();
    let new_chains: HashSet<&str> = table.chains.iter().map(|c| c.name.as_str()).collect();
    for chain in &table.chains {
        if let Some(before) = old_chains.get(chain.name.as_str())
            && before.base != chain.base
        {
            return Ok(None);
        }
    }
    let old_sets: HashMap<&str, &Set> = old.sets.iter().map(|s| (s.name.as_str(), s)).collect();
    let old_maps: HashMap<&str, &Map> = old.maps.iter().map(|m| (m.name.as_str(), m)).collect();
    for set in &table.sets {
        if let Some(before) = old_sets.get(set.name.as_str())
            && (before.key != set.key || before.flags != set.flags)
        {
            return Ok(None);
        }
        if old_maps.contains_key(set.name.as_str()) {
            return Ok(None);
        }
    }
    for map in &table.maps {
        if let Some(before) = old_maps.get(map.name.as_str())
            && before.key != map.key
        {
            return Ok(None);
        }
        if old_sets.contains_key(map.name.as_str()) {
            return Ok(None);
        }
    }

    let mut batch = Batch::new(table.family, &table.name, first_sequence, None);
    batch.number_anonymous_sets(next_anonymous);
    // 1. New chains (declarations), counters, sets and maps with their elements.
    for chain in &table.chains {
        if !old_chains.contains_key(chain.name.as_str()) {
            batch.add_chain(&chain.name, chain.base.as_ref());
        }
    }
    let old_counters: HashSet<&str> = old.counters.iter().map(String::as_str).collect();
    for counter in &table.counters {
        if !old_counters.contains(counter.as_str()) {
            batch.add_counter(counter);
        }
    }
    let mut later: Vec<Filling> = Vec::new();
    for (set, (layout, elements)) in table.sets.iter().zip(&new.sets) {
        let wanted: Vec<(Encoded, Option<Verdict>)> = elements.iter().map(|e| (e.clone(), None)).collect();
        match old_sets.get(set.name.as_str()) {
            None => {
                batch.add_set(&set.name, layout, false);
                later.push(Filling {
                    name: set.name.clone(),
                    layout: layout.clone(),
                    elements: wanted,
                    was_empty: true,
                    map: false,
                });
            }
            // The same elements as committed: nothing to change (nor to encode again).
            Some(before) if before.elements == set.elements => {}
            Some(before) => {
                let had = crate::check::set_elements(before).map(|(_, e)| e).unwrap_or_default();
                let had: Vec<(Encoded, Option<Verdict>)> = had.into_iter().map(|e| (e, None)).collect();
                let (gone, added) = element_difference(&had, &wanted);
                if !gone.is_empty() {
                    let label = format!("delete elements of set \"{}\"", set.name);
                    batch.change_elements(&set.name, layout, &gone, false, false, &label);
                }
                if !added.is_empty() {
                    later.push(Filling {
                        name: set.name.clone(),
                        layout: layout.clone(),
                        elements: added,
                        was_empty: had.is_empty(),
                        map: false,
                    });
                }
            }
        }
    }
    let scope = scope_of(old);
    for (map, (layout, elements)) in table.maps.iter().zip(&new.maps) {
        let wanted: Vec<(Encoded, Option<Verdict>)> =
            elements.iter().map(|(e, v)| (e.clone(), Some(v.clone()))).collect();
        match old_maps.get(map.name.as_str()) {
            None => {
                batch.add_set(&map.name, layout, true);
                later.push(Filling {
                    name: map.name.clone(),
                    layout: layout.clone(),
                    elements: wanted,
                    was_empty: false,
                    map: true,
                });
            }
            Some(before) if before.elements == map.elements => {}
            Some(before) => {
                let had = crate::check::map_elements(&scope, before).map(|(_, e)| e).unwrap_or_default();
                let had: Vec<(Encoded, Option<Verdict>)> = had.into_iter().map(|(e, v)| (e, Some(v))).collect();
                let (mut gone, added) = element_difference(&had, &wanted);
                // A key whose verdict changed is deleted, then added with the new verdict.
                for (key, _) in &added {
                    if let Some(old) = had.iter().find(|(k, _)| k == key)
                        && !gone.iter().any(|(k, _)| k == key)
                    {
                        gone.push(old.clone());
                    }
                }
                if !gone.is_empty() {
                    let label = format!("delete elements of map \"{}\"", map.name);
                    batch.change_elements(&map.name, layout, &gone, false, false, &label);
                }
                if !added.is_empty() {
                    later.push(Filling {
                        name: map.name.clone(),
                        layout: layout.clone(),
                        elements: added,
                        was_empty: false,
                        map: true,
                    });
                }
            }
        }
    }
    // 2. Rules of removed and changed chains go; changed and new chains get theirs.
    for chain in &old.chains {
        if !new_chains.contains(chain.name.as_str()) && !chain.rules.is_empty() {
            batch.flush_chain(&chain.name);
        }
    }
    for (chain, rules) in table.chains.iter().zip(&new.rules) {
        let before = old_chains.get(chain.name.as_str());
        if before.is_some_and(|b| b.rules == chain.rules) {
            continue;
        }
        if before.is_some_and(|b| !b.rules.is_empty()) {
            batch.flush_chain(&chain.name);
        }
        let name: Rc<str> = Rc::from(chain.name.as_str());
        for (i, (rule, compiled)) in chain.rules.iter().zip(rules).enumerate() {
            batch.add_rule(&name, i, rule.comment.as_ref(), compiled);
        }
    }
    // 3. Elements added to sets and maps (after the rules: see write_whole; verdicts may name new chains).
    for set in later {
        let label = format!("add elements to {} \"{}\"", if set.map { "map" } else { "set" }, set.name);
        batch.change_elements(&set.name, &set.layout, &set.elements, true, set.was_empty, &label);
    }
    // 4. What is no longer described: sets and maps first (a map's verdicts hold its chains).
    let new_names: HashSet<&str> = table.sets.iter().map(|s| s.name.as_str()).collect();
    for set in &old.sets {
        if !new_names.contains(set.name.as_str()) {
            batch.delete_set(&set.name, false);
        }
    }
    let new_names: HashSet<&str> = table.maps.iter().map(|m| m.name.as_str()).collect();
    for map in &old.maps {
        if !new_names.contains(map.name.as_str()) {
            batch.delete_set(&map.name, true);
        }
    }
    for chain in &old.chains {
        if !new_chains.contains(chain.name.as_str()) {
            batch.delete_chain(&chain.name);
        }
    }
    let new_counters: HashSet<&str> = table.counters.iter().map(String::as_str).collect();
    for counter in &old.counters {
        if !new_counters.contains(counter.as_str()) {
            batch.delete_counter(counter);
        }
    }
    Ok(Some(batch))
}

/// Encoded elements, with their verdicts for a map.
type Elements = Vec<(Encoded, Option<Verdict>)>;

/// The elements to delete from `had` and to add to it to reach `wanted`.
fn element_difference(had: &Elements, wanted: &Elements) -> (Elements, Elements) {
    let had_set: HashMap<&Encoded, &Option<Verdict>> = had.iter().map(|(k, v)| (k, v)).collect();
    let wanted_set: HashMap<&Encoded, &Option<Verdict>> = wanted.iter().map(|(k, v)| (k, v)).collect();
    let gone = had.iter().filter(|(k, _)| !wanted_set.contains_key(k)).cloned().collect();
    let added = wanted.iter().filter(|(k, v)| had_set.get(k) != Some(&v)).cloned().collect();
    (gone, added)
}
