//! A host-wide lock between plugin processes: `flock(2)` on a file. The kernel drops it when the
//! holder's descriptor closes, also when the holder is killed, so a crashed plugin never leaves
//! it taken.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// A held lock: the descriptor that holds it, and whether another holder had to be waited for.
pub struct HostLock {
    pub fd: OwnedFd,
    pub waited: bool,
}

/// Opens (creating it and its directory) `path` and takes an exclusive lock on it, blocking the
/// calling thread until no other process holds it.
pub fn lock_host_file(path: &Path) -> io::Result<HostLock> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let file = OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(path)?;
    if flock(&file, libc::LOCK_EX | libc::LOCK_NB).is_ok() {
        return Ok(HostLock { fd: file.into(), waited: false });
    }
    flock(&file, libc::LOCK_EX)?;
    Ok(HostLock { fd: file.into(), waited: true })
}

/// [`lock_host_file`], waiting at most `patience` for another holder: `None` if it still holds the
/// lock then. The wait is on a thread of its own that the caller does not join: if the other
/// holder never lets go, that thread stays blocked in flock(2) without holding up the caller (or
/// its process's exit); if the lock comes after the caller gave up, the thread closes it at once.
pub fn lock_host_file_within(path: &Path, patience: Duration) -> io::Result<Option<HostLock>> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let file = OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(path)?;
    if flock(&file, libc::LOCK_EX | libc::LOCK_NB).is_ok() {
        return Ok(Some(HostLock { fd: file.into(), waited: false }));
    }
    let (taken, lock) = mpsc::sync_channel(1);
    std::thread::Builder::new().name("netplug-hostlock".into()).spawn(move || {
        // A send to a caller that gave up fails and drops the file: the lock is released.
        let _ = taken.send(flock(&file, libc::LOCK_EX).map(|()| file));
    })?;
    match lock.recv_timeout(patience) {
        Ok(file) => Ok(Some(HostLock { fd: file?.into(), waited: true })),
        Err(_) => Ok(None),
    }
}

fn flock(file: &fs::File, operation: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor this function's caller owns for the call's duration.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_until_the_first_closes() {
        let dir = std::env::temp_dir().join(format!("netplug-hostlock-{}", std::process::id()));
        let path = dir.join("nested/test.lock");
        let first = lock_host_file(&path).unwrap();
        assert!(!first.waited);
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || lock_host_file(&path).unwrap().waited)
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "the second holder must wait");
        drop(first);
        assert!(waiter.join().unwrap(), "it took the lock after waiting");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_waiter_gives_up_after_its_patience_and_a_late_lock_is_let_go() {
        let dir = std::env::temp_dir().join(format!("netplug-hostlock-patience-{}", std::process::id()));
        let path = dir.join("test.lock");
        let first = lock_host_file(&path).unwrap();
        let start = std::time::Instant::now();
        assert!(lock_host_file_within(&path, Duration::from_millis(100)).unwrap().is_none());
        assert!(start.elapsed() >= Duration::from_millis(100));
        drop(first);
        // The abandoned waiter takes the lock and closes it: a later caller gets it.
        let again = lock_host_file_within(&path, Duration::from_secs(10)).unwrap().expect("the lock, once let go");
        drop(again);
        fs::remove_dir_all(dir).unwrap();
    }
}
