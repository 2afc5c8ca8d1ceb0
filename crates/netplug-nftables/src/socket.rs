//! A synchronous NETLINK_NETFILTER socket: commits batches, reads every reply to them, and
//! answers GET requests and dumps.
//!
//! Replies are read off netlink-sys's socket and framed with netlink-packet-core; the error
//! messages' extended-ack attributes (the kernel's text and the offset of the attribute it
//! refused) are read here, as the message crates leave them unparsed.

use std::os::fd::AsRawFd;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, NetlinkBuffer, NetlinkHeader,
    NetlinkMessage, NetlinkPayload,
};
use netlink_packet_netfilter::NetfilterMessage;
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};
use nix::errno::Errno;
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;

use crate::batch::Sealed;
use crate::error::{NftError, Result};

const NLMSGERR_ATTR_MSG: u16 = 1;
const NLMSGERR_ATTR_OFFS: u16 = 2;
const NLM_F_CAPPED: u16 = 0x100;
const NLM_F_ACK_TLVS: u16 = 0x200;
/// How long a read of the kernel's replies waits. The kernel answers a request inside its send,
/// and a dump's next part as the reader reads, so a read this long without a message means the
/// answer was lost: the call fails, naming it, instead of holding its thread for good.
#[cfg(not(test))]
const REPLY_PATIENCE: libc::timeval = libc::timeval { tv_sec: 30, tv_usec: 0 };
#[cfg(test)]
const REPLY_PATIENCE: libc::timeval = libc::timeval { tv_sec: 0, tv_usec: 200_000 };

/// How often a dump interrupted by a concurrent change is retried.
const DUMP_ATTEMPTS: usize = 5;

/// An error reply: which message, the errno, the kernel's text and the offending attribute.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub sequence: u32,
    pub errno: Errno,
    pub text: Option<String>,
    pub offset: Option<u32>,
}

/// A socket bound to the network namespace of the thread that opened it, for good.
pub struct NfSocket {
    socket: Socket,
    sequence: u32,
    rx: Vec<u8>,
}

impl NfSocket {
    pub fn open() -> Result<Self> {
        let op = "open a netfilter netlink socket";
        let mut socket = Socket::new(NETLINK_NETFILTER).map_err(|e| NftError::from_io(op, &e))?;
        socket.bind(&SocketAddr::new(0, 0)).map_err(|e| NftError::from_io(op, &e))?;
        // Best effort: without them only the kernel's explanation of an error is lost.
        let _ = socket.set_ext_ack(true);
        let _ = socket.set_cap_ack(true);
        setsockopt(&socket, sockopt::ReceiveTimeout, &TimeVal::from(REPLY_PATIENCE))
            .map_err(|err| NftError::from_errno(op, err, None))?;
        Ok(Self { socket, sequence: 0, rx: Vec::with_capacity(256 * 1024) })
    }

    /// Reserves `count` sequence numbers and returns the first.
    pub fn reserve(&mut self, count: u32) -> u32 {
        let first = self.sequence.wrapping_add(1);
        self.sequence = self.sequence.wrapping_add(count);
        first
    }

    /// Sends a batch and reads every reply the kernel queued for it (the kernel handles the
    /// whole batch inside the send, so they are all there when it returns). `Ok` means the
    /// transaction committed; an error names the first message the kernel refused.
    pub fn commit(&mut self, batch: &Sealed, op: &str) -> Result<()> {
        let fd = self.socket.as_raw_fd();
        // The whole batch goes in one send, which the socket's send buffer must hold.
        let wanted = batch.bytes.len() + 64 * 1024;
        if set_buffer(fd, libc::SO_SNDBUFFORCE, wanted).is_err() {
            let _ = set_buffer(fd, libc::SO_SNDBUF, wanted);
        }
        if batch.operations() > 1000 {
            // Room for error replies to a large batch: one per refused message at most.
            let room = (batch.operations() * 512).min(64 << 20);
            if set_buffer(fd, libc::SO_RCVBUFFORCE, room).is_err() {
                let _ = set_buffer(fd, libc::SO_RCVBUF, room);
            }
        }
        self.socket.send(&batch.bytes, 0).map_err(|e| NftError::from_io(format!("{op}: send the batch"), &e))?;
        let mut refusals = Vec::new();
        let mut overflowed = false;
        loop {
            self.rx.clear();
            match self.socket.recv(&mut self.rx, libc::MSG_DONTWAIT) {
                Ok(_) => {}
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(err) if err.raw_os_error() == Some(libc::ENOBUFS) => {
                    overflowed = true;
                    continue;
                }
                Err(err) => return Err(NftError::from_io(format!("{op}: read the kernel's replies"), &err)),
            }
            let mut offset = 0;
            while let Some((header, end)) = next_message(&self.rx, offset) {
                let message = &self.rx[offset..end];
                offset = aligned(end);
                if header.message_type == NLMSG_ERROR
                    && let Some(refusal) = parse_error(message, header.flags, header.sequence_number)
                {
                    refusals.push(refusal);
                }
            }
        }
        refusals.retain(|r| batch.label(r.sequence).is_some());
        if refusals.is_empty() {
            if overflowed {
                return Err(NftError::new(
                    op,
                    Errno::ENOBUFS,
                    "the kernel's replies overflowed the socket; the transaction's outcome is unknown",
                ));
            }
            return Ok(());
        }
        refusals.sort_by_key(|r| r.sequence);
        let first = &refusals[0];
        let what = batch.label(first.sequence).unwrap_or_else(|| "the batch".into());
        let mut detail = match &first.text {
            Some(text) if !text.is_empty() => format!("{} ({text})", first.errno.desc()),
            _ => first.errno.desc().to_string(),
        };
        if let Some(at) = first.offset.and_then(|o| batch.message(first.sequence).and_then(|m| describe_offset(m, o))) {
            detail.push_str(&format!(" at {at}"));
        }
        if refusals.len() > 1 {
            detail.push_str(&format!("; {} later message(s) refused too", refusals.len() - 1));
        }
        detail.push_str("; nothing was changed");
        Err(NftError::new(format!("{op}: {what}"), first.errno, detail))
    }

    /// Sends a GET (a dump when `dump`) and returns the replies, parsed.
    pub fn request(&mut self, message: NetfilterMessage, dump: bool, op: &str) -> Result<Vec<NetfilterMessage>> {
        self.request_raw(message, dump, op, |raw| {
            let parsed = NetlinkMessage::<NetfilterMessage>::deserialize(raw)
                .map_err(|err| NftError::new(op, Errno::EPROTO, format!("unreadable reply: {err}")))?;
            Ok(match parsed.payload {
                NetlinkPayload::InnerMessage(inner) => Some(inner),
                _ => None,
            })
        })
    }

    /// Sends a GET (a dump when `dump`) and returns what `read` makes of each reply's raw
    /// message (netlink header included), where it makes something: a dump of tens of thousands
    /// of entries read without the typed parse's allocation per attribute. A dump interrupted by
    /// a concurrent change is read again from the start.
    pub fn request_raw<T>(
        &mut self,
        message: NetfilterMessage,
        dump: bool,
        op: &str,
        mut read: impl FnMut(&[u8]) -> Result<Option<T>>,
    ) -> Result<Vec<T>> {
        for _ in 0..DUMP_ATTEMPTS {
            let sequence = self.reserve(1);
            let mut header = NetlinkHeader::default();
            header.flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { NLM_F_ACK };
            header.sequence_number = sequence;
            let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(message.clone()));
            packet.finalize();
            let mut bytes = vec![0; packet.buffer_len()];
            packet.serialize(&mut bytes);
            self.socket.send(&bytes, 0).map_err(|e| NftError::from_io(op, &e))?;
            let mut replies = Vec::new();
            let interrupted = self.collect(sequence, dump, op, &mut |raw| {
                replies.extend(read(raw)?);
                Ok(())
            })?;
            if !interrupted {
                return Ok(replies);
            }
        }
        Err(NftError::new(op, Errno::EINTR, "the dump kept being interrupted by concurrent changes"))
    }

    /// Gives each reply to `sequence` to `each` until the last; returns whether the dump was
    /// interrupted by a concurrent change.
    fn collect(
        &mut self,
        sequence: u32,
        dump: bool,
        op: &str,
        each: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<bool> {
        let mut interrupted = false;
        loop {
            self.rx.clear();
            match self.socket.recv(&mut self.rx, 0) {
                Ok(_) => {}
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    return Err(NftError::new(op, Errno::ETIMEDOUT, "no answer from the kernel in 30 s"));
                }
                Err(err) => return Err(NftError::from_io(op, &err)),
            }
            let mut offset = 0;
            while let Some((header, end)) = next_message(&self.rx, offset) {
                let message = &self.rx[offset..end];
                offset = aligned(end);
                if header.sequence_number != sequence {
                    continue;
                }
                interrupted |= header.flags & NLM_F_DUMP_INTR != 0;
                match header.message_type {
                    NLMSG_DONE => return Ok(interrupted),
                    NLMSG_ERROR => {
                        return match parse_error(message, header.flags, sequence) {
                            None if !dump => Ok(interrupted),
                            None => continue,
                            Some(refusal) => Err(NftError::from_errno(op, refusal.errno, refusal.text.as_deref())),
                        };
                    }
                    _ => each(message)?,
                }
            }
        }
    }
}

fn set_buffer(fd: i32, option: libc::c_int, size: usize) -> std::io::Result<()> {
    let value = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // SAFETY: a valid socket descriptor and a pointer to a c_int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

fn aligned(len: usize) -> usize {
    (len + 3) & !3
}

/// The header of the message at `offset` and where it ends, if a whole one is there.
pub(crate) fn next_message(buffer: &[u8], offset: usize) -> Option<(NetlinkHeader, usize)> {
    let rest = buffer.get(offset..)?;
    let view = NetlinkBuffer::new_checked(rest).ok()?;
    let length = view.length() as usize;
    if length < 16 || length > rest.len() {
        return None;
    }
    let mut header = NetlinkHeader::default();
    header.length = view.length();
    header.message_type = view.message_type();
    header.flags = view.flags();
    header.sequence_number = view.sequence_number();
    Some((header, offset + length))
}

/// `None` for an acknowledgement, else the refusal with the extended-ack text and offset.
fn parse_error(message: &[u8], flags: u16, sequence: u32) -> Option<Refusal> {
    let payload = message.get(16..)?;
    let code = i32::from_ne_bytes(payload.get(..4)?.try_into().ok()?);
    if code == 0 {
        return None;
    }
    let mut refusal = Refusal { sequence, errno: Errno::from_raw(-code), text: None, offset: None };
    if flags & NLM_F_ACK_TLVS != 0 {
        // With NLM_F_CAPPED the echoed request is only its header; otherwise it is all of it.
        let echoed = if flags & NLM_F_CAPPED != 0 {
            16
        } else {
            payload.get(4..8).map(|l| aligned(u32::from_ne_bytes(l.try_into().unwrap()) as usize)).unwrap_or(16)
        };
        let mut tlvs = payload.get(4 + echoed..).unwrap_or(&[]);
        while tlvs.len() >= 4 {
            let len = u16::from_ne_bytes([tlvs[0], tlvs[1]]) as usize;
            let kind = u16::from_ne_bytes([tlvs[2], tlvs[3]]) & 0x3fff;
            if len < 4 || len > tlvs.len() {
                break;
            }
            let value = &tlvs[4..len];
            match kind {
                NLMSGERR_ATTR_MSG => {
                    let text = value.split(|b| *b == 0).next().unwrap_or(&[]);
                    refusal.text = Some(String::from_utf8_lossy(text).into_owned());
                }
                NLMSGERR_ATTR_OFFS if value.len() >= 4 => {
                    refusal.offset = Some(u32::from_ne_bytes(value[..4].try_into().unwrap()));
                }
                _ => {}
            }
            tlvs = tlvs.get(aligned(len)..).unwrap_or(&[]);
        }
    }
    Some(refusal)
}

/// Names the attribute at byte `offset` of a message we sent: for a rule, the expression.
pub(crate) fn describe_offset(message: &[u8], offset: u32) -> Option<String> {
    let offset = offset as usize;
    let message_type = u16::from_ne_bytes(message.get(4..6)?.try_into().ok()?) & 0xff;
    let mut at = 20; // nlmsghdr + nfgenmsg
    while at + 4 <= message.len() {
        let len = u16::from_ne_bytes(message[at..at + 2].try_into().ok()?) as usize;
        let kind = u16::from_ne_bytes(message[at + 2..at + 4].try_into().ok()?) & 0x3fff;
        if len < 4 {
            return None;
        }
        if offset >= at && offset < at + len {
            // NFT_MSG_NEWRULE's NFTA_RULE_EXPRESSIONS: find the expression.
            if message_type == 6 && kind == 4 {
                let mut inner = at + 4;
                let mut index = 0;
                while inner + 4 <= at + len {
                    let elem_len = u16::from_ne_bytes(message[inner..inner + 2].try_into().ok()?) as usize;
                    if elem_len < 4 {
                        break;
                    }
                    index += 1;
                    if offset < inner + elem_len {
                        let name_at = inner + 4;
                        let name_len = u16::from_ne_bytes(message[name_at..name_at + 2].try_into().ok()?) as usize;
                        let name = message.get(name_at + 4..name_at + name_len)?;
                        let name = String::from_utf8_lossy(name.split(|b| *b == 0).next()?).into_owned();
                        return Some(format!("expression {index} ({name})"));
                    }
                    inner += aligned(elem_len);
                }
            }
            return Some(format!("attribute {kind}"));
        }
        at += aligned(len);
    }
    None
}

#[cfg(test)]
mod patience_tests {
    use super::*;

    #[test]
    fn a_reply_that_never_comes_fails_naming_it() {
        let mut socket = NfSocket::open().expect("a netfilter netlink socket");
        // No request was sent with this sequence number: nothing will answer it.
        let err = socket.collect(u32::MAX, false, "read a reply", &mut |_| Ok(())).expect_err("no reply");
        assert_eq!(err.errno, Errno::ETIMEDOUT);
        assert!(err.to_string().contains("no answer from the kernel in 30 s"), "{err}");
    }
}
