//! libpq's connection strings: `postgres://` URLs and `key=value` strings,
//! parsed into keyword–value pairs by libpq's rules, then completed from the
//! `PG*` environment variables.
//!
//! Written here rather than taken from tokio-postgres's parser because that one
//! refuses most of libpq's TLS keywords (`sslrootcert`, `sslcert`, `sslkey`,
//! `sslcrl`, `verify-full`, …), and a user's psql connection string must work
//! unchanged.

use std::collections::BTreeMap;

use percent_encoding::percent_decode_str;
use sluice_core::Error;

/// The keywords sluice understands, with the environment variable that gives
/// each one's default (as libpq's).
const KEYWORDS: &[(&str, Option<&str>)] = &[
    ("host", Some("PGHOST")),
    ("hostaddr", Some("PGHOSTADDR")),
    ("port", Some("PGPORT")),
    ("dbname", Some("PGDATABASE")),
    ("user", Some("PGUSER")),
    ("password", Some("PGPASSWORD")),
    ("passfile", Some("PGPASSFILE")),
    ("service", Some("PGSERVICE")),
    ("options", Some("PGOPTIONS")),
    ("application_name", Some("PGAPPNAME")),
    ("fallback_application_name", None),
    ("connect_timeout", Some("PGCONNECT_TIMEOUT")),
    ("sslmode", Some("PGSSLMODE")),
    ("sslnegotiation", Some("PGSSLNEGOTIATION")),
    ("sslrootcert", Some("PGSSLROOTCERT")),
    ("sslcert", Some("PGSSLCERT")),
    ("sslkey", Some("PGSSLKEY")),
    ("sslcrl", Some("PGSSLCRL")),
    ("sslsni", Some("PGSSLSNI")),
    ("channel_binding", Some("PGCHANNELBINDING")),
    ("target_session_attrs", Some("PGTARGETSESSIONATTRS")),
    ("load_balance_hosts", Some("PGLOADBALANCEHOSTS")),
    ("keepalives", None),
    ("keepalives_idle", None),
    ("keepalives_interval", None),
    ("keepalives_count", None),
    ("tcp_user_timeout", None),
    // Accepted for compatibility with psql's strings; they change nothing
    // sluice does (it always speaks UTF-8 and never compresses or uses GSS).
    ("client_encoding", None),
    ("sslcompression", None),
    ("gssencmode", None),
];

/// Keyword–value pairs of one connection string; the last occurrence wins, as
/// in libpq.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    values: BTreeMap<&'static str, String>,
}

impl Settings {
    /// Parses `text`, a URL or a `key=value` string (empty: all defaults).
    pub(crate) fn parse(text: &str) -> Result<Settings, Error> {
        let text = text.trim();
        let pairs = match text
            .strip_prefix("postgresql://")
            .or_else(|| text.strip_prefix("postgres://"))
        {
            Some(rest) => parse_url(rest)?,
            None => parse_key_values(text)?,
        };
        let mut settings = Settings::default();
        for (key, value) in pairs {
            settings.set(&key, value)?;
        }
        Ok(settings)
    }

    /// Sets `key`, which must be a known keyword.
    pub(crate) fn set(&mut self, key: &str, value: String) -> Result<(), Error> {
        let keyword = KEYWORDS
            .iter()
            .map(|(keyword, _)| *keyword)
            .find(|keyword| *keyword == key)
            .ok_or_else(|| {
                Error::config(format!("invalid connection string: unknown option `{key}`"))
            })?;
        self.values.insert(keyword, value);
        Ok(())
    }

    /// Fills every keyword not given from its environment variable (read by `env`).
    pub(crate) fn with_defaults(mut self, env: impl Fn(&str) -> Option<String>) -> Settings {
        for (keyword, variable) in KEYWORDS {
            if self.values.contains_key(keyword) {
                continue;
            }
            if let Some(value) = variable.and_then(&env) {
                self.values.insert(keyword, value);
            }
        }
        self
    }

    /// Fills every keyword not given from `defaults` (a service's settings).
    pub(crate) fn fill_from(&mut self, defaults: Settings) {
        for (keyword, value) in defaults.values {
            self.values.entry(keyword).or_insert(value);
        }
    }

    /// The value of `keyword`, if given and not empty.
    pub(crate) fn get(&self, keyword: &str) -> Option<&str> {
        self.values
            .get(keyword)
            .map(String::as_str)
            .filter(|value| !value.is_empty())
    }
}

/// The rest of a URL after `postgres://`:
/// `[user[:password]@][host[:port][,host[:port]…]][/dbname][?key=value&…]`.
fn parse_url(rest: &str) -> Result<Vec<(String, String)>, Error> {
    let invalid = |why: &str| Error::config(format!("invalid connection string: {why}"));
    let decode = |text: &str| -> Result<String, Error> {
        percent_decode_str(text)
            .decode_utf8()
            .map(|value| value.into_owned())
            .map_err(|_| invalid("a percent-escape in the URL is not UTF-8"))
    };
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    let (authority, dbname) = match rest.split_once('/') {
        Some((authority, dbname)) => (authority, Some(dbname)),
        None => (rest, None),
    };
    let mut pairs = Vec::new();
    let hosts = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let (user, password) = match userinfo.split_once(':') {
                Some((user, password)) => (user, Some(password)),
                None => (userinfo, None),
            };
            if !user.is_empty() {
                pairs.push(("user".to_owned(), decode(user)?));
            }
            if let Some(password) = password {
                pairs.push(("password".to_owned(), decode(password)?));
            }
            hosts
        }
        None => authority,
    };
    if !hosts.is_empty() {
        let (mut names, mut ports) = (Vec::new(), Vec::new());
        for spec in hosts.split(',') {
            let (host, port) = split_host_port(spec).ok_or_else(|| {
                invalid(&format!(
                    "the host {spec:?} has an unclosed [ of an IPv6 address"
                ))
            })?;
            names.push(decode(host)?);
            ports.push(port.unwrap_or_default().to_owned());
        }
        if names.iter().any(|name| !name.is_empty()) {
            pairs.push(("host".to_owned(), names.join(",")));
        }
        if ports.iter().any(|port| !port.is_empty()) {
            pairs.push(("port".to_owned(), ports.join(",")));
        }
    }
    if let Some(dbname) = dbname.filter(|dbname| !dbname.is_empty()) {
        pairs.push(("dbname".to_owned(), decode(dbname)?));
    }
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
    {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| invalid(&format!("the URL parameter {pair:?} has no `=`")))?;
        let (key, value) = (decode(key)?, decode(value)?);
        // JDBC's spelling, which libpq accepts too.
        if key == "ssl" && value == "true" {
            pairs.push(("sslmode".to_owned(), "require".to_owned()));
            continue;
        }
        pairs.push((key, value));
    }
    Ok(pairs)
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; `None` for an unclosed `[`.
fn split_host_port(spec: &str) -> Option<(&str, Option<&str>)> {
    if let Some(bracketed) = spec.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        return Some((host, after.strip_prefix(':')));
    }
    Some(match spec.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (spec, None),
    })
}

/// `key = value …`: values bare up to whitespace or single-quoted, with `\`
/// escaping the next character in both.
fn parse_key_values(text: &str) -> Result<Vec<(String, String)>, Error> {
    let mut pairs = Vec::new();
    let mut characters = text.chars().peekable();
    loop {
        while characters
            .next_if(|character| character.is_whitespace())
            .is_some()
        {}
        if characters.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(character) =
            characters.next_if(|character| *character != '=' && !character.is_whitespace())
        {
            key.push(character);
        }
        while characters
            .next_if(|character| character.is_whitespace())
            .is_some()
        {}
        if characters.next() != Some('=') {
            return Err(Error::config(format!(
                "invalid connection string: missing \"=\" after {key:?}"
            )));
        }
        while characters
            .next_if(|character| character.is_whitespace())
            .is_some()
        {}
        let mut value = String::new();
        if characters.next_if_eq(&'\'').is_some() {
            loop {
                match characters.next() {
                    Some('\\') => value.extend(characters.next()),
                    Some('\'') => break,
                    Some(character) => value.push(character),
                    None => {
                        return Err(Error::config(format!(
                            "invalid connection string: the value of {key:?} has no closing quote"
                        )))
                    }
                }
            }
        } else {
            while let Some(character) = characters.next_if(|character| !character.is_whitespace()) {
                if character == '\\' {
                    value.extend(characters.next());
                } else {
                    value.push(character);
                }
            }
        }
        pairs.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> Settings {
        Settings::parse(text).unwrap()
    }

    #[test]
    fn urls_split_into_libpq_keywords() {
        let parsed = settings(
            "postgresql://al%40ice:p%3Ass@db1.example:6543,[::1]:5433,db3/sales%2F1?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&application_name=x",
        );
        assert_eq!(parsed.get("user"), Some("al@ice"));
        assert_eq!(parsed.get("password"), Some("p:ss"));
        assert_eq!(parsed.get("host"), Some("db1.example,::1,db3"));
        assert_eq!(parsed.get("port"), Some("6543,5433,"));
        assert_eq!(parsed.get("dbname"), Some("sales/1"));
        assert_eq!(parsed.get("sslmode"), Some("verify-full"));
        assert_eq!(parsed.get("sslrootcert"), Some("/tmp/ca.pem"));
        assert_eq!(settings("postgres://").get("host"), None);
        assert_eq!(
            settings("postgres:///d?host=%2Fsock").get("host"),
            Some("/sock")
        );
        assert_eq!(
            settings("postgres://h/d?ssl=true").get("sslmode"),
            Some("require")
        );
    }

    #[test]
    fn key_value_strings_take_quotes_and_escapes() {
        let parsed =
            settings("host = 'a b' port=5433 password='it\\'s' sslkey=/k\\ ey dbname= d user=''");
        assert_eq!(parsed.get("host"), Some("a b"));
        assert_eq!(parsed.get("port"), Some("5433"));
        assert_eq!(parsed.get("password"), Some("it's"));
        assert_eq!(parsed.get("sslkey"), Some("/k ey"));
        assert_eq!(parsed.get("dbname"), Some("d"));
        assert_eq!(parsed.get("user"), None, "empty means not given");
        assert_eq!(settings("sslmode=a sslmode=b").get("sslmode"), Some("b"));
    }

    #[test]
    fn unknown_keywords_and_broken_strings_are_refused() {
        for (text, message) in [
            (
                "postgres://a@b/c?frobnicate=1",
                "unknown option `frobnicate`",
            ),
            ("host=b frobnicate=1", "unknown option `frobnicate`"),
            ("host", "missing \"=\" after \"host\""),
            ("host='b", "has no closing quote"),
            ("postgres://[::1/d", "unclosed ["),
            ("postgres://h/d?sslmode", "has no `=`"),
        ] {
            let error = Settings::parse(text).unwrap_err().to_string();
            assert!(error.contains(message), "{text}: {error}");
        }
    }

    #[test]
    fn the_environment_fills_what_the_string_leaves_out() {
        let parsed = settings("host=h").with_defaults(|variable| match variable {
            "PGHOST" => Some("ignored".into()),
            "PGSSLMODE" => Some("require".into()),
            _ => None,
        });
        assert_eq!(parsed.get("host"), Some("h"));
        assert_eq!(parsed.get("sslmode"), Some("require"));
    }
}
