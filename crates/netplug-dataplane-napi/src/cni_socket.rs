//! netplug-node's CNI socket: listening, accepting, and reading each request with the descriptor
//! that may come beside it, the pod's network namespace (see netplug-cni-socket). Here rather than
//! in Node because Node's sockets cannot receive descriptors. Once the request is read, the
//! connection's descriptor is the caller's: it wraps it in a net.Socket for the rest of the
//! conversation. A received namespace is lent to the path the runtime named it by (`lendNetns`),
//! so that the data plane's calls for that path work on it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use napi::bindgen_prelude::{Buffer, Object};
use napi::{Env, Error, Result};
use napi_derive::napi;
use netplug_cni_socket::descriptor::read_request;
use netplug_dataplane::netns::{self, NetNsLoan};

use crate::on_thread;

/// Connections a burst of pods may queue before the agent accepts them (the kernel caps it at
/// net.core.somaxconn).
const BACKLOG: i32 = 1024;

#[napi(object)]
pub struct AcceptOutcome {
    /// The connection's descriptor, the caller's to close.
    pub fd: Option<i32>,
    /// The listener was closed: no more connections.
    pub closed: Option<bool>,
    pub error: Option<String>,
}

/// The CNI socket, listening.
#[napi]
pub struct CniListener {
    /// Taken by close(); the socket is closed once a waiting accept has returned too.
    listener: Mutex<Option<Arc<UnixListener>>>,
    closed: Arc<AtomicBool>,
}

#[napi]
impl CniListener {
    /// Listens on a unix socket at `path`, which must not exist.
    #[napi(constructor)]
    pub fn new(path: String) -> Result<Self> {
        let listener =
            UnixListener::bind(&path).map_err(|err| Error::from_reason(format!("listening on {path}: {err}")))?;
        // std listens with a backlog of 128; a burst of 100 pods and more may arrive at once.
        if unsafe { libc::listen(listener.as_raw_fd(), BACKLOG) } != 0 {
            return Err(Error::from_reason(format!("listening on {path}: {}", io::Error::last_os_error())));
        }
        Ok(CniListener { listener: Mutex::new(Some(Arc::new(listener))), closed: Arc::new(AtomicBool::new(false)) })
    }

    /// The next connection, waited for on a thread of its own; `closed` once close() is called.
    #[napi(ts_return_type = "Promise<AcceptOutcome>")]
    pub fn accept<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let done = || AcceptOutcome { fd: None, closed: Some(true), error: None };
        let closed = Arc::clone(&self.closed);
        let Some(listener) = self.listener.lock().unwrap_or_else(PoisonError::into_inner).clone() else {
            return on_thread(env, done);
        };
        on_thread(env, move || {
            loop {
                if closed.load(Ordering::Acquire) {
                    return done();
                }
                match listener.accept() {
                    // Closed meanwhile: the connection is dropped, and its shim runs the one-shot.
                    Ok(_) if closed.load(Ordering::Acquire) => return done(),
                    Ok((stream, _)) => {
                        return AcceptOutcome { fd: Some(stream.into_raw_fd()), closed: None, error: None };
                    }
                    Err(_) if closed.load(Ordering::Acquire) => return done(),
                    // A peer gone before it was accepted, a signal: accept the next.
                    Err(err) if matches!(err.raw_os_error(), Some(libc::ECONNABORTED | libc::EINTR)) => {}
                    Err(err) => return AcceptOutcome { fd: None, closed: None, error: Some(err.to_string()) },
                }
            }
        })
    }

    /// Stops accepting: a waiting accept() resolves `closed`, and the socket is closed (shims
    /// still queued on it see the connection end, and run the one-shot).
    #[napi]
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        if let Some(listener) = self.listener.lock().unwrap_or_else(PoisonError::into_inner).take() {
            // Wakes an accept(2) blocked on the socket (it fails with EINVAL).
            unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
        }
    }
}

#[napi(object)]
pub struct CniRequestOutcome {
    /// The first frame: the shim's JSON header.
    pub header: Option<Buffer>,
    /// The second frame: the runtime's stdin.
    pub stdin: Option<Buffer>,
    /// The descriptor that came beside the request (the pod's network namespace), the caller's.
    pub netns: Option<i32>,
    pub error: Option<String>,
}

/// Reads a request (two frames, and a descriptor beside them) from the connection `fd`, which the
/// caller keeps open meanwhile, waiting at most `patienceMs` for all of it.
#[napi(ts_return_type = "Promise<CniRequestOutcome>")]
pub fn read_cni_request(env: &Env, fd: i32, patience_ms: u32) -> Result<Object<'_>> {
    on_thread(env, move || {
        // The caller keeps the descriptor open until this settles.
        let socket = unsafe { BorrowedFd::borrow_raw(fd) };
        match read_request(socket, Duration::from_millis(patience_ms.into())) {
            Ok(request) => CniRequestOutcome {
                header: Some(request.header.into()),
                stdin: Some(request.stdin.into()),
                netns: request.descriptor.map(IntoRawFd::into_raw_fd),
                error: None,
            },
            Err(err) => CniRequestOutcome { header: None, stdin: None, netns: None, error: Some(err.to_string()) },
        }
    })
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
