//! `[sql]`: ad-hoc SQL at `POST /sql` (and Flight SQL), off unless the table
//! exists: the database it runs on, the role it runs as, and its limits.

use std::collections::BTreeMap;
use std::time::Duration;

use super::databases::{database_for, DatabaseConfig};
use super::entries::Entries;
use super::error::ConfigError;
use super::keys::{Key, KeyDefault, Section, Type};
use super::limits::{self, Limits};
use super::tokens::{has_scope, TokenConfig};

/// `[sql]`'s keys.
pub(super) static SECTION: Section = Section {
    path: "sql",
    heading: "[sql]",
    about: "`POST /sql` (and Flight SQL) is off unless this table exists, and needs a token with \
            scope `sql`. See [Allow ad-hoc SQL](serve-sql.md).",
    keys: &[
        Key {
            name: "database",
            ty: Type::Text,
            default: KeyDefault::Absent("the only one"),
            meaning: "The `[databases]` entry it runs on; its login must be unprivileged \
                      ([Allow ad-hoc SQL](serve-sql.md)).",
            example: Some("\"main\""),
            old_names: &[],
        },
        Key {
            name: "role",
            ty: Type::Text,
            default: KeyDefault::Absent("the login's"),
            meaning: "`SET LOCAL ROLE` to this role for each request (1 to 63 bytes).",
            example: Some("\"reporting_reader\""),
            old_names: &[],
        },
        Key {
            name: "statement_timeout",
            ty: Type::Duration,
            default: KeyDefault::Duration(Duration::from_secs(30)),
            meaning: "The statement's time limit: ad-hoc SQL always has one.",
            example: Some("\"10s\""),
            old_names: &[],
        },
        limits::MAX_ROWS,
        limits::MAX_BYTES,
        limits::MAX_STREAM_DURATION,
        limits::IDLE_WRITE_TIMEOUT,
    ],
};

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

/// `[sql]`: `POST /sql`.
pub(super) fn sql_section(
    entries: &Entries<'_>,
    databases: &BTreeMap<String, DatabaseConfig>,
    tokens: &[TokenConfig],
) -> Result<SqlConfig, ConfigError> {
    let database = database_for(entries, databases)?;
    let limits = limits::limits(entries)?;
    if !has_scope(tokens, "sql") {
        return Err(entries.table_error(
            "POST /sql is enabled but no token has scope \"sql\": add one to a [[tokens]] entry",
        ));
    }
    Ok(SqlConfig {
        database,
        role: role_name(entries)?,
        limits,
        line: entries.line(entries.span()),
    })
}

/// `role`: a role name (quoted when used, so any printable text).
fn role_name(entries: &Entries<'_>) -> Result<Option<String>, ConfigError> {
    let Some(role) = entries.text("role")? else {
        return Ok(None);
    };
    if role.value.is_empty() || role.value.len() > 63 || role.value.chars().any(char::is_control) {
        return Err(entries.error(
            "role",
            role.span,
            "expected a role name (1 to 63 bytes, no control characters)",
        ));
    }
    Ok(Some(role.value))
}
