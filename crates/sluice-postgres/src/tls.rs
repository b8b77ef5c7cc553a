//! TLS to the server, as libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey`,
//! `sslcrl` and `sslsni` ask for it, on rustls (ring) with no OpenSSL.
//!
//! The settings are read and their files loaded once, when the connection
//! string is parsed (`TlsSettings::from_settings`), so a missing or unreadable
//! file is a settings error before any connection; the handshake's own failures
//! (an untrusted certificate, a wrong host name) are connection errors.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ClientConfig;
use sluice_core::Error;
use sluice_tls::{Check, ClientSettings, Keywords, Roots};

use crate::conninfo::Settings;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// Plain first; TLS only if the server refuses a plain login.
    Allow,
    /// TLS if the server offers it, else plain (libpq's and sluice's default).
    Prefer,
    /// TLS or nothing; the certificate is checked only if a root certificate is
    /// given (or `~/.postgresql/root.crt` exists), as in libpq.
    Require,
    /// TLS with a certificate signed by a trusted root.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode, Error> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(Error::config(format!(
                    "sslmode={other} is not a valid setting \
                     (disable, allow, prefer, require, verify-ca or verify-full)"
                )))
            }
        })
    }

    /// The setting's spelling.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether a plain connection is acceptable.
    pub fn allows_plain(self) -> bool {
        matches!(self, SslMode::Disable | SslMode::Allow | SslMode::Prefer)
    }
}

/// libpq's `channel_binding`: whether SCRAM binds the login to the TLS channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelBinding {
    /// Never.
    Disable,
    /// When on TLS and the server offers it (default).
    Prefer,
    /// Always: a login without it is refused.
    Require,
}

impl ChannelBinding {
    fn parse(text: &str) -> Result<ChannelBinding, Error> {
        Ok(match text {
            "disable" => ChannelBinding::Disable,
            "prefer" => ChannelBinding::Prefer,
            "require" => ChannelBinding::Require,
            other => {
                return Err(Error::config(format!(
                    "channel_binding={other} is not a valid setting (disable, prefer or require)"
                )))
            }
        })
    }
}

/// The TLS part of a connection's settings.
#[derive(Clone)]
pub struct TlsSettings {
    /// When to use TLS.
    pub mode: SslMode,
    /// Whether SCRAM binds to the channel.
    pub channel_binding: ChannelBinding,
    /// The rustls configuration; `None` for `sslmode=disable`.
    pub(crate) client: Option<Arc<ClientConfig>>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TlsSettings")
            .field("mode", &self.mode)
            .field("channel_binding", &self.channel_binding)
            .finish()
    }
}

impl TlsSettings {
    /// No TLS, as `sslmode=disable`.
    pub fn disabled() -> TlsSettings {
        TlsSettings {
            mode: SslMode::Disable,
            channel_binding: ChannelBinding::Prefer,
            client: None,
        }
    }

    /// Reads the TLS keywords of `settings`, loading the files they name.
    pub(crate) fn from_settings(settings: &Settings) -> Result<TlsSettings, Error> {
        let channel_binding = settings
            .get("channel_binding")
            .map_or(Ok(ChannelBinding::Prefer), ChannelBinding::parse)?;
        if let Some(negotiation) = settings.get("sslnegotiation") {
            if negotiation != "postgres" {
                return Err(Error::config(format!(
                    "sslnegotiation={negotiation} is not supported \
                     (sluice negotiates TLS the PostgreSQL way: sslnegotiation=postgres)"
                )));
            }
        }
        let roots = match settings.get("sslrootcert") {
            Some("system") => Some(Roots::System),
            Some(path) => Some(Roots::File(PathBuf::from(path))),
            None => home_file("root.crt")
                .filter(|path| path.exists())
                .map(Roots::File),
        };
        let mode = match settings.get("sslmode") {
            Some(text) => SslMode::parse(text)?,
            // libpq: with sslrootcert=system the default becomes verify-full.
            None if matches!(roots, Some(Roots::System)) => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if matches!(roots, Some(Roots::System)) && mode != SslMode::VerifyFull {
            return Err(Error::config(format!(
                "sslrootcert=system goes with sslmode=verify-full, not sslmode={}",
                settings.get("sslmode").unwrap_or_default()
            )));
        }
        if channel_binding == ChannelBinding::Require && mode == SslMode::Disable {
            return Err(Error::config(
                "channel_binding=require needs TLS, but sslmode=disable",
            ));
        }
        if mode == SslMode::Disable {
            return Ok(TlsSettings {
                mode,
                channel_binding,
                client: None,
            });
        }
        let client = client_config(settings, mode, roots)?;
        Ok(TlsSettings {
            mode,
            channel_binding,
            client: Some(client),
        })
    }
}

/// `~/.postgresql/<name>`, libpq's default place for TLS files.
fn home_file(name: &str) -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".postgresql").join(name))
}

/// How libpq's settings are spelled, for sluice-tls's messages.
pub(crate) const KEYWORDS: Keywords = Keywords {
    roots: "sslrootcert",
    revocation_list: "sslcrl",
    certificate: "sslcert",
    key: "sslkey",
    name_check: "sslmode=verify-full checks the host name; verify-ca does not",
};

fn client_config(
    settings: &Settings,
    mode: SslMode,
    roots: Option<Roots>,
) -> Result<Arc<ClientConfig>, Error> {
    if matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull) && roots.is_none() {
        let expected = home_file("root.crt").map_or("~/.postgresql/root.crt".into(), |path| {
            path.display().to_string()
        });
        return Err(Error::config(format!(
            "sslmode={} needs a root certificate to check the server's against: \
             set sslrootcert to a PEM file, or to system for the operating system's roots \
             ({expected} does not exist)",
            mode.name()
        )));
    }
    let check = match (mode, &roots) {
        (SslMode::VerifyFull, _) => Check::ChainAndName,
        // libpq: `require` with a root certificate checks the chain, as verify-ca.
        (_, Some(_)) => Check::Chain,
        (_, None) => Check::Nothing,
    };
    let client = ClientSettings {
        check,
        roots,
        revocation_list: settings.get("sslcrl").map(PathBuf::from),
        client_certificate: client_certificate(settings),
        server_name_indication: settings.get("sslsni") != Some("0"),
        // PostgreSQL 17 checks it on direct TLS; earlier servers ignore it.
        protocols: vec![b"postgresql".to_vec()],
    };
    sluice_tls::client_config(&client, &KEYWORDS)
}

/// `sslcert` and `sslkey` (or libpq's defaults in `~/.postgresql/`, when the
/// certificate exists there).
fn client_certificate(settings: &Settings) -> Option<(PathBuf, PathBuf)> {
    let certificate = match settings.get("sslcert") {
        Some(path) => PathBuf::from(path),
        None => home_file("postgresql.crt").filter(|path| path.exists())?,
    };
    let key = match settings.get("sslkey") {
        Some(path) => PathBuf::from(path),
        None => home_file("postgresql.key").unwrap_or_else(|| PathBuf::from("postgresql.key")),
    };
    Some((certificate, key))
}

/// The `tls-server-end-point` channel binding data (RFC 5929): the server
/// certificate's hash by the hash of its signature algorithm (SHA-256 for MD5
/// and SHA-1); `None` for algorithms without one (Ed25519, RSA-PSS), which
/// PostgreSQL cannot bind to either.
pub(crate) fn server_end_point(certificate: &[u8]) -> Option<Vec<u8>> {
    use sha2::Digest;
    let algorithm = signature_algorithm(certificate)?;
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ECDSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04];
    let hash = match algorithm {
        [rsa @ .., last] if rsa == RSA => match last {
            0x04 | 0x05 | 0x0b => 256,
            0x0c => 384,
            0x0d => 512,
            _ => return None,
        },
        [ecdsa @ .., 0x01] if ecdsa == ECDSA => 256,
        [ecdsa @ .., 0x03, last] if ecdsa == ECDSA => match last {
            0x02 => 256,
            0x03 => 384,
            0x04 => 512,
            _ => return None,
        },
        _ => return None,
    };
    Some(match hash {
        256 => sha2::Sha256::digest(certificate).to_vec(),
        384 => sha2::Sha384::digest(certificate).to_vec(),
        _ => sha2::Sha512::digest(certificate).to_vec(),
    })
}

/// The OID of a DER certificate's `signatureAlgorithm`: `Certificate ::=
/// SEQUENCE { tbsCertificate, signatureAlgorithm SEQUENCE { OID, … }, … }`.
/// Three TLV steps, written here rather than pulling in an X.509 parser.
fn signature_algorithm(certificate: &[u8]) -> Option<&[u8]> {
    let (tag, body, _) = der_element(certificate)?;
    if tag != 0x30 {
        return None;
    }
    let (_, _, after_tbs) = der_element(body)?;
    let (tag, algorithm, _) = der_element(after_tbs)?;
    if tag != 0x30 {
        return None;
    }
    let (tag, oid, _) = der_element(algorithm)?;
    (tag == 0x06).then_some(oid)
}

/// One DER element of `input`: its tag, its contents and what follows it.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let length = rest[..count]
            .iter()
            .fold(0usize, |length, byte| (length << 8) | usize::from(*byte));
        (length, &rest[count..])
    };
    if rest.len() < length {
        return None;
    }
    Some((tag, &rest[..length], &rest[length..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_bindings_parse_as_libpq_spells_them() {
        assert_eq!(SslMode::parse("verify-full").unwrap(), SslMode::VerifyFull);
        assert!(SslMode::parse("bogus")
            .unwrap_err()
            .to_string()
            .starts_with("sslmode=bogus is not a valid setting"));
        assert_eq!(
            ChannelBinding::parse("require").unwrap(),
            ChannelBinding::Require
        );
        assert!(ChannelBinding::parse("maybe").is_err());
    }

    #[test]
    fn truncated_der_is_none_not_a_panic() {
        for input in [
            &[][..],
            &[0x30],
            &[0x30, 0x85, 1, 2, 3, 4, 5],
            &[0x30, 0x05, 0x30],
        ] {
            assert_eq!(server_end_point(input), None);
        }
    }
}
