//! The set and element messages of a batch: named sets and maps with their key layout and the
//! user data nft stores beside them, and elements as nft sends them (an interval as a start and
//! an end element, a new interval set starting at zero, large lists split across messages).

use netlink_packet_core::{DefaultNla, NLA_F_NESTED, NLM_F_CREATE};
use netlink_packet_netfilter::nftables::{
    ListAttribute, NfTablesMessage, SetAttribute, SetDescription, SetElementAttribute, SetElementList,
    SetElementMessage, SetFlags, SetMessage,
};

use super::{Batch, Label};
use crate::compile::{ANONYMOUS_SET, AnonymousSet};
use crate::elements::{Encoded, KeyLayout};
use crate::expr::{self, nested, u32_be};
use crate::model::Verdict;

/// Set element attributes as nft lays them out.
const ELEM_KEY: u16 = 1;
const ELEM_DATA: u16 = 2;
const ELEM_FLAGS: u16 = 3;
const ELEM_USERDATA: u16 = 6;
const ELEM_KEY_END: u16 = 10;
const DATA_VALUE: u16 = 1;
const DATA_VERDICT: u16 = 2;
const NFT_SET_ELEM_INTERVAL_END: u32 = 1;
/// A set-element message holds at most this many bytes of elements: the attribute that carries
/// them has a 16-bit length, so large sets are written in several messages (as libnftnl does).
const ELEMENTS_PER_MESSAGE_BYTES: usize = 48 * 1024;

impl Batch {
    /// Adds a named set (`map`: a verdict map), empty: [`Batch::add_first_elements`] fills it.
    pub fn add_set(&mut self, name: &str, layout: &KeyLayout, map: bool) {
        let id = self.next_set_id;
        self.next_set_id += 1;
        self.set_ids.insert(name.to_string(), id);
        let mut attributes = vec![
            SetAttribute::Table(self.table.clone()),
            SetAttribute::Name(name.into()),
            SetAttribute::Flags(SetFlags::from_bits_retain(if map { 0x8 } else { layout.flags() })),
            SetAttribute::KeyType(layout.nft_type()),
            SetAttribute::KeyLen(layout.key_len() as u32),
        ];
        if map {
            attributes.push(SetAttribute::DataType(0xffffff00)); // NFT_DATA_VERDICT
            attributes.push(SetAttribute::DataLen(0));
        }
        attributes.push(SetAttribute::Id(id));
        if layout.interval && layout.concat() {
            let fields: Vec<DefaultNla> =
                layout.fields.iter().map(|f| nested(1, &[u32_be(1, f.width() as u32)])).collect();
            attributes.push(SetAttribute::Description(vec![SetDescription::Other(nested(2, &fields))]));
        }
        attributes.push(SetAttribute::UserData(layout.named_set_userdata(map)));
        let kind = if map { "map" } else { "set" };
        self.nft(NfTablesMessage::NewSet(SetMessage { attributes }), NLM_F_CREATE, format!("add {kind} \"{name}\""));
    }

    /// The elements of a set added (empty) in this batch.
    pub fn add_first_elements(
        &mut self,
        name: &str,
        layout: &KeyLayout,
        map: bool,
        elements: &[(Encoded, Option<Verdict>)],
    ) {
        if !elements.is_empty() {
            // A new interval set starts with the end of an interval from zero, as nft writes it.
            let leading_zero = layout.interval && !layout.concat();
            let kind = if map { "map" } else { "set" };
            self.elements(name, layout, elements, true, leading_zero, &format!("add elements to {kind} \"{name}\""));
        }
    }

    pub fn delete_set(&mut self, name: &str, map: bool) {
        let attributes = vec![SetAttribute::Table(self.table.clone()), SetAttribute::Name(name.into())];
        let label = format!("delete {} \"{name}\"", if map { "map" } else { "set" });
        self.nft(NfTablesMessage::DeleteSet(SetMessage { attributes }), 0, label);
    }

    /// Adds (`add`) or deletes elements of a named set or map that exists.
    pub fn change_elements(
        &mut self,
        name: &str,
        layout: &KeyLayout,
        elements: &[(Encoded, Option<Verdict>)],
        add: bool,
        first_of_empty_set: bool,
        label: &str,
    ) {
        let leading_zero = add && first_of_empty_set && layout.interval && !layout.concat();
        self.elements(name, layout, elements, add, leading_zero, label);
    }

    fn elements(
        &mut self,
        set: &str,
        layout: &KeyLayout,
        elements: &[(Encoded, Option<Verdict>)],
        add: bool,
        leading_zero: bool,
        label: &str,
    ) {
        let mut encoded: Vec<Vec<DefaultNla>> = Vec::new();
        if leading_zero && elements.first().is_some_and(|(e, _)| !starts_at_zero(e)) {
            encoded
                .push(vec![u32_be(ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END), key(ELEM_KEY, &vec![0; layout.key_len()])]);
        }
        for (element, verdict) in elements {
            encoded.extend(element_attributes(element, verdict.as_ref()));
        }
        let id = self.set_ids.get(set).copied();
        let mut chunk: Vec<ListAttribute<SetElementAttribute>> = Vec::new();
        let mut bytes = 0;
        for attrs in encoded {
            let nla = DefaultNla::new((chunk.len() + 1) as u16 | NLA_F_NESTED, expr::emit_all(&attrs));
            bytes += netlink_packet_core::Nla::value_len(&nla) + 4;
            chunk.push(ListAttribute::Other(nla));
            if bytes >= ELEMENTS_PER_MESSAGE_BYTES {
                self.element_message(set, id, std::mem::take(&mut chunk), add, label);
                bytes = 0;
            }
        }
        if !chunk.is_empty() {
            self.element_message(set, id, chunk, add, label);
        }
    }

    fn element_message(
        &mut self,
        set: &str,
        id: Option<u32>,
        elements: Vec<ListAttribute<SetElementAttribute>>,
        add: bool,
        label: &str,
    ) {
        let mut attributes = vec![SetElementList::Table(self.table.clone()), SetElementList::Set(set.into())];
        if let Some(id) = id {
            attributes.push(SetElementList::SetId(id));
        }
        attributes.push(SetElementList::Elements(elements));
        let message = SetElementMessage { attributes };
        if add {
            self.nft(NfTablesMessage::NewSetElement(message), NLM_F_CREATE, label.to_string());
        } else {
            self.nft(NfTablesMessage::DeleteSetElement(message), 0, label.to_string());
        }
    }

    /// An anonymous set of a rule, with its elements; returns its name and id in the batch.
    pub(super) fn add_anonymous_set(
        &mut self,
        set: &AnonymousSet,
        set_label: Label,
        elements_label: Label,
    ) -> (String, u32) {
        let id = self.next_set_id;
        self.next_set_id += 1;
        let name = match &mut self.next_anonymous {
            Some(next) => {
                *next += 1;
                format!("__set{}", *next - 1)
            }
            None => ANONYMOUS_SET.to_string(),
        };
        let layout = KeyLayout { fields: vec![set.selector.value_type()], interval: set.interval };
        let mut elements: Vec<Vec<DefaultNla>> = Vec::new();
        if set.interval && set.elements.first().is_some_and(|e| !starts_at_zero(e)) {
            elements
                .push(vec![u32_be(ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END), key(ELEM_KEY, &vec![0; layout.key_len()])]);
        }
        for element in &set.elements {
            elements.extend(element_attributes(element, None));
        }
        let open = set.elements.iter().filter(|e| matches!(e, Encoded::Interval { end: None, .. })).count();
        let attributes = vec![
            SetAttribute::Table(self.table.clone()),
            SetAttribute::Name(name.clone()),
            // NFT_SET_ANONYMOUS | NFT_SET_CONSTANT, and NFT_SET_INTERVAL
            SetAttribute::Flags(SetFlags::from_bits_retain(if set.interval { 0x7 } else { 0x3 })),
            SetAttribute::KeyType(layout.nft_type()),
            SetAttribute::KeyLen(layout.key_len() as u32),
            SetAttribute::Id(id),
            // nft counts an open interval's missing end element too.
            SetAttribute::Description(vec![SetDescription::Size((elements.len() + open) as u32)]),
            SetAttribute::UserData(set.selector.anonymous_set_userdata(set.interval)),
        ];
        self.nft(NfTablesMessage::NewSet(SetMessage { attributes }), NLM_F_CREATE, set_label);
        let list = elements
            .iter()
            .enumerate()
            .map(|(i, attrs)| {
                ListAttribute::Other(DefaultNla::new((i + 1) as u16 | NLA_F_NESTED, expr::emit_all(attrs)))
            })
            .collect();
        let attributes = vec![
            SetElementList::Table(self.table.clone()),
            SetElementList::Set(name.clone()),
            SetElementList::SetId(id),
            SetElementList::Elements(list),
        ];
        let message = SetElementMessage { attributes };
        self.nft(NfTablesMessage::NewSetElement(message), NLM_F_CREATE, elements_label);
        (name, id)
    }
}

fn starts_at_zero(element: &Encoded) -> bool {
    match element {
        Encoded::Interval { start, .. } => start.iter().all(|b| *b == 0),
        _ => true,
    }
}

fn key(kind: u16, bytes: &[u8]) -> DefaultNla {
    nested(kind, &[DefaultNla::new(DATA_VALUE, bytes.to_vec())])
}

/// The netlink elements of one element: an interval is its start and the end marker after it.
fn element_attributes(element: &Encoded, verdict: Option<&Verdict>) -> Vec<Vec<DefaultNla>> {
    match element {
        Encoded::Key(bytes) => {
            let mut attrs = vec![key(ELEM_KEY, bytes)];
            if let Some(verdict) = verdict {
                let (code, chain) = verdict_code(verdict);
                let inner = expr::verdict_attributes(code, chain);
                let verdict = DefaultNla::new(DATA_VERDICT | NLA_F_NESTED, expr::emit_all(&inner));
                attrs.push(nested(ELEM_DATA, &[verdict]));
            }
            vec![attrs]
        }
        Encoded::Interval { start, end: Some(end) } => {
            vec![vec![key(ELEM_KEY, start)], vec![u32_be(ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END), key(ELEM_KEY, end)]]
        }
        // An interval that runs to the last value has no end element; nft marks its start
        // "interval open" in the element's user data (NFTNL_UDATA_SET_ELEM_FLAGS).
        Encoded::Interval { start, end: None } => {
            let open = crate::selector::tlv_u32(1, 1);
            vec![vec![key(ELEM_KEY, start), DefaultNla::new(ELEM_USERDATA, open)]]
        }
        Encoded::Ranges { first, last } => vec![vec![key(ELEM_KEY, first), key(ELEM_KEY_END, last)]],
    }
}

/// A map element's verdict code and chain.
pub fn verdict_code(verdict: &Verdict) -> (u32, Option<&str>) {
    use crate::model::SimpleVerdict as S;
    match verdict {
        Verdict::Simple(S::Accept) => (expr::NF_ACCEPT, None),
        Verdict::Simple(S::Drop) => (expr::NF_DROP, None),
        Verdict::Simple(S::Return) => (expr::NFT_RETURN, None),
        Verdict::Simple(S::Continue) => (expr::NFT_CONTINUE, None),
        Verdict::Jump { jump } => (expr::NFT_JUMP, Some(jump)),
        Verdict::Goto { goto } => (expr::NFT_GOTO, Some(goto)),
        Verdict::Vmap { .. } => unreachable!("a map element's verdict is never a vmap (checked)"),
    }
}
