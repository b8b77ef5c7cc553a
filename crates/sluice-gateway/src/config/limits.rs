//! The limits a response runs under, written alike in `[queries.NAME]` and
//! `[sql]`: a statement timeout, rows, bytes, and how long the body may run or
//! wait for its client.

use std::time::Duration;

use super::entries::Entries;
use super::error::ConfigError;
use super::keys::{Key, KeyDefault, Type};

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

/// `max_rows`.
pub(super) const MAX_ROWS: Key = Key {
    name: "max_rows",
    ty: Type::Positive,
    default: KeyDefault::Absent("no limit"),
    meaning: "A response that would exceed this many rows is aborted, never cut short.",
    example: Some("5000000"),
    old_names: &[],
};

/// `max_bytes`.
pub(super) const MAX_BYTES: Key = Key {
    name: "max_bytes",
    ty: Type::Size,
    default: KeyDefault::Absent("no limit"),
    meaning: "A response that would exceed this many bytes (before compression) is aborted, never cut short.",
    example: Some("\"2GiB\""),
    old_names: &[],
};

/// `max_stream_duration`.
pub(super) const MAX_STREAM_DURATION: Key = Key {
    name: "max_stream_duration",
    ty: Type::Timeout,
    default: KeyDefault::Absent("`[server]`'s"),
    meaning: "This one's own `[server] max_stream_duration`.",
    example: Some("\"10m\""),
    old_names: &[],
};

/// `idle_write_timeout`.
pub(super) const IDLE_WRITE_TIMEOUT: Key = Key {
    name: "idle_write_timeout",
    ty: Type::Timeout,
    default: KeyDefault::Absent("`[server]`'s"),
    meaning: "This one's own `[server] idle_write_timeout`.",
    example: Some("\"30s\""),
    old_names: &[],
};

/// Reads the limit keys of a section that has them (`statement_timeout`'s
/// default is the section's own).
pub(super) fn limits(entries: &Entries<'_>) -> Result<Limits, ConfigError> {
    Ok(Limits {
        statement_timeout: entries.duration("statement_timeout")?,
        max_rows: entries.count("max_rows")?,
        max_bytes: entries.size("max_bytes")?,
        max_stream_duration: entries.duration("max_stream_duration")?,
        idle_write_timeout: entries.duration("idle_write_timeout")?,
    })
}
