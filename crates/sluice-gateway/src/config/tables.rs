//! `[tables.NAME]`: the tables open to `POST /tables/NAME` (bulk ingest by
//! tokens of scope `write`), each on a database that takes writes.

use std::collections::BTreeMap;
use std::time::Duration;

use super::databases::{database_for, database_span, DatabaseConfig};
use super::entries::Entries;
use super::error::ConfigError;
use super::keys::{Key, KeyDefault, Section, Type};
use super::text::is_identifier;
use super::tokens::{has_scope, TokenConfig};

/// The default for `max_line_bytes`: 64 MiB, as `sluice import`.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 20;

/// `[tables.NAME]`'s keys.
pub(super) static SECTION: Section = Section {
    path: "tables.NAME",
    heading: "[tables.NAME]",
    about: "Tables open to `POST /tables/NAME`, for tokens of scope `write`. See [Write through the \
            gateway](serve-writing.md).",
    keys: &[
        Key {
            name: "database",
            ty: Type::Text,
            default: KeyDefault::Absent("the only one"),
            meaning: "The `[databases]` entry; one that takes writes (databases served read-only cannot).",
            example: Some("\"main\""),
            old_names: &[],
        },
        Key {
            name: "table",
            ty: Type::Text,
            default: KeyDefault::Absent("the key"),
            meaning: "The table in the database: a table's name, not SQL (`table` or \
                      `schema.table`, each part bare or quoted as the database quotes names); \
                      anything else is refused when the configuration loads.",
            example: Some("\"public.payment_events\""),
            old_names: &[],
        },
        Key {
            name: "statement_timeout",
            ty: Type::Duration,
            default: KeyDefault::Absent("none"),
            meaning: "The load's time limit.",
            example: Some("\"10m\""),
            old_names: &[],
        },
        Key {
            name: "max_line_bytes",
            ty: Type::Size,
            default: KeyDefault::Size(DEFAULT_MAX_LINE_BYTES as u64),
            meaning: "Longest NDJSON line or CSV record.",
            example: Some("\"1MiB\""),
            old_names: &[],
        },
        Key {
            name: "max_body",
            ty: Type::Size,
            default: KeyDefault::Absent("`[server] max_body`"),
            meaning: "This table's own body limit.",
            example: Some("\"10GiB\""),
            old_names: &[],
        },
    ],
};

/// A table open to `POST /tables/{name}`.
#[derive(Debug, Clone)]
pub struct TableConfig {
    /// Its name in the file, the last part of `/tables/{name}`.
    pub name: String,
    /// The database it is in.
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

/// `[tables.NAME]`: `POST /tables/NAME`.
pub(super) fn tables_section(
    tables: &[Entries<'_>],
    databases: &BTreeMap<String, DatabaseConfig>,
    tokens: &[TokenConfig],
) -> Result<BTreeMap<String, TableConfig>, ConfigError> {
    let mut configs = BTreeMap::new();
    for entries in tables {
        let table = table_entry(entries, databases)?;
        if !has_scope(tokens, "write") {
            return Err(entries.table_error(
                "POST /tables is enabled but no token has scope \"write\": add one to a [[tokens]] entry",
            ));
        }
        configs.insert(table.name.clone(), table);
    }
    Ok(configs)
}

fn table_entry(
    entries: &Entries<'_>,
    databases: &BTreeMap<String, DatabaseConfig>,
) -> Result<TableConfig, ConfigError> {
    let name = entries.path().trim_start_matches("tables.").to_owned();
    if !is_identifier(&name) {
        return Err(entries.table_error("table names are letters, digits and _"));
    }
    let database = database_for(entries, databases)?;
    let target = &databases[&database].target;
    if target.read_only() {
        return Err(entries.error(
            "database",
            database_span(entries)?,
            format!(
                "database {database:?} is {}, which is served read-only: tables need a database that takes writes",
                target.product()
            ),
        ));
    }
    let table = match entries.text("table")? {
        Some(table) if table.value.trim().is_empty() => {
            return Err(entries.error("table", table.span, "the table name is empty"))
        }
        // Read as the database reads a name (the one grammar of names) now,
        // rather than refused by the first request.
        Some(table) => match target.dialect().table_name(&table.value) {
            Ok(_) => table.value.trim().to_owned(),
            Err(error) => return Err(entries.error("table", table.span, error.to_string())),
        },
        None => name.clone(),
    };
    let max_line_bytes = entries.size("max_line_bytes")?.unwrap_or_default();
    Ok(TableConfig {
        name,
        database,
        table,
        statement_timeout: entries.duration("statement_timeout")?,
        max_line_bytes: usize::try_from(max_line_bytes).unwrap_or(usize::MAX),
        max_body: entries.size("max_body")?,
    })
}
