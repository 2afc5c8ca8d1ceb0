//! Binding of `netplug-http`: a keep-alive connection to etcd's gateway whose connect and
//! exchanges each run on an OS thread of their own and settle a promise, so the JS thread never
//! waits on the network. Failures resolve as `{ error: { kind, message } }`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::{Buffer, Object};
use napi::{Env, Error, Result};
use napi_derive::napi;
use netplug_http::{Connection, Target, TlsFiles, client_config};

use crate::on_thread;

#[napi(object)]
pub struct HttpOptions {
    /// A DNS name or an IP address (without brackets).
    pub host: String,
    pub port: u32,
    /// TLS: the server is verified against `ca` (every certificate in it), and `cert` + `key`
    /// (PEM) are presented for mutual TLS when given.
    pub tls: bool,
    pub ca: Option<Buffer>,
    pub cert: Option<Buffer>,
    pub key: Option<Buffer>,
    pub connect_timeout_ms: u32,
    pub request_timeout_ms: u32,
}

/// `kind`: `connect`, `timeout`, `tls`, `io` or `protocol`.
#[napi(object)]
pub struct HttpError {
    pub kind: String,
    pub message: String,
}

#[napi(object)]
pub struct ConnectOutcome {
    pub error: Option<HttpError>,
}

#[napi(object)]
pub struct ExchangeOutcome {
    /// The whole response, status line to the end of its body.
    pub response: Option<Buffer>,
    pub error: Option<HttpError>,
}

struct Shared {
    target: Target,
    connection: Mutex<Option<Connection>>,
    closed: AtomicBool,
    connect_timeout: Duration,
    request_timeout: Duration,
}

impl Shared {
    /// The open connection, opened now if there is none.
    fn with_connection<T>(&self, work: impl FnOnce(&mut Connection) -> netplug_http::Result<T>) -> netplug_http::Result<T> {
        let mut guard = self.connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if guard.is_none() {
            *guard = Some(Connection::open(&self.target, self.connect_timeout)?);
        }
        let result = work(guard.as_mut().expect("opened above"));
        // A failed exchange leaves the stream mid-message; a closed connection is not reused.
        if result.is_err() || self.closed.load(Ordering::Acquire) {
            *guard = None;
        }
        result
    }
}

/// A keep-alive HTTP/1.1 connection, plain or TLS, opened on first use (or by `connect`).
#[napi]
pub struct HttpConnection {
    shared: Arc<Shared>,
}

#[napi]
impl HttpConnection {
    /// Throws `ca: ...`, `cert: ...` or `key: ...` when TLS material is unusable.
    #[napi(constructor)]
    pub fn new(options: HttpOptions) -> Result<Self> {
        let port = u16::try_from(options.port).map_err(|_| Error::from_reason(format!("port {} is out of range", options.port)))?;
        let tls = if options.tls {
            let files = TlsFiles {
                ca: options.ca.map(|b| b.to_vec()),
                cert: options.cert.map(|b| b.to_vec()),
                key: options.key.map(|b| b.to_vec()),
            };
            Some(client_config(&files).map_err(|err| Error::from_reason(err.to_string()))?)
        } else {
            None
        };
        Ok(HttpConnection {
            shared: Arc::new(Shared {
                target: Target { host: options.host, port, tls },
                connection: Mutex::new(None),
                closed: AtomicBool::new(false),
                connect_timeout: Duration::from_millis(options.connect_timeout_ms.into()),
                request_timeout: Duration::from_millis(options.request_timeout_ms.into()),
            }),
        })
    }

    /// Opens the connection (TCP, and the TLS handshake) ahead of the first exchange.
    #[napi(ts_return_type = "Promise<ConnectOutcome>")]
    pub fn connect<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let shared = self.shared.clone();
        on_thread(env, move || ConnectOutcome { error: shared.with_connection(|_| Ok(())).err().map(http_error) })
    }

    /// Sends one whole request and returns the whole response.
    #[napi(ts_return_type = "Promise<ExchangeOutcome>")]
    pub fn exchange<'env>(&self, env: &'env Env, request: Buffer) -> Result<Object<'env>> {
        let shared = self.shared.clone();
        let request = request.to_vec();
        on_thread(env, move || match shared.with_connection(|c| c.exchange(&request, shared.request_timeout)) {
            Ok(response) => ExchangeOutcome { response: Some(response.into()), error: None },
            Err(err) => ExchangeOutcome { response: None, error: Some(http_error(err)) },
        })
    }

    /// Closes the connection; one in use closes when its exchange ends. A later exchange reopens.
    #[napi]
    pub fn close(&self) {
        match self.shared.connection.try_lock() {
            Ok(mut guard) => *guard = None,
            Err(_) => self.shared.closed.store(true, Ordering::Release),
        }
    }
}

fn http_error(err: netplug_http::Error) -> HttpError {
    let kind = match err.kind {
        netplug_http::ErrorKind::Connect => "connect",
        netplug_http::ErrorKind::Timeout => "timeout",
        netplug_http::ErrorKind::Tls => "tls",
        netplug_http::ErrorKind::Io => "io",
        netplug_http::ErrorKind::Protocol => "protocol",
    };
    HttpError { kind: kind.into(), message: err.message }
}
