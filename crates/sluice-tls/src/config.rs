//! The rustls client configuration a connection's TLS settings make: trusted
//! roots, the checks short of a full verification that database clients
//! offer, client certificates, revocation lists.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{
    CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName, UnixTime,
};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use sluice_core::Error;

/// How much of the server's certificate is checked. Whatever the level, the
/// handshake's signatures are checked, so the session keys are the
/// certificate's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing: the channel is encrypted, the server not authenticated
    /// (libpq's `require` without a root certificate, MySQL's `REQUIRED`).
    Nothing,
    /// The certificate leads to a trusted root; it may name any host.
    Chain,
    /// The certificate leads to a trusted root and names the host connected to.
    ChainAndName,
}

/// Where trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// A PEM file of certificates.
    File(PathBuf),
    /// The operating system's store.
    System,
}

/// How a database's settings spell the TLS settings, for messages that tell
/// the user which one to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keywords {
    /// The file of trusted roots (`sslrootcert`, `ssl-ca`).
    pub roots: &'static str,
    /// The certificate revocation list (`sslcrl`, `ssl-crl`).
    pub revocation_list: &'static str,
    /// The client certificate (`sslcert`, `ssl-cert`).
    pub certificate: &'static str,
    /// The client certificate's key (`sslkey`, `ssl-key`).
    pub key: &'static str,
    /// Which setting checks the host name and which does not, as a sentence.
    pub name_check: &'static str,
}

/// What a connection's TLS is to check and present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// How much of the server's certificate to check (default: [`Check::Nothing`]).
    pub check: Check,
    /// The trusted roots; needed for any check beyond [`Check::Nothing`] (default: none).
    pub roots: Option<Roots>,
    /// A PEM file of certificate revocation lists (default: none).
    pub revocation_list: Option<PathBuf>,
    /// A client certificate chain and its private key, PEM files (default: none).
    pub client_certificate: Option<(PathBuf, PathBuf)>,
    /// Whether to send the host name in the handshake (SNI; default: true).
    pub server_name_indication: bool,
    /// ALPN protocol names to offer (default: none).
    pub protocols: Vec<Vec<u8>>,
}

impl Default for ClientSettings {
    fn default() -> ClientSettings {
        ClientSettings {
            check: Check::Nothing,
            roots: None,
            revocation_list: None,
            client_certificate: None,
            server_name_indication: true,
            protocols: Vec::new(),
        }
    }
}

/// Builds the rustls configuration for `settings`, reading the files they
/// name; errors name the file and its keyword.
pub fn client_config(
    settings: &ClientSettings,
    keywords: &Keywords,
) -> Result<Arc<ClientConfig>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match (&settings.roots, settings.check) {
        (None, Check::Nothing) => Arc::new(ShortOfFull {
            provider: provider.clone(),
            chain: None,
        }),
        (None, _) => {
            return Err(Error::config(format!(
                "checking the server's certificate needs a root certificate: set {}",
                keywords.roots
            )))
        }
        (Some(roots), check) => {
            let chain = WebPkiServerVerifier::builder_with_provider(
                Arc::new(root_store(roots, keywords)?),
                provider.clone(),
            )
            .with_crls(revocation_lists(
                settings.revocation_list.as_deref(),
                keywords,
            )?)
            .build()
            .map_err(|error| Error::config(format!("the TLS root certificates: {error}")))?;
            if check == Check::ChainAndName {
                chain
            } else {
                // A root given with a lesser check still checks the chain, as libpq
                // does for `require` and MySQL for `REQUIRED` with `--ssl-ca`.
                Arc::new(ShortOfFull {
                    provider: provider.clone(),
                    chain: Some(chain),
                })
            }
        }
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::config(format!("TLS: {error}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match &settings.client_certificate {
        Some((certificate, key)) => {
            // The certificate first, as libpq reads them.
            let chain = read_certificates(certificate, keywords.certificate)?;
            let key = read_key(key, keywords.key)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|error| Error::config(format!("the client certificate: {error}")))?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = settings.protocols.clone();
    config.enable_sni = settings.server_name_indication;
    Ok(Arc::new(config))
}

fn root_store(roots: &Roots, keywords: &Keywords) -> Result<RootCertStore, Error> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() {
                let why = found
                    .errors
                    .first()
                    .map_or("none found".to_owned(), ToString::to_string);
                return Err(Error::config(format!(
                    "{}=system: the operating system's root certificates could not be read ({why})",
                    keywords.roots
                )));
            }
            store.add_parsable_certificates(found.certs);
        }
        Roots::File(path) => {
            for certificate in read_certificates(path, keywords.roots)? {
                store.add(certificate).map_err(|error| {
                    Error::config(format!("{} {}: {error}", keywords.roots, path.display()))
                })?;
            }
        }
    }
    Ok(store)
}

/// The certificates of a PEM file; an error names the file and the keyword.
fn read_certificates(path: &Path, keyword: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let unreadable = |why: String| Error::config(format!("{keyword} {}: {why}", path.display()));
    std::fs::metadata(path).map_err(|error| unreadable(error.to_string()))?;
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|error| unreadable(error.to_string()))?;
    if certificates.is_empty() {
        return Err(unreadable("no PEM certificate in the file".into()));
    }
    Ok(certificates)
}

fn revocation_lists(
    path: Option<&Path>,
    keywords: &Keywords,
) -> Result<Vec<CertificateRevocationListDer<'static>>, Error> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    CertificateRevocationListDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|error| {
            Error::config(format!(
                "{} {}: {error}",
                keywords.revocation_list,
                path.display()
            ))
        })
}

/// A private key, refused when others may read it.
fn read_key(path: &Path, keyword: &str) -> Result<PrivateKeyDer<'static>, Error> {
    check_key_permissions(path, keyword)?;
    PrivateKeyDer::from_pem_file(path)
        .map_err(|error| Error::config(format!("{keyword} {}: {error}", path.display())))
}

/// libpq refuses a private key others may read: so does sluice, for every
/// database.
fn check_key_permissions(path: &Path, keyword: &str) -> Result<(), Error> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(path)
        .map_err(|error| Error::config(format!("{keyword} {}: {error}", path.display())))?;
    // As libpq: owned by the user, no access for group or others; owned by
    // root, group read is allowed (a key shared with a service group).
    let loose = if metadata.uid() == 0 {
        metadata.mode() & 0o037 != 0
    } else {
        metadata.mode() & 0o077 != 0
    };
    if loose {
        return Err(Error::config(format!(
            "{keyword} {}: the private key file has group or world access; \
             it must be u=rw (0600) or less",
            path.display()
        )));
    }
    Ok(())
}

/// The checks short of a full verification: with a chain the certificate must
/// lead to a trusted root but may name any host; without one the channel is
/// encrypted and the server not authenticated. Either way the handshake's
/// signatures are checked.
#[derive(Debug)]
struct ShortOfFull {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for ShortOfFull {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        // webpki checks the chain before the name: a name error means the chain is good.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            certificate,
            signature,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            certificate,
            signature,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const KEYWORDS: Keywords = Keywords {
        roots: "roots",
        revocation_list: "crl",
        certificate: "cert",
        key: "key",
        name_check: "names are checked",
    };

    fn message(settings: &ClientSettings) -> String {
        client_config(settings, &KEYWORDS).unwrap_err().to_string()
    }

    #[test]
    fn a_check_without_roots_is_refused() {
        let settings = ClientSettings {
            check: Check::Chain,
            ..ClientSettings::default()
        };
        assert!(message(&settings).contains("needs a root certificate: set roots"));
        assert!(client_config(&ClientSettings::default(), &KEYWORDS).is_ok());
    }

    #[test]
    fn files_are_named_with_their_keyword() {
        let settings = ClientSettings {
            check: Check::ChainAndName,
            roots: Some(Roots::File("/nonexistent/ca.pem".into())),
            ..ClientSettings::default()
        };
        assert!(message(&settings).starts_with("roots /nonexistent/ca.pem: "));

        let dir = std::env::temp_dir().join(format!("sluice-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let settings = ClientSettings {
            roots: Some(Roots::File(empty.clone())),
            check: Check::Chain,
            ..ClientSettings::default()
        };
        assert!(message(&settings).contains("no PEM certificate in the file"));

        // A key others may read is refused before it is parsed.
        let signed = rcgen::generate_simple_self_signed(vec!["client".to_owned()]).unwrap();
        let certificate = dir.join("client.crt");
        std::fs::write(&certificate, signed.cert.pem()).unwrap();
        let key = dir.join("loose.key");
        std::fs::write(&key, signed.key_pair.serialize_pem()).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let settings = ClientSettings {
            client_certificate: Some((certificate, key.clone())),
            ..ClientSettings::default()
        };
        let text = message(&settings);
        assert!(text.contains("key "), "{text}");
        assert!(text.contains("group or world access"), "{text}");
        // Tightened, the pair is taken.
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        client_config(&settings, &KEYWORDS).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
