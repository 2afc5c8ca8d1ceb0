//! The TLS client configuration from PEM: the server's trust anchors (every certificate in the CA
//! file, so a bundle of several roots trusts each), and optionally a client certificate and key
//! for mutual TLS.

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

/// PEM contents (not paths): the caller reads the files and names them in its messages.
#[derive(Default, Clone)]
pub struct TlsFiles {
    pub ca: Option<Vec<u8>>,
    pub cert: Option<Vec<u8>>,
    pub key: Option<Vec<u8>>,
}

/// Which of the three PEM inputs is unusable, and why.
#[derive(Debug, Clone)]
pub struct TlsError {
    /// `ca`, `cert` or `key`.
    pub part: &'static str,
    pub message: String,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.part, self.message)
    }
}

impl std::error::Error for TlsError {}

pub fn client_config(files: &TlsFiles) -> Result<Arc<ClientConfig>, TlsError> {
    let fail = |part: &'static str, message: String| TlsError { part, message };
    let mut roots = RootCertStore::empty();
    if let Some(ca) = &files.ca {
        let certificates = certificates(ca).map_err(|m| fail("ca", m))?;
        for certificate in certificates {
            roots.add(certificate).map_err(|err| fail("ca", format!("a certificate is not a usable trust anchor: {err}")))?;
        }
    }
    // ring explicitly: no process-wide default provider is assumed.
    let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|err| fail("ca", err.to_string()))?
        .with_root_certificates(roots);
    let config = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert).map_err(|m| fail("cert", m))?;
            let key = PrivateKeyDer::from_pem_slice(key).map_err(|err| fail("key", format!("no private key in it ({err})")))?;
            builder.with_client_auth_cert(chain, key).map_err(|err| fail("key", format!("does not fit the certificate: {err}")))?
        }
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => return Err(fail("key", "missing: mutual TLS needs a key with the certificate".into())),
        (None, Some(_)) => return Err(fail("cert", "missing: mutual TLS needs a certificate with the key".into())),
    };
    Ok(Arc::new(config))
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| format!("not PEM certificates ({err})"))?;
    if certificates.is_empty() {
        return Err("no certificate in it".into());
    }
    Ok(certificates)
}
