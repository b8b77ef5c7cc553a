//! [`Config`]: where a MariaDB or MySQL server is and how to log in, parsed
//! from a `mariadb://` or `mysql://` URL with the MySQL clients' environment
//! defaults.
//!
//! ```text
//! mariadb://user:password@host:3306/database?connect_timeout=10s&zero_dates=null
//! mysql://user@localhost/database?socket=/run/mysqld/mysqld.sock
//! mariadb://user@db.example.com/shop?ssl-mode=VERIFY_IDENTITY&ssl-ca=/etc/ssl/db-ca.pem
//! ```
//!
//! TLS options are `crate::tls`'s.
//!
//! What the URL leaves out comes from the environment, as the `mariadb` and
//! `mysql` clients read it: `MYSQL_PWD` (the password), `MYSQL_HOST`,
//! `MYSQL_TCP_PORT`, `MYSQL_UNIX_PORT` (the socket, used when no host is given)
//! and `USER` (the login). Unlike those clients, `localhost` means TCP to
//! `localhost`: a socket is used only when `socket=` (or `MYSQL_UNIX_PORT`
//! without a host) says so, so a URL means the same on every machine.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use percent_encoding::percent_decode_str;
use sluice_core::{parse_duration, Error};

use crate::tls::{TlsOptions, TlsSettings};

/// MariaDB's and MySQL's port.
pub const DEFAULT_PORT: u16 = 3306;

/// How long connecting may take unless `connect_timeout` says otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A host name or address and a port.
    Tcp(String, u16),
    /// A Unix-domain socket file.
    Unix(PathBuf),
}

impl Target {
    /// Whether the target is reached over TCP (TLS applies to TCP only).
    pub fn is_tcp(&self) -> bool {
        matches!(self, Target::Tcp(..))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(host, port) if host.contains(':') => write!(formatter, "[{host}]:{port}"),
            Target::Tcp(host, port) => write!(formatter, "{host}:{port}"),
            Target::Unix(path) => write!(formatter, "socket {}", path.display()),
        }
    }
}

/// What an export does with MariaDB's zero dates (`0000-00-00`,
/// `2024-00-00`), which no calendar and no output format has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZeroDates {
    /// Fail, naming the column (the default: nothing is changed silently).
    #[default]
    Error,
    /// Write NULL instead.
    Null,
}

/// Which dialect a URL asked for; the server's greeting says which it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `mariadb://`.
    MariaDb,
    /// `mysql://`.
    MySql,
}

/// A parsed connection target; see the module docs.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// The URL's scheme.
    pub scheme: Scheme,
    /// Where the server is.
    pub target: Target,
    /// The login.
    pub user: String,
    /// The password, if any.
    pub password: Option<String>,
    /// The default database, if any.
    pub database: Option<String>,
    /// How long connecting (socket, handshake, login) may take.
    pub connect_timeout: Duration,
    /// What exports do with zero dates.
    pub zero_dates: ZeroDates,
    /// TLS: when, and what is checked (see `crate::tls`).
    pub tls: TlsSettings,
}

impl fmt::Debug for Config {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Config")
            .field("scheme", &self.scheme)
            .field("target", &self.target)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .field("database", &self.database)
            .field("connect_timeout", &self.connect_timeout)
            .field("zero_dates", &self.zero_dates)
            .field("tls", &self.tls)
            .finish()
    }
}

/// The environment variables the URL's gaps are filled from.
pub(crate) trait Environment {
    fn get(&self, name: &str) -> Option<String>;
}

/// The process's environment.
struct ProcessEnvironment;

impl Environment for ProcessEnvironment {
    fn get(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|value| !value.is_empty())
    }
}

impl FromStr for Config {
    type Err = Error;

    fn from_str(url: &str) -> Result<Config, Error> {
        Config::parse(url, &ProcessEnvironment)
    }
}

/// The URL's parts before the environment fills gaps.
#[derive(Default)]
struct Parts {
    user: Option<String>,
    password: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    database: Option<String>,
    socket: Option<PathBuf>,
    connect_timeout: Option<Duration>,
    zero_dates: ZeroDates,
    tls: TlsOptions,
}

impl Config {
    pub(crate) fn parse(url: &str, environment: &dyn Environment) -> Result<Config, Error> {
        let (scheme, rest) = split_scheme(url)?;
        let parts = parse_parts(rest)?;
        let target = match (parts.socket, parts.host) {
            (Some(socket), _) => Target::Unix(socket),
            (None, Some(host)) => Target::Tcp(host, port_or_default(parts.port, environment)?),
            (None, None) => match (
                environment.get("MYSQL_HOST"),
                environment.get("MYSQL_UNIX_PORT"),
            ) {
                (Some(host), _) => Target::Tcp(host, port_or_default(parts.port, environment)?),
                (None, Some(socket)) => Target::Unix(socket.into()),
                (None, None) => Target::Tcp(
                    "localhost".into(),
                    port_or_default(parts.port, environment)?,
                ),
            },
        };
        let user = parts
            .user
            .or_else(|| environment.get("USER"))
            .ok_or_else(|| {
                Error::config("no user: give one in the URL (mariadb://user@host/db)")
            })?;
        Ok(Config {
            scheme,
            target,
            user,
            password: parts.password.or_else(|| environment.get("MYSQL_PWD")),
            database: parts.database,
            connect_timeout: parts.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            zero_dates: parts.zero_dates,
            tls: TlsSettings::from_options(parts.tls)?,
        })
    }
}

fn split_scheme(url: &str) -> Result<(Scheme, &str), Error> {
    let url = url.trim();
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| Error::config("not a mariadb:// or mysql:// URL"))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "mariadb" => Scheme::MariaDb,
        "mysql" => Scheme::MySql,
        other => {
            return Err(Error::config(format!(
                "{other}:// is not a MariaDB URL: use mariadb:// or mysql://"
            )))
        }
    };
    Ok((scheme, rest))
}

fn parse_parts(rest: &str) -> Result<Parts, Error> {
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let (authority, path) = match before_query.split_once('/') {
        Some((authority, path)) => (authority, path),
        None => (before_query, ""),
    };
    let mut parts = Parts::default();
    let host_port = match authority.rsplit_once('@') {
        Some((credentials, host_port)) => {
            let (user, password) = match credentials.split_once(':') {
                Some((user, password)) => (user, Some(password)),
                None => (credentials, None),
            };
            parts.user = Some(decode(user, "user")?).filter(|user| !user.is_empty());
            parts.password = password
                .map(|password| decode(password, "password"))
                .transpose()?;
            host_port
        }
        None => authority,
    };
    let (host, port) = split_host_port(host_port)?;
    parts.host = host;
    parts.port = port;
    parts.database =
        Some(decode(path.trim_end_matches('/'), "database")?).filter(|name| !name.is_empty());
    if let Some(query) = query {
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            apply_option(&mut parts, &decode(key, "option")?, &decode(value, key)?)?;
        }
    }
    Ok(parts)
}

fn split_host_port(host_port: &str) -> Result<(Option<String>, Option<u16>), Error> {
    if host_port.is_empty() {
        return Ok((None, None));
    }
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| Error::config(format!("unclosed [ in host {host_port:?}")))?;
        (host.to_owned(), after.strip_prefix(':'))
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (host_port.to_owned(), None),
        }
    };
    let port = port
        .map(|port| {
            port.parse::<u16>().map_err(|_| {
                Error::config(format!("port {port:?} is not a number from 1 to 65535"))
            })
        })
        .transpose()?;
    let host = decode(&host, "host")?;
    Ok((Some(host).filter(|host| !host.is_empty()), port))
}

fn apply_option(parts: &mut Parts, key: &str, value: &str) -> Result<(), Error> {
    match key {
        "socket" => parts.socket = Some(PathBuf::from(value)),
        "connect_timeout" => {
            parts.connect_timeout = Some(if value.bytes().all(|byte| byte.is_ascii_digit()) {
                // libpq's and the MySQL clients' spelling: whole seconds.
                Duration::from_secs(value.parse().map_err(|_| bad_option(key, value))?)
            } else {
                parse_duration(value).map_err(|_| bad_option(key, value))?
            })
        }
        "zero_dates" => {
            parts.zero_dates = match value {
                "error" => ZeroDates::Error,
                "null" => ZeroDates::Null,
                _ => {
                    return Err(Error::config(format!(
                        "zero_dates={value}: expected error or null"
                    )))
                }
            }
        }
        "user" => parts.user = Some(value.to_owned()),
        "password" => parts.password = Some(value.to_owned()),
        _ if parts.tls.apply(key, value)? => {}
        _ => {
            // libpq's spellings, from a PostgreSQL habit.
            let hint = if key.starts_with("ssl") {
                " (MariaDB URLs spell TLS options as the mysql client does: \
                 ssl-mode, ssl-ca, ssl-cert, ssl-key, ssl-crl)"
            } else {
                ""
            };
            return Err(Error::config(format!(
                "unknown option {key:?} in the URL (known: socket, connect_timeout, zero_dates, \
                 user, password, ssl-mode, ssl-ca, ssl-cert, ssl-key, ssl-crl){hint}"
            )));
        }
    }
    Ok(())
}

fn bad_option(key: &str, value: &str) -> Error {
    Error::config(format!("{key}={value} is not a duration such as 10s"))
}

fn port_or_default(port: Option<u16>, environment: &dyn Environment) -> Result<u16, Error> {
    if let Some(port) = port {
        return Ok(port);
    }
    match environment.get("MYSQL_TCP_PORT") {
        Some(port) => port
            .parse()
            .map_err(|_| Error::config(format!("MYSQL_TCP_PORT={port} is not a port number"))),
        None => Ok(DEFAULT_PORT),
    }
}

fn decode(text: &str, what: &str) -> Result<String, Error> {
    percent_decode_str(text)
        .decode_utf8()
        .map(|decoded| decoded.into_owned())
        .map_err(|_| Error::config(format!("the {what} in the URL is not UTF-8 once decoded")))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct Fixed(HashMap<&'static str, &'static str>);

    impl Environment for Fixed {
        fn get(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|value| (*value).to_owned())
        }
    }

    fn parse(url: &str, environment: &[(&'static str, &'static str)]) -> Result<Config, Error> {
        Config::parse(url, &Fixed(environment.iter().copied().collect()))
    }

    #[test]
    fn a_full_url() {
        let config = parse(
            "mariadb://app:p%40ss@db.internal:3307/shop?connect_timeout=5&zero_dates=null",
            &[],
        )
        .unwrap();
        assert_eq!(config.scheme, Scheme::MariaDb);
        assert_eq!(config.target, Target::Tcp("db.internal".into(), 3307));
        assert_eq!(config.user, "app");
        assert_eq!(config.password.as_deref(), Some("p@ss"));
        assert_eq!(config.database.as_deref(), Some("shop"));
        assert_eq!(config.connect_timeout, Duration::from_secs(5));
        assert_eq!(config.zero_dates, ZeroDates::Null);
        assert!(!format!("{config:?}").contains("p@ss"));
    }

    #[test]
    fn the_environment_fills_gaps() {
        let environment = [
            ("MYSQL_PWD", "secret"),
            ("USER", "me"),
            ("MYSQL_TCP_PORT", "3310"),
        ];
        let config = parse("mysql://db/", &environment).unwrap();
        assert_eq!(config.scheme, Scheme::MySql);
        assert_eq!(config.user, "me");
        assert_eq!(config.password.as_deref(), Some("secret"));
        assert_eq!(config.target, Target::Tcp("db".into(), 3310));
        assert_eq!(config.database, None);

        let config = parse(
            "mariadb://root@/test",
            &[("MYSQL_UNIX_PORT", "/run/m.sock")],
        )
        .unwrap();
        assert_eq!(config.target, Target::Unix("/run/m.sock".into()));
        let config = parse("mariadb://root@/test?socket=/tmp/x.sock", &[]).unwrap();
        assert_eq!(config.target, Target::Unix("/tmp/x.sock".into()));
        let config = parse("mariadb://root@[::1]:3307/test", &[]).unwrap();
        assert_eq!(config.target, Target::Tcp("::1".into(), 3307));
        assert_eq!(config.target.to_string(), "[::1]:3307");
    }

    #[test]
    fn mistakes_are_named() {
        let message = |url: &str| parse(url, &[("USER", "me")]).unwrap_err().to_string();
        assert!(message("mariadb://h:99999/db").contains("port \"99999\""));
        assert!(message("mariadb://h/db?sslmode=bogus").contains("unknown option \"sslmode\""));
        assert!(message("mariadb://h/db?zero_dates=maybe").contains("expected error or null"));
        assert!(message("oracle://h/db").contains("not a MariaDB URL"));
        assert!(parse("mariadb://h/db", &[])
            .unwrap_err()
            .to_string()
            .contains("no user"));
    }
}
