//! TLS settings of a MariaDB/MySQL URL, spelled as the `mysql` and `mariadb`
//! clients spell their options: `ssl-mode`, `ssl-ca`, `ssl-cert`, `ssl-key`,
//! `ssl-crl` (underscores work too).
//!
//! | `ssl-mode` | TLS | certificate checked |
//! |---|---|---|
//! | `DISABLED` | never | — |
//! | `PREFERRED` (default) | when the server offers it, else plain | only the chain, if `ssl-ca` is given |
//! | `REQUIRED` | always | only the chain, if `ssl-ca` is given |
//! | `VERIFY_CA` | always | the chain, against `ssl-ca` |
//! | `VERIFY_IDENTITY` | always | the chain and the host name |
//!
//! As with MySQL's client, `ssl-ca` without `ssl-mode` means `VERIFY_CA`, and
//! `ssl-ca=system` trusts the operating system's roots. A Unix-domain socket
//! never carries TLS: it does not leave the machine, and MySQL's servers and
//! clients treat it as secure already.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::ClientConfig;
use sluice_core::Error;
use sluice_tls::{Check, ClientSettings, Keywords, Roots};

/// How MariaDB's settings are spelled, for sluice-tls's messages.
pub(crate) const KEYWORDS: Keywords = Keywords {
    roots: "ssl-ca",
    revocation_list: "ssl-crl",
    certificate: "ssl-cert",
    key: "ssl-key",
    name_check: "ssl-mode=VERIFY_IDENTITY checks the host name; VERIFY_CA does not",
};

/// MySQL's `--ssl-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disabled,
    /// TLS when the server offers it (and the handshake succeeds), else plain.
    Preferred,
    /// TLS or no connection.
    Required,
    /// TLS with a certificate signed by a trusted root.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host connected to.
    VerifyIdentity,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode, Error> {
        Ok(match text.to_ascii_uppercase().replace('-', "_").as_str() {
            "DISABLED" => SslMode::Disabled,
            "PREFERRED" => SslMode::Preferred,
            "REQUIRED" => SslMode::Required,
            "VERIFY_CA" => SslMode::VerifyCa,
            "VERIFY_IDENTITY" => SslMode::VerifyIdentity,
            _ => {
                return Err(Error::config(format!(
                    "ssl-mode={text} is not a valid setting \
                     (DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY)"
                )))
            }
        })
    }

    /// The setting's spelling.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disabled => "DISABLED",
            SslMode::Preferred => "PREFERRED",
            SslMode::Required => "REQUIRED",
            SslMode::VerifyCa => "VERIFY_CA",
            SslMode::VerifyIdentity => "VERIFY_IDENTITY",
        }
    }
}

/// The TLS options of a URL, as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsOptions {
    mode: Option<SslMode>,
    roots: Option<String>,
    certificate: Option<PathBuf>,
    key: Option<PathBuf>,
    revocation_list: Option<PathBuf>,
}

impl TlsOptions {
    /// Takes the URL option `key`; `false` when it is not a TLS option.
    pub(crate) fn apply(&mut self, key: &str, value: &str) -> Result<bool, Error> {
        match key.replace('_', "-").as_str() {
            "ssl-mode" => self.mode = Some(SslMode::parse(value)?),
            "ssl-ca" => self.roots = Some(value.to_owned()),
            "ssl-cert" => self.certificate = Some(value.into()),
            "ssl-key" => self.key = Some(value.into()),
            "ssl-crl" => self.revocation_list = Some(value.into()),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The TLS part of a connection's settings.
#[derive(Clone)]
pub struct TlsSettings {
    /// When to use TLS.
    pub mode: SslMode,
    settings: ClientSettings,
    /// The rustls configuration; `None` for `DISABLED`.
    pub(crate) client: Option<Arc<ClientConfig>>,
}

impl PartialEq for TlsSettings {
    fn eq(&self, other: &TlsSettings) -> bool {
        self.mode == other.mode && self.settings == other.settings
    }
}

impl Eq for TlsSettings {}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TlsSettings")
            .field("mode", &self.mode)
            .field("settings", &self.settings)
            .finish()
    }
}

impl TlsSettings {
    /// Checks the options and reads the files they name.
    pub(crate) fn from_options(options: TlsOptions) -> Result<TlsSettings, Error> {
        let roots = options.roots.map(|roots| match roots.as_str() {
            "system" => Roots::System,
            path => Roots::File(path.into()),
        });
        let mode = match options.mode {
            Some(mode) => mode,
            None if roots.is_some() => SslMode::VerifyCa,
            None => SslMode::Preferred,
        };
        if matches!(mode, SslMode::VerifyCa | SslMode::VerifyIdentity) && roots.is_none() {
            return Err(Error::config(format!(
                "ssl-mode={} needs a root certificate to check the server's against: \
                 set ssl-ca to a PEM file, or to system for the operating system's roots",
                mode.name()
            )));
        }
        let client_certificate = match (options.certificate, options.key) {
            (Some(certificate), Some(key)) => Some((certificate, key)),
            (None, None) => None,
            _ => return Err(Error::config("ssl-cert and ssl-key go together: give both")),
        };
        let settings = ClientSettings {
            check: match (mode, &roots) {
                (SslMode::VerifyIdentity, _) => Check::ChainAndName,
                (_, Some(_)) => Check::Chain,
                (_, None) => Check::Nothing,
            },
            roots,
            revocation_list: options.revocation_list,
            client_certificate,
            ..ClientSettings::default()
        };
        let client = match mode {
            SslMode::Disabled => None,
            _ => Some(sluice_tls::client_config(&settings, &KEYWORDS)?),
        };
        Ok(TlsSettings {
            mode,
            settings,
            client,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<TlsSettings, Error> {
        let mut options = TlsOptions::default();
        for (key, value) in pairs {
            assert!(options.apply(key, value).unwrap(), "{key} is a TLS option");
        }
        TlsSettings::from_options(options)
    }

    #[test]
    fn modes_follow_the_mysql_client() {
        assert_eq!(settings(&[]).unwrap().mode, SslMode::Preferred);
        assert_eq!(
            settings(&[("ssl_mode", "verify-identity"), ("ssl-ca", "system")])
                .unwrap()
                .mode,
            SslMode::VerifyIdentity
        );
        assert!(settings(&[("ssl-mode", "DISABLED")])
            .unwrap()
            .client
            .is_none());
        let message = settings(&[("ssl-mode", "VERIFY_CA")])
            .unwrap_err()
            .to_string();
        assert!(message.contains("needs a root certificate"), "{message}");
        let message = TlsOptions::default()
            .apply("ssl-mode", "sometimes")
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("ssl-mode=sometimes is not"),
            "{message}"
        );
        let message = settings(&[("ssl-ca", "/nonexistent/ca.pem")])
            .unwrap_err()
            .to_string();
        assert!(message.contains("ssl-ca /nonexistent/ca.pem"), "{message}");
        let message = settings(&[("ssl-cert", "/x.pem")]).unwrap_err().to_string();
        assert!(message.contains("give both"), "{message}");
    }
}
