//! The vocabulary of loading rows into a table, shared by every database that
//! can load and by every front end that asks for a load: the table as the
//! catalog describes it (and as a copy creates it), the options (each stating
//! its default), what the load did, and where rejected records go. The loading
//! itself belongs to each database crate ([`crate::connect::Session::import`]).
//!
//! An import's rows come through a [`RowFeed`]: an [`ImportInput`] decodes them
//! from bytes (`sluice import`, `POST /tables`), a [`SourceRows`] reads them
//! from another database's result (`sluice copy`). Either way each row carries
//! its position (the input line its record starts on, or its 1-based place in
//! the source result), which the database's errors are tied back to. An
//! `ImportInput` rejects a row holding a value its column's declared type
//! would store changed (`declared`: digits a `numeric(p,s)` rounds away,
//! characters past a `varchar(n)`), as a decoder rejects a bad record.

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::future::BoxFuture;
use crate::source::DynSource;
use crate::word::{expected, spelled_enum, Word};
use crate::{Batch, Column, Decoded, Decoder, Error, ErrorKind, Progress, Rejected, RowError};

mod declared;

/// A table to import into, as the catalog describes it.
#[derive(Debug, Clone, Default)]
pub struct TableInfo {
    /// The table's name as the database prints it (schema-qualified and quoted
    /// when needed), ready to go into its SQL.
    pub name: String,
    /// Its columns in order, without generated columns (which cannot be written).
    pub columns: Vec<Column>,
    /// Names of the columns that have a default or are identity columns.
    pub defaulted: Vec<String>,
    /// Names of the columns declared `NOT NULL`.
    pub not_null: Vec<String>,
    /// The primary key's columns in key order; empty when the table has none.
    pub primary_key: Vec<String>,
    /// For each of `columns`, in the same order, its type as the database's
    /// own DDL spells it (`numeric(12,2)`, `varchar(40)`), for creating a table
    /// like this one; empty when the database does not say.
    pub declared_types: Vec<String>,
}

impl TableInfo {
    /// The declared type of the column named `name`, when known.
    pub fn declared_type(&self, name: &str) -> Option<&str> {
        let index = self.columns.iter().position(|column| column.name == name)?;
        self.declared_types.get(index).map(String::as_str)
    }
}

/// A table for a load to create (`sluice copy --create`), described by the
/// columns of the result it will hold; each database spells the DDL its own way
/// ([`crate::connect::Session::begin_load`]).
#[derive(Debug, Clone)]
pub struct TableSpec {
    /// The columns in order.
    pub columns: Vec<ColumnSpec>,
    /// The primary key's columns in key order; empty for none.
    pub primary_key: Vec<String>,
    /// The database whose type names the columns carry, as
    /// [`crate::connect::Session::dialect`] says: a target that
    /// [shares its types](crate::connect::Dialect::shares_types_with) creates
    /// each column with the source's own type, any other maps the kind.
    pub dialect: crate::connect::Dialect,
}

/// One column of a [`TableSpec`].
#[derive(Debug, Clone)]
pub struct ColumnSpec {
    /// Name, kind, type name and decimal shape, as the source describes them.
    pub column: Column,
    /// The column's full type in the source's own DDL (`numeric(12,2)`), when
    /// the source is a described table; `None` for a query's column.
    pub declared_type: Option<String>,
    /// Whether the column refuses NULL.
    pub not_null: bool,
}

/// What a load does to its table before the rows go in, inside the unit of
/// work [`crate::connect::Session::begin_load`] starts.
#[derive(Debug, Clone, Default)]
pub struct TableSetup {
    /// Create the table as described (it must not exist yet). Default: `None`.
    pub create: Option<TableSpec>,
    /// Remove every row the table holds. Default: false.
    pub empty: bool,
    /// Other sessions load the same table at the same time, in units of their
    /// own that are committed together once all of them have succeeded
    /// (`sluice copy --jobs`). A table this unit creates is then created, and
    /// committed, before the rows go in, so that the others see it; undoing
    /// the unit drops it again (undo the others' units first: they hold it).
    /// Default: false.
    pub shared: bool,
}

spelled_enum! {
    /// What to do with a bad record or a row the database refuses.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub enum OnError {
        /// Roll everything back and report the first error (default).
        #[default]
        Abort = "abort",
        /// Commit the good rows and report each bad one.
        Skip = "skip",
    }
}

spelled_enum! {
    /// What to do with a row whose key already exists.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub enum OnConflict {
        /// A unique violation is an error (default).
        #[default]
        Error = "error",
        /// Keep the existing row.
        Ignore = "ignore",
        /// Overwrite the existing row's other columns.
        Update = "update",
    }
}

/// Rows per `INSERT` statement of [`Method::Insert`] unless the user says
/// otherwise (`sluice import --insert-rows`, `POST /tables?insert_rows=`).
pub const INSERT_ROWS: usize = 1000;

/// How rows travel. Spelled `copy` or `insert` (with [`INSERT_ROWS`] rows per
/// statement until [`Method::with_insert_rows`] says otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Method {
    /// `COPY … FROM STDIN` (default).
    #[default]
    Copy,
    /// Multi-row `INSERT` statements of this many rows, one round trip each.
    Insert {
        /// Rows per statement (1 is row-by-row).
        rows: usize,
    },
}

impl Method {
    /// The same method, with `rows` rows per statement if it inserts.
    pub fn with_insert_rows(self, rows: usize) -> Method {
        match self {
            Method::Copy => Method::Copy,
            Method::Insert { .. } => Method::Insert { rows },
        }
    }
}

impl Word for Method {
    const SPELLINGS: &'static [&'static str] = &["copy", "insert"];
}

impl std::str::FromStr for Method {
    type Err = String;

    fn from_str(text: &str) -> Result<Method, String> {
        match text {
            "copy" => Ok(Method::Copy),
            "insert" => Ok(Method::Insert { rows: INSERT_ROWS }),
            _ => Err(expected(Method::SPELLINGS)),
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Method::Copy => "copy",
            Method::Insert { .. } => "insert",
        })
    }
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
    /// Send values in the database's binary form when it has one for every
    /// column (PostgreSQL's binary COPY: the server skips its text parsers),
    /// as text otherwise. Default: true.
    pub binary_copy: bool,
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
            binary_copy: true,
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

impl ImportOptions {
    /// [`ImportOptions::check`], and that every key column is one of `table`'s.
    pub fn check_for(&self, table: &TableInfo) -> Result<(), Error> {
        self.check()?;
        match self
            .key
            .iter()
            .find(|key| !table.columns.iter().any(|column| &column.name == *key))
        {
            Some(key) => Err(ImportFault::UnknownKeyColumn { name: key.clone() }.into_error()),
            None => Ok(()),
        }
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

/// For an import that failed without naming a row (a constraint the server
/// checks at the end of a statement): runs `import` again over the same input
/// in skip mode, as a dry run rolled back at the end, and stops at the first
/// record the table refuses. `None` when every row is accepted on its own.
pub async fn locate_refused_row<F>(
    options: &ImportOptions,
    import: F,
) -> Result<Option<RowError>, Error>
where
    F: AsyncFnOnce(&ImportOptions, &mut RejectSink<'_>) -> Result<ImportSummary, Error>,
{
    let options = ImportOptions {
        on_error: OnError::Skip,
        method: Method::Copy,
        dry_run: true,
        ..options.clone()
    };
    let mut found: Option<RowError> = None;
    let mut stop_at_first = |rejected: &Rejected| -> Result<(), Error> {
        found = Some(rejected.error.clone());
        Err(Error::new(ErrorKind::Cancelled, "found the refused row"))
    };
    let result = import(&options, &mut stop_at_first).await;
    match (found, result) {
        (Some(row), _) => Ok(Some(row)),
        (None, Ok(_)) => Ok(None),
        (None, Err(error)) => Err(error),
    }
}

/// Whose transaction an import runs in, for the database crates' imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Its own: begun and ended by the import wherever its strategy needs one.
    Own,
    /// The caller's, open already (a copy's unit of work,
    /// [`crate::connect::Session::begin_load`]), which the caller commits or
    /// rolls back.
    Caller,
}

/// Where an import's rows come from, one piece at a time: decoded from bytes
/// ([`ImportInput`]) or read from another database's result ([`SourceRows`]).
/// Every database's import drives either the same way.
pub trait RowFeed: Send {
    /// Appends the next piece of rows to `decoded` (each with its position in
    /// `decoded.lines`; bad records to `decoded.rejected`); false once the
    /// input is done.
    fn next<'a>(&'a mut self, decoded: &'a mut Decoded) -> BoxFuture<'a, Result<bool, Error>>;

    /// The table columns the rows fill, in row order, once known.
    fn target_columns(&self) -> Option<&[Column]>;

    /// Records seen so far (good and bad), for the summary's accounting.
    fn records_seen(&self) -> u64;

    /// Input bytes and rows as they are read.
    fn progress(&self) -> &Progress;
}

/// Input is read in pieces of this size.
const READ_BYTES: usize = 256 * 1024;

/// An import's input: bytes read in pieces and decoded into rows, each tagged
/// with the input line its record starts on.
pub struct ImportInput<'a, D: ?Sized, R: ?Sized> {
    decoder: &'a mut D,
    reader: &'a mut R,
    buffer: Vec<u8>,
    start: usize,
    finished: bool,
    progress: &'a Progress,
}

/// Where an import stands once its first rows are read.
pub enum Opening {
    /// The columns the rows fill are known; `more` is false when the whole
    /// input has been read already.
    Columns {
        /// The target columns.
        columns: Vec<Column>,
        /// Whether input remains.
        more: bool,
    },
    /// The input held no row (only bad records, reported): the import is done.
    Empty(ImportSummary),
}

impl<'a, D: Decoder + ?Sized, R: AsyncRead + Unpin + Send + ?Sized> ImportInput<'a, D, R> {
    /// The input of `reader`, decoded by `decoder`.
    pub fn new(decoder: &'a mut D, reader: &'a mut R, progress: &'a Progress) -> Self {
        ImportInput {
            decoder,
            reader,
            buffer: Vec::with_capacity(READ_BYTES * 2),
            start: 0,
            finished: false,
            progress,
        }
    }

    /// Reads and decodes one piece of input into `decoded`; false once the input is done.
    async fn read_piece(&mut self, decoded: &mut Decoded) -> Result<bool, Error> {
        if self.finished {
            return Ok(false);
        }
        if self.start > 0 && self.start * 2 >= self.buffer.len() {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.reserve(READ_BYTES);
        let read = self
            .reader
            .read_buf(&mut self.buffer)
            .await
            .map_err(|error| {
                Error::new(ErrorKind::Io, format!("reading the input failed: {error}"))
                    .with_source(error)
            })?;
        self.progress.add_bytes(read as u64);
        let end = read == 0;
        let first = decoded.batch.num_rows();
        let consumed = self
            .decoder
            .decode(&self.buffer[self.start..], end, decoded)?;
        self.start += consumed;
        if let Some(columns) = self.decoder.target_columns() {
            declared::reject_changed(decoded, first, columns);
        }
        if end {
            self.finished = true;
            if self.start < self.buffer.len() {
                return Err(Error::protocol("the decoder left input undecoded"));
            }
        }
        Ok(!end)
    }
}

impl<D, R> RowFeed for ImportInput<'_, D, R>
where
    D: Decoder + ?Sized,
    R: AsyncRead + Unpin + Send + ?Sized,
{
    fn next<'a>(&'a mut self, decoded: &'a mut Decoded) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(self.read_piece(decoded))
    }

    fn target_columns(&self) -> Option<&[Column]> {
        self.decoder.target_columns()
    }

    fn records_seen(&self) -> u64 {
        self.decoder.records_seen()
    }

    fn progress(&self) -> &Progress {
        self.progress
    }
}

/// Checks `options` against `table`, then reads until the target columns are
/// known and a row is read (or the input ends). With [`OnError::Abort`] the
/// first bad record is the import's error; an input without rows reports its
/// bad records to `rejects` and ends the import.
pub async fn open(
    rows: &mut dyn RowFeed,
    decoded: &mut Decoded,
    table: &TableInfo,
    options: &ImportOptions,
    rejects: &mut RejectSink<'_>,
) -> Result<Opening, Error> {
    options.check_for(table)?;
    let on_error = options.on_error;
    let mut more = true;
    while more && decoded.batch.is_empty() {
        more = rows.next(decoded).await?;
        if on_error == OnError::Abort {
            if let Some(first) = decoded.rejected.first() {
                return Err(Error::bad_row(first.error.clone()));
            }
        }
    }
    match rows.target_columns().map(<[Column]>::to_vec) {
        Some(columns) => Ok(Opening::Columns { columns, more }),
        None => {
            for rejected in &decoded.rejected {
                rejects(rejected)?;
            }
            Ok(Opening::Empty(ImportSummary {
                records: rows.records_seen(),
                rejected: decoded.rejected.len() as u64,
                ..ImportSummary::default()
            }))
        }
    }
}

/// Rewrites one source value (`&[u8]`, never NULL) into the canonical form of
/// the target column's kind, appending it to the buffer; an `Err` says why the
/// value does not fit.
pub type Convert = Box<dyn Fn(&[u8], &mut Vec<u8>) -> Result<(), String> + Send + Sync>;

/// How one target column is filled from a source row.
pub struct Fill {
    /// The source column's index.
    pub source: usize,
    /// The value's rewriting, when the source's canonical form is not already
    /// what the target column takes.
    pub convert: Option<Convert>,
}

/// The rows of another database's result as an import's input (`sluice
/// copy`): each batch the source lends is mapped into the target's columns
/// (a copy of its values, rewritten where a [`Fill`] says), so memory stays at
/// a batch on each side. A row's position is its 1-based place in the result.
pub struct SourceRows<'a> {
    source: &'a mut dyn DynSource,
    columns: Vec<Column>,
    fills: Vec<Fill>,
    rows_read: u64,
    finished: bool,
    progress: &'a Progress,
}

impl<'a> SourceRows<'a> {
    /// The rows of `source`, filling `columns` (the target's, in row order)
    /// as `fills` (one per column) say.
    pub fn new(
        source: &'a mut dyn DynSource,
        columns: Vec<Column>,
        fills: Vec<Fill>,
        progress: &'a Progress,
    ) -> SourceRows<'a> {
        assert_eq!(columns.len(), fills.len(), "one fill per target column");
        SourceRows {
            source,
            columns,
            fills,
            rows_read: 0,
            finished: false,
            progress,
        }
    }

    async fn read_piece(&mut self, decoded: &mut Decoded) -> Result<bool, Error> {
        if self.finished {
            return Ok(false);
        }
        if decoded.batch.num_columns() != self.columns.len() {
            decoded.batch.reset(self.columns.len());
        }
        // Whole batches: a row too large for one is read whole (its size is
        // bounded by what the target can take in one row anyway).
        let Some(batch) = self.source.next_batch().await? else {
            self.finished = true;
            return Ok(false);
        };
        self.progress.add_bytes(batch.data_len() as u64);
        map_rows(batch, &self.fills, &self.columns, self.rows_read, decoded);
        self.rows_read += batch.num_rows() as u64;
        Ok(true)
    }
}

/// Appends `batch`'s rows to `decoded` as `fills` map them, numbering them
/// from `before + 1`; a value a conversion refuses rejects its row.
fn map_rows(batch: &Batch, fills: &[Fill], columns: &[Column], before: u64, decoded: &mut Decoded) {
    for (index, row) in batch.rows().enumerate() {
        let position = before + index as u64 + 1;
        let mark = decoded.batch.mark();
        let refused = fills.iter().zip(columns).find_map(|(fill, column)| {
            let outcome = match (row.get(fill.source), &fill.convert) {
                (None, _) => {
                    decoded.batch.push_null();
                    Ok(())
                }
                (Some(value), None) => {
                    decoded.batch.push_value(value);
                    Ok(())
                }
                (Some(value), Some(convert)) => {
                    let start = decoded.batch.begin_value();
                    let converted = convert(value, decoded.batch.value_buffer());
                    decoded.batch.end_value(start);
                    converted
                }
            };
            outcome
                .err()
                .map(|reason| RowError::new(position, Some(column.name.clone()), reason))
        });
        match refused {
            None => decoded.lines.push(position),
            Some(error) => {
                decoded.batch.rollback(mark);
                decoded.rejected.push(Rejected {
                    error,
                    record: Vec::new(),
                });
            }
        }
    }
}

impl RowFeed for SourceRows<'_> {
    fn next<'a>(&'a mut self, decoded: &'a mut Decoded) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(self.read_piece(decoded))
    }

    fn target_columns(&self) -> Option<&[Column]> {
        Some(&self.columns)
    }

    fn records_seen(&self) -> u64 {
        self.rows_read
    }

    fn progress(&self) -> &Progress {
        self.progress
    }
}

/// For each row sent in one load, the input line it came from, stored as runs
/// of consecutive lines so memory does not grow with a regular input.
#[derive(Debug, Default)]
pub struct LineMap {
    runs: Vec<(u64, u64)>,
    rows: u64,
    last_line: u64,
}

impl LineMap {
    /// Adds the lines of the next rows sent.
    pub fn extend(&mut self, lines: &[u64]) {
        for &line in lines {
            if self.runs.is_empty() || line != self.last_line + 1 {
                self.runs.push((self.rows, line));
            }
            self.last_line = line;
            self.rows += 1;
        }
    }

    /// Rows added so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The input line of the `row`th (1-based) row.
    pub fn line(&self, row: u64) -> Option<u64> {
        let index = row.checked_sub(1)?;
        let run = self
            .runs
            .partition_point(|(start, _)| *start <= index)
            .checked_sub(1)?;
        let (start, line) = self.runs[run];
        Some(line + (index - start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_map_follows_gaps() {
        let mut map = LineMap::default();
        map.extend(&[2, 3, 4, 7, 8]);
        map.extend(&[9, 20]);
        assert_eq!(
            (1..=7)
                .map(|row| map.line(row).unwrap())
                .collect::<Vec<_>>(),
            [2, 3, 4, 7, 8, 9, 20]
        );
        assert_eq!(map.runs.len(), 3);
        assert_eq!(map.line(0), None);
    }
}
