//! HTTPS for `sluice serve`: the certificate chain and key of `[server]
//! tls_cert` / `tls_key`, the protocols offered by ALPN (HTTP/2, then
//! HTTP/1.1), and the certificate's reload.
//!
//! The key pair is held behind a resolver rather than baked into the rustls
//! configuration, so [`ServerTls::reload`] swaps it for new handshakes while
//! connections already established keep the session they negotiated: a
//! renewed certificate (certbot, cert-manager) takes effect without dropping
//! a stream in flight. A reload that fails (a half-written file, a key that
//! does not match) keeps the old pair and says why.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// The ALPN name of HTTP/2; a connection that negotiates it is served as HTTP/2.
pub const ALPN_HTTP2: &[u8] = b"h2";
const ALPN_HTTP1: &[u8] = b"http/1.1";

/// Where the certificate chain and its private key are (PEM files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate, followed by any intermediates (`[server] tls_cert`).
    pub certificate: PathBuf,
    /// The private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC) (`[server] tls_key`).
    pub key: PathBuf,
}

/// Which file a [`TlsError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFile {
    /// The certificate chain.
    Certificate,
    /// The private key.
    Key,
}

/// Why a certificate and key could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM item.
    #[error("{}: {message}", path.display())]
    File {
        /// Which of the two files.
        file: TlsFile,
        /// Its path.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The key is not the certificate's, or not a kind rustls can sign with.
    #[error("{} and {}: {message}", certificate.display(), key.display())]
    Pair {
        /// The certificate file.
        certificate: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What is wrong with the pair.
        message: String,
    },
}

/// The server's TLS: an acceptor for new connections and the reloadable pair
/// behind it. Clones share the pair.
#[derive(Clone)]
pub struct ServerTls {
    acceptor: TlsAcceptor,
    certificate: Arc<ReloadableCertificate>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("ServerTls")
            .field("files", &self.certificate.files)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads the certificate chain and key of `files` and checks that they
    /// belong together.
    pub fn load(files: &TlsFiles) -> Result<ServerTls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let pair = read_pair(files, &provider)?;
        let certificate = Arc::new(ReloadableCertificate {
            files: files.clone(),
            provider: provider.clone(),
            current: RwLock::new(Arc::new(pair)),
        });
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports TLS 1.2 and 1.3")
            .with_no_client_auth()
            .with_cert_resolver(certificate.clone());
        config.alpn_protocols = vec![ALPN_HTTP2.to_vec(), ALPN_HTTP1.to_vec()];
        Ok(ServerTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            certificate,
        })
    }

    /// Reads the files again; new handshakes use the new pair, established
    /// connections keep theirs. On an error the old pair stays in use.
    pub fn reload(&self) -> Result<(), TlsError> {
        let pair = read_pair(&self.certificate.files, &self.certificate.provider)?;
        *self
            .certificate
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(pair);
        Ok(())
    }

    /// The files this was loaded from.
    pub fn files(&self) -> &TlsFiles {
        &self.certificate.files
    }

    /// Accepts TLS connections with the pair in use (HTTP/2 and HTTP/1.1 by ALPN).
    pub fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}

/// The pair in use, swapped by [`ServerTls::reload`].
#[derive(Debug)]
struct ReloadableCertificate {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for ReloadableCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let current = self
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(current.clone())
    }
}

fn read_pair(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let chain = read_chain(&files.certificate)?;
    let key = read_key(&files.key)?;
    CertifiedKey::from_der(chain, key, provider).map_err(|error| TlsError::Pair {
        certificate: files.certificate.clone(),
        key: files.key.clone(),
        message: pair_problem(&error),
    })
}

fn pair_problem(error: &rustls::Error) -> String {
    match error {
        rustls::Error::InconsistentKeys(_) => {
            "the private key does not belong to the certificate".into()
        }
        other => format!("cannot use the key: {other}"),
    }
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let fault = |message: String| TlsError::File {
        file: TlsFile::Certificate,
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read(path).map_err(|error| fault(format!("cannot read: {error}")))?;
    let chain = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| fault(format!("not a PEM certificate file: {error}")))?;
    if chain.is_empty() {
        return Err(fault(
            "no certificate in the file (expected -----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let fault = |message: String| TlsError::File {
        file: TlsFile::Key,
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read(path).map_err(|error| fault(format!("cannot read: {error}")))?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|error| match error {
        rustls::pki_types::pem::Error::NoItemsFound => {
            fault("no private key in the file (expected -----BEGIN PRIVATE KEY-----)".into())
        }
        other => fault(format!("not a PEM private key file: {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_testkit::TestCertificates;

    fn files(certificates: &TestCertificates) -> TlsFiles {
        let server = certificates.server();
        TlsFiles {
            certificate: server.certificate,
            key: server.key,
        }
    }

    #[test]
    fn a_pair_loads_and_reloads() {
        let certificates = TestCertificates::generate(&["localhost"]);
        let tls = ServerTls::load(&files(&certificates)).unwrap();
        tls.reload().unwrap();
    }

    #[test]
    fn each_broken_file_is_named() {
        let certificates = TestCertificates::generate(&["localhost"]);
        let good = files(&certificates);
        let missing = TlsFiles {
            certificate: good.certificate.with_extension("missing"),
            ..good.clone()
        };
        let error = ServerTls::load(&missing).unwrap_err();
        assert!(
            matches!(
                &error,
                TlsError::File {
                    file: TlsFile::Certificate,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("cannot read"), "{error}");

        // The certificate given as the key: no key in it.
        let swapped = TlsFiles {
            certificate: good.certificate.clone(),
            key: good.certificate.clone(),
        };
        let error = ServerTls::load(&swapped).unwrap_err();
        assert!(
            matches!(
                &error,
                TlsError::File {
                    file: TlsFile::Key,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("no private key"), "{error}");

        // Another pair's key.
        let other = TestCertificates::generate(&["localhost"]);
        let mismatched = TlsFiles {
            key: other.server().key,
            ..good
        };
        let error = ServerTls::load(&mismatched).unwrap_err();
        assert!(matches!(&error, TlsError::Pair { .. }), "{error:?}");
        assert!(error.to_string().contains("does not belong"), "{error}");
    }

    #[test]
    fn a_failed_reload_keeps_the_old_pair() {
        let certificates = TestCertificates::generate(&["localhost"]);
        let directory = tempfile::tempdir().unwrap();
        let live = TlsFiles {
            certificate: directory.path().join("server.crt"),
            key: directory.path().join("server.key"),
        };
        let source = files(&certificates);
        std::fs::copy(&source.certificate, &live.certificate).unwrap();
        std::fs::copy(&source.key, &live.key).unwrap();
        let tls = ServerTls::load(&live).unwrap();
        let before = tls.certificate.current.read().unwrap().clone();
        std::fs::write(&live.certificate, "half a file").unwrap();
        assert!(tls.reload().is_err());
        let after = tls.certificate.current.read().unwrap().clone();
        assert!(Arc::ptr_eq(&before, &after));
    }
}
