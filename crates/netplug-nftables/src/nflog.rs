//! The NFLOG reader: subscribes to one nfnetlink_log group and hands over every packet a rule
//! logged to it (`log prefix "..." group N`) with its prefix, interfaces, and the addresses,
//! protocol, ports and length read from the packet's headers. Messages are built and parsed with
//! netlink-packet-netfilter's nflog types; the IP and transport headers are read here.
//!
//! Packets come in batches: the kernel holds up to QUEUE_THRESHOLD of them (or FLUSH_AFTER) before
//! it sends them in one message, and each message read is handed over whole. At many new flows a
//! second (flow logs log each one), one wake-up and one call per packet cost the agent more than the
//! packets themselves.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_netfilter::nflog::{
    ConfigCmd, ConfigMode, ConfigNla, PacketNla, Timeout, ULogMessage, config_request,
};
use netlink_packet_netfilter::{NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::error::{NftError, Result};

/// Bytes of each packet copied to us: enough for the IP and transport headers.
const COPY_RANGE: u32 = 128;
/// Packets the kernel gathers before sending them, at most...
const QUEUE_THRESHOLD: u32 = 64;
/// ...and how long it holds the first of them (a Log rule's line, a flow's record, comes that much later).
const FLUSH_AFTER: Duration = Duration::from_millis(20);
/// The kernel's buffer per batch (its maximum is 128 KiB): room for QUEUE_THRESHOLD packets.
const BATCH_BYTES: u32 = 64 * 1024;
/// How long an interface's name is taken from the reader's cache (indexes are reused only once freed).
const NAME_KEPT: Duration = Duration::from_secs(1);

/// One logged packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedPacket {
    pub group: u16,
    /// The rule's `log prefix`.
    pub prefix: String,
    /// 4 or 6.
    pub family: u8,
    pub in_interface: Option<String>,
    pub out_interface: Option<String>,
    /// The IP protocol number (6 tcp, 17 udp, 1 icmp, 58 icmpv6, ...).
    pub protocol: Option<u8>,
    pub source: Option<IpAddr>,
    pub destination: Option<IpAddr>,
    pub source_port: Option<u16>,
    pub destination_port: Option<u16>,
    /// ICMP(v6) type and code.
    pub icmp: Option<(u8, u8)>,
    pub mark: Option<u32>,
    /// The IP packet's length in bytes: the IPv4 total length, or the IPv6 payload length plus
    /// the 40 bytes of its header; the length of the copy the kernel sent when the header is cut
    /// short or its field is 0 (a BIG TCP aggregate), and 0 without a copy.
    pub length: u32,
}

/// A running subscription; [`NflogReader::stop`] ends it.
pub struct NflogReader {
    group: u16,
    wake: OwnedFd,
    thread: Option<JoinHandle<Result<()>>>,
}

impl NflogReader {
    /// Binds `group` in the calling thread's network namespace (failing at once if another
    /// listener holds it) and calls `on_packet` for every packet logged to it, from a thread of
    /// its own, until stopped.
    pub fn start(group: u16, mut on_packets: impl FnMut(Vec<LoggedPacket>) + Send + 'static) -> Result<Self> {
        let op = format!("subscribe to NFLOG group {group}");
        let mut socket = Socket::new(NETLINK_NETFILTER).map_err(|e| NftError::from_io(&op, &e))?;
        socket.bind(&SocketAddr::new(0, 0)).map_err(|e| NftError::from_io(&op, &e))?;
        let _ = socket.set_ext_ack(true);
        // Packets wait in the socket while the callback runs; a large buffer keeps bursts.
        let _ = socket.set_rx_buf_sz(4 << 20);
        configure(
            &socket,
            group,
            vec![
                ConfigNla::Cmd(ConfigCmd::Bind),
                ConfigNla::Mode(ConfigMode::new_packet(COPY_RANGE)),
                ConfigNla::NlBufSiz(BATCH_BYTES),
                ConfigNla::QThresh(QUEUE_THRESHOLD),
                ConfigNla::Timeout(Timeout::from(FLUSH_AFTER)),
            ],
            &op,
        )?;
        // SAFETY: eventfd has no memory preconditions; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(NftError::from_io(&op, &std::io::Error::last_os_error()));
        }
        // SAFETY: a descriptor eventfd just returned, owned by nothing else.
        let wake = unsafe { OwnedFd::from_raw_fd(raw) };
        let waker = wake.try_clone().map_err(|e| NftError::from_io(&op, &e))?;
        let thread = std::thread::Builder::new()
            .name(format!("netplug-nflog-{group}"))
            .spawn(move || read_loop(socket, waker, group, &mut on_packets))
            .map_err(|e| NftError::from_io(&op, &e))?;
        Ok(Self { group, wake, thread: Some(thread) })
    }

    pub fn group(&self) -> u16 {
        self.group
    }

    /// Stops reading, unbinds the group and waits for the reading thread; returns the error
    /// that ended it early, if one did.
    pub fn stop(mut self) -> Result<()> {
        self.signal();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(NftError::new(
                format!("read NFLOG group {}", self.group),
                Errno::EIO,
                "the reading thread panicked",
            )),
            None => Ok(()),
        }
    }

    fn signal(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our own eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }
}

impl Drop for NflogReader {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.signal();
            let _ = thread.join();
        }
    }
}

fn configure(socket: &Socket, group: u16, nlas: Vec<ConfigNla>, op: &str) -> Result<()> {
    let message = config_request(NetfilterProtoFamily::Unspec, group, nlas);
    let mut bytes = vec![0; message.buffer_len()];
    message.serialize(&mut bytes);
    socket.send(&bytes, 0).map_err(|e| NftError::from_io(op, &e))?;
    let mut reply = Vec::with_capacity(4096);
    loop {
        reply.clear();
        socket.recv(&mut reply, 0).map_err(|e| NftError::from_io(op, &e))?;
        let Ok(parsed) = NetlinkMessage::<NetfilterMessage>::deserialize(&reply) else { continue };
        if let NetlinkPayload::Error(error) = parsed.payload {
            return match error.code {
                None => Ok(()),
                Some(code) => {
                    let errno = Errno::from_raw(-code.get());
                    // The kernel refuses a group another socket bound with EPERM (before EBUSY).
                    let detail = if errno == Errno::EBUSY || errno == Errno::EPERM {
                        "another listener holds the group (or the process lacks CAP_NET_ADMIN)".to_string()
                    } else {
                        errno.desc().to_string()
                    };
                    Err(NftError::new(op, errno, detail))
                }
            };
        }
    }
}

fn read_loop(socket: Socket, wake: OwnedFd, group: u16, on_packets: &mut dyn FnMut(Vec<LoggedPacket>)) -> Result<()> {
    let op = format!("read NFLOG group {group}");
    let mut buffer = Vec::with_capacity(256 * 1024);
    let mut names = InterfaceNames::default();
    loop {
        let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLIN), PollFd::new(wake.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(errno) => return Err(NftError::from_errno(&op, errno, None)),
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            let _ = configure(&socket, group, vec![ConfigNla::Cmd(ConfigCmd::Unbind)], &op);
            return Ok(());
        }
        buffer.clear();
        match socket.recv(&mut buffer, 0) {
            Ok(_) => {}
            // Packets were dropped while the socket was full: keep reading the rest.
            Err(err) if err.raw_os_error() == Some(libc::ENOBUFS) => continue,
            Err(err) if err.raw_os_error() == Some(libc::EINTR) => continue,
            Err(err) => return Err(NftError::from_io(&op, &err)),
        }
        let mut packets = Vec::new();
        let mut offset = 0;
        while let Some((_, end)) = crate::socket::next_message(&buffer, offset) {
            let message = &buffer[offset..end];
            offset = (end + 3) & !3;
            if let Ok(parsed) = NetlinkMessage::<NetfilterMessage>::deserialize(message)
                && let NetlinkPayload::InnerMessage(NetfilterMessage {
                    header,
                    inner: NetfilterMessageInner::ULog(ULogMessage::Packet(nlas)),
                    ..
                }) = parsed.payload
            {
                packets.push(packet_of(group, u8::from(header.family), &nlas, &mut names));
            }
        }
        if !packets.is_empty() {
            on_packets(packets);
        }
    }
}

/// Interface names by index, each asked of the kernel at most once per NAME_KEPT.
#[derive(Default)]
struct InterfaceNames {
    known: HashMap<u32, (String, Instant)>,
}

impl InterfaceNames {
    fn name(&mut self, index: u32) -> Option<String> {
        let now = Instant::now();
        if let Some((name, at)) = self.known.get(&index)
            && now.duration_since(*at) < NAME_KEPT
        {
            return Some(name.clone());
        }
        let name = interface_name(index)?;
        if self.known.len() > 4096 {
            self.known.clear();
        }
        self.known.insert(index, (name.clone(), now));
        Some(name)
    }
}

fn packet_of(group: u16, family: u8, nlas: &[PacketNla], names: &mut InterfaceNames) -> LoggedPacket {
    let mut packet = LoggedPacket {
        group,
        prefix: String::new(),
        family: if family == libc::AF_INET6 as u8 { 6 } else { 4 },
        in_interface: None,
        out_interface: None,
        protocol: None,
        source: None,
        destination: None,
        source_port: None,
        destination_port: None,
        icmp: None,
        mark: None,
        length: 0,
    };
    for nla in nlas {
        match nla {
            PacketNla::Prefix(prefix) => packet.prefix = prefix.to_string_lossy().into_owned(),
            PacketNla::IfIndexInDev(index) => packet.in_interface = names.name(*index),
            PacketNla::IfIndexOutDev(index) => packet.out_interface = names.name(*index),
            PacketNla::Mark(mark) => packet.mark = Some(*mark),
            PacketNla::Payload(bytes) => {
                packet.length = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
                read_headers(bytes, &mut packet);
            }
            _ => {}
        }
    }
    packet
}

/// The name of interface `index` in the reading thread's namespace (the subscriber's).
fn interface_name(index: u32) -> Option<String> {
    let mut name = [0u8; libc::IF_NAMESIZE];
    // SAFETY: the buffer holds IF_NAMESIZE bytes, as if_indextoname requires.
    let found = unsafe { libc::if_indextoname(index, name.as_mut_ptr().cast()) };
    if found.is_null() {
        return Some(format!("if{index}"));
    }
    let len = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(&name[..len]).into_owned())
}

/// Reads the addresses, protocol, ports (or ICMP type and code) and length from the packet's
/// headers.
fn read_headers(bytes: &[u8], packet: &mut LoggedPacket) {
    let (protocol, transport) = match bytes.first().map(|b| b >> 4) {
        Some(4) if bytes.len() >= 20 => {
            packet.family = 4;
            let total = u16::from_be_bytes([bytes[2], bytes[3]]);
            if total != 0 {
                packet.length = total.into();
            }
            let header_len = usize::from(bytes[0] & 0x0f) * 4;
            packet.source = Some(IpAddr::V4(Ipv4Addr::new(bytes[12], bytes[13], bytes[14], bytes[15])));
            packet.destination = Some(IpAddr::V4(Ipv4Addr::new(bytes[16], bytes[17], bytes[18], bytes[19])));
            // Only the first fragment carries the transport header.
            let fragment_offset = u16::from_be_bytes([bytes[6], bytes[7]]) & 0x1fff;
            (bytes[9], if fragment_offset == 0 { bytes.get(header_len..) } else { None })
        }
        Some(6) if bytes.len() >= 40 => {
            packet.family = 6;
            let payload = u16::from_be_bytes([bytes[4], bytes[5]]);
            if payload != 0 {
                packet.length = u32::from(payload) + 40;
            }
            let address = |at: usize| IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&bytes[at..at + 16]).unwrap()));
            packet.source = Some(address(8));
            packet.destination = Some(address(24));
            let (mut next, mut at) = (bytes[6], 40);
            // Hop-by-hop, routing and destination options headers come before the transport's.
            while matches!(next, 0 | 43 | 60) && bytes.len() >= at + 2 {
                next = bytes[at];
                at += (usize::from(bytes[at + 1]) + 1) * 8;
            }
            (next, bytes.get(at..))
        }
        _ => return,
    };
    packet.protocol = Some(protocol);
    let Some(transport) = transport else { return };
    match protocol {
        6 | 17 | 132 | 136 if transport.len() >= 4 => {
            packet.source_port = Some(u16::from_be_bytes([transport[0], transport[1]]));
            packet.destination_port = Some(u16::from_be_bytes([transport[2], transport[3]]));
        }
        1 | 58 if transport.len() >= 2 => packet.icmp = Some((transport[0], transport[1])),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> LoggedPacket {
        packet_of(1, 2, &[], &mut InterfaceNames::default())
    }

    #[test]
    fn reads_ipv4_tcp_and_ipv6_icmp_headers() {
        let mut v4 = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        v4.extend([0x30, 0x39, 0x00, 0x50, 0, 0, 0, 0]);
        let mut packet = empty();
        read_headers(&v4, &mut packet);
        assert_eq!(packet.source, Some("10.0.0.1".parse().unwrap()));
        assert_eq!(packet.destination, Some("10.0.0.2".parse().unwrap()));
        assert_eq!((packet.protocol, packet.source_port, packet.destination_port), (Some(6), Some(12345), Some(80)));
        assert_eq!(packet.length, 40);

        let mut v6 = vec![0x60, 0, 0, 0, 0, 8, 58, 64];
        v6.extend("fd00::1".parse::<Ipv6Addr>().unwrap().octets());
        v6.extend("fd00::2".parse::<Ipv6Addr>().unwrap().octets());
        v6.extend([128, 0, 0, 0]);
        let mut packet = empty();
        read_headers(&v6, &mut packet);
        assert_eq!((packet.family, packet.protocol, packet.icmp), (6, Some(58), Some((128, 0))));
        assert_eq!(packet.destination, Some("fd00::2".parse().unwrap()));
        assert_eq!(packet.length, 48);
    }

    #[test]
    fn length_is_the_header_field_or_the_copy_when_the_header_is_cut() {
        // A 1500-byte IPv4 packet of which the kernel copied the first 128 bytes.
        let mut v4 = vec![0x45, 0, 0x05, 0xdc, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        v4.resize(128, 0);
        assert_eq!(packet_of(1, 2, &[PacketNla::Payload(v4.clone())], &mut InterfaceNames::default()).length, 1500);
        // A BIG TCP aggregate leaves the field 0: the copy's length is all there is.
        v4[2..4].copy_from_slice(&[0, 0]);
        assert_eq!(packet_of(1, 2, &[PacketNla::Payload(v4)], &mut InterfaceNames::default()).length, 128);
        // An IPv6 header cut short: the copy's length.
        let v6 = vec![0x60, 0, 0, 0, 0x05, 0xc8, 6, 64, 0xfd, 0];
        let packet = packet_of(1, 10, &[PacketNla::Payload(v6)], &mut InterfaceNames::default());
        assert_eq!((packet.length, packet.source), (10, None));
        // No copy at all.
        assert_eq!(empty().length, 0);
    }
}
