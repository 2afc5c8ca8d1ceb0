//! The thread that counts allowed flows from connection tracking (flow_counts.rs): it reads the
//! event of every entry leaving the table (ctnetlink's destroy group) as it comes, and at each
//! [`FlowTracker::take`] reads the events already queued, dumps the table and hands over the
//! interval's counts. Events and dumps are taken in that one thread, in order, so that an entry is
//! never counted by both. An event lost to a full socket (the kernel says ENOBUFS) is counted; its
//! connection is then counted by the next dump if it is still there, else not at all. A socket
//! filter in the kernel passes only the events of marked entries: on a node, the host's own
//! connections and everything no flow-logging rule allowed never reach this thread.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::thread::JoinHandle;

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::conntrack::{self, entry_of_message};
use crate::error::{NftError, Result};
use crate::flow_counts::{FlowCount, FlowCounter};

/// NFNLGRP_CONNTRACK_DESTROY.
const DESTROY_GROUP: u32 = 3;
/// The socket's buffer: at tens of thousands of connections a second, seconds of events while
/// the thread waits for a core.
const RECEIVE_BUFFER: libc::c_int = 32 << 20;
/// How long the thread lets events gather after reading some. The kernel sends each event alone:
/// woken for each, the thread cost more than the events (a wake-up is several microseconds).
const GATHER: std::time::Duration = std::time::Duration::from_millis(20);
/// The nfnetlink header before a ctnetlink message's attributes: nlmsghdr (16) and nfgenmsg (4).
const ATTRIBUTES_AT: u32 = 20;
/// CTA_MARK: sent in an event only when the mark is not 0.
const CTA_MARK: u32 = 8;
/// The classic-BPF ancillary load that finds a netlink attribute (SKF_AD_OFF + SKF_AD_NLATTR):
/// A = offset of the attribute of type X among those starting at offset A, or 0.
const LOAD_NLATTR: u32 = (-0x1000i32 + 12) as u32;

/// Events read by one system call (recvmmsg), each in a slot of SLOT bytes (an event is a few
/// hundred).
const BATCH: usize = 64;
const SLOT: usize = 2048;

/// What an interval's take gives.
#[derive(Debug, Default)]
pub struct Taken {
    pub counts: Vec<FlowCount>,
    /// Times the kernel dropped events since the last take (a full socket).
    pub overruns: u64,
    /// Connections followed across intervals now.
    pub followed: usize,
    /// Events read since the last take (the kernel's filter passes only those of marked entries).
    pub events: u64,
}

enum Command {
    Take(mpsc::Sender<Result<Taken>>),
}

/// A running tracker; [`FlowTracker::stop`] ends it.
pub struct FlowTracker {
    wake: OwnedFd,
    commands: mpsc::Sender<Command>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl FlowTracker {
    /// Subscribes to the destroy events of the calling thread's network namespace and starts
    /// counting.
    pub fn start() -> Result<Self> {
        let op = "subscribe to connection tracking's destroy events";
        let mut socket = Socket::new(NETLINK_NETFILTER).map_err(|e| NftError::from_io(op, &e))?;
        socket.bind(&SocketAddr::new(0, 0)).map_err(|e| NftError::from_io(op, &e))?;
        force_receive_buffer(&socket);
        pass_marked_only(&socket).map_err(|e| NftError::from_io(op, &e))?;
        socket.add_membership(DESTROY_GROUP).map_err(|e| NftError::from_io(op, &e))?;
        let wake = eventfd(op)?;
        let waker = wake.try_clone().map_err(|e| NftError::from_io(op, &e))?;
        let (commands, received) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("netplug-flows-ct".into())
            .spawn(move || run(socket, waker, received))
            .map_err(|e| NftError::from_io(op, &e))?;
        Ok(Self { wake, commands, thread: Some(thread) })
    }

    /// The counts since the last take (the table dumped for the connections still open).
    pub fn take(&self) -> Result<Taken> {
        let op = "count flows from connection tracking";
        let stopped = || NftError::new(op, Errno::EPIPE, "the counting thread has stopped");
        let (reply, answer) = mpsc::channel();
        self.commands.send(Command::Take(reply)).map_err(|_| stopped())?;
        self.signal();
        answer.recv().map_err(|_| stopped())?
    }

    /// Stops the thread; returns the error that ended it early, if one did.
    pub fn stop(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        let Some(thread) = self.thread.take() else { return Ok(()) };
        // A dropped sender is the thread's cue to end.
        let (commands, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.commands, commands));
        self.signal();
        thread.join().unwrap_or_else(|_| {
            Err(NftError::new("count flows from connection tracking", Errno::EIO, "the counting thread panicked"))
        })
    }

    fn signal(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our own eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }
}

impl Drop for FlowTracker {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

fn run(socket: Socket, wake: OwnedFd, commands: mpsc::Receiver<Command>) -> Result<()> {
    let op = "read connection tracking's destroy events";
    let mut counter = FlowCounter::default();
    let mut overruns = 0u64;
    let mut events = 0u64;
    let mut buffer = vec![0u8; BATCH * SLOT];
    loop {
        let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLIN), PollFd::new(wake.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(errno) => return Err(NftError::from_errno(op, errno, None)),
        }
        if fds[0].revents().is_some_and(|r| !r.is_empty())
            && read_events(&socket, &mut buffer, &mut counter, &mut overruns, &mut events, op)? > 0
        {
            std::thread::sleep(GATHER);
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            let mut count = [0u8; 8];
            // SAFETY: reads 8 bytes into a live buffer from our own eventfd (non-blocking).
            unsafe { libc::read(wake.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
            loop {
                match commands.try_recv() {
                    Ok(Command::Take(reply)) => {
                        // Events queued before the dump first: an entry gone before it began is
                        // counted by its event, one still there by the dump.
                        let taken = read_events(&socket, &mut buffer, &mut counter, &mut overruns, &mut events, op)
                            .and_then(|_| conntrack::dump())
                            .map(|entries| {
                                counter.dumped(&entries);
                                Taken {
                                    counts: counter.take(),
                                    overruns: std::mem::take(&mut overruns),
                                    followed: counter.followed(),
                                    events: std::mem::take(&mut events),
                                }
                            });
                        let _ = reply.send(taken);
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
                }
            }
        }
    }
}

/// Every event queued on the socket, counted, BATCH a system call; returns how many were read
/// once none is left.
fn read_events(
    socket: &Socket,
    buffer: &mut [u8],
    counter: &mut FlowCounter,
    overruns: &mut u64,
    events: &mut u64,
    op: &str,
) -> Result<usize> {
    let mut read = 0;
    loop {
        // SAFETY: all-zero iovec and mmsghdr are valid values (null pointers, zero lengths).
        let mut slots: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut headers: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (i, (slot, header)) in slots.iter_mut().zip(headers.iter_mut()).enumerate() {
            slot.iov_base = buffer[i * SLOT..].as_mut_ptr().cast();
            slot.iov_len = SLOT;
            header.msg_hdr.msg_iov = slot;
            header.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: each header points at one live slot of SLOT bytes inside `buffer`, which
        // outlives the call; the kernel writes at most that much to each.
        let received = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                headers.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if received < 0 {
            match Errno::last() {
                Errno::EAGAIN => return Ok(read),
                // Events were dropped while the socket was full: count it, read on.
                Errno::ENOBUFS => {
                    *overruns += 1;
                    continue;
                }
                Errno::EINTR => continue,
                errno => return Err(NftError::from_errno(op, errno, None)),
            }
        }
        let received = received as usize;
        for (i, header) in headers.iter().take(received).enumerate() {
            if header.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                continue;
            }
            let slot = &buffer[i * SLOT..i * SLOT + (header.msg_len as usize).min(SLOT)];
            let mut offset = 0;
            while let Some((_, end)) = crate::socket::next_message(slot, offset) {
                if let Some(entry) = entry_of_message(&slot[offset..end]) {
                    counter.destroyed(&entry);
                }
                offset = (end + 3) & !3;
            }
        }
        read += received;
        *events += received as u64;
        if received < BATCH {
            return Ok(read);
        }
    }
}

/// Attaches the filter that drops, in the kernel, every event without a CTA_MARK attribute (an
/// entry whose mark is 0): no flow-logging rule allowed it, so the counter would skip it anyway.
fn pass_marked_only(socket: &Socket) -> std::io::Result<()> {
    let step = |code: u32, k: u32, jt: u8, jf: u8| libc::sock_filter { code: code as u16, jt, jf, k };
    let program = [
        step(libc::BPF_LD | libc::BPF_IMM, ATTRIBUTES_AT, 0, 0),
        step(libc::BPF_LDX | libc::BPF_IMM, CTA_MARK, 0, 0),
        step(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, LOAD_NLATTR, 0, 0),
        // Not found: A is 0; drop. Found: pass the whole message.
        step(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, 1, 0),
        step(libc::BPF_RET | libc::BPF_K, u32::MAX, 0, 0),
        step(libc::BPF_RET | libc::BPF_K, 0, 0, 0),
    ];
    let fprog = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr().cast_mut() };
    // SAFETY: passes a live sock_fprog pointing at `program`, which outlives the call (the kernel copies it).
    let done = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if done < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

/// SO_RCVBUFFORCE (root may exceed net.core.rmem_max); a smaller buffer only loses more under load.
fn force_receive_buffer(socket: &Socket) {
    let size = RECEIVE_BUFFER;
    // SAFETY: passes a live c_int of the size given to setsockopt on our own socket.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

fn eventfd(op: &str) -> Result<OwnedFd> {
    // SAFETY: eventfd has no memory preconditions; the result is checked.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if raw < 0 {
        return Err(NftError::from_io(op, &std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor eventfd just returned, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}
