//! The rules of the table description: matches, statements and verdicts, the closed vocabulary
//! the encoder knows (re-exported by [`crate::model`]).

use serde::{Deserialize, Serialize};

use crate::model::{Atom, OneOrMany};

/// A rule: every match must hold (in order), then the statements run, then the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<Match>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statements: Vec<Statement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Shown by `nft list` after the rule (`comment "..."`): which policy the rule belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `key op value`: `ip saddr 10.0.0.0/8`, `th dport != { 80, 443 }`, `ip daddr . meta l4proto .
/// th dport @set`, `meta mark & 0xffff0000 == 0x10000` (with `mask`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    pub key: Key,
    #[serde(default, skip_serializing_if = "Op::is_eq")]
    pub op: Op,
    /// `meta mark` only: the bits compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<Atom>,
    pub value: MatchValue,
}

/// One selector, or a concatenation of them (looked up in a named set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "OneOrMany<Selector>", into = "OneOrMany<Selector>")]
pub struct Key(pub Vec<Selector>);

impl From<OneOrMany<Selector>> for Key {
    fn from(value: OneOrMany<Selector>) -> Self {
        Key(value.into())
    }
}

impl From<Key> for OneOrMany<Selector> {
    fn from(value: Key) -> Self {
        value.0.into()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Selector {
    #[serde(rename = "iifname")]
    Iifname,
    #[serde(rename = "oifname")]
    Oifname,
    #[serde(rename = "meta l4proto")]
    L4proto,
    #[serde(rename = "meta nfproto")]
    Nfproto,
    #[serde(rename = "meta mark")]
    Mark,
    #[serde(rename = "meta skuid")]
    Skuid,
    #[serde(rename = "ip saddr")]
    IpSaddr,
    #[serde(rename = "ip daddr")]
    IpDaddr,
    #[serde(rename = "ip6 saddr")]
    Ip6Saddr,
    #[serde(rename = "ip6 daddr")]
    Ip6Daddr,
    #[serde(rename = "th sport")]
    ThSport,
    #[serde(rename = "th dport")]
    ThDport,
    #[serde(rename = "icmp type")]
    IcmpType,
    #[serde(rename = "icmp code")]
    IcmpCode,
    #[serde(rename = "icmpv6 type")]
    Icmpv6Type,
    #[serde(rename = "icmpv6 code")]
    Icmpv6Code,
    #[serde(rename = "ct state")]
    CtState,
}

impl Selector {
    pub const ALL: [Selector; 17] = [
        Selector::Iifname,
        Selector::Oifname,
        Selector::L4proto,
        Selector::Nfproto,
        Selector::Mark,
        Selector::Skuid,
        Selector::IpSaddr,
        Selector::IpDaddr,
        Selector::Ip6Saddr,
        Selector::Ip6Daddr,
        Selector::ThSport,
        Selector::ThDport,
        Selector::IcmpType,
        Selector::IcmpCode,
        Selector::Icmpv6Type,
        Selector::Icmpv6Code,
        Selector::CtState,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Selector::Iifname => "iifname",
            Selector::Oifname => "oifname",
            Selector::L4proto => "meta l4proto",
            Selector::Nfproto => "meta nfproto",
            Selector::Mark => "meta mark",
            Selector::Skuid => "meta skuid",
            Selector::IpSaddr => "ip saddr",
            Selector::IpDaddr => "ip daddr",
            Selector::Ip6Saddr => "ip6 saddr",
            Selector::Ip6Daddr => "ip6 daddr",
            Selector::ThSport => "th sport",
            Selector::ThDport => "th dport",
            Selector::IcmpType => "icmp type",
            Selector::IcmpCode => "icmp code",
            Selector::Icmpv6Type => "icmpv6 type",
            Selector::Icmpv6Code => "icmpv6 code",
            Selector::CtState => "ct state",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    #[default]
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
}

impl Op {
    pub fn is_eq(&self) -> bool {
        *self == Op::Eq
    }
}

/// The right-hand side: a named set (`{"set": "name"}`, `@name`), an anonymous set (a list), or
/// one value. For `ct state` a list is the states any of which matches. Read by crate::read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum MatchValue {
    List(Vec<Atom>),
    Set(SetRef),
    One(Atom),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetRef {
    pub set: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Statement {
    /// `counter` (anonymous) or `counter name "x"`.
    Counter(Counter),
    /// `limit rate N/unit burst M packets`: the statements after it run only within the rate.
    Limit(Limit),
    /// `log prefix "..." group N` (NFLOG, read with the NFLOG reader) or `log prefix "..." level L`.
    Log(Log),
    /// `meta mark set meta mark | X` (`{"or": X}`) or `meta mark set meta mark & ~X` (`{"clear": X}`).
    Mark(MarkChange),
    /// `masquerade` (`fully-random` when asked).
    Masquerade(Masquerade),
    /// `dnat ip to A` (`dnat ip6 to A`): the connection's destination becomes `to`, the address's
    /// family deciding which packets it applies to. Floating IPs are forwarded to their pod so.
    Dnat(NatAddress),
    /// `snat ip to A` (`snat ip6 to A`): the connection's source becomes `to` (a pod reaching its
    /// own floating IP is answered from it).
    Snat(NatAddress),
    /// `notrack`.
    Notrack(Empty),
    /// `reject`: ICMP(v6) port unreachable.
    Reject(Empty),
    /// `ct mark set ct mark & ~clear | or`. Flow logs name the rules that allowed a connection in
    /// its mark (flow_counts.rs reads it back).
    CtMark(CtMarkChange),
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// The bits of a connection's mark to clear, then those to set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CtMarkChange {
    #[serde(default)]
    pub clear: u32,
    #[serde(default)]
    pub or: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    pub rate: u64,
    pub per: TimeUnit,
    /// Packets allowed above the rate in a burst; nft's default is 5.
    #[serde(default = "default_burst")]
    pub burst: u32,
}

fn default_burst() -> u32 {
    5
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    Second,
    Minute,
    Hour,
    Day,
}

impl TimeUnit {
    pub fn seconds(self) -> u64 {
        match self {
            TimeUnit::Second => 1,
            TimeUnit::Minute => 60,
            TimeUnit::Hour => 3600,
            TimeUnit::Day => 86400,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Second => "second",
            TimeUnit::Minute => "minute",
            TimeUnit::Hour => "hour",
            TimeUnit::Day => "day",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Log {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The NFLOG group: the packet goes to the group's listener instead of the kernel log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u16>,
    /// The kernel log's level (without `group`); nft's default is warn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<LogLevel>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Emerg,
    Alert,
    Crit,
    Err,
    Warn,
    Notice,
    Info,
    Debug,
}

impl LogLevel {
    pub fn number(self) -> u32 {
        self as u32
    }

    pub fn name(self) -> &'static str {
        ["emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"][self as usize]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum MarkChange {
    /// Sets these bits.
    Or(u32),
    /// Clears these bits.
    Clear(u32),
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Masquerade {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fully_random: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatAddress {
    /// An IPv4 or IPv6 address.
    pub to: String,
}

/// Where the packet goes next. `vmap` dispatches on the interface name through a verdict map.
/// Read by crate::read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Verdict {
    Simple(SimpleVerdict),
    Jump { jump: String },
    Goto { goto: String },
    Vmap { vmap: Vmap },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SimpleVerdict {
    Accept,
    Drop,
    Return,
    Continue,
}

impl SimpleVerdict {
    pub fn name(self) -> &'static str {
        match self {
            SimpleVerdict::Accept => "accept",
            SimpleVerdict::Drop => "drop",
            SimpleVerdict::Return => "return",
            SimpleVerdict::Continue => "continue",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vmap {
    pub key: VmapKey,
    pub map: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VmapKey {
    Iifname,
    Oifname,
}

impl Verdict {
    /// The chain this verdict sends packets to, if any.
    pub fn target(&self) -> Option<&str> {
        match self {
            Verdict::Jump { jump } => Some(jump),
            Verdict::Goto { goto } => Some(goto),
            _ => None,
        }
    }
}
