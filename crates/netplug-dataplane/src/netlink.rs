//! A synchronous rtnetlink socket: send one request, read its acknowledgement, dumps or replies.
//!
//! Written over netlink-sys and netlink-packet-route rather than the async `rtnetlink` crate:
//! every operation already owns a dedicated thread, so a blocking socket does the same work
//! without starting an async runtime per operation, and we read the kernel's extended-ack text
//! (the reason behind an errno), which the message crates leave unparsed.

use std::os::fd::{AsRawFd, RawFd};

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, NetlinkBuffer, NetlinkHeader,
    NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
use nix::errno::Errno;
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;

use crate::error::DataplaneError;

/// Netlink's reply to a failed request: the errno and the kernel's explanation, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetlinkError {
    pub errno: Errno,
    pub kernel_text: Option<String>,
}

impl NetlinkError {
    pub fn into_dataplane(self, op: impl Into<String>) -> DataplaneError {
        DataplaneError::from_errno(op, self.errno, self.kernel_text.as_deref())
    }

    fn io(err: std::io::Error) -> Self {
        Self { errno: err.raw_os_error().map(Errno::from_raw).unwrap_or(Errno::EIO), kernel_text: None }
    }

    /// A read of replies: one that waited out the socket's patience says so.
    fn reply(err: std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::WouldBlock {
            return Self { errno: Errno::ETIMEDOUT, kernel_text: Some(REPLY_PATIENCE_TEXT.into()) };
        }
        Self::io(err)
    }
}

pub type NetlinkResult<T> = std::result::Result<T, NetlinkError>;

/// Flags added to a request that creates an object that must not exist yet.
pub const CREATE_EXCL: u16 = netlink_packet_core::NLM_F_CREATE | netlink_packet_core::NLM_F_EXCL;

/// How long a read of the kernel's replies waits. The kernel answers a request inside its send,
/// and a dump's next part as the reader reads, so a read this long without a message means the
/// answer was lost: the call fails, naming it, instead of holding its thread for good.
#[cfg(not(test))]
const REPLY_PATIENCE: libc::timeval = libc::timeval { tv_sec: 30, tv_usec: 0 };
#[cfg(test)]
const REPLY_PATIENCE: libc::timeval = libc::timeval { tv_sec: 0, tv_usec: 200_000 };
const REPLY_PATIENCE_TEXT: &str = "no answer from the kernel in 30 s";

/// How often a dump interrupted by a concurrent change is retried (as containernetworking's
/// netlinksafe does).
const DUMP_ATTEMPTS: usize = 5;

// Extended-ack attribute carrying the kernel's error string (include/uapi/linux/netlink.h).
const NLMSGERR_ATTR_MSG: u16 = 1;
const NLM_F_CAPPED: u16 = 0x100;
const NLM_F_ACK_TLVS: u16 = 0x200;

/// An rtnetlink socket bound to the namespace of the thread that opened it, for good.
pub struct Rtnl {
    socket: Socket,
    sequence: u32,
    rx: Vec<u8>,
    tx: Vec<u8>,
}

impl Rtnl {
    /// Opens a socket in the calling thread's current network namespace.
    pub fn open() -> NetlinkResult<Self> {
        Self::open_with_groups(0)
    }

    /// Opens a socket that also receives the multicast groups in `groups` (a bit mask).
    pub fn open_with_groups(groups: u32) -> NetlinkResult<Self> {
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(NetlinkError::io)?;
        socket.bind(&SocketAddr::new(0, groups)).map_err(NetlinkError::io)?;
        // Best effort: older kernels lack these options and we only lose the error text.
        let _ = socket.set_ext_ack(true);
        let _ = socket.set_cap_ack(true);
        let _ = socket.set_netlink_get_strict_chk(true);
        setsockopt(&socket, sockopt::ReceiveTimeout, &TimeVal::from(REPLY_PATIENCE))
            .map_err(|errno| NetlinkError { errno, kernel_text: None })?;
        Ok(Self { socket, sequence: 0, rx: Vec::with_capacity(64 * 1024), tx: Vec::with_capacity(1024) })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// Sends a request and waits for the kernel's acknowledgement.
    pub fn execute(&mut self, message: RouteNetlinkMessage, flags: u16) -> NetlinkResult<()> {
        let sequence = self.send(message, NLM_F_REQUEST | NLM_F_ACK | flags)?;
        self.collect(sequence, |_| {}).map(|_| ())
    }

    /// Sends a `GET` for one object and returns the kernel's reply.
    pub fn get(&mut self, message: RouteNetlinkMessage) -> NetlinkResult<RouteNetlinkMessage> {
        let sequence = self.send(message, NLM_F_REQUEST | NLM_F_ACK)?;
        let mut reply = None;
        self.collect(sequence, |message| reply = reply.take().or(Some(message)))?;
        reply.ok_or(NetlinkError { errno: Errno::ENODATA, kernel_text: None })
    }

    /// Dumps a table, retrying when a concurrent change interrupted the dump.
    pub fn dump(&mut self, message: RouteNetlinkMessage) -> NetlinkResult<Vec<RouteNetlinkMessage>> {
        for _ in 0..DUMP_ATTEMPTS {
            let sequence = self.send(message.clone(), NLM_F_REQUEST | NLM_F_DUMP)?;
            let mut replies = Vec::new();
            let interrupted = self.collect(sequence, |message| replies.push(message))?;
            if !interrupted {
                return Ok(replies);
            }
        }
        Err(NetlinkError { errno: Errno::EINTR, kernel_text: Some("dump kept being interrupted".into()) })
    }

    /// Reads the next batch of unsolicited messages (multicast notifications).
    pub fn receive_notifications(&mut self) -> NetlinkResult<Vec<RouteNetlinkMessage>> {
        self.rx.clear();
        self.socket.recv(&mut self.rx, 0).map_err(NetlinkError::io)?;
        let mut messages = Vec::new();
        let mut offset = 0;
        while let Some((header, end)) = next_message(&self.rx, offset) {
            if header.message_type != NLMSG_ERROR && header.message_type != NLMSG_DONE {
                if let Ok(NetlinkMessage { payload: NetlinkPayload::InnerMessage(inner), .. }) =
                    NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.rx[offset..end])
                {
                    messages.push(inner);
                }
            }
            offset = aligned(end);
        }
        Ok(messages)
    }

    fn send(&mut self, message: RouteNetlinkMessage, flags: u16) -> NetlinkResult<u32> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.sequence;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(message));
        packet.finalize();
        self.tx.resize(packet.buffer_len(), 0);
        packet.serialize(&mut self.tx);
        self.socket.send(&self.tx, 0).map_err(NetlinkError::io)?;
        Ok(self.sequence)
    }

    /// Reads replies to `sequence` until its acknowledgement, error or end of dump; hands each
    /// reply message to `each`. Returns whether a dump was interrupted.
    fn collect(&mut self, sequence: u32, mut each: impl FnMut(RouteNetlinkMessage)) -> NetlinkResult<bool> {
        let mut interrupted = false;
        loop {
            self.rx.clear();
            self.socket.recv(&mut self.rx, 0).map_err(NetlinkError::reply)?;
            let mut offset = 0;
            while let Some((header, end)) = next_message(&self.rx, offset) {
                let message = &self.rx[offset..end];
                offset = aligned(end);
                if header.sequence_number != sequence {
                    continue; // a notification or a stale reply
                }
                interrupted |= header.flags & NLM_F_DUMP_INTR != 0;
                match header.message_type {
                    NLMSG_DONE => {
                        // A dump the kernel refused ends with its negative errno as DONE's payload.
                        let code = message.get(16..20).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                        if code < 0 {
                            return Err(NetlinkError { errno: Errno::from_raw(-code), kernel_text: None });
                        }
                        return Ok(interrupted);
                    }
                    NLMSG_ERROR => {
                        return match parse_error(message, header.flags) {
                            None => Ok(interrupted),
                            Some(err) => Err(err),
                        };
                    }
                    _ => {
                        let parsed = NetlinkMessage::<RouteNetlinkMessage>::deserialize(message)
                            .map_err(|err| NetlinkError { errno: Errno::EPROTO, kernel_text: Some(err.to_string()) })?;
                        // A single reply to a GET is followed by its ACK, so keep reading.
                        if let NetlinkPayload::InnerMessage(inner) = parsed.payload {
                            each(inner);
                        }
                    }
                }
            }
        }
    }
}

fn aligned(len: usize) -> usize {
    (len + 3) & !3
}

/// The header of the message at `offset` and where it ends, if a whole one is there.
fn next_message(buffer: &[u8], offset: usize) -> Option<(NetlinkHeader, usize)> {
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

/// `None` for an acknowledgement, else the errno with the kernel's extended-ack message.
fn parse_error(message: &[u8], flags: u16) -> Option<NetlinkError> {
    let payload = message.get(16..)?;
    let code = i32::from_ne_bytes(payload.get(..4)?.try_into().ok()?);
    if code == 0 {
        return None;
    }
    let errno = Errno::from_raw(-code);
    let mut kernel_text = None;
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
            if kind == NLMSGERR_ATTR_MSG {
                let text = &tlvs[4..len];
                let text = text.split(|b| *b == 0).next().unwrap_or(&[]);
                kernel_text = Some(String::from_utf8_lossy(text).into_owned());
            }
            tlvs = tlvs.get(aligned(len)..).unwrap_or(&[]);
        }
    }
    Some(NetlinkError { errno, kernel_text })
}

#[cfg(test)]
mod patience_tests {
    use super::*;

    #[test]
    fn a_reply_that_never_comes_fails_naming_it() {
        let mut rtnl = Rtnl::open().expect("an rtnetlink socket");
        // No request was sent with this sequence number: nothing will answer it.
        let err = rtnl.collect(u32::MAX, |_| {}).expect_err("no reply");
        assert_eq!(err.errno, Errno::ETIMEDOUT);
        assert_eq!(err.kernel_text.as_deref(), Some(REPLY_PATIENCE_TEXT));
    }
}
