//! Binding of `netplug-http`: an HTTP agent (TLS material, proxy and timeouts fixed at
//! construction, connections pooled) whose requests each run on an OS thread of their own and
//! settle a promise, so the JS thread never waits on the network. Failures resolve as
//! `{ error: { kind, message } }`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{Buffer, Object};
use napi::{Env, Error, Result};
use napi_derive::napi;
use netplug_http::{Client, ClientOptions, TlsFiles};

use crate::on_thread;

#[napi(object)]
pub struct HttpAgentOptions {
    /// Trust exactly the certificates of this PEM bundle; the platform's store when absent.
    pub ca: Option<Buffer>,
    /// PEM client certificate and key, presented for mutual TLS.
    pub cert: Option<Buffer>,
    pub key: Option<Buffer>,
    /// An `http://` or `https://` proxy URL (CONNECT for https targets); none when absent.
    pub proxy: Option<String>,
    pub connect_timeout_ms: u32,
    /// The deadline of each request as a whole.
    pub request_timeout_ms: u32,
}

#[napi(object)]
pub struct HttpRequestSpec {
    pub method: String,
    /// Absolute URL.
    pub url: String,
    pub headers: Option<HashMap<String, String>>,
    pub body: Option<Buffer>,
}

/// `kind`: `connect`, `timeout`, `tls`, `io` or `protocol`.
#[napi(object)]
pub struct HttpError {
    pub kind: String,
    pub message: String,
}

#[napi(object)]
pub struct HttpOutcome {
    pub status: Option<u32>,
    /// Names lower-cased; repeated headers joined with `, `.
    pub headers: Option<HashMap<String, String>>,
    pub body: Option<Buffer>,
    pub error: Option<HttpError>,
}

/// Connections to any number of servers, kept alive between requests.
#[napi]
pub struct HttpAgent {
    client: Arc<Client>,
}

#[napi]
impl HttpAgent {
    /// Throws `ca: ...`, `cert: ...`, `key: ...` or `proxy: ...` when that setting is unusable.
    #[napi(constructor)]
    pub fn new(options: HttpAgentOptions) -> Result<Self> {
        let client = Client::new(ClientOptions {
            tls: TlsFiles {
                ca: options.ca.map(|b| b.to_vec()),
                cert: options.cert.map(|b| b.to_vec()),
                key: options.key.map(|b| b.to_vec()),
            },
            proxy: options.proxy,
            connect_timeout: Duration::from_millis(options.connect_timeout_ms.into()),
            request_timeout: Duration::from_millis(options.request_timeout_ms.into()),
        })
        .map_err(|err| Error::from_reason(err.to_string()))?;
        Ok(HttpAgent { client: Arc::new(client) })
    }

    /// Sends one request and reads the whole response, whatever its status.
    #[napi(ts_return_type = "Promise<HttpOutcome>")]
    pub fn request<'env>(&self, env: &'env Env, request: HttpRequestSpec) -> Result<Object<'env>> {
        let client = self.client.clone();
        let headers: Vec<(String, String)> = request.headers.unwrap_or_default().into_iter().collect();
        let body = request.body.map(|b| b.to_vec());
        on_thread(env, move || {
            let spec = netplug_http::Request {
                method: &request.method,
                url: &request.url,
                headers: &headers,
                body: body.as_deref(),
            };
            match client.request(&spec) {
                Ok(response) => HttpOutcome {
                    status: Some(response.status.into()),
                    headers: Some(response.headers.into_iter().collect()),
                    body: Some(response.body.into()),
                    error: None,
                },
                Err(err) => HttpOutcome { status: None, headers: None, body: None, error: Some(http_error(err)) },
            }
        })
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
