//! The connection tracking table of the calling thread's network namespace, dumped over
//! ctnetlink (IPCTNL_MSG_CT_GET with NLM_F_DUMP on NETLINK_NETFILTER, once for IPv4 and once
//! for IPv6): each connection's tuples both ways, the packets and bytes that passed each way,
//! its mark, id, status bits and timestamps. The flow logs read packets and bytes from here.
//!
//! Requests are built with netlink-packet-netfilter's conntrack types; replies and events are
//! read attribute by attribute with netlink-packet-core's NLA iterator, without allocating (a
//! node's table holds tens of thousands of entries, and flow logs dump it at every interval).
//! The kernel counts packets and bytes only when `net.netfilter.nf_conntrack_acct` was 1 as the
//! connection was created (0 otherwise), and stamps it only with
//! `net.netfilter.nf_conntrack_timestamp`.

use std::net::IpAddr;

use netlink_packet_core::{NLA_TYPE_MASK, NlaBuffer, NlasIterator, parse_u32_be, parse_u64_be};
use netlink_packet_netfilter::conntrack::ConntrackMessage;
use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterProtoFamily};

use crate::error::Result;
use crate::socket::NfSocket;

const CTA_COUNTERS_ORIG: u16 = 9;
const CTA_COUNTERS_REPLY: u16 = 10;
const CTA_COUNTERS_PACKETS: u16 = 1;
const CTA_COUNTERS_BYTES: u16 = 2;
const CTA_ID: u16 = 12;
const CTA_TIMESTAMP: u16 = 20;
const CTA_TIMESTAMP_START: u16 = 1;
const CTA_TIMESTAMP_STOP: u16 = 2;

/// Status bits (`enum ip_conntrack_status`, nf_conntrack_common.h) the flow logs look at.
pub mod status {
    /// A packet was seen in the reply direction.
    pub const SEEN_REPLY: u32 = 1 << 1;
    /// Traffic was seen both ways long enough: the entry is not dropped early under pressure.
    pub const ASSURED: u32 = 1 << 2;
    /// The entry is in the table (every dumped entry is).
    pub const CONFIRMED: u32 = 1 << 3;
    /// The source (the destination) was rewritten: the reply tuple is not the original reversed.
    pub const SRC_NAT: u32 = 1 << 4;
    pub const DST_NAT: u32 = 1 << 5;
    /// The entry is going away.
    pub const DYING: u32 = 1 << 9;
}

/// One direction of a connection: the tuple its packets carry, and what passed that way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Direction {
    pub source: IpAddr,
    pub destination: IpAddr,
    /// Absent for protocols without ports (ICMP, ...).
    pub source_port: Option<u16>,
    pub destination_port: Option<u16>,
    /// 0 when accounting was off as the connection began.
    pub packets: u64,
    /// IP bytes (headers included); 0 when accounting was off as the connection began.
    pub bytes: u64,
}

/// One connection tracking entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConntrackEntry {
    /// 4 or 6.
    pub family: u8,
    /// The IP protocol number (6 tcp, 17 udp, 1 icmp, 58 icmpv6, ...).
    pub protocol: u8,
    /// As the first packet went: from the initiator to the responder.
    pub original: Direction,
    /// As the answers go (after NAT: to the address the initiator's packets were rewritten to).
    pub reply: Direction,
    pub mark: u32,
    /// The kernel's id of the entry, stable for its lifetime (`conntrack -L -o id` shows it).
    pub id: u32,
    /// `ip_conntrack_status` bits: see [`status`].
    pub status: u32,
    /// When the entry was created, ns since the epoch; with `nf_conntrack_timestamp` only.
    pub start: Option<u64>,
    /// When it ended, ns since the epoch (entries being destroyed only).
    pub stop: Option<u64>,
}

/// Every IPv4 and IPv6 entry of the calling thread's network namespace.
pub fn dump() -> Result<Vec<ConntrackEntry>> {
    let mut socket = NfSocket::open()?;
    let mut entries = Vec::new();
    for (family, name) in [(NetfilterProtoFamily::IPv4, "IPv4"), (NetfilterProtoFamily::IPv6, "IPv6")] {
        let request = NetfilterMessage::new(NetfilterHeader::new(family, 0, 0), ConntrackMessage::Get(vec![]));
        let op = format!("dump the {name} connection tracking table");
        entries.extend(socket.request_raw(request, true, &op, |raw| Ok(entry_of_message(raw)))?);
    }
    Ok(entries)
}

type Addresses = (IpAddr, IpAddr, Option<u16>, Option<u16>);

// Attributes read by entry_of_message (include/uapi/linux/netfilter/nfnetlink_conntrack.h).
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_REPLY: u16 = 2;
const CTA_STATUS: u16 = 3;
const CTA_MARK: u16 = 8;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_IP_V4_SRC: u16 = 1;
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_SRC: u16 = 3;
const CTA_IP_V6_DST: u16 = 4;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_SRC_PORT: u16 = 2;
const CTA_PROTO_DST_PORT: u16 = 3;
/// NFNL_SUBSYS_CTNETLINK's messages: IPCTNL_MSG_CT_NEW and IPCTNL_MSG_CT_DELETE.
const CT_NEW: u16 = 1 << 8;
const CT_DELETE: u16 = (1 << 8) | 2;

/// The entry one raw message (netlink header included) describes, read attribute by attribute
/// with netlink-packet-core's iterator, without allocating: the flow tracker reads one such event
/// for every connection that ends, tens of thousands a second, and each interval's dump as
/// many, where netlink-packet-netfilter's typed parse allocates for each attribute. `None` for
/// any other message.
pub fn entry_of_message(message: &[u8]) -> Option<ConntrackEntry> {
    let message_type = u16::from_ne_bytes(message.get(4..6)?.try_into().ok()?);
    if message_type != CT_NEW && message_type != CT_DELETE {
        return None;
    }
    // nfgenmsg after the 16-byte header: the family first.
    let family = match i32::from(*message.get(16)?) {
        libc::AF_INET => 4,
        libc::AF_INET6 => 6,
        _ => return None,
    };
    let mut fields = Fields::default();
    for nla in NlasIterator::new(message.get(20..)?).flatten() {
        let value = nla.value();
        match nla.kind() & NLA_TYPE_MASK {
            CTA_TUPLE_ORIG => fields.original = raw_tuple(value, &mut fields.protocol),
            CTA_TUPLE_REPLY => fields.reply = raw_tuple(value, &mut None),
            CTA_STATUS => fields.status = parse_u32_be(value).unwrap_or(0),
            CTA_MARK => fields.mark = parse_u32_be(value).unwrap_or(0),
            kind => fields.other(kind, value),
        }
    }
    fields.entry(family)
}

/// What an entry's attributes gave, until both tuples are known to be there.
#[derive(Default)]
struct Fields {
    original: Option<Addresses>,
    reply: Option<Addresses>,
    protocol: Option<u8>,
    original_counts: (u64, u64),
    reply_counts: (u64, u64),
    mark: u32,
    id: u32,
    status: u32,
    start: Option<u64>,
    stop: Option<u64>,
}

impl Fields {
    /// An attribute the conntrack types leave unparsed: the counters, the id, the timestamps.
    fn other(&mut self, kind: u16, value: &[u8]) {
        match kind {
            CTA_COUNTERS_ORIG => self.original_counts = counters_of(value),
            CTA_COUNTERS_REPLY => self.reply_counts = counters_of(value),
            CTA_ID => self.id = parse_u32_be(value).unwrap_or(0),
            CTA_TIMESTAMP => {
                for nla in NlasIterator::new(value).flatten() {
                    match nla.kind() {
                        CTA_TIMESTAMP_START => self.start = u64_of(&nla),
                        CTA_TIMESTAMP_STOP => self.stop = u64_of(&nla),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    fn entry(self, family: u8) -> Option<ConntrackEntry> {
        let direction = |(source, destination, source_port, destination_port), (packets, bytes)| Direction {
            source,
            destination,
            source_port,
            destination_port,
            packets,
            bytes,
        };
        Some(ConntrackEntry {
            family,
            protocol: self.protocol?,
            original: direction(self.original?, self.original_counts),
            reply: direction(self.reply?, self.reply_counts),
            mark: self.mark,
            id: self.id,
            status: self.status,
            start: self.start,
            stop: self.stop,
        })
    }
}

/// The addresses and ports of a raw CTA_TUPLE_ORIG or CTA_TUPLE_REPLY, and its protocol.
fn raw_tuple(nested: &[u8], protocol: &mut Option<u8>) -> Option<Addresses> {
    let (mut source, mut destination, mut source_port, mut destination_port) = (None, None, None, None);
    for part in NlasIterator::new(nested).flatten() {
        match part.kind() & NLA_TYPE_MASK {
            CTA_TUPLE_IP => {
                for nla in NlasIterator::new(part.value()).flatten() {
                    let value = nla.value();
                    let v4 = || <[u8; 4]>::try_from(value).ok().map(IpAddr::from);
                    let v6 = || <[u8; 16]>::try_from(value).ok().map(IpAddr::from);
                    match nla.kind() {
                        CTA_IP_V4_SRC => source = v4(),
                        CTA_IP_V4_DST => destination = v4(),
                        CTA_IP_V6_SRC => source = v6(),
                        CTA_IP_V6_DST => destination = v6(),
                        _ => {}
                    }
                }
            }
            CTA_TUPLE_PROTO => {
                for nla in NlasIterator::new(part.value()).flatten() {
                    let value = nla.value();
                    let port = || <[u8; 2]>::try_from(value).ok().map(u16::from_be_bytes);
                    match nla.kind() {
                        CTA_PROTO_NUM => *protocol = value.first().copied(),
                        CTA_PROTO_SRC_PORT => source_port = port(),
                        CTA_PROTO_DST_PORT => destination_port = port(),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Some((source?, destination?, source_port, destination_port))
}

/// The addresses and ports of a CTA_TUPLE_ORIG or CTA_TUPLE_REPLY, and its protocol.
/// Packets and bytes of a CTA_COUNTERS_ORIG or CTA_COUNTERS_REPLY (its padding skipped).
fn counters_of(nested: &[u8]) -> (u64, u64) {
    let (mut packets, mut bytes) = (0, 0);
    for nla in NlasIterator::new(nested).flatten() {
        match nla.kind() {
            CTA_COUNTERS_PACKETS => packets = u64_of(&nla).unwrap_or(0),
            CTA_COUNTERS_BYTES => bytes = u64_of(&nla).unwrap_or(0),
            _ => {}
        }
    }
    (packets, bytes)
}

fn u64_of(nla: &NlaBuffer<&[u8]>) -> Option<u64> {
    parse_u64_be(nla.value()).ok()
}

#[cfg(test)]
mod tests {
    use netlink_packet_core::{DefaultNla, Emitable, NLA_F_NESTED, NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla};
    use netlink_packet_netfilter::NetfilterMessageInner;
    use netlink_packet_netfilter::conntrack::{ConntrackAttribute, IPTuple, ProtoTuple, Protocol, Status, Tuple};

    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len()).step_by(2).map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap()).collect()
    }

    fn parse(bytes: &[u8]) -> ConntrackEntry {
        entry_of_message(bytes).unwrap()
    }

    fn typed_parse(bytes: &[u8]) -> ConntrackEntry {
        let message = NetlinkMessage::<NetfilterMessage>::deserialize(bytes).unwrap();
        let NetlinkPayload::InnerMessage(inner) = message.payload else { panic!("{message:?}") };
        entry_of(&inner).unwrap()
    }

    /// The entry a reply describes, read with netlink-packet-netfilter's conntrack types: the
    /// reference the raw parse is checked against.
    fn entry_of(message: &NetfilterMessage) -> Option<ConntrackEntry> {
        let attributes = match &message.inner {
            // A dump's replies are New; a destroyed entry's event is Delete.
            NetfilterMessageInner::Conntrack(
                ConntrackMessage::New(attributes)
                | ConntrackMessage::Get(attributes)
                | ConntrackMessage::Delete(attributes),
            ) => attributes,
            _ => return None,
        };
        let family = match message.header.family {
            NetfilterProtoFamily::IPv4 => 4,
            NetfilterProtoFamily::IPv6 => 6,
            _ => return None,
        };
        let mut fields = Fields::default();
        for attribute in attributes {
            match attribute {
                ConntrackAttribute::CtaTupleOrig(tuples) => fields.original = tuple_of(tuples, &mut fields.protocol),
                ConntrackAttribute::CtaTupleReply(tuples) => fields.reply = tuple_of(tuples, &mut None),
                ConntrackAttribute::CtaStatus(bits) => fields.status = bits.bits(),
                ConntrackAttribute::CtaMark(value) => fields.mark = *value,
                ConntrackAttribute::Other(nla) => fields.other(nla.kind() & NLA_TYPE_MASK, &value_of(nla)),
                _ => {}
            }
        }
        fields.entry(family)
    }

    fn tuple_of(tuples: &[Tuple], protocol: &mut Option<u8>) -> Option<Addresses> {
        let (mut source, mut destination, mut source_port, mut destination_port) = (None, None, None, None);
        for tuple in tuples {
            match tuple {
                Tuple::Ip(parts) => {
                    for part in parts {
                        match part {
                            IPTuple::SourceAddress(address) => source = Some(*address),
                            IPTuple::DestinationAddress(address) => destination = Some(*address),
                            _ => {}
                        }
                    }
                }
                Tuple::Proto(parts) => {
                    for part in parts {
                        match part {
                            ProtoTuple::Protocol(number) => *protocol = Some(u8::from(*number)),
                            ProtoTuple::SourcePort(port) => source_port = Some(*port),
                            ProtoTuple::DestinationPort(port) => destination_port = Some(*port),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Some((source?, destination?, source_port, destination_port))
    }

    /// The value of an attribute the conntrack types leave unparsed.
    fn value_of(nla: &DefaultNla) -> Vec<u8> {
        let mut value = vec![0; nla.value_len()];
        nla.emit_value(&mut value);
        value
    }

    /// A dump's reply from Linux 6.18 (`conntrack -L -o id,extended` showed the same entry): a TCP
    /// connection from 10.77.0.2 to 10.77.0.1:8080 that sent 5000 bytes and got 3000 back, in
    /// TIME_WAIT, with accounting and timestamps on.
    const IPV4_TCP: &str = "1c0100000001220001000000817e0000020000003400018014000180080001000a4d0002080002000a4d00011c000280050001000600000006000200a6be0000060003001f9000003400028014000180080001000a4d0001080002000a4d00021c0002800500010006000000060002001f90000006000300a6be0000080003000000000e080008000000000008000c003a994ca408000b00000000010800070000000072300004802c0001800500010007000000050002000a000000050003000a000000060004002700000006000500230000001c0009800c00010000000000000000060c00020000000000000014c81c000a800c00010000000000000000040c0002000000000000000c90100014800c00010018ec4b2710e441ff";

    /// The same over IPv6, fd00:77::2 to [fd00:77::1]:8080.
    const IPV6_TCP: &str = "4c0100000001220001000000107f00000a0000004c0001802c00018014000300fd00007700000000000000000000000214000400fd0000770000000000000000000000011c000280050001000600000006000200c6cc0000060003001f9000004c0002802c00018014000300fd00007700000000000000000000000114000400fd0000770000000000000000000000021c0002800500010006000000060002001f90000006000300c6cc0000080003000000000e080008000000000008000c00261fad8e08000b00000000010800070000000077300004802c0001800500010007000000050002000a000000050003000a000000060004002700000006000500230000001c0009800c00010000000000000000060c00020000000000000015401c000a800c00010000000000000000040c0002000000000000000ce0100014800c00010018ec4b28ad29d33f";

    #[test]
    fn the_raw_parse_reads_what_the_typed_one_does() {
        for text in [IPV4_TCP, IPV6_TCP] {
            let bytes = hex(text);
            assert_eq!(entry_of_message(&bytes), Some(typed_parse(&bytes)));
            // The same as an event of an ended entry (IPCTNL_MSG_CT_DELETE).
            let mut deleted = bytes.clone();
            deleted[4..6].copy_from_slice(&CT_DELETE.to_ne_bytes());
            assert_eq!(entry_of_message(&deleted), Some(typed_parse(&bytes)));
            // Not a conntrack message.
            deleted[4..6].copy_from_slice(&0x0300u16.to_ne_bytes());
            assert_eq!(entry_of_message(&deleted), None);
        }
    }

    #[test]
    fn reads_a_real_ipv4_dump_reply() {
        let entry = parse(&hex(IPV4_TCP));
        assert_eq!(
            entry,
            ConntrackEntry {
                family: 4,
                protocol: 6,
                original: Direction {
                    source: "10.77.0.2".parse().unwrap(),
                    destination: "10.77.0.1".parse().unwrap(),
                    source_port: Some(42686),
                    destination_port: Some(8080),
                    packets: 6,
                    bytes: 5320,
                },
                reply: Direction {
                    source: "10.77.0.1".parse().unwrap(),
                    destination: "10.77.0.2".parse().unwrap(),
                    source_port: Some(8080),
                    destination_port: Some(42686),
                    packets: 4,
                    bytes: 3216,
                },
                mark: 0,
                id: 983125156,
                status: status::SEEN_REPLY | status::ASSURED | status::CONFIRMED,
                start: Some(0x18ec_4b27_10e4_41ff),
                stop: None,
            }
        );
    }

    #[test]
    fn reads_a_real_ipv6_dump_reply() {
        let entry = parse(&hex(IPV6_TCP));
        assert_eq!((entry.family, entry.protocol, entry.id), (6, 6, 639610254));
        assert_eq!(entry.original.source, "fd00:77::2".parse::<IpAddr>().unwrap());
        assert_eq!(entry.original.destination, "fd00:77::1".parse::<IpAddr>().unwrap());
        assert_eq!((entry.original.source_port, entry.original.destination_port), (Some(50892), Some(8080)));
        assert_eq!((entry.original.packets, entry.original.bytes), (6, 5440));
        assert_eq!(entry.reply.source, "fd00:77::1".parse::<IpAddr>().unwrap());
        assert_eq!((entry.reply.source_port, entry.reply.destination_port), (Some(8080), Some(50892)));
        assert_eq!((entry.reply.packets, entry.reply.bytes), (4, 3296));
        assert!(entry.start.is_some());
    }

    fn nested(kind: u16, nlas: &[DefaultNla]) -> ConntrackAttribute {
        let mut value = vec![0; nlas.buffer_len()];
        nlas.emit(&mut value);
        ConntrackAttribute::Other(DefaultNla::new(kind | NLA_F_NESTED, value))
    }

    /// A message as the kernel would send it: with its netlink header.
    fn emitted(inner: NetfilterMessage) -> Vec<u8> {
        let mut message = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::InnerMessage(inner));
        message.finalize();
        let mut bytes = vec![0; message.buffer_len()];
        message.serialize(&mut bytes);
        bytes
    }

    fn be64(kind: u16, value: u64) -> DefaultNla {
        DefaultNla::new(kind, value.to_be_bytes().to_vec())
    }

    fn ip_tuple(source: &str, destination: &str) -> Tuple {
        Tuple::Ip(vec![
            IPTuple::SourceAddress(source.parse().unwrap()),
            IPTuple::DestinationAddress(destination.parse().unwrap()),
        ])
    }

    /// An ICMP entry as the crate's types build it: no ports; the counters after padding
    /// attributes (CTA_COUNTERS_PAD, CTA_TIMESTAMP_PAD), a stop time, a mark.
    #[test]
    fn reads_a_built_icmp_entry_with_padding_and_a_stop_time() {
        let icmp = |id: u16| {
            Tuple::Proto(vec![
                ProtoTuple::Protocol(Protocol::Icmp),
                ProtoTuple::Other(DefaultNla::new(4, id.to_be_bytes().to_vec())),
                ProtoTuple::Other(DefaultNla::new(5, vec![8])),
                ProtoTuple::Other(DefaultNla::new(6, vec![0])),
            ])
        };
        let attributes = vec![
            ConntrackAttribute::CtaTupleOrig(vec![ip_tuple("192.0.2.1", "192.0.2.9"), icmp(77)]),
            ConntrackAttribute::CtaTupleReply(vec![ip_tuple("192.0.2.9", "192.0.2.1"), icmp(77)]),
            ConntrackAttribute::CtaStatus(Status::Confirmed | Status::SeenReply),
            ConntrackAttribute::CtaMark(0x4000),
            nested(
                CTA_COUNTERS_ORIG,
                &[DefaultNla::new(5, vec![]), be64(CTA_COUNTERS_PACKETS, 3), be64(CTA_COUNTERS_BYTES, 252)],
            ),
            nested(CTA_COUNTERS_REPLY, &[be64(CTA_COUNTERS_PACKETS, 2), be64(CTA_COUNTERS_BYTES, 168)]),
            ConntrackAttribute::Other(DefaultNla::new(CTA_ID, 1234u32.to_be_bytes().to_vec())),
            nested(
                CTA_TIMESTAMP,
                &[DefaultNla::new(3, vec![]), be64(CTA_TIMESTAMP_START, 10), be64(CTA_TIMESTAMP_STOP, 20)],
            ),
        ];
        let bytes = emitted(NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::IPv4, 0, 0),
            ConntrackMessage::New(attributes),
        ));

        let entry = parse(&bytes);
        assert_eq!((entry.family, entry.protocol, entry.mark, entry.id), (4, 1, 0x4000, 1234));
        assert_eq!(entry.status, status::CONFIRMED | status::SEEN_REPLY);
        assert_eq!((entry.original.source_port, entry.original.destination_port), (None, None));
        assert_eq!(
            (entry.original.packets, entry.original.bytes, entry.reply.packets, entry.reply.bytes),
            (3, 252, 2, 168)
        );
        assert_eq!(entry.reply.source, "192.0.2.9".parse::<IpAddr>().unwrap());
        assert_eq!((entry.start, entry.stop), (Some(10), Some(20)));
    }

    /// Without accounting (or timestamps) the kernel sends no counters (no CTA_TIMESTAMP).
    #[test]
    fn counts_are_zero_without_accounting() {
        let tcp = Tuple::Proto(vec![
            ProtoTuple::Protocol(Protocol::Tcp),
            ProtoTuple::SourcePort(40000),
            ProtoTuple::DestinationPort(443),
        ]);
        let message = NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::IPv6, 0, 0),
            ConntrackMessage::New(vec![
                ConntrackAttribute::CtaTupleOrig(vec![ip_tuple("fd00::1", "fd00::2"), tcp.clone()]),
                ConntrackAttribute::CtaTupleReply(vec![ip_tuple("fd00::2", "fd00::1"), tcp]),
            ]),
        );
        let entry = parse(&emitted(message));
        assert_eq!((entry.family, entry.protocol, entry.original.destination_port), (6, 6, Some(443)));
        assert_eq!((entry.original.packets, entry.original.bytes, entry.reply.packets), (0, 0, 0));
        assert_eq!((entry.start, entry.stop), (None, None));

        let without_reply = NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::IPv6, 0, 0),
            ConntrackMessage::New(vec![ConntrackAttribute::CtaTupleOrig(vec![
                ip_tuple("fd00::1", "fd00::2"),
                Tuple::Proto(vec![ProtoTuple::Protocol(Protocol::Tcp)]),
            ])]),
        );
        assert_eq!(entry_of_message(&emitted(without_reply)), None);
    }
}
