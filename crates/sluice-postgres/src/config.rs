//! [`Config`]: where and how to connect, from a libpq URL or `key=value` string
//! (see `crate::conninfo`) with libpq's environment defaults (`PGHOST`,
//! `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGSSLMODE`, …).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sluice_core::{Error, Keepalive, TcpSettings};

use crate::conninfo::Settings;
use crate::passfile;
use crate::tls::TlsSettings;

/// One address to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A TCP host name or address and port.
    Tcp(String, u16),
    /// A Unix-domain socket file.
    Unix(PathBuf),
}

impl Target {
    /// The host and port a password-file line is matched against: a socket
    /// matches `localhost`, as in libpq.
    pub(crate) fn host_and_port(&self) -> (&str, u16) {
        match self {
            Target::Tcp(host, port) => (host, *port),
            Target::Unix(path) => {
                let port = path
                    .extension()
                    .and_then(|extension| extension.to_str())
                    .and_then(|extension| extension.parse().ok())
                    .unwrap_or(5432);
                ("localhost", port)
            }
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp(host, port) => write!(f, "{host}:{port}"),
            Target::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// libpq's `target_session_attrs`: which of several hosts will do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAttributes {
    /// The first that accepts (default).
    Any,
    /// One that takes writes (`transaction_read_only` off).
    ReadWrite,
    /// One that does not (`transaction_read_only` on).
    ReadOnly,
    /// A primary (not in recovery).
    Primary,
    /// A standby (in recovery).
    Standby,
    /// A standby if any host is one, else any.
    PreferStandby,
}

impl SessionAttributes {
    fn parse(text: &str) -> Result<SessionAttributes, Error> {
        Ok(match text {
            "any" => SessionAttributes::Any,
            "read-write" => SessionAttributes::ReadWrite,
            "read-only" => SessionAttributes::ReadOnly,
            "primary" => SessionAttributes::Primary,
            "standby" => SessionAttributes::Standby,
            "prefer-standby" => SessionAttributes::PreferStandby,
            other => {
                return Err(Error::config(format!(
                    "target_session_attrs={other} is not a valid setting (any, read-write, \
                     read-only, primary, standby or prefer-standby)"
                )))
            }
        })
    }

    /// The setting's spelling.
    pub fn name(self) -> &'static str {
        match self {
            SessionAttributes::Any => "any",
            SessionAttributes::ReadWrite => "read-write",
            SessionAttributes::ReadOnly => "read-only",
            SessionAttributes::Primary => "primary",
            SessionAttributes::Standby => "standby",
            SessionAttributes::PreferStandby => "prefer-standby",
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
    /// How long connecting to each address may take, login included (as
    /// libpq's `connect_timeout`); default 10 s.
    pub connect_timeout: Duration,
    /// TCP keepalive and user timeout (`keepalives`, `keepalives_idle`,
    /// `keepalives_interval`, `keepalives_count`, `tcp_user_timeout`).
    pub tcp: TcpSettings,
    /// Extra run-time settings sent in the startup message (name, value).
    pub settings: Vec<(String, String)>,
    /// When and how to use TLS.
    pub tls: TlsSettings,
    /// The password file read when no password is given and the server asks.
    pub passfile: Option<PathBuf>,
    /// Which host will do, when there are several.
    pub target_session_attrs: SessionAttributes,
    /// Try the hosts in random order (`load_balance_hosts=random`).
    pub load_balance_hosts: bool,
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
            .field("tls", &self.tls)
            .finish()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

impl FromStr for Config {
    type Err = Error;

    /// Parses a libpq URL or `key=value` string; what it leaves out comes from
    /// libpq's environment variables (`PGHOST`, `PGSSLMODE`, …), then libpq's
    /// defaults.
    fn from_str(text: &str) -> Result<Config, Error> {
        let mut settings = Settings::parse(text)?;
        // The string first, then its service's settings, then the environment.
        let service = settings
            .get("service")
            .map(str::to_owned)
            .or_else(|| env("PGSERVICE"));
        if let Some(service) = service {
            settings.fill_from(passfile::service(&service, &env)?);
        }
        Config::from_settings(settings.with_defaults(env))
    }
}

impl Config {
    fn from_settings(settings: Settings) -> Result<Config, Error> {
        if let Some(address) = settings.get("hostaddr") {
            return Err(Error::config(format!(
                "hostaddr={address} is not supported yet: give the address as host \
                 (with sslmode=verify-full the certificate must then name that address)"
            )));
        }
        let targets = targets(&settings)?;
        let user = settings
            .get("user")
            .map(str::to_owned)
            .or_else(|| env("USER"))
            .unwrap_or_else(|| "postgres".into());
        let database = settings
            .get("dbname")
            .map_or_else(|| user.clone(), str::to_owned);
        // libpq: none, zero or negative waits for ever; otherwise at least 2 s.
        // sluice waits 10 s when nothing is said, so a dead host never hangs it.
        let connect_timeout = match settings.get("connect_timeout") {
            None => Duration::from_secs(10),
            Some(text) => match text.trim().parse::<i64>() {
                Ok(seconds) if seconds <= 0 => Duration::MAX,
                Ok(seconds) => Duration::from_secs(seconds.max(2).unsigned_abs()),
                Err(_) => {
                    return Err(Error::config(format!(
                        "invalid connection string: connect_timeout={text} is not a whole number of seconds"
                    )))
                }
            },
        };
        let tcp = tcp_settings(&settings)?;
        Ok(Config {
            tcp,
            targets,
            password: settings
                .get("password")
                .map(|text| text.as_bytes().to_vec()),
            user,
            database,
            options: settings.get("options").map(str::to_owned),
            application_name: settings
                .get("application_name")
                .or_else(|| settings.get("fallback_application_name"))
                .unwrap_or("sluice")
                .to_owned(),
            connect_timeout,
            settings: Vec::new(),
            tls: TlsSettings::from_settings(&settings)?,
            passfile: passfile::password_file(&settings),
            target_session_attrs: settings
                .get("target_session_attrs")
                .map_or(Ok(SessionAttributes::Any), SessionAttributes::parse)?,
            load_balance_hosts: match settings.get("load_balance_hosts") {
                None | Some("disable") => false,
                Some("random") => true,
                Some(other) => {
                    return Err(Error::config(format!(
                        "load_balance_hosts={other} is not a valid setting (disable or random)"
                    )))
                }
            },
        })
    }
}

/// The addresses of `host` and `port`: comma-separated lists, one port for all
/// hosts or one per host; a host starting with `/` is a socket directory.
fn targets(settings: &Settings) -> Result<Vec<Target>, Error> {
    let hosts: Vec<&str> = settings
        .get("host")
        .unwrap_or("localhost")
        .split(',')
        .collect();
    let ports = settings
        .get("port")
        .unwrap_or_default()
        .split(',')
        .map(|port| match port.trim() {
            "" => Ok(5432),
            port => port.parse::<u16>().map_err(|_| {
                Error::config(format!(
                    "invalid connection string: port {port:?} is not a port number"
                ))
            }),
        })
        .collect::<Result<Vec<u16>, Error>>()?;
    if ports.len() != 1 && ports.len() != hosts.len() {
        return Err(Error::config(format!(
            "invalid connection string: {} hosts but {} ports (give one port, or one per host)",
            hosts.len(),
            ports.len()
        )));
    }
    Ok(hosts
        .iter()
        .enumerate()
        .map(|(index, host)| {
            let port = ports[if ports.len() == 1 { 0 } else { index }];
            let host = if host.is_empty() { "localhost" } else { host };
            if host.starts_with('/') {
                Target::Unix(PathBuf::from(host).join(format!(".s.PGSQL.{port}")))
            } else {
                Target::Tcp(host.to_owned(), port)
            }
        })
        .collect())
}

/// libpq's keepalive keywords over sluice's defaults: `keepalives=0` turns
/// the probes off; `keepalives_idle`, `keepalives_interval` (seconds) and
/// `keepalives_count` replace a default, 0 keeping it (libpq: the system's);
/// `tcp_user_timeout` is in milliseconds, 0 the system's.
fn tcp_settings(settings: &Settings) -> Result<TcpSettings, Error> {
    let number = |keyword: &str| -> Result<Option<u32>, Error> {
        let Some(text) = settings.get(keyword) else {
            return Ok(None);
        };
        match text.trim().parse::<u32>() {
            Ok(0) => Ok(None),
            Ok(value) => Ok(Some(value)),
            Err(_) => Err(Error::config(format!(
                "invalid connection string: {keyword}={text} is not a whole number"
            ))),
        }
    };
    let seconds = |value: u32| Duration::from_secs(value.into());
    let defaults = Keepalive::default();
    let keepalive = Keepalive {
        idle: number("keepalives_idle")?.map_or(defaults.idle, seconds),
        interval: number("keepalives_interval")?.map_or(defaults.interval, seconds),
        retries: number("keepalives_count")?.unwrap_or(defaults.retries),
    };
    let enabled = match settings.get("keepalives").map(str::trim) {
        None | Some("1") => true,
        Some("0") => false,
        Some(other) => {
            return Err(Error::config(format!(
                "invalid connection string: keepalives={other} is not 0 or 1"
            )))
        }
    };
    Ok(TcpSettings {
        keepalive: enabled.then_some(keepalive),
        user_timeout: number("tcp_user_timeout")?
            .map(|milliseconds| Duration::from_millis(milliseconds.into())),
    })
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
    use crate::tls::SslMode;

    fn config(text: &str) -> Config {
        Config::from_settings(Settings::parse(text).unwrap()).unwrap()
    }

    fn message(text: &str) -> String {
        match Settings::parse(text).and_then(Config::from_settings) {
            Ok(_) => panic!("{text} parsed"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn urls_and_key_value_strings_parse() {
        let parsed = config("postgres://alice:secret@db.example:6543/sales?application_name=x");
        assert_eq!(parsed.targets, [Target::Tcp("db.example".into(), 6543)]);
        assert_eq!(parsed.user, "alice");
        assert_eq!(parsed.password.as_deref(), Some(&b"secret"[..]));
        assert_eq!(parsed.database, "sales");
        assert_eq!(parsed.application_name, "x");
        assert_eq!(parsed.tls.mode, SslMode::Prefer, "libpq's default");

        let parsed = config("host=/run/postgresql port=5433 user=bob dbname=d");
        assert_eq!(
            parsed.targets,
            [Target::Unix("/run/postgresql/.s.PGSQL.5433".into())]
        );
        let parsed = config("postgres://a:1,b/d");
        assert_eq!(
            parsed.targets,
            [Target::Tcp("a".into(), 1), Target::Tcp("b".into(), 5432)]
        );
        let parsed = config("host=a,b port=7");
        assert_eq!(
            parsed.targets,
            [Target::Tcp("a".into(), 7), Target::Tcp("b".into(), 7)]
        );
        assert_eq!(
            config("connect_timeout=1").connect_timeout,
            Duration::from_secs(2)
        );
        assert_eq!(config("sslmode=require").tls.mode, SslMode::Require);
    }

    #[test]
    fn keepalives_are_on_by_default_and_follow_libpq_s_keywords() {
        assert_eq!(config("host=a").tcp, TcpSettings::default());
        let tuned = config(
            "keepalives_idle=5 keepalives_interval=2 keepalives_count=3 tcp_user_timeout=1500",
        );
        assert_eq!(
            tuned.tcp,
            TcpSettings {
                keepalive: Some(Keepalive {
                    idle: Duration::from_secs(5),
                    interval: Duration::from_secs(2),
                    retries: 3,
                }),
                user_timeout: Some(Duration::from_millis(1500)),
            }
        );
        assert_eq!(config("keepalives_idle=0").tcp, TcpSettings::default());
        assert_eq!(config("keepalives=0").tcp.keepalive, None);
        assert!(message("keepalives=2").contains("keepalives=2 is not 0 or 1"));
        assert!(message("keepalives_count=many")
            .contains("keepalives_count=many is not a whole number"));
    }

    #[test]
    fn errors_name_the_setting_and_the_reason() {
        assert!(message("host=b sslmode=bogus").starts_with("sslmode=bogus is not a valid setting"));
        assert_eq!(
            message("postgres://a@b/c?frobnicate=1"),
            "invalid connection string: unknown option `frobnicate`"
        );
        assert_eq!(
            message("host=b port=x"),
            "invalid connection string: port \"x\" is not a port number"
        );
        assert!(message("host=a,b,c port=1,2").contains("3 hosts but 2 ports"));
        assert!(message("host=db hostaddr=10.0.0.1")
            .starts_with("hostaddr=10.0.0.1 is not supported yet"));
        assert!(
            message("sslmode=verify-full sslrootcert=/nonexistent/ca.pem")
                .starts_with("sslrootcert /nonexistent/ca.pem: ")
        );
        assert!(
            message("sslmode=require sslrootcert=system").contains("goes with sslmode=verify-full")
        );
        assert!(message("sslmode=disable channel_binding=require").contains("needs TLS"));
        let error = Settings::parse("port=x")
            .and_then(Config::from_settings)
            .unwrap_err();
        assert_eq!(error.kind(), sluice_core::ErrorKind::Config);
    }
}
