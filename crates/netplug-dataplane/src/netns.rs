//! Network namespaces by path, and the dedicated OS threads that enter them.
//!
//! A path may be lent a descriptor ([`lend`]): netplug-node works on the namespace the `netplug`
//! shim opened on the host, which the agent's own mounts may not show. A lookup of a lent path
//! uses the descriptor, and everything it reports still names the path, as the one-shot plugin's
//! would.
//!
//! `setns(2)` moves only the calling thread, so every namespace operation runs on a thread of its
//! own that is thrown away afterwards: nothing has to be switched back, and no thread that other
//! code shares (the JS thread, libuv's or tokio's pools) ever changes namespace. The
//! [`NamespaceThread`] token makes that a type rule: entering a namespace needs `&mut
//! NamespaceThread`, which only exists inside a thread started by [`spawn`].

use std::collections::HashMap;
use std::fs::File;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::thread::JoinHandle;

use nix::errno::Errno;
use nix::sched::{CloneFlags, setns};
use nix::sys::statfs::{NSFS_MAGIC, fstatfs};

use crate::error::{DataplaneError, Result};

/// An open network namespace, held by file descriptor so it cannot vanish mid-operation.
#[derive(Debug)]
pub struct NetNs {
    file: File,
    path: PathBuf,
}

/// What a namespace path turned out to hold.
#[derive(Debug)]
pub enum NetNsLookup {
    Found(NetNs),
    /// Nothing at the path: the runtime has already destroyed the sandbox.
    Missing,
    /// A file that is not a namespace, such as the mount point left after `umount`.
    NotANamespace,
}

impl NetNs {
    /// Opens a namespace given as any path: `/run/netns/x`, `/var/run/netns/x`, `/proc/<pid>/ns/net`.
    pub fn lookup(path: &Path) -> Result<NetNsLookup> {
        let op = || format!("open network namespace {}", path.display());
        let opened = match lent_to(path) {
            Some(lent) => lent.try_clone(),
            None => File::open(path),
        };
        let file = match opened {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(NetNsLookup::Missing),
            // A path too long to name a file, or one through a regular file, names no namespace
            // either: DEL of it succeeds, ADD says it does not exist.
            Err(err)
                if matches!(err.raw_os_error().map(Errno::from_raw), Some(Errno::ENAMETOOLONG | Errno::ENOTDIR)) =>
            {
                return Ok(NetNsLookup::Missing);
            }
            Err(err) => return Err(DataplaneError::from_io(op(), &err)),
        };
        let fs = fstatfs(file.as_fd()).map_err(|errno| DataplaneError::from_errno(op(), errno, None))?;
        if fs.filesystem_type() != NSFS_MAGIC {
            return Ok(NetNsLookup::NotANamespace);
        }
        Ok(NetNsLookup::Found(NetNs { file, path: path.to_path_buf() }))
    }

    /// Opens a namespace that must exist.
    pub fn open(path: &Path) -> Result<NetNs> {
        let op = || format!("open network namespace {}", path.display());
        match Self::lookup(path)? {
            NetNsLookup::Found(ns) => Ok(ns),
            NetNsLookup::Missing => Err(DataplaneError::new(
                op(),
                Errno::ENOENT,
                format!("network namespace {} does not exist", path.display()),
            )),
            NetNsLookup::NotANamespace => {
                Err(DataplaneError::invalid(op(), format!("{} is not a network namespace", path.display())))
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Whether this is the namespace the calling thread is in now.
    pub fn is_current(&self) -> Result<bool> {
        let op = "compare network namespaces";
        let current = std::fs::metadata("/proc/thread-self/ns/net").map_err(|e| DataplaneError::from_io(op, &e))?;
        let target = self.file.metadata().map_err(|e| DataplaneError::from_io(op, &e))?;
        Ok(current.dev() == target.dev() && current.ino() == target.ino())
    }
}

/// A descriptor lent to a namespace path, and how many loans hold it.
struct Lent {
    file: Arc<File>,
    identity: (u64, u64),
    loans: usize,
}

fn lent() -> MutexGuard<'static, HashMap<PathBuf, Lent>> {
    static LENT: LazyLock<Mutex<HashMap<PathBuf, Lent>>> = LazyLock::new(Mutex::default);
    LENT.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lent_to(path: &Path) -> Option<Arc<File>> {
    lent().get(path).map(|lent| Arc::clone(&lent.file))
}

/// `path` stands for the file behind `descriptor` until the loan is dropped. None, and the
/// descriptor closed, if the path is lent already for another file: a call would not know which
/// one it means. Lent again for the same file, the path stays lent until both loans end.
pub fn lend(path: &Path, descriptor: OwnedFd) -> Result<Option<NetNsLoan>> {
    let file = File::from(descriptor);
    let meta = file.metadata().map_err(|err| DataplaneError::from_io(format!("lend {}", path.display()), &err))?;
    let identity = (meta.dev(), meta.ino());
    let mut lent = lent();
    match lent.get_mut(path) {
        Some(existing) if existing.identity != identity => return Ok(None),
        Some(existing) => existing.loans += 1,
        None => {
            lent.insert(path.to_path_buf(), Lent { file: Arc::new(file), identity, loans: 1 });
        }
    }
    Ok(Some(NetNsLoan { path: path.to_path_buf() }))
}

/// A path lent a descriptor ([`lend`]); the loan ends when this is dropped.
#[derive(Debug)]
pub struct NetNsLoan {
    path: PathBuf,
}

impl Drop for NetNsLoan {
    fn drop(&mut self) {
        let mut lent = lent();
        if let Some(entry) = lent.get_mut(&self.path) {
            entry.loans -= 1;
            if entry.loans == 0 {
                lent.remove(&self.path);
            }
        }
    }
}

/// Proof that the code holding it runs on a dedicated thread that may change namespace.
/// Not `Send`: it cannot leave the thread it was made for.
pub struct NamespaceThread {
    _not_send: PhantomData<*const ()>,
}

impl NamespaceThread {
    /// Moves this thread into `ns`. The thread stays there until it ends.
    pub fn enter(&mut self, ns: &NetNs) -> Result<()> {
        setns(ns.file.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|errno| {
            DataplaneError::from_errno(format!("enter network namespace {}", ns.path.display()), errno, None)
        })
    }
}

/// Starts a dedicated thread for one namespace operation.
pub fn spawn<T, F>(f: F) -> Result<JoinHandle<T>>
where
    T: Send + 'static,
    F: FnOnce(&mut NamespaceThread) -> T + Send + 'static,
{
    std::thread::Builder::new()
        .name("netplug-netns".into())
        .spawn(move || f(&mut NamespaceThread { _not_send: PhantomData }))
        .map_err(|err| DataplaneError::from_io("start namespace thread", &err))
}

/// Runs `f` on a dedicated thread and waits for it. For Rust callers; the N-API binding uses
/// [`spawn`] and settles a promise from the thread instead of blocking.
pub fn run<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&mut NamespaceThread) -> Result<T> + Send + 'static,
{
    match spawn(f)?.join() {
        Ok(result) => result,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
