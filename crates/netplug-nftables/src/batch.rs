//! A transaction: nf_tables messages between NFNL_MSG_BATCH_BEGIN and NFNL_MSG_BATCH_END,
//! serialized as they are added, each remembered by what it does so that a kernel error names
//! the chain, set or rule that failed.

use std::collections::HashMap;
use std::rc::Rc;

use netlink_packet_core::{
    DefaultNla, NLA_F_NESTED, NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_netfilter::nftables::{
    ChainAttribute, ChainMessage, Hook, HookNumber, InetHookNumber, ListAttribute, NfTablesMessage, RuleAttribute,
    RuleMessage, SetAttribute, SetDescription, SetElementAttribute, SetElementList, SetElementMessage, SetFlags,
    SetMessage, TableAttribute, TableFlags, TableMessage,
};
use netlink_packet_netfilter::none::ControlMessage;
use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterProtoFamily};

use crate::compile::{ANONYMOUS_SET, CompiledRule};
use crate::elements::{Encoded, KeyLayout};
use crate::expr::{self, Expr, nested, string, u32_be, u64_be};
use crate::model::{BaseChain, Family, Policy, Verdict};

/// NFNL_SUBSYS_NFTABLES, the batch's resource id.
const NFTABLES: u16 = 10;
/// NFNL_BATCH_GENID: the batch applies only if the ruleset generation is still this one.
const BATCH_GENID: u16 = 1;
/// nf_tables object messages, which netlink-packet-netfilter carries as raw attributes.
const NFTA_OBJ_TABLE: u16 = 1;
const NFTA_OBJ_NAME: u16 = 2;
const NFTA_OBJ_TYPE: u16 = 3;
const NFTA_OBJ_DATA: u16 = 4;
/// Set element attributes as nft lays them out (see [`Batch::element`]).
const ELEM_KEY: u16 = 1;
const ELEM_DATA: u16 = 2;
const ELEM_FLAGS: u16 = 3;
const ELEM_USERDATA: u16 = 6;
const ELEM_KEY_END: u16 = 10;
const DATA_VALUE: u16 = 1;
const DATA_VERDICT: u16 = 2;
const NFT_SET_ELEM_INTERVAL_END: u32 = 1;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
/// A set-element message holds at most this many bytes of elements: the attribute that carries
/// them has a 16-bit length, so large sets are written in several messages (as libnftnl does).
const ELEMENTS_PER_MESSAGE_BYTES: usize = 48 * 1024;

/// One transaction being built.
pub struct Batch {
    family: Family,
    table: String,
    buffer: Vec<u8>,
    /// What each message does, by sequence number offset (0 is BATCH_BEGIN).
    labels: Vec<Label>,
    first_sequence: u32,
    next_set_id: u32,
    /// Sets created in this batch: lookups and elements refer to them by id as well as name.
    set_ids: HashMap<String, u32>,
    /// The number of the next anonymous set, when this batch names them itself (see
    /// [`Batch::number_anonymous_sets`]); `None` leaves the naming to the kernel, as nft does.
    next_anonymous: Option<u32>,
}

/// What a message does, formatted only when an error names it.
#[derive(Debug, Clone)]
pub enum Label {
    Text(String),
    /// A rule (`part` 0), or its anonymous set (1) or that set's elements (2).
    Rule { chain: Rc<str>, index: usize, comment: Option<String>, part: u8 },
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Label::Text(text) => f.write_str(text),
            Label::Rule { chain, index, comment, part } => {
                write!(f, "add rule {} of chain \"{chain}\"", index + 1)?;
                if let Some(comment) = comment {
                    write!(f, " (comment \"{comment}\")")?;
                }
                match part {
                    1 => f.write_str(": its set"),
                    2 => f.write_str(": its set's elements"),
                    _ => Ok(()),
                }
            }
        }
    }
}

impl From<String> for Label {
    fn from(text: String) -> Self {
        Label::Text(text)
    }
}

/// A serialized batch and the labels of its messages.
pub struct Sealed {
    pub bytes: Vec<u8>,
    pub first_sequence: u32,
    pub labels: Vec<Label>,
}

impl Sealed {
    /// What the message with `sequence` did, if it is one of this batch's.
    pub fn label(&self, sequence: u32) -> Option<String> {
        let index = sequence.checked_sub(self.first_sequence)? as usize;
        self.labels.get(index).map(ToString::to_string)
    }

    pub fn last_sequence(&self) -> u32 {
        self.first_sequence + self.labels.len() as u32 - 1
    }

    /// The serialized message with `sequence`, for resolving an error's attribute offset.
    pub fn message(&self, sequence: u32) -> Option<&[u8]> {
        let mut offset = 0;
        while offset + 16 <= self.bytes.len() {
            let len = u32::from_ne_bytes(self.bytes[offset..offset + 4].try_into().ok()?) as usize;
            let seq = u32::from_ne_bytes(self.bytes[offset + 8..offset + 12].try_into().ok()?);
            if seq == sequence {
                return self.bytes.get(offset..offset + len);
            }
            offset += (len + 3) & !3;
        }
        None
    }

    /// The number of messages between BATCH_BEGIN and BATCH_END.
    pub fn operations(&self) -> usize {
        self.labels.len().saturating_sub(2)
    }
}

impl Batch {
    /// Starts a batch for `table`; `generation` makes it apply only to that ruleset generation.
    pub fn new(family: Family, table: &str, first_sequence: u32, generation: Option<u32>) -> Self {
        let mut batch = Batch {
            family,
            table: table.to_string(),
            buffer: Vec::with_capacity(64 * 1024),
            labels: Vec::new(),
            first_sequence,
            next_set_id: 1,
            set_ids: HashMap::new(),
            next_anonymous: None,
        };
        let attributes = generation.map(|g| vec![u32_be(BATCH_GENID, g)]).unwrap_or_default();
        let control = match attributes.is_empty() {
            true => ControlMessage::BatchBegin,
            false => ControlMessage::Other { message_type: 16, attributes },
        };
        let header = NetfilterHeader::new(NetfilterProtoFamily::Unspec, 0, NFTABLES);
        batch.push(NetfilterMessage::new(header, control), NLM_F_REQUEST, Label::Text("begin the transaction".into()));
        batch
    }

    fn push(&mut self, message: NetfilterMessage, flags: u16, label: impl Into<Label>) {
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.first_sequence + self.labels.len() as u32;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(message));
        packet.finalize();
        let start = self.buffer.len();
        self.buffer.resize(start + packet.buffer_len(), 0);
        packet.serialize(&mut self.buffer[start..]);
        self.labels.push(label.into());
    }

    fn nft(&mut self, message: NfTablesMessage, flags: u16, label: impl Into<Label>) {
        let header = NetfilterHeader::new(NetfilterProtoFamily::from(self.family.nfproto()), 0, 0);
        self.push(NetfilterMessage::new(header, message), NLM_F_REQUEST | flags, label);
    }

    /// Ends the batch. BATCH_END asks for an acknowledgement, which kernels since 6.10 send once
    /// the transaction committed.
    pub fn seal(mut self) -> Sealed {
        let header = NetfilterHeader::new(NetfilterProtoFamily::Unspec, 0, NFTABLES);
        self.push(NetfilterMessage::new(header, ControlMessage::BatchEnd), NLM_F_REQUEST | NLM_F_ACK, Label::Text("commit".into()));
        Sealed { bytes: self.buffer, first_sequence: self.first_sequence, labels: self.labels }
    }

    /// Names anonymous sets `__set<n>` from `first` on instead of sending nft's `__set%d`. For
    /// `%d` the kernel picks the lowest free number by reading the name of every set in the table
    /// (with sscanf), once per anonymous set: a table of thousands of them took tens of seconds
    /// to write. `nft list` shows both alike (it prints anonymous sets inline, by their flag).
    pub fn number_anonymous_sets(&mut self, first: u32) {
        self.next_anonymous = Some(first);
    }

    /// The number the next anonymous set would get, when this batch names them.
    pub fn next_anonymous(&self) -> Option<u32> {
        self.next_anonymous
    }

    pub fn is_empty(&self) -> bool {
        self.labels.len() <= 1
    }

    fn table_name(&self) -> String {
        format!("{} {}", self.family.name(), self.table)
    }

    pub fn add_table(&mut self) {
        let attributes = vec![TableAttribute::Name(self.table.clone()), TableAttribute::Flags(TableFlags::empty())];
        let label = format!("add table {}", self.table_name());
        self.nft(NfTablesMessage::NewTable(TableMessage { attributes }), NLM_F_CREATE, label);
    }

    pub fn delete_table(&mut self) {
        let attributes = vec![TableAttribute::Name(self.table.clone())];
        let label = format!("delete table {}", self.table_name());
        self.nft(NfTablesMessage::DeleteTable(TableMessage { attributes }), 0, label);
    }

    pub fn add_chain(&mut self, name: &str, base: Option<&BaseChain>) {
        let mut attributes = vec![ChainAttribute::Table(self.table.clone()), ChainAttribute::Name(name.into())];
        if let Some(base) = base {
            attributes.push(ChainAttribute::Type(base.kind.name().into()));
            attributes.push(ChainAttribute::Policy(match base.policy {
                Policy::Accept => expr::NF_ACCEPT,
                Policy::Drop => expr::NF_DROP,
            }));
            attributes.push(ChainAttribute::Hook(vec![
                Hook::Number(HookNumber::Inet(InetHookNumber::from(base.hook.number()))),
                Hook::Priority(base.priority as u32),
            ]));
        }
        self.nft(NfTablesMessage::NewChain(ChainMessage { attributes }), NLM_F_CREATE, format!("add chain \"{name}\""));
    }

    pub fn delete_chain(&mut self, name: &str) {
        let attributes = vec![ChainAttribute::Table(self.table.clone()), ChainAttribute::Name(name.into())];
        self.nft(NfTablesMessage::DeleteChain(ChainMessage { attributes }), 0, format!("delete chain \"{name}\""));
    }

    /// Deletes every rule of a chain.
    pub fn flush_chain(&mut self, name: &str) {
        let attributes = vec![RuleAttribute::Table(self.table.clone()), RuleAttribute::Chain(name.into())];
        self.nft(NfTablesMessage::DeleteRule(RuleMessage { attributes }), 0, format!("flush chain \"{name}\""));
    }

    /// Deletes one rule by its kernel handle.
    pub fn delete_rule(&mut self, chain: &str, handle: u64) {
        let attributes = vec![
            RuleAttribute::Table(self.table.clone()),
            RuleAttribute::Chain(chain.into()),
            RuleAttribute::Handle(handle),
        ];
        let label = format!("delete rule {handle} of chain \"{chain}\"");
        self.nft(NfTablesMessage::DeleteRule(RuleMessage { attributes }), 0, label);
    }

    pub fn add_counter(&mut self, name: &str) {
        let attributes = vec![
            string(NFTA_OBJ_TABLE, &self.table),
            string(NFTA_OBJ_NAME, name),
            u32_be(NFTA_OBJ_TYPE, expr::OBJECT_COUNTER),
            nested(NFTA_OBJ_DATA, &[u64_be(1, 0), u64_be(2, 0)]),
        ];
        self.nft(NfTablesMessage::NewObject(attributes), NLM_F_CREATE, format!("add counter \"{name}\""));
    }

    pub fn delete_counter(&mut self, name: &str) {
        let attributes = vec![
            string(NFTA_OBJ_TABLE, &self.table),
            string(NFTA_OBJ_NAME, name),
            u32_be(NFTA_OBJ_TYPE, expr::OBJECT_COUNTER),
        ];
        self.nft(NfTablesMessage::DeleteObject(attributes), 0, format!("delete counter \"{name}\""));
    }

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
    pub fn add_first_elements(&mut self, name: &str, layout: &KeyLayout, map: bool, elements: &[(Encoded, Option<Verdict>)]) {
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
            encoded.push(vec![u32_be(ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END), key(ELEM_KEY, &vec![0; layout.key_len()])]);
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

    /// Appends a rule to `chain`, after the anonymous sets its lookups use.
    pub fn add_rule(&mut self, chain: &Rc<str>, index: usize, comment: Option<&String>, compiled: &CompiledRule) {
        let label = |part| Label::Rule { chain: chain.clone(), index, comment: comment.cloned(), part };
        let mut exprs = compiled.exprs.clone();
        for (index, set) in &compiled.anonymous {
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
            self.nft(NfTablesMessage::NewSet(SetMessage { attributes }), NLM_F_CREATE, label(1));
            let list = elements
                .iter()
                .enumerate()
                .map(|(i, attrs)| {
                    ListAttribute::Other(DefaultNla::new(
                        (i + 1) as u16 | NLA_F_NESTED,
                        expr::emit_all(attrs),
                    ))
                })
                .collect();
            let attributes = vec![
                SetElementList::Table(self.table.clone()),
                SetElementList::Set(name.clone()),
                SetElementList::SetId(id),
                SetElementList::Elements(list),
            ];
            let message = SetElementMessage { attributes };
            self.nft(NfTablesMessage::NewSetElement(message), NLM_F_CREATE, label(2));
            if let Some(Expr::Lookup { set: lookup, set_id, .. }) = exprs.get_mut(*index) {
                *lookup = name;
                *set_id = Some(id);
            }
        }
        for expr in &mut exprs {
            if let Expr::Lookup { set, set_id: set_id @ None, .. } = expr
                && let Some(id) = self.set_ids.get(set.as_str())
            {
                *set_id = Some(*id);
            }
        }
        // The expressions are emitted once into one attribute: emitting them as typed attributes
        // in the message measures every nested level again at each level above it.
        let expressions: Vec<_> = exprs.iter().map(Expr::to_attribute).collect();
        let mut attributes = vec![
            RuleAttribute::Table(self.table.clone()),
            RuleAttribute::Chain(chain.to_string()),
            RuleAttribute::Other(DefaultNla::new(NFTA_RULE_EXPRESSIONS | NLA_F_NESTED, expr::emit_all(&expressions))),
        ];
        if let Some(userdata) = &compiled.userdata {
            attributes.push(RuleAttribute::UserData(userdata.clone()));
        }
        self.nft(NfTablesMessage::NewRule(RuleMessage { attributes }), NLM_F_CREATE | NLM_F_APPEND, label(0));
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
