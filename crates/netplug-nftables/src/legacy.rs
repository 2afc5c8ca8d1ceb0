//! Removal of a chain an older netplug release left in an iptables-nft table (the `ip nat`
//! table's NETPLUG-NAT-OUTGOING, jumped to from POSTROUTING), over netlink: the rules that jump
//! to it are found and deleted, then the chain is flushed and deleted, in one transaction bound
//! to the ruleset generation it was read at (a concurrent change, such as kube-proxy's
//! iptables-restore, makes it start over).

use netlink_packet_netfilter::nftables::{
    ChainAttribute, ChainMessage, DataAttribute, ExpressionAttribute, Expressions, GenAttribute, GenMessage, Immediate,
    ListAttribute, NfTablesMessage, RuleAttribute, RuleMessage, VerdictAttribute,
};
use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily};
use nix::errno::Errno;

use crate::batch::Batch;
use crate::error::{NftError, Result};
use crate::model::Family;
use crate::socket::NfSocket;

/// What removing the chain found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// There was no such chain (nor, perhaps, table).
    Absent,
    /// The chain and the rules that jumped to it (`from`: their chains) were deleted.
    Removed { jumps: Vec<String> },
}

/// How often the removal starts over when the ruleset changed under it.
const ATTEMPTS: usize = 5;
/// Errno the kernel answers a batch whose generation is no longer current with.
const ERESTART: i32 = 85;

/// Removes chain `chain` of the IPv4 iptables-nft table `table` and every rule of that table that
/// jumps or goes to it. Acts on the calling thread's network namespace.
pub fn remove_iptables_chain(table: &str, chain: &str) -> Result<Removal> {
    let op = format!("remove iptables chain {chain} of table ip {table}");
    let mut socket = NfSocket::open()?;
    for _ in 0..ATTEMPTS {
        let generation = generation(&mut socket, &op)?;
        let lookup = message(NfTablesMessage::GetChain(ChainMessage {
            attributes: vec![ChainAttribute::Table(table.into()), ChainAttribute::Name(chain.into())],
        }));
        match socket.request(lookup, false, &op) {
            Ok(_) => {}
            Err(err) if err.errno == Errno::ENOENT => return Ok(Removal::Absent),
            Err(err) => return Err(err),
        }
        let dump =
            message(NfTablesMessage::GetRule(RuleMessage { attributes: vec![RuleAttribute::Table(table.into())] }));
        let mut jumps = Vec::new();
        for reply in socket.request(dump, true, &op)? {
            let NetfilterMessageInner::NfTables(NfTablesMessage::NewRule(rule)) = reply.inner else { continue };
            let mut from = None;
            let mut handle = None;
            let mut targets = false;
            for attribute in &rule.attributes {
                match attribute {
                    RuleAttribute::Chain(name) => from = Some(name.clone()),
                    RuleAttribute::Handle(h) => handle = Some(*h),
                    RuleAttribute::Expressions(expressions) => targets = expressions.iter().any(|e| jumps_to(e, chain)),
                    _ => {}
                }
            }
            if let (true, Some(from), Some(handle)) = (targets, from, handle)
                && from != chain
            {
                jumps.push((from, handle));
            }
        }
        let mut batch = Batch::new(Family::Ip, table, socket.reserve(0), Some(generation));
        for (from, handle) in &jumps {
            batch.delete_rule(from, *handle);
        }
        batch.flush_chain(chain);
        batch.delete_chain(chain);
        let sealed = batch.seal();
        socket.reserve(sealed.labels.len() as u32);
        match socket.commit(&sealed, &op) {
            Ok(()) => return Ok(Removal::Removed { jumps: jumps.into_iter().map(|(from, _)| from).collect() }),
            Err(err) if err.errno == Errno::from_raw(ERESTART) || err.errno == Errno::EAGAIN => continue,
            Err(err) => return Err(err),
        }
    }
    Err(NftError::new(op, Errno::EAGAIN, "the ruleset kept changing while the chain was being removed"))
}

fn message(inner: NfTablesMessage) -> NetfilterMessage {
    NetfilterMessage::new(NetfilterHeader::new(NetfilterProtoFamily::IPv4, 0, 0), inner)
}

fn generation(socket: &mut NfSocket, op: &str) -> Result<u32> {
    let request = NetfilterMessage::new(
        NetfilterHeader::new(NetfilterProtoFamily::Unspec, 0, 0),
        NfTablesMessage::GetGen(GenMessage { attributes: vec![] }),
    );
    for reply in socket.request(request, false, op)? {
        if let NetfilterMessageInner::NfTables(NfTablesMessage::NewGen(generation)) = reply.inner
            && let Some(id) = generation.attributes.iter().find_map(|a| match a {
                GenAttribute::Id(id) => Some(*id),
                _ => None,
            })
        {
            return Ok(id);
        }
    }
    Err(NftError::new(op, Errno::EPROTO, "the kernel did not say the ruleset generation"))
}

/// Whether an expression is an immediate jump or goto to `chain` (iptables' `-j CHAIN`).
fn jumps_to(expression: &ListAttribute<ExpressionAttribute>, chain: &str) -> bool {
    let ListAttribute::Element(attributes) = expression else { return false };
    attributes.iter().any(|attribute| match attribute {
        ExpressionAttribute::Data(Expressions::Immediate(immediate)) => immediate.iter().any(|i| match i {
            Immediate::Data(DataAttribute::Verdict(verdict)) => {
                verdict.iter().any(|v| matches!(v, VerdictAttribute::Chain(name) if name == chain))
            }
            _ => false,
        }),
        _ => false,
    })
}
