//! [`Config`]: where and how to connect, parsed from a libpq-style URL or
//! `key=value` string (by tokio-postgres's well-tested parser) with libpq's
//! environment defaults (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use percent_encoding::percent_decode_str;
use sluice_core::Error;
use tokio_postgres::config::{Host, SslMode};

/// One address to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A TCP host name or address and port.
    Tcp(String, u16),
    /// A Unix-domain socket file.
    Unix(PathBuf),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp(host, port) => write!(f, "{host}:{port}"),
            Target::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Connection settings.
#[derive(Clone)]
pub struct Config {
    /// Addresses tried in order until one accepts.
    pub targets: Vec<Target>,
    /// Role name.
    pub user: String,
    /// Password, if any.
    pub password: Option<Vec<u8>>,
    /// Database name.
    pub database: String,
    /// Command-line options for the server (`-c name=value …`), from the URL's `options`.
    pub options: Option<String>,
    /// `application_name`; default `sluice`.
    pub application_name: String,
    /// How long to wait for each address; default 10 s.
    pub connect_timeout: Duration,
    /// Extra run-time settings sent in the startup message (name, value).
    pub settings: Vec<(String, String)>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("targets", &self.targets)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .field("database", &self.database)
            .field("options", &self.options)
            .field("settings", &self.settings)
            .finish()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

impl FromStr for Config {
    type Err = Error;

    fn from_str(text: &str) -> Result<Config, Error> {
        let parsed = tokio_postgres::Config::from_str(text)
            .map_err(|error| describe_parse_error(text, &error))?;
        if matches!(parsed.get_ssl_mode(), SslMode::Require) {
            return Err(ssl_mode_error("require"));
        }
        let default_port = env("PGPORT")
            .and_then(|port| port.parse().ok())
            .unwrap_or(5432u16);
        let ports = parsed.get_ports();
        let port_for = |index: usize| match ports.len() {
            0 => default_port,
            1 => ports[0],
            _ => ports.get(index).copied().unwrap_or(default_port),
        };
        let mut targets: Vec<Target> = parsed
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(index, host)| match host {
                Host::Tcp(name) => Target::Tcp(name.clone(), port_for(index)),
                Host::Unix(directory) => {
                    Target::Unix(directory.join(format!(".s.PGSQL.{}", port_for(index))))
                }
            })
            .collect();
        if targets.is_empty() {
            let host = env("PGHOST").unwrap_or_else(|| "localhost".into());
            targets.push(if host.starts_with('/') {
                Target::Unix(PathBuf::from(host).join(format!(".s.PGSQL.{}", port_for(0))))
            } else {
                Target::Tcp(host, port_for(0))
            });
        }
        let user = parsed
            .get_user()
            .map(str::to_owned)
            .or_else(|| env("PGUSER"))
            .or_else(|| env("USER"))
            .unwrap_or_else(|| "postgres".into());
        let database = parsed
            .get_dbname()
            .map(str::to_owned)
            .or_else(|| env("PGDATABASE"))
            .unwrap_or_else(|| user.clone());
        Ok(Config {
            targets,
            password: parsed
                .get_password()
                .map(<[u8]>::to_vec)
                .or_else(|| env("PGPASSWORD").map(String::into_bytes)),
            user,
            database,
            options: parsed.get_options().map(str::to_owned),
            application_name: parsed.get_application_name().unwrap_or("sluice").to_owned(),
            connect_timeout: parsed
                .get_connect_timeout()
                .copied()
                .unwrap_or(Duration::from_secs(10)),
            settings: Vec::new(),
        })
    }
}

/// Words a parse failure: tokio-postgres's own `Display` only says "invalid
/// connection string"; the setting at fault is in its source.
fn describe_parse_error(text: &str, error: &tokio_postgres::Error) -> Error {
    let reason = std::error::Error::source(error)
        .map(ToString::to_string)
        .unwrap_or_else(|| error.to_string());
    if reason.contains("`sslmode`") {
        if let Some(mode) = setting_value(text, "sslmode") {
            return ssl_mode_error(&mode);
        }
    }
    Error::config(format!("invalid connection string: {reason}"))
}

/// The error for an `sslmode` this build cannot honour, or one that does not exist.
fn ssl_mode_error(mode: &str) -> Error {
    match mode {
        "require" | "verify-ca" | "verify-full" => Error::config(format!(
            "sslmode={mode} needs TLS, which this build does not support yet \
             (connect with sslmode=disable or prefer, or through a local TLS-terminating proxy)"
        )),
        "allow" => Error::config(
            "sslmode=allow is not supported by this build: use sslmode=disable or prefer",
        ),
        other => Error::config(format!(
            "sslmode={other} is not a valid setting \
             (disable, allow, prefer, require, verify-ca or verify-full)"
        )),
    }
}

/// The value of setting `name` in a URL's query string or a `key=value` string, as
/// written (URL percent-escapes decoded, quotes removed); the last occurrence wins,
/// as in libpq. Only used to word errors, so it need not validate the rest.
fn setting_value(text: &str, name: &str) -> Option<String> {
    let text = text.trim();
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        let query = text.split_once('?')?.1;
        return query
            .rsplit('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| percent_decode_str(value).decode_utf8_lossy().into_owned());
    }
    let mut found = None;
    let mut rest = text;
    while let Some((key, after_key)) = rest.split_once('=') {
        let key = key.split_whitespace().last().unwrap_or("");
        let after_key = after_key.trim_start();
        let (value, after_value) = key_value_token(after_key);
        if key == name {
            found = Some(value);
        }
        rest = after_value;
    }
    found
}

/// One value of a `key=value` string: quoted (`'a b'`, `\'` escapes) or up to the
/// next whitespace; returns it and the text after it.
fn key_value_token(text: &str) -> (String, &str) {
    let Some(quoted) = text.strip_prefix('\'') else {
        let end = text.find(char::is_whitespace).unwrap_or(text.len());
        return (text[..end].to_owned(), &text[end..]);
    };
    let mut value = String::new();
    let mut characters = quoted.char_indices();
    while let Some((index, character)) = characters.next() {
        match character {
            '\\' => value.extend(characters.next().map(|(_, escaped)| escaped)),
            '\'' => return (value, &quoted[index + 1..]),
            other => value.push(other),
        }
    }
    (value, "")
}

impl Config {
    /// Adds a run-time setting sent at startup (e.g. `statement_timeout`, `5min`).
    pub fn setting(mut self, name: &str, value: &str) -> Config {
        self.settings.push((name.to_owned(), value.to_owned()));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_key_value_strings_parse() {
        let config: Config = "postgres://alice:secret@db.example:6543/sales?application_name=x"
            .parse()
            .unwrap();
        assert_eq!(config.targets, [Target::Tcp("db.example".into(), 6543)]);
        assert_eq!(config.user, "alice");
        assert_eq!(config.password.as_deref(), Some(&b"secret"[..]));
        assert_eq!(config.database, "sales");
        assert_eq!(config.application_name, "x");

        let config: Config = "host=/run/postgresql port=5433 user=bob dbname=d"
            .parse()
            .unwrap();
        assert_eq!(
            config.targets,
            [Target::Unix("/run/postgresql/.s.PGSQL.5433".into())]
        );
    }

    #[test]
    fn nonsense_and_tls_requirements_are_config_errors() {
        let error = "postgres://a@b/c?sslmode=require"
            .parse::<Config>()
            .unwrap_err();
        assert_eq!(error.kind(), sluice_core::ErrorKind::Config);
        let error = "postgres://a@b:notaport/c".parse::<Config>().unwrap_err();
        assert_eq!(error.kind(), sluice_core::ErrorKind::Config);
    }

    fn message(text: &str) -> String {
        text.parse::<Config>().unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_setting_and_the_reason() {
        for text in [
            "postgres://a@b/c?sslmode=verify-full",
            "postgres://a@b/c?application_name=x&sslmode=verify%2Dfull",
            "host=b sslmode=verify-full",
            "host=b sslmode = 'verify-full' dbname=c",
        ] {
            assert_eq!(
                message(text),
                "sslmode=verify-full needs TLS, which this build does not support yet \
                 (connect with sslmode=disable or prefer, or through a local TLS-terminating proxy)",
                "{text}"
            );
        }
        assert!(message("host=b sslmode=verify-ca").starts_with("sslmode=verify-ca needs TLS"));
        assert!(
            message("postgres://a@b/c?sslmode=require").starts_with("sslmode=require needs TLS")
        );
        assert!(message("host=b sslmode=allow").starts_with("sslmode=allow is not supported"));
        assert!(message("host=b sslmode=bogus").starts_with("sslmode=bogus is not a valid setting"));
        assert_eq!(
            message("postgres://a@b/c?frobnicate=1"),
            "invalid connection string: unknown option `frobnicate`"
        );
        assert_eq!(
            message("host=b port=x"),
            "invalid connection string: invalid value for option `port`"
        );
    }

    #[test]
    fn setting_values_are_found_in_both_forms() {
        assert_eq!(
            setting_value("host=a sslmode=x", "sslmode").as_deref(),
            Some("x")
        );
        assert_eq!(
            setting_value("host='a b' sslmode='it\\'s' dbname=d", "sslmode").as_deref(),
            Some("it's")
        );
        assert_eq!(
            setting_value("postgresql://u@h/d?sslmode=a&sslmode=b", "sslmode").as_deref(),
            Some("b")
        );
        assert_eq!(setting_value("host=a", "sslmode"), None);
        assert_eq!(setting_value("postgres://u@h/d", "sslmode"), None);
    }
}
