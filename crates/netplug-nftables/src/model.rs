//! The table description: what netplug wants in its nftables table, as JSON (serde).
//!
//! A closed vocabulary: the matches, statements and verdicts below are the only ones the encoder
//! knows, each written as `nft` 1.0 writes it. The spelling follows what `nft list` prints
//! (`"ip saddr"`, `"meta l4proto"`, `"th dport"`, `"iifname"`), so a description reads like the
//! ruleset an admin sees. Values are checked (types, lengths, references) by [`crate::check`].

use serde::{Deserialize, Serialize};

pub use crate::rule::*;

/// One nftables table and everything in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Table {
    pub family: Family,
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<Chain>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<Set>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maps: Vec<Map>,
    /// Named counter objects (`counter name "x"` in rules; read back with the writer's counters()).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Inet,
    Ip,
    Ip6,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Inet => "inet",
            Family::Ip => "ip",
            Family::Ip6 => "ip6",
        }
    }

    /// The nfgenmsg family (NFPROTO_*).
    pub fn nfproto(self) -> u8 {
        match self {
            Family::Inet => 1,
            Family::Ip => 2,
            Family::Ip6 => 10,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Chain {
    pub name: String,
    /// Present for a base chain (attached to a hook); absent for a regular chain (jump target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseChain>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaseChain {
    #[serde(rename = "type")]
    pub kind: ChainType,
    pub hook: Hook,
    /// Numeric priority: filter is 0, srcnat 100, dstnat -100, raw -300, mangle -150.
    pub priority: i32,
    #[serde(default)]
    pub policy: Policy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChainType {
    Filter,
    Nat,
    Route,
}

impl ChainType {
    pub fn name(self) -> &'static str {
        match self {
            ChainType::Filter => "filter",
            ChainType::Nat => "nat",
            ChainType::Route => "route",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Hook {
    Prerouting,
    Input,
    Forward,
    Output,
    Postrouting,
}

impl Hook {
    pub fn name(self) -> &'static str {
        match self {
            Hook::Prerouting => "prerouting",
            Hook::Input => "input",
            Hook::Forward => "forward",
            Hook::Output => "output",
            Hook::Postrouting => "postrouting",
        }
    }

    /// NF_INET_* hook number.
    pub fn number(self) -> u32 {
        match self {
            Hook::Prerouting => 0,
            Hook::Input => 1,
            Hook::Forward => 2,
            Hook::Output => 3,
            Hook::Postrouting => 4,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    #[default]
    Accept,
    Drop,
}

/// A named set: `type` is one data type or a concatenation of them (`["ipv4_addr", "inet_proto",
/// "inet_service"]`); elements are values of that type, a concatenation's as arrays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Set {
    pub name: String,
    #[serde(rename = "type")]
    pub key: KeyType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<SetFlag>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elements: Vec<Element>,
}

impl Set {
    pub fn interval(&self) -> bool {
        self.flags.contains(&SetFlag::Interval)
    }
}

/// A verdict map (`type <key> : verdict`), the dispatch of `iifname vmap @map`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Map {
    pub name: String,
    #[serde(rename = "type")]
    pub key: KeyType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elements: Vec<MapElement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MapElement {
    pub key: Element,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SetFlag {
    Interval,
}

/// One data type, or a concatenation (two or more).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "OneOrMany<DataType>", into = "OneOrMany<DataType>")]
pub struct KeyType(pub Vec<DataType>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataType {
    Ipv4Addr,
    Ipv6Addr,
    InetProto,
    InetService,
    Ifname,
    Mark,
}

impl DataType {
    pub fn name(self) -> &'static str {
        match self {
            DataType::Ipv4Addr => "ipv4_addr",
            DataType::Ipv6Addr => "ipv6_addr",
            DataType::InetProto => "inet_proto",
            DataType::InetService => "inet_service",
            DataType::Ifname => "ifname",
            DataType::Mark => "mark",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> From<OneOrMany<T>> for Vec<T> {
    fn from(value: OneOrMany<T>) -> Self {
        match value {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        }
    }
}

impl<T> From<Vec<T>> for OneOrMany<T> {
    fn from(mut value: Vec<T>) -> Self {
        if value.len() == 1 { OneOrMany::One(value.remove(0)) } else { OneOrMany::Many(value) }
    }
}

impl From<OneOrMany<DataType>> for KeyType {
    fn from(value: OneOrMany<DataType>) -> Self {
        KeyType(value.into())
    }
}

impl From<KeyType> for OneOrMany<DataType> {
    fn from(value: KeyType) -> Self {
        value.0.into()
    }
}

/// A value as written in JSON: a number (ports, protocol numbers, marks) or text (addresses,
/// prefixes `10.0.0.0/8`, ranges `1000-2000`, names `tcp`, `echo-request`, interface names).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum Atom {
    Number(u64),
    Text(String),
}

impl std::fmt::Display for Atom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Atom::Number(n) => write!(f, "{n}"),
            Atom::Text(text) => write!(f, "\"{text}\""),
        }
    }
}

/// A set element: one value, or one per component of a concatenation. Read by crate::read, as
/// are the other either-or values.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum Element {
    One(Atom),
    Concat(Vec<Atom>),
}

impl std::fmt::Display for Element {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Element::One(atom) => write!(f, "{atom}"),
            Element::Concat(atoms) => {
                let parts: Vec<String> = atoms.iter().map(ToString::to_string).collect();
                write!(f, "{}", parts.join(" . "))
            }
        }
    }
}

/// Element changes to the named sets and maps of a table already written.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ElementChanges {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<SetChange>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maps: Vec<MapChange>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetChange {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<Element>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete: Vec<Element>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MapChange {
    pub name: String,
    /// Added, or replacing the verdict of a key already there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<MapElement>,
    /// Keys to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete: Vec<Element>,
}

/// Parses a description from JSON; an error names the path of the offending field.
pub fn table_from_json(text: &str) -> crate::Result<Table> {
    from_json("read table description", text)
}

/// Parses element changes from JSON.
pub fn changes_from_json(text: &str) -> crate::Result<ElementChanges> {
    from_json("read element changes", text)
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(op: &str, text: &str) -> crate::Result<T> {
    // Read without tracking the path (which slows the read of a whole table of thousands of
    // rules), and again with it only to say where a description that does not read is wrong.
    if let Ok(value) = serde_json::from_str(text) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let what = if path == "." { inner.to_string() } else { format!("{path}: {inner}") };
        crate::NftError::invalid(op, what)
    })
}
