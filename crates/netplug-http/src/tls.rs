//! TLS from PEM: the server's trust anchors (every certificate of the CA bundle, so a bundle of
//! several roots trusts each) or else the platform's store, and optionally a client certificate
//! and key for mutual TLS. The material is checked here, when the client is made, so an unusable
//! file is reported by name before any request (ureq would only find out, or panic, on connect).

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig, TlsProvider};

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

fn ring() -> Arc<rustls::crypto::CryptoProvider> {
    // ring explicitly: no process-wide default provider is assumed, and no aws-lc is built.
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS settings for ureq. Without a CA bundle the platform verifier is used
/// (rustls-platform-verifier): on Linux it reads the distribution's store the way OpenSSL does,
/// honouring SSL_CERT_FILE and SSL_CERT_DIR, so a node's own trust (a corporate root added with
/// update-ca-certificates) applies as it does for curl and Go; a bundle compiled into the binary
/// would ignore it. ureq builds the verifier on the first https connection, so a process that
/// never speaks https without a CA never reads the store.
pub fn tls_config(files: &TlsFiles) -> Result<TlsConfig, TlsError> {
    let fail = |part: &'static str, message: String| TlsError { part, message };
    let roots = match &files.ca {
        Some(ca) => {
            let certificates = certificates(ca).map_err(|m| fail("ca", m))?;
            let mut store = RootCertStore::empty();
            for certificate in &certificates {
                store
                    .add(certificate.clone())
                    .map_err(|err| fail("ca", format!("a certificate is not a usable trust anchor: {err}")))?;
            }
            RootCerts::new_with_certs(
                &certificates.iter().map(|c| Certificate::from_der(c.as_ref()).to_owned()).collect::<Vec<_>>(),
            )
        }
        None => RootCerts::PlatformVerifier,
    };
    let client_cert = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => Some(client_cert(cert, key)?),
        (None, None) => None,
        (Some(_), None) => return Err(fail("key", "missing: mutual TLS needs a key with the certificate".into())),
        (None, Some(_)) => return Err(fail("cert", "missing: mutual TLS needs a certificate with the key".into())),
    };
    Ok(TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(ring())
        .root_certs(roots)
        .client_cert(client_cert)
        .build())
}

fn client_cert(cert: &[u8], pem: &[u8]) -> Result<ClientCert, TlsError> {
    let fail = |part: &'static str, message: String| TlsError { part, message };
    let chain = certificates(cert).map_err(|m| fail("cert", m))?;
    let key = PrivateKeyDer::from_pem_slice(pem).map_err(|err| fail("key", format!("no private key in it ({err})")))?;
    // rustls checks that the key is usable and belongs to the certificate.
    ClientConfig::builder_with_provider(ring())
        .with_safe_default_protocol_versions()
        .map_err(|err| fail("key", err.to_string()))?
        .with_root_certificates(RootCertStore::empty())
        .with_client_auth_cert(chain.clone(), key)
        .map_err(|err| fail("key", format!("does not fit the certificate: {err}")))?;
    let pem_key = PrivateKey::from_pem(pem).map_err(|err| fail("key", format!("no private key in it ({err})")))?;
    let chain: Vec<_> = chain.iter().map(|c| Certificate::from_der(c.as_ref()).to_owned()).collect();
    Ok(ClientCert::new_with_certs(&chain, pem_key))
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
