//! Element changes planned against the writer's copy of the committed table: what to delete and
//! add in the kernel (deletions first, an element deleted and added again left alone, additions
//! of elements already there and deletions of absent ones dropped), and the copy's new elements.

use std::collections::{HashMap, HashSet};

use crate::batch::Batch;
use crate::check::{check_map_verdict, scope_of};
use crate::elements::{Encoded, KeyLayout};
use crate::model::{Element, ElementChanges, MapElement, Set, Table, Verdict};

/// A set's elements encoded, in the order of the copy's element list, and each key's position:
/// kept by the writer between element updates, so that an update costs its own elements, not an
/// encoding of every element of the sets it touches (a namespace's pods are thousands).
pub struct SetIndex {
    keys: Vec<Encoded>,
    at: HashMap<Encoded, usize>,
}

impl SetIndex {
    fn of(set: &Set, layout: &KeyLayout) -> Result<Self, String> {
        let mut keys = Vec::with_capacity(set.elements.len());
        let mut at = HashMap::with_capacity(set.elements.len());
        for (i, element) in set.elements.iter().enumerate() {
            let key =
                layout.encode(element).map_err(|err| format!("set \"{}\": element {element}: {err}", set.name))?;
            at.insert(key.clone(), i);
            keys.push(key);
        }
        Ok(SetIndex { keys, at })
    }
}

/// The indexes of the sets element updates touched, by set name.
pub type SetIndexes = HashMap<String, SetIndex>;

/// The change to one set or map.
pub struct Edit {
    name: String,
    /// Index in the table's maps (when a map) or sets.
    index: usize,
    map: bool,
    layout: KeyLayout,
    /// Encoded keys to delete and their positions in the copy's element list.
    deleted: Vec<(Encoded, usize)>,
    /// Encoded elements to add (with their verdicts for a map) and as described.
    added: Vec<(Encoded, Option<Verdict>, Element)>,
    /// Whether the set had no elements before (nft then starts an interval set at zero).
    was_empty: bool,
}

/// Plans `changes`; an error names the set or map and the element.
/// Plans `changes`; `indexes` holds (and gets) the touched sets' indexes.
pub fn plan(table: &Table, changes: &ElementChanges, indexes: &mut SetIndexes) -> Result<Vec<Edit>, String> {
    let mut edits = Vec::new();
    let mut named = HashSet::new();
    for name in changes.sets.iter().map(|c| &c.name).chain(changes.maps.iter().map(|c| &c.name)) {
        if !named.insert(name) {
            return Err(format!("\"{name}\" is changed twice: give its additions and deletions together"));
        }
    }
    for change in &changes.sets {
        let index = table.sets.iter().position(|s| s.name == change.name);
        let index = index.ok_or_else(|| format!("there is no set \"{}\"", change.name))?;
        let set = &table.sets[index];
        let layout = KeyLayout::of(&set.key, set.interval());
        let at = |err: String| format!("set \"{}\": {err}", change.name);
        let encode = |e: &Element| layout.encode(e).map_err(|err| at(format!("element {e}: {err}")));
        if !indexes.contains_key(&change.name) {
            indexes.insert(change.name.clone(), SetIndex::of(set, &layout)?);
        }
        let present = &indexes[&change.name].at;
        let was_empty = present.is_empty();
        let kept: HashSet<Encoded> = change.add.iter().map(encode).collect::<Result<_, _>>()?;
        let mut deleted = Vec::new();
        let mut gone = HashSet::new();
        for element in &change.delete {
            let key = encode(element)?;
            if !kept.contains(&key)
                && let Some(i) = present.get(&key)
                && gone.insert(key.clone())
            {
                deleted.push((key, *i));
            }
        }
        let mut added: Vec<(Encoded, Option<Verdict>, Element)> = Vec::new();
        for element in &change.add {
            let key = encode(element)?;
            let there = present.contains_key(&key) && !gone.contains(&key);
            if there || added.iter().any(|(k, ..)| *k == key) {
                continue;
            }
            let overlaps = |k: &Encoded| !gone.contains(k) && k.overlaps(&key);
            if layout.interval && (present.keys().any(overlaps) || added.iter().any(|(k, ..)| k.overlaps(&key))) {
                return Err(at(format!("element {element} overlaps an element of the set")));
            }
            added.push((key, None, element.clone()));
        }
        deleted.sort_by(|a, b| a.0.cmp(&b.0));
        if layout.interval {
            added.sort_by(|a, b| a.0.cmp(&b.0));
        }
        edits.push(Edit { name: change.name.clone(), index, map: false, layout, deleted, added, was_empty });
    }
    // The chains a map's new verdicts may name (built only when maps change: it is the whole table).
    let scope = (!changes.maps.is_empty()).then(|| scope_of(table));
    for change in &changes.maps {
        let scope = scope.as_ref().expect("built when maps change");
        let index = table.maps.iter().position(|m| m.name == change.name);
        let index = index.ok_or_else(|| format!("there is no map \"{}\"", change.name))?;
        let map = &table.maps[index];
        let layout = KeyLayout::of(&map.key, false);
        let at = |err: String| format!("map \"{}\": {err}", change.name);
        let encode = |e: &Element| layout.encode(e).map_err(|err| at(format!("element {e}: {err}")));
        let mut present: HashMap<Encoded, (usize, &Verdict)> = HashMap::new();
        for (i, element) in map.elements.iter().enumerate() {
            present.insert(encode(&element.key)?, (i, &element.verdict));
        }
        let mut deleted: Vec<(Encoded, usize)> = Vec::new();
        for key in &change.delete {
            let encoded = encode(key)?;
            if let Some((i, _)) = present.get(&encoded) {
                deleted.push((encoded, *i));
            }
        }
        let mut added: Vec<(Encoded, Option<Verdict>, Element)> = Vec::new();
        for MapElement { key, verdict } in &change.add {
            let encoded = encode(key)?;
            check_map_verdict(scope, verdict).map_err(|err| at(format!("element {key}: {err}")))?;
            match present.get(&encoded) {
                Some((_, had)) if *had == verdict => continue,
                // A new verdict for a key: delete it, then add it again.
                Some((i, _)) if !deleted.iter().any(|(k, _)| *k == encoded) => deleted.push((encoded.clone(), *i)),
                _ => {}
            }
            added.retain(|(k, ..)| *k != encoded);
            added.push((encoded, Some(verdict.clone()), key.clone()));
        }
        edits.push(Edit { name: change.name.clone(), index, map: true, layout, deleted, added, was_empty: false });
    }
    Ok(edits)
}

/// The edits' deletions, then their additions, into `batch`.
pub fn write(batch: &mut Batch, edits: &[Edit]) {
    write_deletions(batch, edits);
    write_additions(batch, edits);
}

/// The edits' deletions into `batch`.
pub fn write_deletions(batch: &mut Batch, edits: &[Edit]) {
    for edit in edits.iter().filter(|e| !e.deleted.is_empty()) {
        let keys: Vec<(Encoded, Option<Verdict>)> = edit.deleted.iter().map(|(k, _)| (k.clone(), None)).collect();
        let label = format!("delete elements of {} \"{}\"", kind(edit.map), edit.name);
        batch.change_elements(&edit.name, &edit.layout, &keys, false, false, &label);
    }
}

/// The edits' additions into `batch`.
pub fn write_additions(batch: &mut Batch, edits: &[Edit]) {
    for edit in edits.iter().filter(|e| !e.added.is_empty()) {
        let keys: Vec<(Encoded, Option<Verdict>)> = edit.added.iter().map(|(k, v, _)| (k.clone(), v.clone())).collect();
        let label = format!("add elements to {} \"{}\"", kind(edit.map), edit.name);
        batch.change_elements(&edit.name, &edit.layout, &keys, true, edit.was_empty, &label);
    }
}

/// The copy of the table (and its sets' indexes) after the edits committed. A set's elements
/// are in no particular order: a deleted one's place takes the last.
pub fn apply(table: &mut Table, edits: Vec<Edit>, indexes: &mut SetIndexes) {
    for edit in edits {
        if edit.map {
            let mut gone: Vec<usize> = edit.deleted.iter().map(|(_, i)| *i).collect();
            gone.sort_unstable();
            gone.dedup();
            let elements = &mut table.maps[edit.index].elements;
            for i in gone.into_iter().rev() {
                elements.remove(i);
            }
            elements.extend(
                edit.added.into_iter().map(|(_, verdict, key)| MapElement {
                    key,
                    verdict: verdict.expect("a map element has a verdict"),
                }),
            );
            continue;
        }
        let elements = &mut table.sets[edit.index].elements;
        let index = indexes.get_mut(&edit.name).expect("plan indexed every set it changed");
        for (key, _) in &edit.deleted {
            let Some(i) = index.at.remove(key) else { continue };
            elements.swap_remove(i);
            index.keys.swap_remove(i);
            if let Some(moved) = index.keys.get(i) {
                index.at.insert(moved.clone(), i);
            }
        }
        for (key, _, element) in edit.added {
            index.at.insert(key.clone(), elements.len());
            index.keys.push(key);
            elements.push(element);
        }
    }
}

fn kind(map: bool) -> &'static str {
    if map { "map" } else { "set" }
}
