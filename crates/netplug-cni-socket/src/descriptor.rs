//! The pod's network namespace, passed beside the request as a descriptor (SCM_RIGHTS): the shim
//! opens `CNI_NETNS` on the host, where the runtime made it, and netplug-node works on what the
//! shim opened, whatever its own mounts show (a container sees a namespace mounted after it
//! started only through mount propagation, which not every host has). The descriptor travels with
//! the request's first byte; a peer that reads plain bytes (an agent of an earlier release) never
//! sees it, and the kernel closes it.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::frame::MAX_FRAME;

/// Room for this many descriptors in one message: more than the one a shim sends, so that a peer
/// sending several does not truncate ours away (the extra ones are closed).
const FDS_PER_MESSAGE: usize = 4;

/// Writes all of `bytes` to the connected unix stream socket `socket`, with `descriptor` (if any)
/// beside the first of them. A timeout set on the socket (SO_SNDTIMEO) bounds each write.
pub fn send_with_descriptor(socket: BorrowedFd, bytes: &[u8], descriptor: Option<BorrowedFd>) -> io::Result<()> {
    let mut sent = 0;
    if let Some(fd) = descriptor {
        sent = loop {
            match sendmsg_fd(socket.as_raw_fd(), bytes, fd.as_raw_fd()) {
                Ok(n) => break n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            }
        };
    }
    while sent < bytes.len() {
        let rest = &bytes[sent..];
        let n = unsafe { libc::send(socket.as_raw_fd(), rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        sent += n as usize;
    }
    Ok(())
}

fn sendmsg_fd(socket: RawFd, bytes: &[u8], fd: RawFd) -> io::Result<usize> {
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
    let space = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;
    // u64 elements: cmsghdr's alignment.
    let mut control = vec![0u64; space.div_ceil(size_of::<u64>())];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), fd);
    }
    let n = unsafe { libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// A shim's request as netplug-node reads it: the two frames, and the descriptor that came with
/// them (the pod's network namespace), if one did.
#[derive(Debug)]
pub struct Request {
    pub header: Vec<u8>,
    pub stdin: Vec<u8>,
    pub descriptor: Option<OwnedFd>,
}

/// Reads a request (two frames) from the connected socket `socket`, and the first descriptor sent
/// with it; at most `patience` in all. Reads exactly the two frames, nothing after them. A frame
/// above [`MAX_FRAME`] is refused before anything is allocated for it.
pub fn read_request(socket: BorrowedFd, patience: Duration) -> io::Result<Request> {
    let mut reader = Reader { socket: socket.as_raw_fd(), deadline: Instant::now() + patience, descriptor: None };
    let header = reader.frame()?;
    let stdin = reader.frame()?;
    Ok(Request { header, stdin, descriptor: reader.descriptor })
}

struct Reader {
    socket: RawFd,
    deadline: Instant,
    descriptor: Option<OwnedFd>,
}

impl Reader {
    fn frame(&mut self) -> io::Result<Vec<u8>> {
        let mut length = [0u8; 4];
        self.fill(&mut length)?;
        let length = u32::from_be_bytes(length) as usize;
        if length > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the peer announced a frame of {length} bytes, more than the {MAX_FRAME} allowed"),
            ));
        }
        let mut bytes = vec![0u8; length];
        self.fill(&mut bytes)?;
        Ok(bytes)
    }

    fn fill(&mut self, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            self.wait()?;
            let n = self.recv(buf)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection inside its request",
                ));
            }
            buf = &mut buf[n..];
        }
        Ok(())
    }

    /// Until the socket has something to read, at most until the deadline.
    fn wait(&self) -> io::Result<()> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the peer did not send its whole request in time"));
            }
            let mut pollfd = libc::pollfd { fd: self.socket, events: libc::POLLIN, revents: 0 };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            match unsafe { libc::poll(&mut pollfd, 1, ms) } {
                n if n > 0 => return Ok(()),
                0 => continue,
                _ => {
                    let err = io::Error::last_os_error();
                    if err.kind() != io::ErrorKind::Interrupted {
                        return Err(err);
                    }
                }
            }
        }
    }

    /// One recvmsg(2) into `buf`, keeping the first descriptor that arrives (others are closed).
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let space = unsafe { libc::CMSG_SPACE((FDS_PER_MESSAGE * size_of::<RawFd>()) as u32) } as usize;
        let mut control = vec![0u64; space.div_ceil(size_of::<u64>())];
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let n = loop {
            let n = unsafe { libc::recvmsg(self.socket, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT) };
            if n >= 0 {
                break n as usize;
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => {}
                // poll(2) said readable, and yet: wait again.
                io::ErrorKind::WouldBlock => self.wait()?,
                _ => return Err(err),
            }
        };
        for fd in received(&msg) {
            if self.descriptor.is_none() {
                self.descriptor = Some(fd);
            }
        }
        Ok(n)
    }
}

/// The descriptors an SCM_RIGHTS message carried, owned (so those not kept are closed).
fn received(msg: &libc::msghdr) -> Vec<OwnedFd> {
    let mut fds = Vec::new();
    let mut header = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !header.is_null() {
        let cmsg = unsafe { &*header };
        if cmsg.cmsg_level == libc::SOL_SOCKET && cmsg.cmsg_type == libc::SCM_RIGHTS {
            let data = unsafe { libc::CMSG_DATA(header) };
            let bytes = cmsg.cmsg_len as usize - unsafe { libc::CMSG_LEN(0) } as usize;
            for i in 0..bytes / size_of::<RawFd>() {
                let fd = unsafe { std::ptr::read_unaligned(data.cast::<RawFd>().add(i)) };
                fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
        header = unsafe { libc::CMSG_NXTHDR(msg, header) };
    }
    fds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::push_frame;
    use std::fs::File;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::net::UnixStream;

    fn frames(header: &[u8], stdin: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_frame(&mut out, header).unwrap();
        push_frame(&mut out, stdin).unwrap();
        out
    }

    #[test]
    fn the_descriptor_arrives_with_the_frames_and_names_the_same_file() {
        let (shim, agent) = UnixStream::pair().unwrap();
        let file = File::open("/proc/self/ns/net").unwrap();
        send_with_descriptor(shim.as_fd(), &frames(b"{\"version\":1}", b"netconf"), Some(file.as_fd())).unwrap();
        let request = read_request(agent.as_fd(), Duration::from_secs(5)).unwrap();
        assert_eq!((request.header.as_slice(), request.stdin.as_slice()), (&b"{\"version\":1}"[..], &b"netconf"[..]));
        let received = File::from(request.descriptor.expect("a descriptor"));
        let (ours, theirs) = (file.metadata().unwrap(), received.metadata().unwrap());
        assert_eq!((ours.dev(), ours.ino()), (theirs.dev(), theirs.ino()));
    }

    #[test]
    fn without_a_descriptor_the_frames_alone_arrive_and_nothing_after_them_is_read() {
        let (mut shim, agent) = UnixStream::pair().unwrap();
        let mut bytes = frames(b"h", b"");
        bytes.push(0x01);
        shim.write_all(&bytes).unwrap();
        let request = read_request(agent.as_fd(), Duration::from_secs(5)).unwrap();
        assert_eq!(
            (request.header.as_slice(), request.stdin.len(), request.descriptor.is_none()),
            (&b"h"[..], 0, true)
        );
        let mut rest = [0u8; 1];
        (&agent).read_exact(&mut rest).unwrap();
        assert_eq!(rest, [0x01], "the byte after the request is left for the conversation");
    }

    #[test]
    fn a_peer_that_reads_plain_bytes_gets_the_frames_and_no_descriptor() {
        let (shim, mut agent) = UnixStream::pair().unwrap();
        let file = File::open("/proc/self/ns/net").unwrap();
        let bytes = frames(b"{}", b"x");
        send_with_descriptor(shim.as_fd(), &bytes, Some(file.as_fd())).unwrap();
        let mut read = vec![0u8; bytes.len()];
        agent.read_exact(&mut read).unwrap();
        assert_eq!(read, bytes);
    }

    #[test]
    fn a_large_request_arrives_whole_with_its_descriptor() {
        let (shim, agent) = UnixStream::pair().unwrap();
        let stdin = vec![7u8; 3 << 20];
        let bytes = frames(b"{}", &stdin);
        let writer = std::thread::spawn(move || {
            let file = File::open("/proc/self/ns/net").unwrap();
            send_with_descriptor(shim.as_fd(), &bytes, Some(file.as_fd())).unwrap();
        });
        let request = read_request(agent.as_fd(), Duration::from_secs(10)).unwrap();
        writer.join().unwrap();
        assert_eq!(request.stdin, stdin);
        assert!(request.descriptor.is_some());
    }

    #[test]
    fn a_request_not_sent_in_time_or_cut_short_fails() {
        let (mut shim, agent) = UnixStream::pair().unwrap();
        shim.write_all(&[0, 0, 0, 5, b'a']).unwrap();
        let err = read_request(agent.as_fd(), Duration::from_millis(50)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        drop(shim);
        let (mut shim, agent) = UnixStream::pair().unwrap();
        shim.write_all(&[0, 0, 0, 5, b'a']).unwrap();
        drop(shim);
        assert_eq!(
            read_request(agent.as_fd(), Duration::from_secs(5)).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }

    #[test]
    fn a_frame_announced_above_the_limit_is_refused() {
        let (mut shim, agent) = UnixStream::pair().unwrap();
        shim.write_all(&[0x01, 0x00, 0x00, 0x01]).unwrap();
        let err = read_request(agent.as_fd(), Duration::from_secs(5)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
