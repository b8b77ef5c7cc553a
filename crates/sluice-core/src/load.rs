//! The vocabulary of loading rows into a table, shared by every database that
//! can load and by every front end that asks for a load: the table as the
//! catalog describes it, the options (each stating its default), what the load
//! did, and where rejected records go. The loading itself belongs to each
//! database crate ([`crate::connect::Session::import`]).

use crate::{Column, Error, Rejected};

/// A table to import into, as the catalog describes it.
#[derive(Debug, Clone)]
pub struct TableInfo {
    /// The table's name as PostgreSQL prints it (schema-qualified and quoted when needed).
    pub name: String,
    /// Its columns in order, without generated columns (which cannot be written).
    pub columns: Vec<Column>,
    /// Names of the columns that have a default or are identity columns.
    pub defaulted: Vec<String>,
}

/// What to do with a bad record or a row the database refuses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnError {
    /// Roll everything back and report the first error (default).
    #[default]
    Abort,
    /// Commit the good rows and report each bad one.
    Skip,
}

/// What to do with a row whose key already exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnConflict {
    /// A unique violation is an error (default).
    #[default]
    Error,
    /// Keep the existing row.
    Ignore,
    /// Overwrite the existing row's other columns.
    Update,
}

/// How rows travel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Method {
    /// `COPY … FROM STDIN` (default).
    #[default]
    Copy,
    /// Multi-row `INSERT` statements of this many rows, one round trip each.
    Insert {
        /// Rows per statement (1 is row-by-row).
        batch_size: usize,
    },
}

/// Settings of an import ([`crate::connect::Session::import`]); each states its default.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Default: [`OnError::Abort`].
    pub on_error: OnError,
    /// Default: [`OnConflict::Error`].
    pub on_conflict: OnConflict,
    /// Conflict target columns for [`OnConflict::Update`] (required there) and
    /// [`OnConflict::Ignore`] (optional: without it any unique violation is ignored).
    /// Default: empty.
    pub key: Vec<String>,
    /// Default: [`Method::Copy`].
    pub method: Method,
    /// Rows per savepoint with [`OnError::Skip`]. Default: 10,000.
    pub chunk_rows: usize,
    /// Check everything, keep nothing: the work is rolled back at the end.
    /// Default: false.
    pub dry_run: bool,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            on_error: OnError::Abort,
            on_conflict: OnConflict::Error,
            key: Vec::new(),
            method: Method::Copy,
            chunk_rows: 10_000,
            dry_run: false,
        }
    }
}

/// What an import did. `accepted + rejected == records` always.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Records read from the input (blank NDJSON lines are not records).
    pub records: u64,
    /// Records that became rows sent to the table.
    pub accepted: u64,
    /// Records rejected (in skip mode; in abort mode an error ends the import).
    pub rejected: u64,
    /// Rows the table gained or changed (fewer than `accepted` when conflicts were ignored).
    pub written: u64,
}

/// Receives each rejected record in skip mode (to write a reject file or response).
pub type RejectSink<'a> = dyn FnMut(&Rejected) -> Result<(), Error> + Send + 'a;
