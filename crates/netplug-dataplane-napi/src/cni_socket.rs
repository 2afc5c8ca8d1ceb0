//! netplug-node's CNI socket: listening, accepting, and reading each request with the descriptor
//! that may come beside it, the pod's network namespace (see netplug-cni-socket). Here rather than
//! in Node because Node's sockets cannot receive descriptors. Once the request is read, the
//! connection's descriptor is the receiver's: it wraps it in a net.Socket for the rest of the
//! conversation. A received namespace is lent to the path the runtime named it by (`lendNetns`),
//! so that the data plane's calls for that path work on it.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use napi::bindgen_prelude::{Buffer, Function};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Error, Result, Status};
use napi_derive::napi;
use netplug_cni_socket::descriptor::read_request;
use netplug_dataplane::netns::{self, NetNsLoan};

/// Connections a burst of pods may queue before the agent accepts them (the kernel caps it at
/// net.core.somaxconn).
const BACKLOG: i32 = 1024;

#[napi(object)]
pub struct CniRequest {
    /// The connection's descriptor, the receiver's to close; absent once the listener is closed
    /// and every request under way has been delivered (the last call).
    pub fd: Option<i32>,
    /// The first frame: the shim's JSON header.
    pub header: Option<Buffer>,
    /// The second frame: the runtime's stdin.
    pub stdin: Option<Buffer>,
    /// The descriptor that came beside the request (the pod's network namespace), the receiver's.
    pub netns: Option<i32>,
    /// When the connection was accepted: milliseconds on the monotonic clock (as process.hrtime's).
    pub accepted_at: Option<f64>,
}

type OnRequest = Arc<ThreadsafeFunction<CniRequest, (), CniRequest, Status, false, true>>;

/// Connections whose request is being read, by descriptor: close() cuts them short.
type Reading = Arc<Mutex<HashSet<RawFd>>>;

/// The CNI socket, listening: a thread accepts each connection and hands it to a thread of the
/// addon's pool that reads the request, which is then given to `onRequest` on the JS thread (no
/// round trip to JS to accept or to read, and no thread of libuv's held by a slow shim).
#[napi]
pub struct CniListener {
    listener: Arc<UnixListener>,
    closed: Arc<AtomicBool>,
    reading: Reading,
}

#[napi]
impl CniListener {
    /// Listens on a unix socket at `path`, which must not exist. Each request whose frames arrive
    /// within `patienceMs` goes to `onRequest`; a connection that sends less is closed.
    #[napi(constructor)]
    pub fn new(path: String, patience_ms: u32, on_request: Function<CniRequest, ()>) -> Result<Self> {
        let listener =
            UnixListener::bind(&path).map_err(|err| Error::from_reason(format!("listening on {path}: {err}")))?;
        // std listens with a backlog of 128; a burst of 100 pods and more may arrive at once.
        if unsafe { libc::listen(listener.as_raw_fd(), BACKLOG) } != 0 {
            return Err(Error::from_reason(format!("listening on {path}: {}", io::Error::last_os_error())));
        }
        let on_request: OnRequest =
            Arc::new(on_request.build_threadsafe_function().callee_handled::<false>().weak::<true>().build()?);
        let listener = Arc::new(listener);
        let closed = Arc::new(AtomicBool::new(false));
        let reading: Reading = Arc::default();
        let patience = Duration::from_millis(patience_ms.into());
        let (accepting, stop, readers) = (Arc::clone(&listener), Arc::clone(&closed), Arc::clone(&reading));
        std::thread::Builder::new()
            .name("netplug-cni-accept".into())
            .spawn(move || accept_all(&accepting, &stop, &readers, patience, on_request))
            .map_err(|err| Error::from_reason(format!("start a thread: {err}")))?;
        Ok(CniListener { listener, closed, reading })
    }

    /// Stops accepting, and cuts short the requests being read: `onRequest` is called once more,
    /// without a descriptor, once the last of them is settled.
    #[napi]
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        // Wakes an accept(2) blocked on the socket (it fails with EINVAL).
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        for fd in self.reading.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            unsafe { libc::shutdown(*fd, libc::SHUT_RDWR) };
        }
    }
}

/// Requests being read on the addon's threads, counted so that the last call comes after them.
#[derive(Default)]
struct Readers {
    running: Mutex<usize>,
    done: Condvar,
}

/// One read under way; it counts as finished when dropped (its work ended, panicked or was not run).
struct Reader(Arc<Readers>);

impl Drop for Reader {
    fn drop(&mut self) {
        *self.0.running.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.done.notify_all();
    }
}

impl Readers {
    fn start(self: &Arc<Self>) -> Reader {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Reader(Arc::clone(self))
    }

    fn wait_all(&self) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        while *running > 0 {
            running = self.done.wait(running).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

fn accept_all(
    listener: &UnixListener,
    closed: &AtomicBool,
    reading: &Reading,
    patience: Duration,
    on_request: OnRequest,
) {
    let readers = Arc::new(Readers::default());
    while !closed.load(Ordering::Acquire) {
        match listener.accept() {
            // Closed meanwhile: the connection is dropped, and its shim runs the one-shot.
            Ok(_) if closed.load(Ordering::Acquire) => break,
            Ok((stream, _)) => {
                let accepted = monotonic_ms();
                let fd = OwnedFd::from(stream);
                let raw = fd.as_raw_fd();
                reading.lock().unwrap_or_else(PoisonError::into_inner).insert(raw);
                let (reader, on_request) = (readers.start(), Arc::clone(&on_request));
                let in_reading = Arc::clone(reading);
                // Read on a pooled thread (no thread started per request), which a slow shim holds
                // for at most `patience`; the accepting goes on meanwhile.
                let submitted = netns::submit(move |_| {
                    let _reader = reader;
                    read_one(fd, accepted, &in_reading, patience, &on_request);
                });
                if submitted.is_err() {
                    // Not read: the connection was closed with the work, and its shim runs the one-shot.
                    reading.lock().unwrap_or_else(PoisonError::into_inner).remove(&raw);
                }
            }
            Err(_) if closed.load(Ordering::Acquire) => break,
            // A peer gone before it was accepted, a signal: accept the next.
            Err(err) if matches!(err.raw_os_error(), Some(libc::ECONNABORTED | libc::EINTR)) => {}
            // Out of descriptors, say: the shims meanwhile wait, then run the one-shot.
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    readers.wait_all();
    let last = CniRequest { fd: None, header: None, stdin: None, netns: None, accepted_at: None };
    on_request.call(last, ThreadsafeFunctionCallMode::Blocking);
}

/// CLOCK_MONOTONIC in milliseconds: the clock of process.hrtime, and of every process on the host.
fn monotonic_ms() -> f64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as f64 * 1e3 + now.tv_nsec as f64 / 1e6
}

/// Reads the connection's request and hands it to JS; a request that does not arrive whole in
/// time (or a listener closing) closes the connection.
fn read_one(fd: OwnedFd, accepted: f64, reading: &Reading, patience: Duration, on_request: &OnRequest) {
    let request = read_request(fd.as_fd(), patience);
    // Out of the set before the descriptor changes hands: close() must not cut a handed-over one.
    reading.lock().unwrap_or_else(PoisonError::into_inner).remove(&fd.as_raw_fd());
    let Ok(request) = request else { return };
    on_request.call(
        CniRequest {
            fd: Some(fd.into_raw_fd()),
            header: Some(request.header.into()),
            stdin: Some(request.stdin.into()),
            netns: request.descriptor.map(IntoRawFd::into_raw_fd),
            accepted_at: Some(accepted),
        },
        ThreadsafeFunctionCallMode::NonBlocking,
    );
}

/// A namespace path lent a descriptor; release() ends the loan (so does the object's collection).
#[napi]
pub struct NetnsLoan {
    loan: Option<NetNsLoan>,
}

#[napi]
impl NetnsLoan {
    #[napi]
    pub fn release(&mut self) {
        self.loan = None;
    }
}

/// Lends the descriptor `fd` (taken over: closed when the loan ends) to `path`: the data plane's
/// calls for `path` work on it. Null, and `fd` closed, if `path` is lent already for another
/// namespace.
#[napi]
pub fn lend_netns(path: String, fd: i32) -> Result<Option<NetnsLoan>> {
    let descriptor = unsafe { OwnedFd::from_raw_fd(fd) };
    let loan = netns::lend(Path::new(&path), descriptor).map_err(|err| Error::from_reason(err.to_string()))?;
    Ok(loan.map(|loan| NetnsLoan { loan: Some(loan) }))
}
