//! Network namespaces by path, and the dedicated OS threads that enter them.
//!
//! A path may be lent a descriptor ([`lend`]): netplug-node works on the namespace the `netplug`
//! shim opened on the host, which the agent's own mounts may not show. A lookup of a lent path
//! uses the descriptor, and everything it reports still names the path, as the one-shot plugin's
//! would.
//!
//! `setns(2)` moves only the calling thread, so every namespace operation runs on a thread that
//! does nothing else: no thread that other code shares (the JS thread, libuv's or tokio's pools)
//! ever changes namespace. The [`NamespaceThread`] token makes that a type rule: entering a
//! namespace needs `&mut NamespaceThread`, which only exists inside a thread started by [`spawn`]
//! (thrown away afterwards) or a thread of the pool [`submit`] hands work to, which goes back to
//! the process's namespace after each piece of work that entered another, and ends if it cannot.
//! The pool spares a resident program a thread's start and end per call: in netplug-node, under
//! load, starting one took up to ~0.3 ms of the JS thread.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

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
    /// Whether [`enter`](Self::enter) was called: a pooled thread goes back before its next work.
    entered: bool,
    _not_send: PhantomData<*const ()>,
}

impl NamespaceThread {
    fn new() -> NamespaceThread {
        NamespaceThread { entered: false, _not_send: PhantomData }
    }

    /// Moves this thread into `ns` for the rest of the work it was given.
    pub fn enter(&mut self, ns: &NetNs) -> Result<()> {
        self.entered = true;
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
        .spawn(move || f(&mut NamespaceThread::new()))
        .map_err(|err| DataplaneError::from_io("start namespace thread", &err))
}

/// How long a pooled thread waits for work before it ends, beyond the few kept.
const POOL_IDLE: Duration = Duration::from_secs(30);
/// Pooled threads kept however long they wait.
const POOL_KEPT: usize = 4;

type Job = Box<dyn FnOnce(&mut NamespaceThread) + Send>;

/// Threads for namespace work, started as work arrives while none is free.
struct Pool {
    /// The process's own namespace, which a thread goes back to after work that entered another.
    home: File,
    state: Mutex<PoolState>,
    work: Condvar,
}

#[derive(Default)]
struct PoolState {
    jobs: VecDeque<Job>,
    /// Threads waiting for work.
    idle: usize,
    threads: usize,
}

fn pool() -> Result<&'static Pool> {
    static POOL: LazyLock<std::io::Result<Pool>> = LazyLock::new(|| {
        Ok(Pool { home: File::open("/proc/self/ns/net")?, state: Mutex::default(), work: Condvar::new() })
    });
    POOL.as_ref().map_err(|err| DataplaneError::from_io("open the process's network namespace", err))
}

/// Runs `f` on a thread of the pool, at once: a free one, else a new one. For callers that do
/// not wait for it (the N-API binding settles a promise from it).
pub fn submit<F>(f: F) -> Result<()>
where
    F: FnOnce(&mut NamespaceThread) + Send + 'static,
{
    let pool = pool()?;
    let mut state = pool.state.lock().unwrap_or_else(PoisonError::into_inner);
    state.jobs.push_back(Box::new(f));
    if state.idle >= state.jobs.len() {
        pool.work.notify_one();
        return Ok(());
    }
    match std::thread::Builder::new().name("netplug-netns".into()).spawn(move || serve_pool(pool)) {
        Ok(_) => {
            state.threads += 1;
            Ok(())
        }
        Err(err) => {
            state.jobs.pop_back();
            Err(DataplaneError::from_io("start namespace thread", &err))
        }
    }
}

/// A pooled thread: work after work, back home after each that entered a namespace.
fn serve_pool(pool: &'static Pool) {
    let mut thread = NamespaceThread::new();
    while let Some(job) = next_job(pool) {
        let finished = catch_unwind(AssertUnwindSafe(|| job(&mut thread))).is_ok();
        // A thread that panicked, or cannot go back, takes no more work: the next starts afresh.
        let home = !thread.entered || setns(pool.home.as_fd(), CloneFlags::CLONE_NEWNET).is_ok();
        thread.entered = false;
        if !finished || !home {
            pool.state.lock().unwrap_or_else(PoisonError::into_inner).threads -= 1;
            return;
        }
    }
}

/// The next job, or None when the thread has waited long enough and others are kept.
fn next_job(pool: &Pool) -> Option<Job> {
    let mut state = pool.state.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if let Some(job) = state.jobs.pop_front() {
            return Some(job);
        }
        state.idle += 1;
        let (woken, wait) = pool.work.wait_timeout(state, POOL_IDLE).unwrap_or_else(PoisonError::into_inner);
        state = woken;
        state.idle -= 1;
        if wait.timed_out() && state.jobs.is_empty() && state.threads > POOL_KEPT {
            state.threads -= 1;
            return None;
        }
    }
}

/// Runs `f` on a dedicated thread and waits for it. For Rust callers; the N-API binding uses
/// [`submit`] and settles a promise from the pooled thread instead of blocking.
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
