//! HTTP/1.1 for netplug's three servers (etcd's JSON gateway, the Kubernetes API, readiness
//! gates) by ureq on rustls: response framing as servers really send it (Content-Length,
//! chunked, close-delimited, bodiless 204/304), keep-alive, a deadline on every request, TLS
//! trust from a CA bundle or the platform's store, mutual TLS, and an optional HTTP(S) proxy.
//!
//! Blocking by design: the N-API binding runs every request on an OS thread of its own, so a
//! plugin process connects, handshakes and waits off its JavaScript thread (Node's own sockets
//! would cost that thread the loading of its whole streams stack on every pod's path).

mod error;
mod observe;
mod tls;

use std::time::Duration;

use ureq::Agent;
use ureq::http;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{Connector, DefaultConnector};

pub use error::{Error, ErrorKind, Result};
pub use tls::{TlsError, TlsFiles, tls_config};

/// Largest response body accepted (a Kubernetes list of a big cluster fits).
const MAX_BODY: u64 = 256 << 20;

pub struct ClientOptions {
    pub tls: TlsFiles,
    /// `http://host:port` or `https://...`; CONNECT is used through it for https targets.
    pub proxy: Option<String>,
    pub connect_timeout: Duration,
    /// The whole request, connecting included, to the last byte of the body.
    pub request_timeout: Duration,
}

pub struct Request<'a> {
    pub method: &'a str,
    /// Absolute: `https://host:port/path?query`.
    pub url: &'a str,
    pub headers: &'a [(String, String)],
    pub body: Option<&'a [u8]>,
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Names lower-cased; repeated headers joined with `, `.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A keep-alive agent: connections are pooled per host and reused while the server keeps them.
pub struct Client {
    agent: Agent,
}

impl Client {
    /// Fails, naming `ca`, `cert`, `key` or `proxy`, when that setting is unusable.
    pub fn new(options: ClientOptions) -> std::result::Result<Client, TlsError> {
        let proxy = match &options.proxy {
            // The URL may carry credentials: it is not repeated in the message.
            Some(url) => {
                Some(ureq::Proxy::new(url).map_err(|err| TlsError { part: "proxy", message: err.to_string() })?)
            }
            // Never from the environment: the caller decides per server (see ts/net/proxy.ts).
            None => None,
        };
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(proxy)
            .tls_config(tls_config(&options.tls)?)
            .timeout_connect(Some(options.connect_timeout))
            .timeout_global(Some(options.request_timeout))
            .user_agent("netplug")
            .build();
        let connector = DefaultConnector::new().chain(observe::Observe);
        Ok(Client { agent: Agent::with_parts(config, connector, DefaultResolver::default()) })
    }

    /// Sends the request and reads the whole response, any status. A pooled connection that the
    /// server closed while idle (it had no way to tell us) fails before any byte of an answer;
    /// only then is the request sent once more, on a new connection. That is safe for every
    /// request, etcd's compare-and-swap transactions included: a server that closed the
    /// connection never read the request, and should it have read it and then died, the
    /// transaction's comparison fails the second time instead of applying twice.
    pub fn request(&self, request: &Request) -> Result<Response> {
        observe::reset();
        match self.send(request) {
            Err(err) if matches!(err.kind, ErrorKind::Io | ErrorKind::Protocol) && observe::pooled_and_silent() => {
                observe::reset();
                self.send(request)
            }
            outcome => outcome,
        }
    }

    fn send(&self, request: &Request) -> Result<Response> {
        let mut builder = http::Request::builder().method(request.method).uri(request.url);
        for (name, value) in request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let built = builder
            .body(request.body.unwrap_or_default())
            .map_err(|err| Error::new(ErrorKind::Protocol, err.to_string()))?;
        let mut response = self.agent.run(built)?;
        let mut headers: Vec<(String, String)> = Vec::new();
        for (name, value) in response.headers() {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            match headers.iter_mut().find(|(n, _)| n == name.as_str()) {
                Some((_, joined)) => {
                    joined.push_str(", ");
                    joined.push_str(&value);
                }
                None => headers.push((name.as_str().to_owned(), value)),
            }
        }
        let body = response.body_mut().with_config().limit(MAX_BODY).read_to_vec()?;
        Ok(Response { status: response.status().as_u16(), headers, body })
    }
}
