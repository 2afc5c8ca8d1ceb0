//! Element changes planned against the writer's copy of the committed table: what to delete and
//! add in the kernel (deletions first, an element deleted and added again left alone, additions
//! of elements already there and deletions of absent ones dropped), and the copy's new elements.

use std::collections::{HashMap, HashSet};

use crate::batch::Batch;
use crate::check::{check_map_verdict, scope_of};
use crate::elements::{Encoded, KeyLayout};
use crate::model::{Element, ElementChanges, MapElement, Table, Verdict};

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
pub fn plan(table: &Table, changes: &ElementChanges) -> Result<Vec<Edit>, String> {
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
        let mut present: HashMap<Encoded, usize> = HashMap::new();
        for (i, element) in set.elements.iter().enumerate() {
            present.insert(encode(element)?, i);
        }
        let was_empty = present.is_empty();
        let kept: HashSet<Encoded> = change.add.iter().map(encode).collect::<Result<_, _>>()?;
        let mut deleted = Vec::new();
        for element in &change.delete {
            let key = encode(element)?;
            if !kept.contains(&key)
                && let Some(i) = present.remove(&key)
            {
                deleted.push((key, i));
            }
        }
        let mut added: Vec<(Encoded, Option<Verdict>, Element)> = Vec::new();
        for element in &change.add {
            let key = encode(element)?;
            if present.contains_key(&key) || added.iter().any(|(k, ..)| *k == key) {
                continue;
            }
            if layout.interval && present.keys().chain(added.iter().map(|(k, ..)| k)).any(|k| k.overlaps(&key)) {
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

/// The copy of the table after the edits committed.
pub fn apply(table: &mut Table, edits: Vec<Edit>) {
    for edit in edits {
        let mut gone: Vec<usize> = edit.deleted.iter().map(|(_, i)| *i).collect();
        gone.sort_unstable();
        gone.dedup();
        if edit.map {
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
        } else {
            let elements = &mut table.sets[edit.index].elements;
            for i in gone.into_iter().rev() {
                elements.remove(i);
            }
            elements.extend(edit.added.into_iter().map(|(_, _, element)| element));
        }
    }
}

fn kind(map: bool) -> &'static str {
    if map { "map" } else { "set" }
}
