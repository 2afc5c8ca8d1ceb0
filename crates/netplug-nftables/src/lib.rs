//! netplug's nftables data plane.
//!
//! A [`model::Table`] describes netplug's own table (`inet netplug`): chains, named sets and
//! maps, counters, and rules in a closed vocabulary. [`TableWriter`] writes it to the kernel's
//! nf_tables over `NETLINK_NETFILTER` in atomic transactions, encoding every construct the way
//! `nft` 1.0 encodes it so that `nft list table inet netplug` shows it cleanly; no `nft` binary
//! or libnftnl is involved. [`nflog::NflogReader`] receives the packets rules log to an NFLOG
//! group; [`conntrack::dump`] lists the connection tracking table. [`legacy`] removes a chain an
//! older release left in iptables-nft's tables.
//!
//! Every call acts on the network namespace of the calling thread.

pub mod batch;
pub mod check;
pub mod compile;
pub mod conntrack;
pub mod delta;
pub mod elements;
pub mod error;
pub mod expr;
pub mod flow_counts;
pub mod flow_tracking;
pub mod kept;
pub mod legacy;
pub mod model;
pub mod nflog;
pub mod plan;
mod read;
pub mod rule;
pub mod selector;
pub mod socket;
pub mod types;
pub mod update;
pub mod wire;
pub mod writer;

pub use delta::{TableDelta, delta_from_json};
pub use error::{NftError, Result};
pub use model::{ElementChanges, Table, changes_from_json, table_from_json};
pub use writer::{ApplyReport, CounterValue, TableWriter};
