//! The server's configuration file: databases, named queries, tokens, limits.
//!
//! The file is TOML. Everything is checked when it is loaded, before the port opens,
//! and the first problem is reported as one line naming the file, the line and the
//! key (`sluice.toml:12: queries.by_status.params[1].type: unknown type "tiemstamp"…`).
//! `${NAME}` in database URLs, SQLite paths and token values is replaced by the
//! environment variable `NAME`, so secrets stay out of the file; a variable that is
//! not set is an error, never an empty password.
//!
//! ```toml
//! [server]
//! listen = "127.0.0.1:8080"        # --listen wins
//! shutdown_grace = "30s"           # how long in-flight streams may finish after SIGTERM
//! header_read_timeout = "10s"      # a request's head must arrive within this
//! keep_alive_timeout = "60s"       # an idle kept-alive connection is closed after this
//! max_connections = 10000          # open connections per listener (HTTP, Flight); more are closed at once (default 10000, less when the open-files limit is lower)
//! threads = 8                      # worker threads (--threads wins); default: the CPUs this process may use
//! max_query_string = "8KiB"        # longer query strings get 414 (default 8KiB)
//! max_body = "1GiB"                # POST /tables and batch bodies; larger ones get 413 (default 1GiB)
//! max_stream_duration = "1h"       # a response body running longer is aborted, its query cancelled (default 1h)
//! idle_write_timeout = "60s"       # ... as is one whose client takes nothing for this long (default 60s)
//! tls_cert = "/etc/sluice/server.crt"  # HTTPS (HTTP/2 and HTTP/1.1): the certificate chain, PEM
//! tls_key = "/etc/sluice/server.key"   # and its key; both re-read on SIGHUP
//!
//! [databases.main]
//! url = "postgres://app:${APP_DB_PASSWORD}@db.internal/app"   # or: sqlite = "/path/file.db"
//! pool_size = 8                    # connections (SQLite: concurrent queries)
//! pool_wait = "2s"                 # wait this long for a free one, then 503
//!
//! [queries.payments_by_status]
//! description = "Payments in one status since a time"
//! sql = "select * from payment_events where status = $1 and created_at >= $2::timestamptz"
//! params = [
//!   { name = "status", type = "text", required = true },
//!   { name = "since", type = "timestamptz", default = "2024-01-01T00:00:00Z" },
//! ]
//! statement_timeout = "30s"
//! max_rows = 5000000
//! max_bytes = "2GiB"
//! lob = "inline"                   # PostgreSQL: stream large objects (oid columns) in place of their numbers (default "oid")
//! max_stream_duration = "10m"      # this query's own (default: [server]'s)
//! idle_write_timeout = "30s"       # this query's own (default: [server]'s)
//!
//! [sql]                            # POST /sql: off unless this table exists
//! database = "main"                # its login must be unprivileged (see crate::checks)
//! role = "reporting_reader"        # SET ROLE for each request (optional)
//! statement_timeout = "10s"
//!
//! [tables.payment_events]          # POST /tables/payment_events: bulk ingest (scope "write")
//! database = "main"                # PostgreSQL or MariaDB/MySQL (SQLite is read-only)
//! table = "public.payment_events"  # the table in the database; default: the key
//! statement_timeout = "10m"        # default: none
//! max_line_bytes = "1MiB"          # longest NDJSON line / CSV record; default 64MiB
//! max_body = "10GiB"               # this table's own body limit (default: [server] max_body)
//!
//! [[tokens]]
//! name = "reporting"
//! sha256 = "…64 hex digits…"       # or: token = "${REPORTING_TOKEN}"
//! queries = ["payments_by_status"] # or ["*"]
//! scopes = ["sql", "write"]
//! max_concurrent = 4               # requests of this token in flight at once; more get 429 (default: no limit)
//! rate = 10                        # requests per second on average; more get 429 (default: no limit)
//! burst = 20                       # requests at once after a quiet spell (default: rate, rounded up)
//! ```
//!
//! Parameters are positional: the n-th entry of `params` is `$n` in PostgreSQL SQL
//! and `?n` in SQLite SQL.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use sluice_core::connect::{Drivers, Target};
use sluice_core::parse_duration;
use sluice_formats::{Declared, ParamType, Signature};
use toml::Spanned;

mod flight;

pub use flight::{FlightConfig, DEFAULT_MAX_PLANS_PER_TOKEN, DEFAULT_PARTITIONS, MAX_PARTITIONS};

use crate::throttle::{default_burst, TokenLimits};
use crate::tls::TlsFiles;

/// The default address, loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The default `[server] header_read_timeout`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The default `[server] keep_alive_timeout`.
pub const DEFAULT_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(60);

/// The default `[server] max_query_string`: far beyond any named query's
/// parameters, small enough that a query string cannot be used to fill memory.
pub const DEFAULT_MAX_QUERY_STRING: usize = 8 << 10;

/// The default `[server] max_body` for uploads and batches (streamed, so the
/// limit is about abuse, not memory).
pub const DEFAULT_MAX_BODY: u64 = 1 << 30;

/// The default `[server] max_stream_duration`.
pub const DEFAULT_MAX_STREAM_DURATION: Duration = Duration::from_secs(3600);

/// The default `[server] idle_write_timeout`.
pub const DEFAULT_IDLE_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// A configuration problem: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {key}: {message}")]
pub struct ConfigError {
    /// The file (or a name for configuration built in memory).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// The offending key, as a dotted path.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// Limits applied to one query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// The database cancels the statement after this long.
    pub statement_timeout: Option<Duration>,
    /// The response is aborted (never silently cut) past this many rows.
    pub max_rows: Option<u64>,
    /// The response is aborted past this many bytes (before compression).
    pub max_bytes: Option<u64>,
    /// A response body running longer is aborted (`None`: `[server]`'s).
    pub max_stream_duration: Option<Duration>,
    /// A response body whose client takes nothing for this long is aborted
    /// (`None`: `[server]`'s).
    pub idle_write_timeout: Option<Duration>,
}

impl Limits {
    /// The row and byte limits, as the streaming engine applies them.
    pub fn transfer(&self) -> sluice_core::Limits {
        sluice_core::Limits {
            max_rows: self.max_rows,
            max_bytes: self.max_bytes,
        }
    }
}

impl Config {
    /// A response's time limits: the query's own `limits`, else the server's.
    pub fn timing(&self, limits: &Limits) -> crate::stream::Timing {
        crate::stream::Timing {
            max_duration: limits
                .max_stream_duration
                .unwrap_or(self.max_stream_duration),
            idle_write_timeout: limits.idle_write_timeout.unwrap_or(self.idle_write_timeout),
        }
    }
}

/// One database and its pool.
#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    /// Its name in the file.
    pub name: String,
    /// Where it is, parsed by its database's driver.
    pub target: Arc<dyn Target>,
    /// Connections (PostgreSQL) or concurrent queries (SQLite).
    pub pool_size: usize,
    /// How long a request waits for a free connection before a 503.
    pub pool_wait: Duration,
    /// SHA-256 of everything above as written (the URL after `${…}`
    /// substitution): equal in two configurations when the pool can be kept
    /// across a reload. A hash, so the password is not held twice in clear.
    pub fingerprint: [u8; 32],
}

/// A typed parameter of a named query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSpec {
    /// The query-string key.
    pub name: String,
    /// Its type; values are checked against it before the query runs.
    pub ty: ParamType,
    /// A request without it is a 400.
    pub required: bool,
    /// The value used when the request does not give one (SQL NULL when absent).
    pub default: Option<String>,
    /// For the OpenAPI document.
    pub description: Option<String>,
    /// The line of its `type` in the configuration file, for start-up errors.
    pub line: usize,
}

impl ParamSpec {
    /// The declaration request values are checked against.
    pub fn declared(&self) -> Declared {
        Declared {
            name: self.name.clone(),
            ty: Some(self.ty),
            required: self.required,
            default: self.default.clone(),
        }
    }
}

/// A named query.
#[derive(Debug, Clone)]
pub struct QueryConfig {
    /// Its name, the last part of `/queries/{name}`.
    pub name: String,
    /// The database it runs on.
    pub database: String,
    /// The SQL, with `$n` (PostgreSQL) or `?n` (SQLite) placeholders.
    pub sql: String,
    /// For the OpenAPI document.
    pub description: Option<String>,
    /// The parameters, in placeholder order.
    pub params: Vec<ParamSpec>,
    /// How request values bind to them (from `params`).
    pub signature: Signature,
    /// Its limits.
    pub limits: Limits,
    /// `lob = "inline"`: large objects (PostgreSQL `oid` columns) are read and
    /// streamed in the place of their numbers.
    pub inline_large_objects: bool,
    /// How Arrow Flight cuts it into parts that read one snapshot
    /// (`split_by`, or the storage of a `table` query); `None`: one part.
    pub split: Option<QuerySplit>,
    /// The line of its `sql` in the configuration file, for start-up errors.
    pub line: usize,
}

/// How a named query is cut into parts ([`sluice_core::split`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuerySplit {
    /// By ranges of this table's storage (`table = "…"` without `split_by`).
    Storage {
        /// The table, as the database knows it.
        table: String,
    },
    /// By ranges of this integer column's values (`split_by = "…"`).
    Column(String),
}

/// Which named queries a token may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// All of them (`"*"`).
    All,
    /// These.
    Only(Vec<String>),
}

/// A bearer token. Only its SHA-256 is kept.
#[derive(Clone)]
pub struct TokenConfig {
    /// A name for logs.
    pub name: String,
    /// SHA-256 of the token.
    pub sha256: [u8; 32],
    /// The named queries it may run.
    pub queries: Allowed,
    /// Extra scopes (`sql` for `POST /sql`).
    pub scopes: Vec<String>,
    /// How many requests it may have in flight, and how often it may ask.
    pub limits: TokenLimits,
}

impl fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenConfig")
            .field("name", &self.name)
            .field("queries", &self.queries)
            .field("scopes", &self.scopes)
            .field("limits", &self.limits)
            .finish()
    }
}

/// `POST /sql`.
#[derive(Debug, Clone)]
pub struct SqlConfig {
    /// The database ad-hoc queries run on.
    pub database: String,
    /// The role each request runs as (`SET LOCAL ROLE`), if not the login.
    pub role: Option<String>,
    /// Their limits (a statement timeout always applies).
    pub limits: Limits,
    /// The line of `[sql]` in the configuration file, for start-up errors.
    pub line: usize,
}

/// A table open to `POST /tables/{name}`.
#[derive(Debug, Clone)]
pub struct TableConfig {
    /// Its name in the file, the last part of `/tables/{name}`.
    pub name: String,
    /// The (PostgreSQL) database it is in.
    pub database: String,
    /// The table as the database knows it (optionally schema-qualified).
    pub table: String,
    /// The database cancels an import that runs longer.
    pub statement_timeout: Option<Duration>,
    /// Longest NDJSON line or CSV record accepted, in bytes.
    pub max_line_bytes: usize,
    /// Largest body accepted, in bytes (`None`: `[server] max_body`).
    pub max_body: Option<u64>,
}

/// The default for `max_line_bytes`: 64 MiB, as `sluice import`.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 20;

/// The whole, checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file's name as errors give it.
    pub file: String,
    /// `[server] listen`, if given.
    pub listen: Option<SocketAddr>,
    /// How long in-flight streams may finish after SIGTERM.
    pub shutdown_grace: Duration,
    /// How long a request's head may take to arrive, from the connection being
    /// accepted or (kept alive) from the request's first byte.
    pub header_read_timeout: Duration,
    /// How long a kept-alive connection may stay idle between requests.
    pub keep_alive_timeout: Duration,
    /// `[server] max_connections`: open connections per listener, if given
    /// (see [`crate::accepting::cap_for`] for the cap in force).
    pub max_connections: Option<usize>,
    /// `[server] tls_cert` and `tls_key`: serve HTTPS with these files.
    pub tls: Option<TlsFiles>,
    /// `[server] threads`: the runtime's worker threads, if given.
    pub threads: Option<usize>,
    /// Longest query string accepted, in bytes.
    pub max_query_string: usize,
    /// Largest body of `POST /tables` and batches, unless a table says otherwise.
    pub max_body: u64,
    /// Longest a response body may run, unless its query says otherwise.
    pub max_stream_duration: Duration,
    /// Longest a response body may wait for its client, unless its query says otherwise.
    pub idle_write_timeout: Duration,
    /// Databases by name.
    pub databases: BTreeMap<String, DatabaseConfig>,
    /// Named queries by name.
    pub queries: BTreeMap<String, QueryConfig>,
    /// Bearer tokens; none means: no authentication, loopback only.
    pub tokens: Vec<TokenConfig>,
    /// `POST /sql`, when enabled.
    pub sql: Option<SqlConfig>,
    /// Tables open to `POST /tables/{name}`, by name.
    pub tables: BTreeMap<String, TableConfig>,
    /// `[flight]`: Arrow Flight beside HTTP, when enabled.
    pub flight: Option<FlightConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    databases: BTreeMap<String, Spanned<RawDatabase>>,
    #[serde(default)]
    queries: BTreeMap<String, Spanned<RawQuery>>,
    #[serde(default)]
    tokens: Vec<Spanned<RawToken>>,
    sql: Option<Spanned<RawSql>>,
    #[serde(default)]
    tables: BTreeMap<String, Spanned<RawTable>>,
    flight: Option<Spanned<flight::RawFlight>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    database: Option<Spanned<String>>,
    table: Option<Spanned<String>>,
    statement_timeout: Option<Spanned<String>>,
    max_line_bytes: Option<Spanned<toml::Value>>,
    max_body: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Option<Spanned<String>>,
    shutdown_grace: Option<Spanned<String>>,
    header_read_timeout: Option<Spanned<String>>,
    keep_alive_timeout: Option<Spanned<String>>,
    max_connections: Option<Spanned<i64>>,
    tls_cert: Option<Spanned<String>>,
    tls_key: Option<Spanned<String>>,
    threads: Option<Spanned<i64>>,
    max_query_string: Option<Spanned<toml::Value>>,
    max_body: Option<Spanned<toml::Value>>,
    max_stream_duration: Option<Spanned<String>>,
    idle_write_timeout: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDatabase {
    url: Option<Spanned<String>>,
    sqlite: Option<Spanned<String>>,
    pool_size: Option<Spanned<i64>>,
    pool_wait: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuery {
    database: Option<Spanned<String>>,
    sql: Option<Spanned<String>>,
    table: Option<Spanned<String>>,
    split_by: Option<Spanned<String>>,
    description: Option<String>,
    #[serde(default)]
    params: Vec<Spanned<RawParam>>,
    statement_timeout: Option<Spanned<String>>,
    max_rows: Option<Spanned<i64>>,
    max_bytes: Option<Spanned<toml::Value>>,
    max_stream_duration: Option<Spanned<String>>,
    idle_write_timeout: Option<Spanned<String>>,
    lob: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParam {
    name: Spanned<String>,
    #[serde(rename = "type")]
    ty: Spanned<String>,
    #[serde(default)]
    required: bool,
    default: Option<Spanned<toml::Value>>,
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    name: Spanned<String>,
    sha256: Option<Spanned<String>>,
    token: Option<Spanned<String>>,
    #[serde(default)]
    queries: Vec<Spanned<String>>,
    #[serde(default)]
    scopes: Vec<Spanned<String>>,
    max_concurrent: Option<Spanned<i64>>,
    rate: Option<Spanned<toml::Value>>,
    burst: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSql {
    database: Option<Spanned<String>>,
    role: Option<Spanned<String>>,
    statement_timeout: Option<Spanned<String>>,
    max_rows: Option<Spanned<i64>>,
    max_bytes: Option<Spanned<toml::Value>>,
    max_stream_duration: Option<Spanned<String>>,
    idle_write_timeout: Option<Spanned<String>>,
}

/// The configuration's text: turns byte offsets into line numbers and builds errors.
struct ConfigText<'a> {
    file: &'a str,
    text: &'a str,
}

impl ConfigText<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .bytes()
            .filter(|&byte| byte == b'\n')
            .count()
            + 1
    }

    fn error(&self, span: Range<usize>, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            line: self.line(span.start),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// A TOML syntax or shape error, with the key read off the offending line.
    fn parse_error(&self, error: &toml::de::Error) -> ConfigError {
        let span = error.span().unwrap_or(0..0);
        let line = self.line(span.start);
        let text = self.text.lines().nth(line - 1).unwrap_or("");
        let key = match text.split_once('=') {
            Some((key, _)) if !text.trim_start().starts_with('[') => key.trim().to_owned(),
            _ => text.trim().to_owned(),
        };
        ConfigError {
            file: self.file.to_owned(),
            line,
            key,
            message: error.message().trim().to_owned(),
        }
    }

    /// Replaces each `${NAME}` in a string value by the environment variable.
    fn substitute(&self, value: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        let text = value.get_ref();
        let mut output = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(start) = rest.find("${") {
            output.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(self.error(value.span(), key, "unterminated ${ in value"));
            };
            let name = &after[..end];
            match std::env::var(name) {
                Ok(found) => output.push_str(&found),
                Err(_) => {
                    return Err(self.error(
                        value.span(),
                        key,
                        format!("environment variable {name} is not set"),
                    ))
                }
            }
            rest = &after[end + 1..];
        }
        output.push_str(rest);
        Ok(output)
    }
}

impl ConfigText<'_> {
    /// A byte count (see [`parse_bytes`]) at `key`.
    fn size(&self, value: &Spanned<toml::Value>, key: &str) -> Result<u64, ConfigError> {
        parse_bytes(value.get_ref()).map_err(|message| self.error(value.span(), key, message))
    }

    /// A duration (see [`parse_duration`]) at `key`.
    fn duration(&self, value: &Spanned<String>, key: &str) -> Result<Duration, ConfigError> {
        parse_duration(value.get_ref())
            .map_err(|error| self.error(value.span(), key, error.to_string()))
    }

    /// A count between 1 and `most` at `key`; `None` when absent.
    fn count(
        &self,
        value: &Option<Spanned<i64>>,
        key: &str,
        most: usize,
    ) -> Result<Option<usize>, ConfigError> {
        match value {
            None => Ok(None),
            Some(count) if (1..=most as i64).contains(count.get_ref()) => {
                Ok(Some(*count.get_ref() as usize))
            }
            Some(count) => {
                Err(self.error(count.span(), key, format!("must be between 1 and {most}")))
            }
        }
    }

    /// A connection timeout: a duration above zero, `default` when absent.
    fn timeout(
        &self,
        value: &Option<Spanned<String>>,
        key: &str,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        let Some(value) = value else {
            return Ok(default);
        };
        match parse_duration(value.get_ref()) {
            Ok(duration) if duration.is_zero() => {
                Err(self.error(value.span(), key, "must be more than zero"))
            }
            Ok(duration) => Ok(duration),
            Err(error) => Err(self.error(value.span(), key, error.to_string())),
        }
    }
}

/// A byte count: an integer, or a string such as `"512KiB"`, `"64MiB"`, `"2GB"`.
fn parse_bytes(value: &toml::Value) -> Result<u64, String> {
    let bad = || format!("{value} is not a size (e.g. 1048576, \"64MiB\", \"2GB\")");
    match value {
        toml::Value::Integer(bytes) if *bytes > 0 => Ok(*bytes as u64),
        toml::Value::String(text) => {
            let text = text.trim();
            let split = text
                .find(|character: char| !character.is_ascii_digit())
                .unwrap_or(text.len());
            let (number, unit) = text.split_at(split);
            let number: u64 = number.parse().map_err(|_| bad())?;
            let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
                "" | "b" => 1,
                "kb" => 1_000,
                "kib" => 1 << 10,
                "mb" => 1_000_000,
                "mib" => 1 << 20,
                "gb" => 1_000_000_000,
                "gib" => 1 << 30,
                "tb" => 1_000_000_000_000,
                "tib" => 1 << 40,
                _ => return Err(bad()),
            };
            number.checked_mul(factor).ok_or_else(bad)
        }
        _ => Err(bad()),
    }
}

/// A table name: identifiers joined by dots (`payment_events`, `public.payment_events`).
fn is_qualified_identifier(name: &str) -> bool {
    name.split('.').all(is_identifier) && name.split('.').count() <= 3
}

fn is_identifier(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && characters.all(|character| character.is_ascii_alphanumeric() || character == '_')
}

impl Config {
    /// Reads and checks a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError {
            file: path.display().to_string(),
            line: 0,
            key: "(file)".into(),
            message: format!("cannot read: {error}"),
        })?;
        Config::parse(&text, &path.display().to_string())
    }

    /// Checks configuration text; `file` names it in errors. Relative SQLite and TLS paths
    /// are taken relative to the current directory.
    ///
    /// Sections are read in the order they refer to each other: databases before
    /// the queries, `[sql]` and tables that name them, queries before the tokens
    /// that allow them, tokens before the sections that need a token's scope.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        Config::parse_with(text, file, &sluice_drivers::all())
    }

    /// [`Config::parse`] with the databases `drivers` know.
    pub fn parse_with(text: &str, file: &str, drivers: &Drivers) -> Result<Config, ConfigError> {
        let source = ConfigText { file, text };
        let raw: RawFile = toml::from_str(text).map_err(|error| source.parse_error(&error))?;
        let server = server_section(&source, &raw.server)?;
        let databases = databases_section(&source, &raw.databases, drivers)?;
        let queries = queries_section(&source, &raw.queries, &databases)?;
        let tokens = tokens_section(&source, &raw.tokens, &queries)?;
        let sql = match &raw.sql {
            Some(sql) => Some(sql_section(&source, sql, &databases, &tokens)?),
            None => None,
        };
        let tables = tables_section(&source, &raw.tables, &databases, &tokens)?;
        let flight = match &raw.flight {
            Some(flight) => Some(flight::flight_section(&source, flight)?),
            None => None,
        };
        Ok(Config {
            file: file.to_owned(),
            listen: server.listen,
            shutdown_grace: server.shutdown_grace,
            header_read_timeout: server.header_read_timeout,
            keep_alive_timeout: server.keep_alive_timeout,
            max_connections: server.max_connections,
            tls: server.tls,
            threads: server.threads,
            max_query_string: server.max_query_string,
            max_body: server.max_body,
            max_stream_duration: server.max_stream_duration,
            idle_write_timeout: server.idle_write_timeout,
            databases,
            queries,
            tokens,
            sql,
            tables,
            flight,
        })
    }
}

/// `[server]`, checked.
struct ServerSection {
    listen: Option<SocketAddr>,
    shutdown_grace: Duration,
    header_read_timeout: Duration,
    keep_alive_timeout: Duration,
    max_connections: Option<usize>,
    tls: Option<TlsFiles>,
    threads: Option<usize>,
    max_query_string: usize,
    max_body: u64,
    max_stream_duration: Duration,
    idle_write_timeout: Duration,
}

/// The largest `[server] max_connections`: beyond any open-files limit in use.
pub const MAX_CONNECTIONS: usize = 1 << 24;

/// The most worker threads a configuration may ask for: far beyond any
/// machine's cores, low enough that a typo cannot exhaust the process.
pub const MAX_THREADS: usize = 1024;

fn server_section(source: &ConfigText<'_>, raw: &RawServer) -> Result<ServerSection, ConfigError> {
    let listen = match &raw.listen {
        Some(listen) => Some(listen.get_ref().parse::<SocketAddr>().map_err(|_| {
            source.error(
                listen.span(),
                "server.listen",
                format!(
                    "{:?} is not an address such as \"127.0.0.1:8080\"",
                    listen.get_ref()
                ),
            )
        })?),
        None => None,
    };
    let shutdown_grace = match &raw.shutdown_grace {
        Some(grace) => source.duration(grace, "server.shutdown_grace")?,
        None => Duration::from_secs(30),
    };
    Ok(ServerSection {
        listen,
        shutdown_grace,
        header_read_timeout: source.timeout(
            &raw.header_read_timeout,
            "server.header_read_timeout",
            DEFAULT_HEADER_READ_TIMEOUT,
        )?,
        keep_alive_timeout: source.timeout(
            &raw.keep_alive_timeout,
            "server.keep_alive_timeout",
            DEFAULT_KEEP_ALIVE_TIMEOUT,
        )?,
        max_connections: source.count(
            &raw.max_connections,
            "server.max_connections",
            MAX_CONNECTIONS,
        )?,
        tls: tls_files(source, raw)?,
        max_query_string: match &raw.max_query_string {
            Some(size) => {
                usize::try_from(source.size(size, "server.max_query_string")?).unwrap_or(usize::MAX)
            }
            None => DEFAULT_MAX_QUERY_STRING,
        },
        max_body: match &raw.max_body {
            Some(size) => source.size(size, "server.max_body")?,
            None => DEFAULT_MAX_BODY,
        },
        max_stream_duration: source.timeout(
            &raw.max_stream_duration,
            "server.max_stream_duration",
            DEFAULT_MAX_STREAM_DURATION,
        )?,
        idle_write_timeout: source.timeout(
            &raw.idle_write_timeout,
            "server.idle_write_timeout",
            DEFAULT_IDLE_WRITE_TIMEOUT,
        )?,
        threads: source.count(&raw.threads, "server.threads", MAX_THREADS)?,
    })
}

/// `tls_cert` and `tls_key`: both or neither. The files are read when the
/// server starts ([`crate::tls::ServerTls::load`]), not here.
fn tls_files(source: &ConfigText<'_>, raw: &RawServer) -> Result<Option<TlsFiles>, ConfigError> {
    match (&raw.tls_cert, &raw.tls_key) {
        (None, None) => Ok(None),
        (Some(certificate), Some(key)) => Ok(Some(TlsFiles {
            certificate: source.substitute(certificate, "server.tls_cert")?.into(),
            key: source.substitute(key, "server.tls_key")?.into(),
        })),
        (Some(certificate), None) => Err(source.error(
            certificate.span(),
            "server.tls_cert",
            "tls_cert needs tls_key, the certificate's private key",
        )),
        (None, Some(key)) => Err(source.error(
            key.span(),
            "server.tls_key",
            "tls_key needs tls_cert, the certificate chain it belongs to",
        )),
    }
}

/// `[databases.NAME]`: at least one.
fn databases_section(
    source: &ConfigText<'_>,
    raw: &BTreeMap<String, Spanned<RawDatabase>>,
    drivers: &Drivers,
) -> Result<BTreeMap<String, DatabaseConfig>, ConfigError> {
    let mut databases = BTreeMap::new();
    for (name, database) in raw {
        databases.insert(
            name.clone(),
            database_entry(source, name, database, drivers)?,
        );
    }
    if databases.is_empty() {
        return Err(source.error(
            0..0,
            "databases",
            "no database is configured: add a [databases.NAME] table",
        ));
    }
    Ok(databases)
}

fn database_entry(
    source: &ConfigText<'_>,
    name: &str,
    database: &Spanned<RawDatabase>,
    drivers: &Drivers,
) -> Result<DatabaseConfig, ConfigError> {
    let key = format!("databases.{name}");
    let span = database.span();
    let database = database.get_ref();
    let url = match (&database.url, &database.sqlite) {
        (Some(url), None) => (url, source.substitute(url, &format!("{key}.url"))?, "url"),
        // A SQLite file by its path, relative to the current directory.
        (None, Some(path)) => {
            let path_text = source.substitute(path, &format!("{key}.sqlite"))?;
            (path, format!("sqlite://{path_text}"), "sqlite")
        }
        _ => {
            return Err(source.error(
                span,
                &key,
                "give exactly one of url = \"postgres://…\" or sqlite = \"path\"",
            ))
        }
    };
    let (spanned, url_text, field) = url;
    let target = drivers.open(&url_text).map_err(|error| {
        source.error(spanned.span(), &format!("{key}.{field}"), error.to_string())
    })?;
    let pool_size = source
        .count(&database.pool_size, &format!("{key}.pool_size"), 10_000)?
        .unwrap_or(8);
    let pool_wait = match &database.pool_wait {
        Some(wait) => source.duration(wait, &format!("{key}.pool_wait"))?,
        None => Duration::from_secs(2),
    };
    let fingerprint =
        Sha256::digest(format!("{url_text}\n{pool_size}\n{}", pool_wait.as_nanos()).as_bytes())
            .into();
    Ok(DatabaseConfig {
        name: name.to_owned(),
        target,
        pool_size,
        pool_wait,
        fingerprint,
    })
}

/// The database a section names, or the only one there is.
fn database_for(
    source: &ConfigText<'_>,
    databases: &BTreeMap<String, DatabaseConfig>,
    given: &Option<Spanned<String>>,
    key: &str,
    span: Range<usize>,
) -> Result<String, ConfigError> {
    match given {
        Some(name) if databases.contains_key(name.get_ref()) => Ok(name.get_ref().clone()),
        Some(name) => Err(source.error(
            name.span(),
            key,
            format!("no database named {:?} is configured", name.get_ref()),
        )),
        None if databases.len() == 1 => Ok(databases.keys().next().cloned().unwrap_or_default()),
        None => Err(source.error(
            span,
            key,
            "several databases are configured: say which one with database = \"NAME\"",
        )),
    }
}

/// `[queries.NAME]`.
fn queries_section(
    source: &ConfigText<'_>,
    raw: &BTreeMap<String, Spanned<RawQuery>>,
    databases: &BTreeMap<String, DatabaseConfig>,
) -> Result<BTreeMap<String, QueryConfig>, ConfigError> {
    let mut queries = BTreeMap::new();
    for (name, query) in raw {
        queries.insert(name.clone(), query_entry(source, name, query, databases)?);
    }
    Ok(queries)
}

fn query_entry(
    source: &ConfigText<'_>,
    name: &str,
    query: &Spanned<RawQuery>,
    databases: &BTreeMap<String, DatabaseConfig>,
) -> Result<QueryConfig, ConfigError> {
    let key = format!("queries.{name}");
    let span = query.span();
    if !is_identifier(name) {
        return Err(source.error(span, &key, "query names are letters, digits and _"));
    }
    let query = query.get_ref();
    let database = database_for(
        source,
        databases,
        &query.database,
        &format!("{key}.database"),
        span.clone(),
    )?;
    let (sql, sql_span) = query_sql(source, &key, span.clone(), query)?;
    let mut params: Vec<ParamSpec> = Vec::new();
    for (index, param) in query.params.iter().enumerate() {
        let key = format!("{key}.params[{index}]");
        params.push(param_entry(source, &key, param.get_ref(), &params)?);
    }
    let limits = limits(
        source,
        RawLimits {
            statement_timeout: &query.statement_timeout,
            max_rows: &query.max_rows,
            max_bytes: &query.max_bytes,
            max_stream_duration: &query.max_stream_duration,
            idle_write_timeout: &query.idle_write_timeout,
        },
        &key,
    )?;
    let inline_large_objects = match &query.lob {
        None => false,
        Some(lob) => match lob.get_ref().as_str() {
            "oid" => false,
            "inline" if databases[&database].target.has_large_objects() => true,
            "inline" => {
                return Err(source.error(
                    lob.span(),
                    &format!("{key}.lob"),
                    format!(
                        "database {database:?} is {}, which has no large objects to inline",
                        databases[&database].target.product()
                    ),
                ))
            }
            other => {
                return Err(source.error(
                    lob.span(),
                    &format!("{key}.lob"),
                    format!("expected \"oid\" or \"inline\", not {other:?}"),
                ))
            }
        },
    };
    let split = query_split(source, &key, query, &params, &databases[&database])?;
    Ok(QueryConfig {
        name: name.to_owned(),
        database,
        sql,
        split,
        description: query.description.clone(),
        signature: Signature::new(params.iter().map(ParamSpec::declared).collect()),
        params,
        limits,
        inline_large_objects,
        line: source.line(sql_span.start),
    })
}

/// A query's SQL: its `sql`, or the whole of its `table`; and where it is.
fn query_sql(
    source: &ConfigText<'_>,
    key: &str,
    span: Range<usize>,
    query: &RawQuery,
) -> Result<(String, Range<usize>), ConfigError> {
    match (&query.sql, &query.table) {
        (Some(sql), None) if sql.get_ref().trim().is_empty() => {
            Err(source.error(sql.span(), &format!("{key}.sql"), "the SQL is empty"))
        }
        (Some(sql), None) => Ok((sql.get_ref().clone(), sql.span())),
        (None, Some(table)) if is_qualified_identifier(table.get_ref()) => {
            Ok((format!("select * from {}", table.get_ref()), table.span()))
        }
        (None, Some(table)) => Err(source.error(
            table.span(),
            &format!("{key}.table"),
            "a table is named by letters, digits and _, optionally after its schema and a dot",
        )),
        _ => Err(source.error(
            span,
            key,
            "give exactly one of sql = \"…\" or table = \"…\" (every row of a table)",
        )),
    }
}

/// `split_by`, or the storage of a `table` query on a database that splits
/// reads: how Flight cuts the query into parts.
fn query_split(
    source: &ConfigText<'_>,
    key: &str,
    query: &RawQuery,
    params: &[ParamSpec],
    database: &DatabaseConfig,
) -> Result<Option<QuerySplit>, ConfigError> {
    if let (Some(table), false) = (&query.table, params.is_empty()) {
        return Err(source.error(
            table.span(),
            &format!("{key}.params"),
            "a table query takes no parameters: write the SQL with sql = \"…\"",
        ));
    }
    let splits = database.target.splits_reads();
    match (&query.split_by, &query.table) {
        (Some(column), _) if !splits => Err(source.error(
            column.span(),
            &format!("{key}.split_by"),
            format!(
                "database {:?} is {}, which cannot read parts of one snapshot in parallel",
                database.name,
                database.target.product()
            ),
        )),
        (Some(column), _) if !is_identifier(column.get_ref()) => Err(source.error(
            column.span(),
            &format!("{key}.split_by"),
            "a column is named by letters, digits and _",
        )),
        (Some(column), _) => Ok(Some(QuerySplit::Column(column.get_ref().clone()))),
        (None, Some(table)) if splits => Ok(Some(QuerySplit::Storage {
            table: table.get_ref().clone(),
        })),
        (None, _) => Ok(None),
    }
}

/// One of a query's `params`, after `earlier` ones; `key` is its dotted path.
fn param_entry(
    source: &ConfigText<'_>,
    key: &str,
    param: &RawParam,
    earlier: &[ParamSpec],
) -> Result<ParamSpec, ConfigError> {
    let name = param.name.get_ref();
    if !is_identifier(name) || crate::app::RESERVED_PARAMETERS.contains(&name.as_str()) {
        return Err(source.error(
            param.name.span(),
            &format!("{key}.name"),
            format!(
                "{name:?} cannot be a parameter name (letters, digits and _; not \"format\" or \"complete\", which the server reads itself)"
            ),
        ));
    }
    if earlier.iter().any(|earlier| &earlier.name == name) {
        return Err(source.error(
            param.name.span(),
            &format!("{key}.name"),
            format!("parameter {name:?} is declared twice"),
        ));
    }
    let ty: ParamType = param
        .ty
        .get_ref()
        .parse()
        .map_err(|message| source.error(param.ty.span(), &format!("{key}.type"), message))?;
    let default = match &param.default {
        Some(_) if param.required => {
            return Err(source.error(
                param.name.span(),
                &format!("{key}.default"),
                "a required parameter has no default",
            ))
        }
        Some(value) => {
            let text = match value.get_ref() {
                toml::Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            ty.parse(&text).map_err(|message| {
                source.error(value.span(), &format!("{key}.default"), message)
            })?;
            Some(text)
        }
        None => None,
    };
    Ok(ParamSpec {
        name: name.clone(),
        ty,
        required: param.required,
        default,
        description: param.description.clone(),
        line: source.line(param.ty.span().start),
    })
}

/// `[[tokens]]`: each different from the others.
fn tokens_section(
    source: &ConfigText<'_>,
    raw: &[Spanned<RawToken>],
    queries: &BTreeMap<String, QueryConfig>,
) -> Result<Vec<TokenConfig>, ConfigError> {
    let mut tokens: Vec<TokenConfig> = Vec::new();
    for (index, token) in raw.iter().enumerate() {
        let key = format!("tokens[{index}]");
        tokens.push(token_entry(source, &key, token, queries, &tokens)?);
    }
    Ok(tokens)
}

/// One of `[[tokens]]`, after `earlier` ones, which it must differ from.
fn token_entry(
    source: &ConfigText<'_>,
    key: &str,
    token: &Spanned<RawToken>,
    queries: &BTreeMap<String, QueryConfig>,
    earlier: &[TokenConfig],
) -> Result<TokenConfig, ConfigError> {
    let span = token.span();
    let token = token.get_ref();
    let sha256 = token_hash(source, key, token, span.clone())?;
    if let Some(index) = earlier.iter().position(|earlier| earlier.sha256 == sha256) {
        let (field, value_span) = match (&token.sha256, &token.token) {
            (Some(hash), _) => ("sha256", hash.span()),
            (_, Some(plain)) => ("token", plain.span()),
            _ => ("token", span),
        };
        return Err(source.error(
            value_span,
            &format!("{key}.{field}"),
            format!(
                "the same token as tokens[{index}] ({:?}): every token must be different, \
                 or a request could not tell which rights it has",
                earlier[index].name
            ),
        ));
    }
    let queries_allowed = allowed_queries(source, key, token, queries)?;
    for scope in &token.scopes {
        if scope.get_ref() != "sql" && scope.get_ref() != "write" {
            return Err(source.error(
                scope.span(),
                &format!("{key}.scopes"),
                format!(
                    "unknown scope {:?} (scopes are \"sql\" and \"write\")",
                    scope.get_ref()
                ),
            ));
        }
    }
    Ok(TokenConfig {
        name: token.name.get_ref().clone(),
        sha256,
        queries: queries_allowed,
        scopes: token
            .scopes
            .iter()
            .map(|scope| scope.get_ref().clone())
            .collect(),
        limits: token_limits(source, key, token)?,
    })
}

/// A token's `max_concurrent`, `rate` and `burst`.
fn token_limits(
    source: &ConfigText<'_>,
    key: &str,
    token: &RawToken,
) -> Result<TokenLimits, ConfigError> {
    let count = |value: &Spanned<i64>, name: &str| {
        u32::try_from(*value.get_ref())
            .ok()
            .filter(|count| *count > 0)
            .ok_or_else(|| {
                source.error(
                    value.span(),
                    &format!("{key}.{name}"),
                    "must be a positive integer",
                )
            })
    };
    let max_concurrent = match &token.max_concurrent {
        Some(value) => Some(count(value, "max_concurrent")? as usize),
        None => None,
    };
    let rate = match &token.rate {
        Some(value) => {
            let rate = match value.get_ref() {
                toml::Value::Integer(rate) => Some(*rate as f64),
                toml::Value::Float(rate) => Some(*rate),
                _ => None,
            };
            Some(
                rate.filter(|rate| rate.is_finite() && *rate >= 0.001 && *rate <= 1e9)
                    .ok_or_else(|| {
                        source.error(
                            value.span(),
                            &format!("{key}.rate"),
                            "expected requests per second, a number from 0.001 (e.g. 10, 0.5)",
                        )
                    })?,
            )
        }
        None => None,
    };
    let burst = match &token.burst {
        Some(value) if rate.is_none() => {
            return Err(source.error(
                value.span(),
                &format!("{key}.burst"),
                "goes with rate (the requests per second it lets arrive at once)",
            ))
        }
        Some(value) => Some(count(value, "burst")?),
        None => rate.map(default_burst),
    };
    Ok(TokenLimits {
        max_concurrent,
        rate,
        burst,
    })
}

/// The SHA-256 of a token: given as `sha256`, or computed from `token`.
fn token_hash(
    source: &ConfigText<'_>,
    key: &str,
    token: &RawToken,
    span: Range<usize>,
) -> Result<[u8; 32], ConfigError> {
    match (&token.sha256, &token.token) {
        (Some(hash), None) => {
            let text = source.substitute(hash, &format!("{key}.sha256"))?;
            parse_sha256(&text).ok_or_else(|| {
                source.error(
                    hash.span(),
                    &format!("{key}.sha256"),
                    "expected 64 hex digits (sha256sum of the token)",
                )
            })
        }
        (None, Some(plain)) => {
            let text = source.substitute(plain, &format!("{key}.token"))?;
            if text.len() < 16 {
                return Err(source.error(
                    plain.span(),
                    &format!("{key}.token"),
                    "tokens must be at least 16 characters",
                ));
            }
            Ok(Sha256::digest(text.as_bytes()).into())
        }
        _ => Err(source.error(
            span,
            key,
            "give exactly one of sha256 = \"…\" or token = \"${VARIABLE}\"",
        )),
    }
}

/// A token's `queries`: `["*"]`, or names of configured queries.
fn allowed_queries(
    source: &ConfigText<'_>,
    key: &str,
    token: &RawToken,
    queries: &BTreeMap<String, QueryConfig>,
) -> Result<Allowed, ConfigError> {
    if token.queries.iter().any(|name| name.get_ref() == "*") {
        return Ok(Allowed::All);
    }
    for name in &token.queries {
        if !queries.contains_key(name.get_ref()) {
            return Err(source.error(
                name.span(),
                &format!("{key}.queries"),
                format!("no query named {:?}", name.get_ref()),
            ));
        }
    }
    Ok(Allowed::Only(
        token
            .queries
            .iter()
            .map(|name| name.get_ref().clone())
            .collect(),
    ))
}

/// Whether some token has `scope`: a section that needs one is useless without it.
fn has_scope(tokens: &[TokenConfig], scope: &str) -> bool {
    tokens
        .iter()
        .any(|token| token.scopes.iter().any(|given| given == scope))
}

/// `[sql]`: `POST /sql`.
fn sql_section(
    source: &ConfigText<'_>,
    sql: &Spanned<RawSql>,
    databases: &BTreeMap<String, DatabaseConfig>,
    tokens: &[TokenConfig],
) -> Result<SqlConfig, ConfigError> {
    let span = sql.span();
    let sql = sql.get_ref();
    let database = database_for(
        source,
        databases,
        &sql.database,
        "sql.database",
        span.clone(),
    )?;
    let mut limits = limits(
        source,
        RawLimits {
            statement_timeout: &sql.statement_timeout,
            max_rows: &sql.max_rows,
            max_bytes: &sql.max_bytes,
            max_stream_duration: &sql.max_stream_duration,
            idle_write_timeout: &sql.idle_write_timeout,
        },
        "sql",
    )?;
    limits
        .statement_timeout
        .get_or_insert(Duration::from_secs(30));
    if !has_scope(tokens, "sql") {
        return Err(source.error(
            span,
            "sql",
            "POST /sql is enabled but no token has scope \"sql\": add one to a [[tokens]] entry",
        ));
    }
    let role = match &sql.role {
        Some(role) => Some(role_name(source, role)?),
        None => None,
    };
    Ok(SqlConfig {
        database,
        role,
        limits,
        line: source.line(span.start),
    })
}

/// `[tables.NAME]`: `POST /tables/NAME`.
fn tables_section(
    source: &ConfigText<'_>,
    raw: &BTreeMap<String, Spanned<RawTable>>,
    databases: &BTreeMap<String, DatabaseConfig>,
    tokens: &[TokenConfig],
) -> Result<BTreeMap<String, TableConfig>, ConfigError> {
    let mut tables = BTreeMap::new();
    for (name, table) in raw {
        let entry = table_entry(source, name, table, databases)?;
        if !has_scope(tokens, "write") {
            return Err(source.error(
                table.span(),
                &format!("tables.{name}"),
                "POST /tables is enabled but no token has scope \"write\": add one to a [[tokens]] entry",
            ));
        }
        tables.insert(name.clone(), entry);
    }
    Ok(tables)
}

fn table_entry(
    source: &ConfigText<'_>,
    name: &str,
    table: &Spanned<RawTable>,
    databases: &BTreeMap<String, DatabaseConfig>,
) -> Result<TableConfig, ConfigError> {
    let key = format!("tables.{name}");
    let span = table.span();
    if !is_identifier(name) {
        return Err(source.error(span, &key, "table names are letters, digits and _"));
    }
    let table = table.get_ref();
    let database = database_for(
        source,
        databases,
        &table.database,
        &format!("{key}.database"),
        span.clone(),
    )?;
    let target = &databases[&database].target;
    if target.read_only() {
        return Err(source.error(
            table.database.as_ref().map_or(span, Spanned::span),
            &format!("{key}.database"),
            format!(
                "database {database:?} is {}, which is served read-only: tables need a database that takes writes",
                target.product()
            ),
        ));
    }
    let target = match &table.table {
        Some(target) if target.get_ref().trim().is_empty() => {
            return Err(source.error(
                target.span(),
                &format!("{key}.table"),
                "the table name is empty",
            ))
        }
        Some(target) => target.get_ref().trim().to_owned(),
        None => name.to_owned(),
    };
    let statement_timeout = match &table.statement_timeout {
        Some(timeout) => Some(source.duration(timeout, &format!("{key}.statement_timeout"))?),
        None => None,
    };
    let max_line_bytes = match &table.max_line_bytes {
        Some(bytes) => parse_bytes(bytes.get_ref())
            .ok()
            .and_then(|bytes| usize::try_from(bytes).ok())
            .ok_or_else(|| {
                source.error(
                    bytes.span(),
                    &format!("{key}.max_line_bytes"),
                    format!("{} is not a size (e.g. 1048576, \"1MiB\")", bytes.get_ref()),
                )
            })?,
        None => DEFAULT_MAX_LINE_BYTES,
    };
    let max_body = match &table.max_body {
        Some(size) => Some(source.size(size, &format!("{key}.max_body"))?),
        None => None,
    };
    Ok(TableConfig {
        name: name.to_owned(),
        database,
        table: target,
        statement_timeout,
        max_line_bytes,
        max_body,
    })
}

/// The limit keys, as they appear in `[queries.NAME]` and `[sql]`.
struct RawLimits<'a> {
    statement_timeout: &'a Option<Spanned<String>>,
    max_rows: &'a Option<Spanned<i64>>,
    max_bytes: &'a Option<Spanned<toml::Value>>,
    max_stream_duration: &'a Option<Spanned<String>>,
    idle_write_timeout: &'a Option<Spanned<String>>,
}

fn limits(source: &ConfigText<'_>, raw: RawLimits<'_>, key: &str) -> Result<Limits, ConfigError> {
    let statement_timeout = match raw.statement_timeout {
        Some(timeout) => Some(source.duration(timeout, &format!("{key}.statement_timeout"))?),
        None => None,
    };
    let max_rows = match raw.max_rows {
        Some(rows) if *rows.get_ref() > 0 => Some(*rows.get_ref() as u64),
        Some(rows) => {
            return Err(source.error(rows.span(), &format!("{key}.max_rows"), "must be positive"))
        }
        None => None,
    };
    let max_bytes =
        match raw.max_bytes {
            Some(bytes) => Some(parse_bytes(bytes.get_ref()).map_err(|message| {
                source.error(bytes.span(), &format!("{key}.max_bytes"), message)
            })?),
            None => None,
        };
    let positive = |value: &Option<Spanned<String>>, name: &str| match value {
        Some(_) => source
            .timeout(value, &format!("{key}.{name}"), Duration::ZERO)
            .map(Some),
        None => Ok(None),
    };
    Ok(Limits {
        statement_timeout,
        max_rows,
        max_bytes,
        max_stream_duration: positive(raw.max_stream_duration, "max_stream_duration")?,
        idle_write_timeout: positive(raw.idle_write_timeout, "idle_write_timeout")?,
    })
}

/// `[sql] role`: a PostgreSQL role name (quoted when used, so any printable text).
fn role_name(source: &ConfigText<'_>, role: &Spanned<String>) -> Result<String, ConfigError> {
    let name = role.get_ref();
    if name.is_empty() || name.len() > 63 || name.chars().any(char::is_control) {
        return Err(source.error(
            role.span(),
            "sql.role",
            "expected a role name (1 to 63 bytes, no control characters)",
        ));
    }
    Ok(name.clone())
}

fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut hash = [0u8; 32];
    for (index, byte) in hash.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[server]
shutdown_grace = "5s"

[databases.main]
url = "postgres://app:${SLUICE_CONFIG_TEST_PASSWORD}@127.0.0.1:5432/app"
pool_size = 4

[queries.by_status]
sql = "select * from t where status = $1 and at >= $2::timestamptz"
params = [
  { name = "status", type = "text", required = true },
  { name = "since", type = "timestamptz", default = "2024-01-01T00:00:00Z" },
]
statement_timeout = "30s"
max_rows = 1000
max_bytes = "64MiB"

[[tokens]]
name = "ops"
token = "a-long-enough-token-value"
queries = ["*"]
scopes = ["sql"]

[sql]
"#;

    #[test]
    fn limits_of_tokens_bodies_and_streams_load_with_their_defaults() {
        std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
        let config = Config::parse(GOOD, "good.toml").unwrap();
        assert_eq!(config.max_query_string, DEFAULT_MAX_QUERY_STRING);
        assert_eq!(config.max_body, DEFAULT_MAX_BODY);
        assert_eq!(config.max_stream_duration, DEFAULT_MAX_STREAM_DURATION);
        assert_eq!(config.idle_write_timeout, DEFAULT_IDLE_WRITE_TIMEOUT);
        assert_eq!(config.tokens[0].limits, TokenLimits::default());
        let text = GOOD
            .replace(
                "shutdown_grace = \"5s\"",
                "shutdown_grace = \"5s\"\nmax_body = \"10MiB\"\nidle_write_timeout = \"5s\"",
            )
            .replace(
                "max_rows = 1000",
                "max_rows = 1000\nmax_stream_duration = \"10m\"",
            )
            .replace(
                "scopes = [\"sql\"]",
                "scopes = [\"sql\"]\nmax_concurrent = 3\nrate = 2.5",
            );
        let config = Config::parse(&text, "good.toml").unwrap();
        assert_eq!(config.max_body, 10 << 20);
        assert_eq!(config.idle_write_timeout, Duration::from_secs(5));
        let limits = &config.queries["by_status"].limits;
        assert_eq!(limits.max_stream_duration, Some(Duration::from_secs(600)));
        assert_eq!(limits.idle_write_timeout, None);
        assert_eq!(
            config.tokens[0].limits,
            TokenLimits {
                max_concurrent: Some(3),
                rate: Some(2.5),
                burst: Some(3),
            }
        );
        for (replacement, key) in [
            ("max_concurrent = 0", "tokens[0].max_concurrent"),
            ("rate = 0", "tokens[0].rate"),
            ("rate = \"fast\"", "tokens[0].rate"),
            ("burst = 5", "tokens[0].burst"),
        ] {
            let error = error_for(&GOOD.replace(
                "scopes = [\"sql\"]",
                &format!("scopes = [\"sql\"]\n{replacement}"),
            ));
            assert_eq!(error.key, key, "{replacement}: {error}");
        }
        let error = error_for(&GOOD.replace("max_rows = 1000", "idle_write_timeout = \"0s\""));
        assert_eq!(error.key, "queries.by_status.idle_write_timeout");
    }

    #[test]
    fn a_full_file_loads_with_env_substitution_and_hashed_tokens() {
        std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
        let config = Config::parse(GOOD, "good.toml").unwrap();
        let target = &config.databases["main"].target;
        assert_eq!(target.product(), "PostgreSQL");
        // The password came from the environment (and is never printed).
        let described = format!("{target:?}");
        assert!(described.contains("password: Some(\"…\")"), "{described}");
        assert!(!described.contains("s3cret"), "{described}");
        let query = &config.queries["by_status"];
        assert_eq!(query.params[1].ty, ParamType::TimestampTz);
        assert_eq!(query.limits.max_bytes, Some(64 << 20));
        assert_eq!(
            query.limits.statement_timeout,
            Some(Duration::from_secs(30))
        );
        assert_eq!(config.shutdown_grace, Duration::from_secs(5));
        assert_eq!(
            config.tokens[0].sha256,
            <[u8; 32]>::from(Sha256::digest(b"a-long-enough-token-value"))
        );
        assert_eq!(
            config.sql.unwrap().limits.statement_timeout,
            Some(Duration::from_secs(30))
        );
    }

    #[test]
    fn tls_needs_both_files() {
        let both = GOOD.replace(
            "shutdown_grace = \"5s\"",
            "tls_cert = \"/etc/sluice/server.crt\"\ntls_key = \"server.key\"",
        );
        let config = Config::parse(&both, "good.toml").unwrap();
        assert_eq!(
            config.tls,
            Some(TlsFiles {
                certificate: "/etc/sluice/server.crt".into(),
                key: "server.key".into(),
            })
        );
        assert_eq!(Config::parse(GOOD, "good.toml").unwrap().tls, None);

        let error = error_for(&GOOD.replace("shutdown_grace = \"5s\"", "tls_cert = \"a.crt\""));
        assert_eq!((error.line, error.key.as_str()), (3, "server.tls_cert"));
        assert!(error.message.contains("needs tls_key"), "{error}");
        let error = error_for(&GOOD.replace("shutdown_grace = \"5s\"", "tls_key = \"a.key\""));
        assert_eq!(error.key, "server.tls_key");
    }

    fn error_for(text: &str) -> ConfigError {
        std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
        Config::parse(text, "bad.toml").unwrap_err()
    }

    #[test]
    fn the_servers_own_query_string_keys_are_no_parameter_names() {
        for reserved in ["format", "complete"] {
            let error = error_for(
                &GOOD.replace("{ name = \"since\"", &format!("{{ name = \"{reserved}\"")),
            );
            assert_eq!(
                (error.line, error.key.as_str()),
                (13, "queries.by_status.params[1].name")
            );
            assert!(
                error.message.contains("which the server reads itself"),
                "{error}"
            );
        }
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_key() {
        let error = error_for(&GOOD.replace("type = \"timestamptz\"", "type = \"tiemstamptz\""));
        assert_eq!(
            (error.line, error.key.as_str()),
            (13, "queries.by_status.params[1].type")
        );
        assert!(
            error
                .to_string()
                .starts_with("bad.toml:13: queries.by_status.params[1].type: unknown"),
            "{error}"
        );

        let error = error_for(&GOOD.replace(
            "${SLUICE_CONFIG_TEST_PASSWORD}",
            "${SLUICE_NOT_SET_ANYWHERE}",
        ));
        assert_eq!((error.line, error.key.as_str()), (6, "databases.main.url"));
        assert!(error.message.contains("SLUICE_NOT_SET_ANYWHERE"), "{error}");

        let error = error_for(&GOOD.replace("pool_size = 4", "pool_size = \"four\""));
        assert_eq!((error.line, error.key.as_str()), (7, "pool_size"));

        let error = error_for(&GOOD.replace("max_rows = 1000", "max_rowz = 1000"));
        assert_eq!((error.line, error.key.as_str()), (16, "max_rowz"));

        let error = error_for(&GOOD.replace(
            "statement_timeout = \"30s\"",
            "statement_timeout = \"30 parsecs\"",
        ));
        assert_eq!(error.line, 15);

        let error =
            error_for(&GOOD.replace("statement_timeout = \"30s\"", "statement_timeout = \"30\""));
        assert_eq!(
            (error.line, error.key.as_str(), error.message.as_str()),
            (
                15,
                "queries.by_status.statement_timeout",
                "give a unit: 30s, 30ms"
            )
        );

        let error = error_for(&GOOD.replace(
            "default = \"2024-01-01T00:00:00Z\"",
            "default = \"yesterday\"",
        ));
        assert_eq!(
            (error.line, error.key.as_str()),
            (13, "queries.by_status.params[1].default")
        );

        let error = error_for(&GOOD.replace("scopes = [\"sql\"]", "scopes = []"));
        assert_eq!(error.key, "sql");

        let error = error_for(&GOOD.replace("name = \"since\"", "name = \"status\""));
        assert_eq!(
            (error.line, error.key.as_str()),
            (13, "queries.by_status.params[1].name")
        );
        assert!(error.message.contains("declared twice"), "{error}");
    }

    #[test]
    fn tables_need_postgres_and_a_write_token() {
        let with_table =
            format!("{GOOD}\n[tables.events]\ntable = \"app.events\"\nmax_line_bytes = \"1MiB\"\n");
        let error = error_for(&with_table);
        assert_eq!(error.key, "tables.events");
        assert!(error.message.contains("scope \"write\""), "{error}");

        let writable = with_table.replace("scopes = [\"sql\"]", "scopes = [\"sql\", \"write\"]");
        std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
        let config = Config::parse(&writable, "good.toml").unwrap();
        let table = &config.tables["events"];
        assert_eq!(
            (table.database.as_str(), table.table.as_str()),
            ("main", "app.events")
        );
        assert_eq!(table.max_line_bytes, 1 << 20);

        let error =
            error_for(&writable.replace("scopes = [\"sql\", \"write\"]", "scopes = [\"wrote\"]"));
        assert_eq!(error.key, "tokens[0].scopes");

        let error =
            error_for(&writable.replace("max_line_bytes = \"1MiB\"", "max_line_bytes = \"lots\""));
        assert_eq!(
            (error.line, error.key.as_str()),
            (29, "tables.events.max_line_bytes")
        );

        let sqlite = "[databases.demo]\nsqlite = \"/tmp/x.sqlite\"\n\n[tables.events]\n";
        let error = error_for(sqlite);
        assert_eq!(
            (error.line, error.key.as_str()),
            (4, "tables.events.database")
        );
        assert!(error.message.contains("read-only"), "{error}");
    }

    #[test]
    fn table_queries_and_split_by_say_how_flight_cuts_a_query() {
        let text = "[databases.main]\nurl = \"postgres://u@h/d\"\n\
                    [queries.whole]\ntable = \"app.events\"\n\
                    [queries.by_id]\ntable = \"events\"\nsplit_by = \"id\"\n\
                    [queries.some]\nsql = \"select * from events where k = $1\"\n\
                    params = [{ name = \"k\", type = \"int\" }]\nsplit_by = \"id\"\n\
                    [queries.plain]\nsql = \"select 1\"\n";
        let config = Config::parse(text, "good.toml").unwrap();
        let whole = &config.queries["whole"];
        assert_eq!(whole.sql, "select * from app.events");
        assert_eq!(
            whole.split,
            Some(QuerySplit::Storage {
                table: "app.events".into()
            })
        );
        assert_eq!(whole.line, 4);
        assert_eq!(
            config.queries["by_id"].split,
            Some(QuerySplit::Column("id".into()))
        );
        assert_eq!(
            config.queries["some"].split,
            Some(QuerySplit::Column("id".into()))
        );
        assert_eq!(config.queries["plain"].split, None);
        assert!(config.flight.is_none());

        let both = "[databases.main]\nurl = \"postgres://u@h/d\"\n\
                    [queries.q]\nsql = \"select 1\"\ntable = \"t\"\n";
        assert!(error_for(both).message.contains("exactly one of sql"));
        let injected = "[databases.main]\nurl = \"postgres://u@h/d\"\n\
                        [queries.q]\ntable = \"t; drop table t\"\n";
        assert_eq!(error_for(injected).key, "queries.q.table");
        let with_params = "[databases.main]\nurl = \"postgres://u@h/d\"\n\
                           [queries.q]\ntable = \"t\"\nparams = [{ name = \"k\", type = \"int\" }]\n";
        assert_eq!(error_for(with_params).key, "queries.q.params");
        let sqlite = "[databases.demo]\nsqlite = \"/tmp/x.sqlite\"\n\
                      [queries.q]\nsql = \"select 1 as id\"\nsplit_by = \"id\"\n";
        let error = error_for(sqlite);
        assert_eq!(error.key, "queries.q.split_by");
        assert!(error.message.contains("SQLite"), "{error}");
        // A table query on SQLite is one part: nothing to refuse.
        let sqlite_table =
            "[databases.demo]\nsqlite = \"/tmp/x.sqlite\"\n[queries.q]\ntable = \"t\"\n";
        assert_eq!(
            Config::parse(sqlite_table, "ok.toml").unwrap().queries["q"].split,
            None
        );
    }

    #[test]
    fn flight_takes_its_defaults_and_needs_a_shared_secret_for_replicas() {
        let base =
            "[databases.main]\nurl = \"postgres://u@h/d\"\n[flight]\nlisten = \"127.0.0.1:8815\"\n";
        let flight = Config::parse(base, "good.toml").unwrap().flight.unwrap();
        assert_eq!(flight.partitions, DEFAULT_PARTITIONS);
        assert_eq!(flight.plan_timeout, Duration::from_secs(600));
        assert_eq!(flight.max_plans_per_token, DEFAULT_MAX_PLANS_PER_TOKEN);
        assert!(flight.locations.is_empty() && flight.ticket_secret.is_none());

        let replicas = format!("{base}locations = [\"grpc://10.0.0.1:8815\"]\n");
        assert_eq!(error_for(&replicas).key, "flight.ticket_secret");
        let short = format!("{replicas}ticket_secret = \"short\"\n");
        assert!(error_for(&short).message.contains("32 bytes"));
        let good = format!(
            "{replicas}ticket_secret = \"{}\"\npartitions = 8\n",
            "s".repeat(32)
        );
        let flight = Config::parse(&good, "good.toml").unwrap().flight.unwrap();
        assert_eq!(flight.partitions, 8);
        assert_eq!(flight.locations, ["grpc://10.0.0.1:8815"]);

        let https = format!("{base}locations = [\"https://x\"]\n");
        assert_eq!(error_for(&https).key, "flight.locations[0]");
        let zero = format!("{base}partitions = 0\n");
        assert_eq!(error_for(&zero).key, "flight.partitions");
        let server =
            "[server]\nmax_connections = 0\n[databases.main]\nurl = \"postgres://u@h/d\"\n";
        assert_eq!(error_for(server).key, "server.max_connections");
        let server = server.replace("= 0", "= 500");
        assert_eq!(
            Config::parse(&server, "x.toml").unwrap().max_connections,
            Some(500)
        );
        let none = format!("{base}max_plans_per_token = 0\n");
        assert_eq!(error_for(&none).key, "flight.max_plans_per_token");
        let address = base.replace("127.0.0.1:8815", "somewhere");
        assert_eq!(error_for(&address).key, "flight.listen");
    }

    #[test]
    fn a_database_url_is_opened_by_the_driver_that_knows_it() {
        let sqlite = "[databases.demo]\nurl = \"sqlite:///tmp/x.sqlite\"\n";
        let config = Config::parse(sqlite, "good.toml").unwrap();
        let target = &config.databases["demo"].target;
        assert_eq!(target.product(), "SQLite");
        assert!(target.read_only());

        let error = error_for("[databases.main]\nurl = \"oracle://db.internal/app\"\n");
        assert_eq!((error.line, error.key.as_str()), (2, "databases.main.url"));
        assert!(
            error.message.contains("expected postgres://"),
            "{}",
            error.message
        );
    }

    #[test]
    fn the_same_token_twice_is_an_error_naming_both_entries() {
        let hash: String = Sha256::digest(b"a-long-enough-token-value")
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        for (second, field) in [
            ("token = \"a-long-enough-token-value\"", "token"),
            (&*format!("sha256 = \"{}\"", hash.to_uppercase()), "sha256"),
        ] {
            let text =
                format!("{GOOD}\n[[tokens]]\nname = \"copy\"\n{second}\nqueries = [\"*\"]\n");
            let error = error_for(&text);
            assert_eq!(
                (error.line, error.key.as_str()),
                (29, &*format!("tokens[1].{field}")),
                "{error}"
            );
            assert!(
                error.message.contains("same token as tokens[0] (\"ops\")"),
                "{error}"
            );
        }
        let different =
            format!("{GOOD}\n[[tokens]]\nname = \"other\"\ntoken = \"another-long-token-value\"\n");
        std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
        assert_eq!(
            Config::parse(&different, "good.toml").unwrap().tokens.len(),
            2
        );
    }

    #[test]
    fn sql_takes_a_role_and_positions_are_kept_for_start_up_checks() {
        std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
        let config = Config::parse(
            &format!("{GOOD}role = \"report \\\"reader\\\"\"\n"),
            "good.toml",
        )
        .unwrap();
        assert_eq!(config.file, "good.toml");
        let sql = config.sql.unwrap();
        assert_eq!(sql.role.as_deref(), Some("report \"reader\""));
        assert_eq!(sql.line, 25);
        let query = &config.queries["by_status"];
        assert_eq!(query.line, 10);
        assert_eq!((query.params[0].line, query.params[1].line), (12, 13));

        let error = error_for(&format!("{GOOD}role = \"\"\n"));
        assert_eq!((error.line, error.key.as_str()), (26, "sql.role"));
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(
            parse_bytes(&toml::Value::String("2GB".into())).unwrap(),
            2_000_000_000
        );
        assert_eq!(parse_bytes(&toml::Value::Integer(10)).unwrap(), 10);
        assert!(parse_bytes(&toml::Value::String("lots".into())).is_err());
    }
}
