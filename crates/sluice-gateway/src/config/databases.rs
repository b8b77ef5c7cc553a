//! `[databases.NAME]`: the databases the gateway serves, each opened by the
//! driver that claims its `url`, and the pool in front of it.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use sluice_core::connect::{Drivers, Target};

use super::entries::{Entries, Given};
use super::error::ConfigError;
use super::keys::{Key, KeyDefault, Section, Type};
use super::text::ConfigText;

/// The most connections one pool may have.
pub const MAX_POOL_SIZE: usize = 10_000;

/// `[databases.NAME]`'s keys.
pub(super) static SECTION: Section = Section {
    path: "databases.NAME",
    heading: "[databases.NAME]",
    about: "One or more. A query, `[sql]` and a table name their database (`database = \"NAME\"`) \
            when there are several.",
    keys: &[
        Key {
            name: "url",
            ty: Type::EnvText,
            default: KeyDefault::Required,
            meaning: "Where the database is: a [connection URL](connections.md), or a path that a \
                      database claims as its own file. Accepted: {drivers}.",
            example: Some("\"${APP_DATABASE_URL}\""),
            old_names: &["sqlite"],
        },
        Key {
            name: "pool_size",
            ty: Type::Count(MAX_POOL_SIZE),
            default: KeyDefault::Count(8),
            meaning: "Sessions in the pool: connections to a database server, or queries at once \
                      on a database file read in this process.",
            example: Some("8"),
            old_names: &[],
        },
        Key {
            name: "pool_wait",
            ty: Type::Duration,
            default: KeyDefault::Duration(Duration::from_secs(2)),
            meaning: "A request waits this long for a free session, then gets 503.",
            example: Some("\"2s\""),
            old_names: &[],
        },
    ],
};

/// One database and its pool.
#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    /// Its name in the file.
    pub name: String,
    /// Where it is, parsed by its database's driver.
    pub target: Arc<dyn Target>,
    /// Sessions in its pool: connections, or queries at once on a file.
    pub pool_size: usize,
    /// How long a request waits for a free connection before a 503.
    pub pool_wait: Duration,
    /// SHA-256 of everything above as written (the URL after `${…}`
    /// substitution): equal in two configurations when the pool can be kept
    /// across a reload. A hash, so the password is not held twice in clear.
    pub fingerprint: [u8; 32],
}

/// `[databases.NAME]`: at least one.
pub(super) fn databases_section(
    source: &ConfigText<'_>,
    tables: Vec<Entries<'_>>,
    drivers: &Drivers,
) -> Result<BTreeMap<String, DatabaseConfig>, ConfigError> {
    let mut databases = BTreeMap::new();
    for entries in tables {
        let database = database_entry(&entries, drivers)?;
        databases.insert(database.name.clone(), database);
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

fn database_entry(entries: &Entries<'_>, drivers: &Drivers) -> Result<DatabaseConfig, ConfigError> {
    let name = entries.path().trim_start_matches("databases.").to_owned();
    if !entries.has("url") {
        return Err(entries.error(
            "url",
            entries.span(),
            format!("give url = \"…\": {}", drivers.url_help(false)),
        ));
    }
    let Given { value: url, span } = entries.required_text("url")?;
    let target = drivers
        .open(&url)
        .map_err(|error| entries.error("url", span, error.to_string()))?;
    let pool_size = entries.count("pool_size")?.unwrap_or_default() as usize;
    let pool_wait = entries.duration("pool_wait")?.unwrap_or_default();
    let fingerprint =
        Sha256::digest(format!("{url}\n{pool_size}\n{}", pool_wait.as_nanos()).as_bytes()).into();
    Ok(DatabaseConfig {
        name,
        target,
        pool_size,
        pool_wait,
        fingerprint,
    })
}

/// The database a section names, or the only one there is.
pub(super) fn database_for(
    entries: &Entries<'_>,
    databases: &BTreeMap<String, DatabaseConfig>,
) -> Result<String, ConfigError> {
    match entries.text("database")? {
        Some(name) if databases.contains_key(&name.value) => Ok(name.value),
        Some(name) => Err(entries.error(
            "database",
            name.span,
            format!("no database named {:?} is configured", name.value),
        )),
        None if databases.len() == 1 => Ok(databases.keys().next().cloned().unwrap_or_default()),
        None => Err(entries.error(
            "database",
            entries.span(),
            "several databases are configured: say which one with database = \"NAME\"",
        )),
    }
}

/// The span of a section's `database` key, else of the section.
pub(super) fn database_span(entries: &Entries<'_>) -> Result<Range<usize>, ConfigError> {
    Ok(entries
        .text("database")?
        .map_or_else(|| entries.span(), |name| name.span))
}
