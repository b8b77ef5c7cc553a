//! The server's configuration file: databases, named queries, tokens, limits.
//!
//! The file is TOML. Everything is checked when it is loaded, before the port opens,
//! and the first problem is reported as one line naming the file, the line and the
//! key (`sluice.toml:12: queries.by_status.params[1].type: unknown type "tiemstamp"…`).
//! `${NAME}` in database URLs, file paths, tokens and secrets is replaced by the
//! environment variable `NAME`, so secrets stay out of the file; a variable that is
//! not set is an error, never an empty password.
//!
//! Each table of the file has its own module, which defines its keys once
//! ([`Section`], [`Key`]: name, type, default, meaning, old spellings) and reads
//! them through those definitions; [`reference_page`] writes the book's
//! reference from the same definitions. The book's page
//! (`docs/src/configuration.md`) shows the whole file.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use sluice_core::connect::Drivers;
use toml::Spanned;

mod databases;
mod entries;
mod error;
mod flight;
mod keys;
mod limits;
mod queries;
mod reference;
mod sections;
mod server;
mod sql;
mod tables;
#[cfg(test)]
mod tests;
mod text;
mod tokens;

pub use databases::{DatabaseConfig, MAX_POOL_SIZE};
pub use error::ConfigError;
pub use flight::{
    FlightConfig, DEFAULT_MAX_PLANS_PER_TOKEN, DEFAULT_PARTITIONS, DEFAULT_UNREAD_PLAN_TIMEOUT,
    MAX_PARTITIONS,
};
pub use keys::{default_text, type_name, Key, KeyDefault, Section, Type};
pub use limits::Limits;
pub use queries::{ParamSpec, QueryConfig, QuerySplit, RESERVED_PARAMETERS};
pub use reference::{example_file, reference_page};
pub use sections::SECTIONS;
pub use server::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_WRITE_TIMEOUT,
    DEFAULT_KEEP_ALIVE_TIMEOUT, DEFAULT_LISTEN, DEFAULT_MAX_BODY, DEFAULT_MAX_QUERY_STRING,
    DEFAULT_MAX_STREAM_DURATION, DEFAULT_MIN_BODY_RATE, DEFAULT_SHUTDOWN_GRACE, MAX_CONNECTIONS,
    MAX_THREADS,
};
pub use sql::SqlConfig;
pub use tables::{TableConfig, DEFAULT_MAX_LINE_BYTES};
pub use tokens::{Allowed, TokenConfig};

use entries::{Entries, RawTable};
use text::ConfigText;

use crate::tls::TlsFiles;

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
    /// Each stretch of this long spent waiting for a request body must bring
    /// `min_body_rate` bytes a second (and at least one byte).
    pub body_read_timeout: Duration,
    /// Bytes a second a request body must average while the server waits for it.
    pub min_body_rate: u64,
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
    /// One line per key written in an old spelling, naming the file, the
    /// line and the new spelling ([`Config::load`] logs them).
    pub deprecations: Vec<String>,
}

impl Config {
    /// A response's time limits: the query's own `limits`, else the server's.
    pub fn timing(&self, limits: &Limits) -> crate::request::Timing {
        crate::request::Timing {
            max_duration: limits
                .max_stream_duration
                .unwrap_or(self.max_stream_duration),
            idle_write_timeout: limits.idle_write_timeout.unwrap_or(self.idle_write_timeout),
        }
    }

    /// The names of the tokens that may plan split reads of `database` (run a
    /// named query on it that splits): the clients Flight shares its plan
    /// places among. None without tokens, where every client is one.
    pub fn planners(&self, database: &str) -> Vec<&str> {
        let splits_there: Vec<&str> = self
            .queries
            .values()
            .filter(|query| query.database == database && query.split.is_some())
            .map(|query| query.name.as_str())
            .collect();
        self.tokens
            .iter()
            .filter(|token| splits_there.iter().any(|name| token.queries.includes(name)))
            .map(|token| token.name.as_str())
            .collect()
    }

    /// Reads and checks a configuration file; a key in an old spelling is
    /// logged as a warning, once per load (at start and on each reload).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError {
            file: path.display().to_string(),
            line: 0,
            key: "(file)".into(),
            message: format!("cannot read: {error}"),
        })?;
        let config = Config::parse(&text, &path.display().to_string())?;
        for note in &config.deprecations {
            tracing::warn!("{note}");
        }
        Ok(config)
    }

    /// Checks configuration text; `file` names it in errors. Relative file and TLS
    /// paths are taken relative to the current directory.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        Config::parse_with(text, file, &sluice_drivers::all())
    }

    /// [`Config::parse`] with the databases `drivers` know.
    ///
    /// Sections are read in the order they refer to each other: databases before
    /// the queries, `[sql]` and tables that name them, queries before the tokens
    /// that allow them, tokens before the sections that need a token's scope.
    pub fn parse_with(text: &str, file: &str, drivers: &Drivers) -> Result<Config, ConfigError> {
        let source = ConfigText { file, text };
        let raw = RawFile::read(&source)?;
        let notes = RefCell::new(Vec::new());
        let read =
            |section, path: String, table| Entries::read(&source, section, path, table, &notes);
        let empty = Spanned::new(0..0, RawTable::new());
        let server = read(
            &server::SECTION,
            "server".into(),
            raw.file.server.as_ref().unwrap_or(&empty),
        )?;
        let server = server::server_section(&server)?;
        let mut database_tables = Vec::new();
        for (name, table) in &raw.file.databases {
            database_tables.push(read(
                &databases::SECTION,
                format!("databases.{name}"),
                table,
            )?);
        }
        let databases = databases::databases_section(&source, database_tables, drivers)?;
        let mut queries = BTreeMap::new();
        for (name, table) in &raw.file.queries {
            let entries = read(&queries::SECTION, format!("queries.{name}"), table)?;
            let mut params = Vec::new();
            for (index, param) in raw.params(name).iter().enumerate() {
                let path = format!("queries.{name}.params[{index}]");
                params.push(read(&queries::PARAMS, path, param)?);
            }
            queries.insert(
                name.clone(),
                queries::query_entry(&entries, &params, &databases)?,
            );
        }
        let mut token_tables = Vec::new();
        for (index, table) in raw.file.tokens.iter().enumerate() {
            token_tables.push(read(&tokens::SECTION, format!("tokens[{index}]"), table)?);
        }
        let tokens = tokens::tokens_section(&token_tables, &queries)?;
        let sql = match &raw.file.sql {
            Some(table) => {
                let entries = read(&sql::SECTION, "sql".into(), table)?;
                Some(sql::sql_section(&entries, &databases, &tokens)?)
            }
            None => None,
        };
        let mut table_tables = Vec::new();
        for (name, table) in &raw.file.tables {
            table_tables.push(read(&tables::SECTION, format!("tables.{name}"), table)?);
        }
        let tables = tables::tables_section(&table_tables, &databases, &tokens)?;
        let flight = match &raw.file.flight {
            Some(table) => Some(flight::flight_section(&read(
                &flight::SECTION,
                "flight".into(),
                table,
            )?)?),
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
            body_read_timeout: server.body_read_timeout,
            min_body_rate: server.min_body_rate,
            databases,
            queries,
            tokens,
            sql,
            tables,
            flight,
            deprecations: notes.into_inner(),
        })
    }
}

/// The file's tables, each a [`RawTable`] whose keys its section checks.
#[derive(Deserialize)]
struct FileTables {
    server: Option<Spanned<RawTable>>,
    #[serde(default)]
    databases: BTreeMap<String, Spanned<RawTable>>,
    #[serde(default)]
    queries: BTreeMap<String, Spanned<RawTable>>,
    #[serde(default)]
    tokens: Vec<Spanned<RawTable>>,
    sql: Option<Spanned<RawTable>>,
    #[serde(default)]
    tables: BTreeMap<String, Spanned<RawTable>>,
    flight: Option<Spanned<RawTable>>,
}

/// The queries' `params`, read apart so each entry keeps where its keys are.
#[derive(Deserialize)]
struct FileParams {
    #[serde(default)]
    queries: BTreeMap<String, QueryParams>,
}

#[derive(Deserialize)]
struct QueryParams {
    #[serde(default)]
    params: Vec<Spanned<RawTable>>,
}

/// The file read as tables, its top-level keys checked against [`SECTIONS`].
struct RawFile {
    file: FileTables,
    params: FileParams,
}

impl RawFile {
    fn read(source: &ConfigText<'_>) -> Result<RawFile, ConfigError> {
        let parse_error = |error: toml::de::Error| source.parse_error(&error);
        let top: BTreeMap<Spanned<String>, serde::de::IgnoredAny> =
            toml::from_str(source.text).map_err(parse_error)?;
        for name in top.keys() {
            if !SECTIONS
                .iter()
                .any(|section| section.top() == name.get_ref())
            {
                let tops: Vec<String> = SECTIONS
                    .iter()
                    .map(|section| section.heading.to_owned())
                    .collect();
                return Err(source.error(
                    name.span(),
                    name.get_ref(),
                    format!(
                        "unknown table {:?}: the file has {}",
                        name.get_ref(),
                        tops.join(", ")
                    ),
                ));
            }
        }
        Ok(RawFile {
            file: toml::from_str(source.text).map_err(parse_error)?,
            params: toml::from_str(source.text).map_err(parse_error)?,
        })
    }

    /// Query `name`'s `params` entries.
    fn params(&self, name: &str) -> &[Spanned<RawTable>] {
        self.params
            .queries
            .get(name)
            .map_or(&[], |query| query.params.as_slice())
    }
}
