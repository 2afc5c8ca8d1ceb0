//! The table writer: makes the kernel's table equal a description, remembering what it last
//! committed so that a later description costs only its difference.
//!
//! The first apply, and any after a failure, replaces the table whole in one transaction (add
//! the table so that deleting it cannot fail, delete it, add it and everything in it): packets
//! meet either the old table or the new one, never a half-written one. Later applies send the
//! chains added and removed, the rules of changed chains (flushed and written again), and the
//! elements added to and removed from sets and maps, again in one transaction.

use std::collections::{HashMap, HashSet};

use netlink_packet_core::DefaultNla;
use netlink_packet_netfilter::nftables::{NfTablesMessage, TableAttribute, TableMessage};
use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily};
use nix::errno::Errno;

use crate::batch::Batch;
use crate::check::{Checked, check, check_map_verdict, rule_label, scope_of};
use crate::elements::{Encoded, KeyLayout};
use crate::error::{NftError, Result};
use crate::expr::{self, string, u32_be};
use crate::model::{Element, ElementChanges, Family, MapElement, Table, Verdict};
use crate::socket::NfSocket;

/// What an apply sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyReport {
    /// Whether the table was replaced whole (rather than changed by difference).
    pub replaced: bool,
    /// Messages in the transaction (0: the kernel already held the description).
    pub operations: usize,
    /// Bytes sent.
    pub bytes: usize,
}

/// A named counter's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterValue {
    pub name: String,
    pub packets: u64,
    pub bytes: u64,
}

/// Writes one table (`family`, `name`) in the network namespace of the calling thread.
pub struct TableWriter {
    family: Family,
    name: String,
    committed: Option<Table>,
}

impl TableWriter {
    pub fn new(family: Family, name: &str) -> Self {
        Self { family, name: name.to_string(), committed: None }
    }

    fn label(&self) -> String {
        format!("table {} {}", self.family.name(), self.name)
    }

    /// The description the kernel holds since the last successful call, if any.
    pub fn committed(&self) -> Option<&Table> {
        self.committed.as_ref()
    }

    /// Forgets what was committed: the next apply replaces the table whole.
    pub fn forget(&mut self) {
        self.committed = None;
    }

    /// Makes the kernel's table equal `table`, in one transaction.
    pub fn apply(&mut self, table: Table) -> Result<ApplyReport> {
        let op = format!("apply {}", self.label());
        if table.family != self.family || table.name != self.name {
            return Err(NftError::invalid(
                &op,
                format!("the description is of table {} {}, not this writer's", table.family.name(), table.name),
            ));
        }
        let checked = check(&table)?;
        let mut socket = NfSocket::open()?;
        let first = socket.reserve(0);
        let (batch, replaced) = match self.committed.take() {
            Some(old) => match difference(&old, &checked, first)? {
                Some(batch) => (batch, false),
                None => (replace(&checked, first), true),
            },
            None => (replace(&checked, first), true),
        };
        if batch.is_empty() {
            self.committed = Some(table);
            return Ok(ApplyReport { replaced: false, operations: 0, bytes: 0 });
        }
        let sealed = batch.seal();
        socket.reserve(sealed.labels.len() as u32);
        socket.commit(&sealed, &op)?;
        let report = ApplyReport { replaced, operations: sealed.operations(), bytes: sealed.bytes.len() };
        self.committed = Some(table);
        Ok(report)
    }

    /// Adds and deletes elements of the committed table's sets and maps, in one transaction.
    /// Adding an element already there or deleting one that is not changes nothing.
    pub fn update_elements(&mut self, changes: &ElementChanges) -> Result<ApplyReport> {
        let op = format!("update elements of {}", self.label());
        let Some(mut table) = self.committed.take() else {
            return Err(NftError::new(op, Errno::ENOENT, "nothing was applied yet (or the last call failed): apply first"));
        };
        let result = self.write_elements(&mut table, changes, &op);
        if result.is_ok() {
            self.committed = Some(table);
        }
        result
    }

    fn write_elements(&self, table: &mut Table, changes: &ElementChanges, op: &str) -> Result<ApplyReport> {
        let mut socket = NfSocket::open()?;
        let mut batch = Batch::new(self.family, &self.name, socket.reserve(0), None);
        let invalid = |detail: String| NftError::invalid(op, detail);
        let mut additions: Vec<Box<dyn FnOnce(&mut Batch)>> = Vec::new();
        let mut edits: Vec<Box<dyn FnOnce(&mut Table)>> = Vec::new();
        for change in &changes.sets {
            let Some(index) = table.sets.iter().position(|s| s.name == change.name) else {
                return Err(invalid(format!("there is no set \"{}\"", change.name)));
            };
            let set = &table.sets[index];
            let layout = KeyLayout::of(&set.key, set.interval());
            let at = |err: String| invalid(format!("set \"{}\": {err}", change.name));
            let mut present: HashMap<Encoded, usize> = HashMap::new();
            for (i, element) in set.elements.iter().enumerate() {
                present.insert(layout.encode(element).map_err(at)?, i);
            }
            let mut deleted = Vec::new();
            for element in &change.delete {
                let key = layout.encode(element).map_err(|e| at(format!("element {element}: {e}")))?;
                if let Some(i) = present.remove(&key) {
                    deleted.push((key, i));
                }
            }
            let mut added: Vec<(Encoded, Element)> = Vec::new();
            for element in &change.add {
                let key = layout.encode(element).map_err(|e| at(format!("element {element}: {e}")))?;
                if present.contains_key(&key) || added.iter().any(|(k, _)| *k == key) {
                    continue;
                }
                if layout.interval
                    && let Some(clash) = present.keys().chain(added.iter().map(|(k, _)| k)).find(|k| k.overlaps(&key))
                {
                    let _ = clash;
                    return Err(at(format!("element {element} overlaps an element of the set")));
                }
                added.push((key, element.clone()));
            }
            let name = change.name.clone();
            if !deleted.is_empty() {
                let mut keys: Vec<(Encoded, Option<Verdict>)> = deleted.iter().map(|(k, _)| (k.clone(), None)).collect();
                keys.sort_by(|a, b| a.0.cmp(&b.0));
                batch.change_elements(&name, &layout, &keys, false, false, &format!("delete elements of set \"{name}\""));
            }
            if !added.is_empty() {
                let empty = present.is_empty() && set.elements.is_empty();
                let mut keys: Vec<(Encoded, Option<Verdict>)> = added.iter().map(|(k, _)| (k.clone(), None)).collect();
                if layout.interval {
                    keys.sort_by(|a, b| a.0.cmp(&b.0));
                }
                let layout = layout.clone();
                let name = name.clone();
                additions.push(Box::new(move |batch: &mut Batch| {
                    batch.change_elements(&name, &layout, &keys, true, empty, &format!("add elements to set \"{name}\""));
                }));
            }
            let mut gone: Vec<usize> = deleted.iter().map(|(_, i)| *i).collect();
            gone.sort_unstable();
            let new: Vec<Element> = added.into_iter().map(|(_, e)| e).collect();
            edits.push(Box::new(move |table: &mut Table| {
                let elements = &mut table.sets[index].elements;
                for i in gone.into_iter().rev() {
                    elements.remove(i);
                }
                elements.extend(new);
            }));
        }
        let scope_table = table.clone();
        let scope = scope_of(&scope_table);
        for change in &changes.maps {
            let Some(index) = table.maps.iter().position(|m| m.name == change.name) else {
                return Err(invalid(format!("there is no map \"{}\"", change.name)));
            };
            let map = &table.maps[index];
            let layout = KeyLayout::of(&map.key, false);
            let at = |err: String| invalid(format!("map \"{}\": {err}", change.name));
            let mut present: HashMap<Encoded, (usize, Verdict)> = HashMap::new();
            for (i, element) in map.elements.iter().enumerate() {
                present.insert(layout.encode(&element.key).map_err(at)?, (i, element.verdict.clone()));
            }
            let mut deleted: Vec<(Encoded, usize)> = Vec::new();
            let mut added: Vec<(Encoded, MapElement)> = Vec::new();
            for key in &change.delete {
                let encoded = layout.encode(key).map_err(|e| at(format!("element {key}: {e}")))?;
                if let Some((i, _)) = present.get(&encoded) {
                    deleted.push((encoded, *i));
                }
            }
            for element in &change.add {
                let encoded = layout.encode(&element.key).map_err(|e| at(format!("element {}: {e}", element.key)))?;
                check_map_verdict(&scope, &element.verdict).map_err(|e| at(format!("element {}: {e}", element.key)))?;
                match present.get(&encoded) {
                    Some((_, verdict)) if *verdict == element.verdict => continue,
                    Some((i, _)) => {
                        if !deleted.iter().any(|(k, _)| *k == encoded) {
                            deleted.push((encoded.clone(), *i));
                        }
                    }
                    None => {}
                }
                added.retain(|(k, _)| *k != encoded);
                added.push((encoded, element.clone()));
            }
            let name = change.name.clone();
            if !deleted.is_empty() {
                let keys: Vec<(Encoded, Option<Verdict>)> = deleted.iter().map(|(k, _)| (k.clone(), None)).collect();
                batch.change_elements(&name, &layout, &keys, false, false, &format!("delete elements of map \"{name}\""));
            }
            if !added.is_empty() {
                let keys: Vec<(Encoded, Option<Verdict>)> =
                    added.iter().map(|(k, e)| (k.clone(), Some(e.verdict.clone()))).collect();
                let layout = layout.clone();
                let name = name.clone();
                additions.push(Box::new(move |batch: &mut Batch| {
                    batch.change_elements(&name, &layout, &keys, true, false, &format!("add elements to map \"{name}\""));
                }));
            }
            let mut gone: Vec<usize> = deleted.iter().map(|(_, i)| *i).collect();
            gone.sort_unstable();
            gone.dedup();
            let new: Vec<MapElement> = added.into_iter().map(|(_, e)| e).collect();
            edits.push(Box::new(move |table: &mut Table| {
                let elements = &mut table.maps[index].elements;
                for i in gone.into_iter().rev() {
                    elements.remove(i);
                }
                elements.extend(new);
            }));
        }
        for addition in additions {
            addition(&mut batch);
        }
        if batch.is_empty() {
            return Ok(ApplyReport { replaced: false, operations: 0, bytes: 0 });
        }
        let sealed = batch.seal();
        socket.reserve(sealed.labels.len() as u32);
        socket.commit(&sealed, op)?;
        for edit in edits {
            edit(table);
        }
        Ok(ApplyReport { replaced: false, operations: sealed.operations(), bytes: sealed.bytes.len() })
    }

    /// The named counters' values, by name.
    pub fn counters(&self) -> Result<Vec<CounterValue>> {
        let op = format!("read the counters of {}", self.label());
        let mut socket = NfSocket::open()?;
        let request = NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::from(self.family.nfproto()), 0, 0),
            NfTablesMessage::GetObject(vec![string(1, &self.name), u32_be(3, expr::OBJECT_COUNTER)]),
        );
        let replies = socket.request(request, true, &op)?;
        let mut counters = Vec::new();
        for reply in replies {
            let NetfilterMessageInner::NfTables(NfTablesMessage::NewObject(attributes)) = reply.inner else { continue };
            if let Some(counter) = counter_of(&attributes, &self.name) {
                counters.push(counter);
            }
        }
        Ok(counters)
    }

    /// Deletes the table if it is there; says whether it was.
    pub fn remove(&mut self) -> Result<bool> {
        let op = format!("remove {}", self.label());
        self.committed = None;
        let mut socket = NfSocket::open()?;
        let request = NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::from(self.family.nfproto()), 0, 0),
            NfTablesMessage::GetTable(TableMessage { attributes: vec![TableAttribute::Name(self.name.clone())] }),
        );
        match socket.request(request, false, &op) {
            Ok(_) => {}
            Err(err) if err.errno == Errno::ENOENT => return Ok(false),
            Err(err) => return Err(err),
        }
        let mut batch = Batch::new(self.family, &self.name, socket.reserve(0), None);
        batch.add_table();
        batch.delete_table();
        let sealed = batch.seal();
        socket.reserve(sealed.labels.len() as u32);
        socket.commit(&sealed, &op)?;
        Ok(true)
    }
}

fn counter_of(attributes: &[DefaultNla], table: &str) -> Option<CounterValue> {
    use netlink_packet_core::Nla;
    let value = |nla: &DefaultNla| expr::emit_all(std::slice::from_ref(nla))[4..4 + nla.value_len()].to_vec();
    let mut name = None;
    let (mut packets, mut bytes) = (0, 0);
    for nla in attributes {
        let raw = value(nla);
        match nla.kind() & 0x3fff {
            1 if raw.split(|b| *b == 0).next() != Some(table.as_bytes()) => return None,
            2 => name = Some(String::from_utf8_lossy(raw.split(|b| *b == 0).next()?).into_owned()),
            3 if raw.get(..4).map(|b| u32::from_be_bytes(b.try_into().unwrap())) != Some(expr::OBJECT_COUNTER) => {
                return None;
            }
            4 => {
                let mut at = 0;
                while at + 4 <= raw.len() {
                    let len = u16::from_ne_bytes([raw[at], raw[at + 1]]) as usize;
                    let kind = u16::from_ne_bytes([raw[at + 2], raw[at + 3]]) & 0x3fff;
                    if len < 4 || at + len > raw.len() {
                        break;
                    }
                    let number = raw.get(at + 4..at + 12).map(|b| u64::from_be_bytes(b.try_into().unwrap()));
                    match (kind, number) {
                        (1, Some(n)) => bytes = n,
                        (2, Some(n)) => packets = n,
                        _ => {}
                    }
                    at += (len + 3) & !3;
                }
            }
            _ => {}
        }
    }
    Some(CounterValue { name: name?, packets, bytes })
}

/// The whole table in one transaction: add it (so that deleting it cannot fail), delete it, add
/// it with everything in it, in nft's order (chains, counters, sets and maps, rules).
pub fn replace(checked: &Checked, first_sequence: u32) -> Batch {
    let table = checked.table;
    let mut batch = Batch::new(table.family, &table.name, first_sequence, None);
    batch.add_table();
    batch.delete_table();
    write_whole(&mut batch, checked);
    batch
}

/// Everything of a table into a batch, in nft's order: the table, chains, counters, sets and
/// maps with their elements, then the rules chain by chain.
pub fn write_whole(batch: &mut Batch, checked: &Checked) {
    let table = checked.table;
    batch.add_table();
    for chain in &table.chains {
        batch.add_chain(&chain.name, chain.base.as_ref());
    }
    for counter in &table.counters {
        batch.add_counter(counter);
    }
    for (set, (layout, elements)) in table.sets.iter().zip(&checked.sets) {
        let elements: Vec<(Encoded, Option<Verdict>)> = elements.iter().map(|e| (e.clone(), None)).collect();
        batch.add_set(&set.name, layout, false, &elements);
    }
    for (map, (layout, elements)) in table.maps.iter().zip(&checked.maps) {
        let elements: Vec<(Encoded, Option<Verdict>)> =
            elements.iter().map(|(e, v)| (e.clone(), Some(v.clone()))).collect();
        batch.add_set(&map.name, layout, true, &elements);
    }
    for (chain, rules) in table.chains.iter().zip(&checked.rules) {
        for (i, (rule, compiled)) in chain.rules.iter().zip(rules).enumerate() {
            batch.add_rule(&chain.name, compiled, format!("add {}", rule_label(&chain.name, i, rule)));
        }
    }
}

/// The transaction that turns `old` into the checked description, or `None` when only a whole
/// replacement can (a base chain's hook, a set's type changed).
fn difference(old: &Table, new: &Checked, first_sequence: u32) -> Result<Option<Batch>> {
    let table = new.table;
    let old_chains: HashMap<&str, &crate::model::Chain> = old.chains.iter().map(|c| (c.name.as_str(), c)).collect();
    let new_chains: HashSet<&str> = table.chains.iter().map(|c| c.name.as_str()).collect();
    for chain in &table.chains {
        if let Some(before) = old_chains.get(chain.name.as_str())
            && before.base != chain.base
        {
            return Ok(None);
        }
    }
    let old_sets: HashMap<&str, &crate::model::Set> = old.sets.iter().map(|s| (s.name.as_str(), s)).collect();
    let old_maps: HashMap<&str, &crate::model::Map> = old.maps.iter().map(|m| (m.name.as_str(), m)).collect();
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
    let mut later: Vec<(String, KeyLayout, Vec<(Encoded, Option<Verdict>)>, bool, bool)> = Vec::new();
    for (set, (layout, elements)) in table.sets.iter().zip(&new.sets) {
        let wanted: Vec<(Encoded, Option<Verdict>)> = elements.iter().map(|e| (e.clone(), None)).collect();
        match old_sets.get(set.name.as_str()) {
            None => batch.add_set(&set.name, layout, false, &wanted),
            Some(before) => {
                let had = crate::check::set_elements(before).map(|(_, e)| e).unwrap_or_default();
                let had: Vec<(Encoded, Option<Verdict>)> = had.into_iter().map(|e| (e, None)).collect();
                let (gone, added) = element_difference(&had, &wanted);
                if !gone.is_empty() {
                    let label = format!("delete elements of set \"{}\"", set.name);
                    batch.change_elements(&set.name, layout, &gone, false, false, &label);
                }
                if !added.is_empty() {
                    later.push((set.name.clone(), layout.clone(), added, had.is_empty(), false));
                }
            }
        }
    }
    let scope = scope_of(old);
    for (map, (layout, elements)) in table.maps.iter().zip(&new.maps) {
        let wanted: Vec<(Encoded, Option<Verdict>)> =
            elements.iter().map(|(e, v)| (e.clone(), Some(v.clone()))).collect();
        match old_maps.get(map.name.as_str()) {
            None => batch.add_set(&map.name, layout, true, &wanted),
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
                    later.push((map.name.clone(), layout.clone(), added, false, true));
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
        for (i, (rule, compiled)) in chain.rules.iter().zip(rules).enumerate() {
            batch.add_rule(&chain.name, compiled, format!("add {}", rule_label(&chain.name, i, rule)));
        }
    }
    // 3. Elements added to sets and maps that stay (their verdicts may name new chains).
    for (name, layout, added, empty, map) in later {
        let label = format!("add elements to {} \"{name}\"", if map { "map" } else { "set" });
        batch.change_elements(&name, &layout, &added, true, empty, &label);
    }
    // 4. What is no longer described.
    for chain in &old.chains {
        if !new_chains.contains(chain.name.as_str()) {
            batch.delete_chain(&chain.name);
        }
    }
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
    let new_counters: HashSet<&str> = table.counters.iter().map(String::as_str).collect();
    for counter in &old.counters {
        if !new_counters.contains(counter.as_str()) {
            batch.delete_counter(counter);
        }
    }
    Ok(Some(batch))
}

type Elements = Vec<(Encoded, Option<Verdict>)>;

/// The elements to delete from `had` and to add to it to reach `wanted`.
fn element_difference(had: &Elements, wanted: &Elements) -> (Elements, Elements) {
    let had_set: HashMap<&Encoded, &Option<Verdict>> = had.iter().map(|(k, v)| (k, v)).collect();
    let wanted_set: HashMap<&Encoded, &Option<Verdict>> = wanted.iter().map(|(k, v)| (k, v)).collect();
    let gone = had.iter().filter(|(k, _)| !wanted_set.contains_key(k)).cloned().collect();
    let added = wanted.iter().filter(|(k, v)| had_set.get(k) != Some(&v)).cloned().collect();
    (gone, added)
}
