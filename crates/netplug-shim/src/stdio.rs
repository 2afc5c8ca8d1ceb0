//! Whole reads and writes on the descriptors the runtime gave: a runtime's pipe may be
//! non-blocking, so EAGAIN waits in poll(2) rather than failing, and EINTR retries.

use std::io;

fn wait_for(fd: i32, events: libc::c_short) -> io::Result<()> {
    let mut pollfd = libc::pollfd { fd, events, revents: 0 };
    loop {
        if unsafe { libc::poll(&mut pollfd, 1, -1) } >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// One read(2) of at least one byte, or 0 at the end.
pub fn read_fd(fd: i32, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => wait_for(fd, libc::POLLIN)?,
            _ => return Err(err),
        }
    }
}

/// Writes all of `bytes` to `fd`.
pub fn write_fd_all(fd: i32, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n >= 0 {
            bytes = &bytes[n as usize..];
            continue;
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => wait_for(fd, libc::POLLOUT)?,
            _ => return Err(err),
        }
    }
    Ok(())
}
