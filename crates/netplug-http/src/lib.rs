//! One keep-alive HTTP/1.1 connection to etcd's JSON gateway, over plain TCP or TLS (rustls).
//!
//! Blocking by design: the N-API binding runs every call on an OS thread of its own, so a plugin
//! process connects, handshakes and waits for etcd off its JavaScript thread, which meanwhile
//! validates the netconf (Node's own sockets would cost that thread the loading of its whole
//! streams stack on every pod's path). Requests are written and responses parsed by the caller;
//! this crate only knows where a response ends.

mod framing;
mod tls;

use std::fmt;
use std::io::{ErrorKind as IoKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

pub use framing::response_length;
pub use tls::{TlsError, TlsFiles, client_config};

/// What failed, for the caller's retry decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// No connection could be made (refused, unreachable, name not resolved).
    Connect,
    /// The peer took longer than the time allowed.
    Timeout,
    /// The TLS handshake or session failed (certificates, protocol).
    Tls,
    /// The connection broke, or the peer closed it mid-response.
    Io,
    /// The bytes received are not an HTTP/1.1 response.
    Protocol,
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }

    fn io(context: &str, err: std::io::Error) -> Self {
        let kind = match err.kind() {
            IoKind::TimedOut | IoKind::WouldBlock => ErrorKind::Timeout,
            // rustls reports its failures through io::Error with an inner rustls::Error.
            IoKind::InvalidData if err.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) => ErrorKind::Tls,
            _ => ErrorKind::Io,
        };
        Error::new(kind, format!("{context}: {err}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Where to connect: host (name or address) and port, with TLS when a client configuration is given.
#[derive(Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub tls: Option<Arc<ClientConfig>>,
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => tls.get_ref(),
        }
    }

    fn as_io(&mut self) -> &mut dyn ReadWrite {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => tls.as_mut(),
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// An open connection: TCP connected and, with TLS, the handshake done.
pub struct Connection {
    stream: Stream,
}

impl Connection {
    /// Connects to the first address of `target` that accepts within `timeout` each, and
    /// completes the TLS handshake within the same time.
    pub fn open(target: &Target, timeout: Duration) -> Result<Connection> {
        let authority = format!("{}:{}", target.host, target.port);
        let addresses = (target.host.as_str(), target.port)
            .to_socket_addrs()
            .map_err(|err| Error::new(ErrorKind::Connect, format!("resolve {authority}: {err}")))?;
        let mut failures = Vec::new();
        let mut tcp = None;
        for address in addresses {
            match TcpStream::connect_timeout(&address, timeout) {
                Ok(stream) => {
                    tcp = Some(stream);
                    break;
                }
                Err(err) => failures.push(format!("{address}: {err}")),
            }
        }
        let Some(tcp) = tcp else {
            // One address (the usual case) needs no repeating; a name with several lists each.
            let detail = match failures.as_slice() {
                [] => format!("{authority} resolves to no address"),
                [only] => only.split_once(": ").map_or(only.clone(), |(_, err)| err.to_string()),
                many => many.join("; "),
            };
            return Err(Error::new(ErrorKind::Connect, detail));
        };
        tcp.set_nodelay(true).map_err(|err| Error::io("set TCP_NODELAY", err))?;
        let stream = match &target.tls {
            None => Stream::Plain(tcp),
            Some(config) => Stream::Tls(Box::new(handshake(config.clone(), &target.host, tcp, timeout)?)),
        };
        Ok(Connection { stream })
    }

    /// Writes `request` (a whole HTTP/1.1 request) and reads its whole response, each within
    /// `timeout`. After an error the connection is unusable; open another.
    pub fn exchange(&mut self, request: &[u8], timeout: Duration) -> Result<Vec<u8>> {
        let tcp = self.stream.tcp();
        tcp.set_write_timeout(Some(timeout)).map_err(|err| Error::io("set write timeout", err))?;
        tcp.set_read_timeout(Some(timeout)).map_err(|err| Error::io("set read timeout", err))?;
        let io = self.stream.as_io();
        io.write_all(request).map_err(|err| Error::io("send request", err))?;
        io.flush().map_err(|err| Error::io("send request", err))?;
        let mut response = Vec::with_capacity(4096);
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some(length) = response_length(&response)? {
                response.truncate(length);
                return Ok(response);
            }
            let n = io.read(&mut chunk).map_err(|err| Error::io("read response", err))?;
            if n == 0 {
                return Err(Error::new(ErrorKind::Io, "read response: the server closed the connection"));
            }
            response.extend_from_slice(&chunk[..n]);
        }
    }
}

fn handshake(config: Arc<ClientConfig>, host: &str, mut tcp: TcpStream, timeout: Duration) -> Result<StreamOwned<ClientConnection, TcpStream>> {
    let name = ServerName::try_from(host.to_string())
        .map_err(|_| Error::new(ErrorKind::Tls, format!("\"{host}\" is neither a DNS name nor an IP address")))?;
    let mut session = ClientConnection::new(config, name).map_err(|err| Error::new(ErrorKind::Tls, format!("TLS with {host}: {err}")))?;
    tcp.set_read_timeout(Some(timeout)).map_err(|err| Error::io("set read timeout", err))?;
    tcp.set_write_timeout(Some(timeout)).map_err(|err| Error::io("set write timeout", err))?;
    // Done here rather than on the first request, so that a warm-up connects completely.
    while session.is_handshaking() {
        session.complete_io(&mut tcp).map_err(|err| Error::io(&format!("TLS handshake with {host}"), err))?;
    }
    Ok(StreamOwned::new(session, tcp))
}
