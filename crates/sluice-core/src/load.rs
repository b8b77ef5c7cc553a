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

impl ImportOptions {
    /// Checks that the settings fit together (what needs the table, such as key
    /// columns it has, is checked by the database's import). A misfit is an error of kind
    /// [`crate::ErrorKind::Config`] whose [`ImportFault`] the caller words for its users.
    pub fn check(&self) -> Result<(), Error> {
        let fault = match (self.on_conflict, self.key.is_empty()) {
            (OnConflict::Update, true) => Some(ImportFault::UpdateWithoutKey),
            (OnConflict::Error, false) => Some(ImportFault::KeyWithoutConflictAction),
            _ if self.on_error == OnError::Skip && matches!(self.method, Method::Insert { .. }) => {
                Some(ImportFault::SkipWithInsert)
            }
            _ => None,
        };
        fault.map_or(Ok(()), |fault| Err(fault.into_error()))
    }
}

/// A setting of [`ImportOptions`] that does not fit the others or the table, by
/// name, so that `sluice import` can point at its flag and `POST /tables` at its
/// query parameter. The error carries it as its source; [`ImportFault::of`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImportFault {
    /// [`OnConflict::Update`] without key columns to find the rows to update by.
    UpdateWithoutKey,
    /// Key columns with [`OnConflict::Error`], which has no use for them.
    KeyWithoutConflictAction,
    /// A key column the table does not have.
    UnknownKeyColumn {
        /// The name given.
        name: String,
    },
    /// [`OnError::Skip`] with [`Method::Insert`]: an INSERT batch aborts on its
    /// first error, so there is no row to skip.
    SkipWithInsert,
    /// One INSERT of this many rows would need more bind parameters than the
    /// protocol carries (one per column and row).
    BatchTooLarge {
        /// Rows in the statement.
        rows: usize,
        /// Columns per row.
        columns: usize,
    },
}

impl ImportFault {
    /// The fault behind an import error, when a setting caused it.
    pub fn of(error: &Error) -> Option<&ImportFault> {
        std::error::Error::source(error)?.downcast_ref::<ImportFault>()
    }

    /// The fault as an error of kind [`crate::ErrorKind::Config`] carrying it.
    pub fn into_error(self) -> Error {
        Error::config(self.to_string()).with_source(self)
    }
}

impl std::fmt::Display for ImportFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImportFault::UpdateWithoutKey => {
                f.write_str("updating rows on conflict needs the key columns")
            }
            ImportFault::KeyWithoutConflictAction => {
                f.write_str("key columns go with ignoring or updating rows on conflict")
            }
            ImportFault::UnknownKeyColumn { name } => {
                write!(
                    f,
                    "the key names a column {name:?} that the table does not have"
                )
            }
            ImportFault::SkipWithInsert => f.write_str(
                "skipping bad rows works with COPY (INSERT batches abort on the first error)",
            ),
            ImportFault::BatchTooLarge { rows, columns } => write!(
                f,
                "one INSERT of {rows} rows of {columns} columns has too many parameters: \
                 send fewer rows per INSERT"
            ),
        }
    }
}

impl std::error::Error for ImportFault {}

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
