//! A transaction: nf_tables messages between NFNL_MSG_BATCH_BEGIN and NFNL_MSG_BATCH_END,
//! serialized as they are added, each remembered by what it does so that a kernel error names
//! the chain, set or rule that failed.

mod sets;

use std::collections::HashMap;
use std::rc::Rc;

use netlink_packet_core::{
    DefaultNla, NLA_F_NESTED, NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage,
    NetlinkPayload,
};
use netlink_packet_netfilter::nftables::{
    ChainAttribute, ChainMessage, Hook, HookNumber, InetHookNumber, NfTablesMessage, RuleAttribute, RuleMessage,
    TableAttribute, TableFlags, TableMessage,
};
use netlink_packet_netfilter::none::ControlMessage;
use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterProtoFamily};

use crate::compile::CompiledRule;
use crate::expr::{self, nested, string, u32_be, u64_be};
use crate::model::{BaseChain, Family, Policy};

/// NFNL_SUBSYS_NFTABLES, the batch's resource id.
const NFTABLES: u16 = 10;
/// NFNL_BATCH_GENID: the batch applies only if the ruleset generation is still this one.
const BATCH_GENID: u16 = 1;
/// nf_tables object messages, which netlink-packet-netfilter carries as raw attributes.
const NFTA_OBJ_TABLE: u16 = 1;
const NFTA_OBJ_NAME: u16 = 2;
const NFTA_OBJ_TYPE: u16 = 3;
const NFTA_OBJ_DATA: u16 = 4;
const NFTA_RULE_EXPRESSIONS: u16 = 4;

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
    Rule {
        chain: Rc<str>,
        index: usize,
        comment: Option<String>,
        part: u8,
    },
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
        self.push(
            NetfilterMessage::new(header, ControlMessage::BatchEnd),
            NLM_F_REQUEST | NLM_F_ACK,
            Label::Text("commit".into()),
        );
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

    /// Appends a rule to `chain`, after the anonymous sets its lookups use.
    pub fn add_rule(&mut self, chain: &Rc<str>, index: usize, comment: Option<&String>, compiled: &CompiledRule) {
        let label = |part| Label::Rule { chain: chain.clone(), index, comment: comment.cloned(), part };
        let mut anonymous = Vec::with_capacity(compiled.anonymous.len());
        for (index, set) in &compiled.anonymous {
            let (name, id) = self.add_anonymous_set(set, label(1), label(2));
            anonymous.push((*index, name, id));
        }
        // A lookup names its anonymous set as the batch named it, and any set made in this
        // batch by its id too.
        let set_ids = &self.set_ids;
        let set_of = |at: usize, set, id: Option<u32>| match anonymous.iter().find(|(index, ..)| *index == at) {
            Some((_, name, id)) => (name.as_str(), Some(*id)),
            None => (set, id.or_else(|| set_ids.get(set).copied())),
        };
        let mut expressions = Vec::with_capacity(compiled.exprs.len() * 64);
        crate::wire::Writer::new(&mut expressions).expressions(&compiled.exprs, set_of);
        let mut attributes = vec![
            RuleAttribute::Table(self.table.clone()),
            RuleAttribute::Chain(chain.to_string()),
            RuleAttribute::Other(DefaultNla::new(NFTA_RULE_EXPRESSIONS | NLA_F_NESTED, expressions)),
        ];
        if let Some(userdata) = &compiled.userdata {
            attributes.push(RuleAttribute::UserData(userdata.clone()));
        }
        self.nft(NfTablesMessage::NewRule(RuleMessage { attributes }), NLM_F_CREATE | NLM_F_APPEND, label(0));
    }
}
