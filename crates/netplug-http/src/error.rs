//! ureq's errors sorted into the five kinds callers decide on: fail over to another endpoint
//! (connect, timeout), report a setting to fix (tls), or give up on this answer (io, protocol).

use std::fmt;
use std::io::ErrorKind as IoKind;

/// What failed, for the caller's retry decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// No connection could be made (refused, unreachable, name not resolved, proxy refused).
    Connect,
    /// The deadline passed (connecting or waiting for the answer).
    Timeout,
    /// The TLS handshake or session failed (certificates, protocol).
    Tls,
    /// The connection broke, or the peer closed it mid-response.
    Io,
    /// The request could not be made or the bytes received are not an HTTP/1.1 response.
    Protocol,
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

impl From<ureq::Error> for Error {
    fn from(err: ureq::Error) -> Self {
        let kind = match &err {
            ureq::Error::Timeout(_) => ErrorKind::Timeout,
            ureq::Error::HostNotFound | ureq::Error::ConnectionFailed | ureq::Error::ConnectProxyFailed(_) => {
                ErrorKind::Connect
            }
            ureq::Error::Tls(_) | ureq::Error::Pem(_) | ureq::Error::Rustls(_) | ureq::Error::TlsRequired => {
                ErrorKind::Tls
            }
            ureq::Error::Io(io) => io_kind(io),
            _ => ErrorKind::Protocol,
        };
        let message = match &err {
            // Without ureq's "io: " in front: the message names the failure plainly.
            ureq::Error::Io(io) => io.to_string(),
            _ => err.to_string(),
        };
        Error::new(kind, message)
    }
}

fn io_kind(err: &std::io::Error) -> ErrorKind {
    // rustls reports its failures (a refused certificate, an alert) through io::Error.
    if err.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
        return ErrorKind::Tls;
    }
    match err.kind() {
        IoKind::TimedOut | IoKind::WouldBlock => ErrorKind::Timeout,
        IoKind::ConnectionRefused | IoKind::HostUnreachable | IoKind::NetworkUnreachable | IoKind::AddrNotAvailable => {
            ErrorKind::Connect
        }
        _ => ErrorKind::Io,
    }
}
