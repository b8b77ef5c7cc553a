//! [`SqliteStream`]: one SQLite query running on its own thread, read as batches.
//!
//! The thread opens the file, prepares and binds the statement, steps it and fills
//! [`Batch`]es. A full batch goes through a channel of capacity one, so at most
//! three batches exist per query (one being filled, one queued, one being read)
//! and a reader that stops reading stops the statement. Batches come back through
//! a return channel and are reused, so a long result allocates nothing per batch.
//!
//! When the [`SqliteStream`] is dropped before the end, a shared flag is set and
//! SQLite's interrupt handle is fired: a statement busy inside SQLite (a sort, a
//! scan that matches nothing) stops at its next VM instruction, and one waiting to
//! hand over a batch sees the channel closed. The same progress handler that reads
//! the flag enforces the statement timeout.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{InterruptHandle, OpenFlags, ToSql};
use sluice_core::{Batch, BatchSource, Column, DbCause, DbError, Error, ErrorKind, Kind, Schema};
use tokio::sync::{mpsc, oneshot};

use crate::convert::push_value;
use crate::kind::{kind_of_declared, kind_of_storage};

/// A batch is handed on once it holds this many bytes of values (as for PostgreSQL)…
const BATCH_BYTES: usize = 64 * 1024;
/// …or this many rows, so results of tiny or NULL values stay bounded too.
const BATCH_ROWS: usize = 8192;
/// SQLite VM instructions between two looks at the cancel flag and the deadline.
const PROGRESS_STEPS: i32 = 10_000;
/// How long a reader waits for a writer's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A parameter value, bound with its SQLite storage class (so `?1 > id` compares
/// numbers with numbers).
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// SQL NULL.
    Null,
    /// A 64-bit integer.
    Integer(i64),
    /// A float.
    Real(f64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl ToSql for Param {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Param::Null => ValueRef::Null,
            Param::Integer(value) => ValueRef::Integer(*value),
            Param::Real(value) => ValueRef::Real(*value),
            Param::Text(value) => ValueRef::Text(value.as_bytes()),
            Param::Blob(value) => ValueRef::Blob(value),
        }))
    }
}

/// How to run a query.
#[derive(Debug, Clone, Default)]
pub struct SqliteOptions {
    /// Cancel the statement once it has run this long (error SQLSTATE `57014`, as
    /// PostgreSQL reports its `statement_timeout`).
    pub statement_timeout: Option<Duration>,
    /// Open the file read-write (default: read-only, and statements that would
    /// write are refused before they run).
    pub read_write: bool,
}

enum Message {
    Batch(Batch),
    End,
    Failed(Error),
}

/// A running SQLite query; read it through [`BatchSource::next_batch`].
pub struct SqliteStream {
    schema: Schema,
    receiver: mpsc::Receiver<Message>,
    current: Option<Batch>,
    recycle: std::sync::mpsc::SyncSender<Batch>,
    cancelled: Arc<AtomicBool>,
    interrupt: Arc<InterruptHandle>,
    done: bool,
}

impl std::fmt::Debug for SqliteStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStream")
            .field("schema", &self.schema)
            .field("done", &self.done)
            .finish()
    }
}

/// A failure reported by SQLite, as a database error. SQLite has no SQLSTATEs, so
/// the code is empty except for the statement timeout; the cause says what it means.
fn sqlite_error(error: rusqlite::Error) -> Error {
    let message = match &error {
        rusqlite::Error::SqliteFailure(failure, Some(message)) => {
            format!("{message} (SQLite {:?})", failure.code)
        }
        other => other.to_string(),
    };
    Error::db(DbError {
        severity: "ERROR".into(),
        cause: cause(&error),
        message,
        ..DbError::default()
    })
}

/// What SQLite's error means. Its generic error (a syntax error, a missing
/// table, a bad parameter count) is the statement's.
fn cause(error: &rusqlite::Error) -> DbCause {
    use rusqlite::ErrorCode;
    match error {
        rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
            ErrorCode::ConstraintViolation => DbCause::Integrity,
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => DbCause::LostRace,
            ErrorCode::ReadOnly => DbCause::ReadOnly,
            ErrorCode::TooBig | ErrorCode::TypeMismatch => DbCause::Data,
            ErrorCode::OutOfMemory | ErrorCode::DiskFull | ErrorCode::CannotOpen => {
                DbCause::Unavailable
            }
            _ => DbCause::Statement,
        },
        _ => DbCause::Statement,
    }
}

fn timeout_error() -> Error {
    Error::db(DbError {
        severity: "ERROR".into(),
        cause: DbCause::StatementTimeout,
        code: "57014".into(),
        message: "canceling statement due to statement timeout".into(),
        ..DbError::default()
    })
}

impl SqliteStream {
    /// Opens `path`, prepares `sql` (parameters `?1`, `?2`, … or `?`), binds
    /// `params` and starts stepping it on a new thread. Returns once the columns
    /// are known (after the first row, which decides the kinds of columns that
    /// have no declared type); errors up to then are returned here.
    pub async fn start(
        path: impl Into<PathBuf>,
        sql: &str,
        params: Vec<Param>,
        options: SqliteOptions,
    ) -> Result<SqliteStream, Error> {
        let path = path.into();
        let sql = sql.to_owned();
        let (started_sender, started) = oneshot::channel();
        let (sender, receiver) = mpsc::channel(1);
        let (recycle, recycled) = std::sync::mpsc::sync_channel(2);
        let cancelled = Arc::new(AtomicBool::new(false));
        let flag = cancelled.clone();
        std::thread::Builder::new()
            .name("sluice-sqlite".into())
            .spawn(move || {
                let worker = Worker {
                    sender,
                    recycled,
                    cancelled: flag,
                    timed_out: Arc::new(AtomicBool::new(false)),
                };
                worker.run(&path, &sql, &params, &options, started_sender)
            })
            .map_err(|error| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot start a SQLite thread: {error}"),
                )
            })?;
        // Dropping this future before the query starts (an HTTP client that left
        // during a long sort) must stop the thread too.
        let guard = CancelOnDrop(Some(cancelled.clone()));
        let (schema, interrupt) = started.await.map_err(|_| {
            Error::new(
                ErrorKind::Io,
                "the SQLite thread ended before the query started",
            )
        })??;
        guard.disarm();
        Ok(SqliteStream {
            schema,
            receiver,
            current: None,
            recycle,
            cancelled,
            interrupt,
            done: false,
        })
    }
}

impl BatchSource for SqliteStream {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
        if let Some(batch) = self.current.take() {
            // Full only if the thread already has two spare batches: then drop it.
            let _ = self.recycle.try_send(batch);
        }
        if self.done {
            return Ok(None);
        }
        match self.receiver.recv().await {
            Some(Message::Batch(batch)) => Ok(Some(self.current.insert(batch))),
            Some(Message::End) => {
                self.done = true;
                Ok(None)
            }
            Some(Message::Failed(error)) => {
                self.done = true;
                Err(error)
            }
            // Never a quiet end: a result is complete only when the thread says so.
            None => {
                self.done = true;
                Err(Error::new(
                    ErrorKind::Closed,
                    "the SQLite thread ended before the result was complete",
                ))
            }
        }
    }
}

impl Drop for SqliteStream {
    fn drop(&mut self) {
        if !self.done {
            self.cancelled.store(true, Ordering::SeqCst);
            self.interrupt.interrupt();
        }
    }
}

/// Sets the cancel flag when dropped, unless disarmed.
struct CancelOnDrop(Option<Arc<AtomicBool>>);

impl CancelOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = &self.0 {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

type Started = Result<(Schema, Arc<InterruptHandle>), Error>;

struct Worker {
    sender: mpsc::Sender<Message>,
    recycled: std::sync::mpsc::Receiver<Batch>,
    cancelled: Arc<AtomicBool>,
    timed_out: Arc<AtomicBool>,
}

impl Worker {
    fn run(
        &self,
        path: &std::path::Path,
        sql: &str,
        params: &[Param],
        options: &SqliteOptions,
        started: oneshot::Sender<Started>,
    ) {
        let mut started = Some(started);
        let result = self.stream(path, sql, params, options, &mut started);
        let message = match result {
            Ok(()) => Message::End,
            Err(error) => {
                if let Some(started) = started.take() {
                    let _ = started.send(Err(error));
                    return;
                }
                Message::Failed(error)
            }
        };
        let _ = self.sender.blocking_send(message);
    }

    /// A statement error, or a timeout/cancel reported as what it is.
    fn failed(&self, error: rusqlite::Error) -> Error {
        if self.timed_out.load(Ordering::SeqCst) {
            timeout_error()
        } else if self.cancelled.load(Ordering::SeqCst) {
            Error::new(ErrorKind::Cancelled, "the query was cancelled")
        } else {
            sqlite_error(error)
        }
    }

    fn stream(
        &self,
        path: &std::path::Path,
        sql: &str,
        params: &[Param],
        options: &SqliteOptions,
        started: &mut Option<oneshot::Sender<Started>>,
    ) -> Result<(), Error> {
        let mut flags = OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        flags |= if options.read_write {
            OpenFlags::SQLITE_OPEN_READ_WRITE
        } else {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        };
        let connection = rusqlite::Connection::open_with_flags(path, flags).map_err(|error| {
            Error::new(
                ErrorKind::Connect,
                format!("cannot open SQLite database {}: {error}", path.display()),
            )
        })?;
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(sqlite_error)?;
        let deadline = options
            .statement_timeout
            .map(|timeout| Instant::now() + timeout);
        let cancelled = self.cancelled.clone();
        let timed_out = self.timed_out.clone();
        connection.progress_handler(
            PROGRESS_STEPS,
            Some(move || {
                if cancelled.load(Ordering::Relaxed) {
                    return true;
                }
                if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                    timed_out.store(true, Ordering::SeqCst);
                    return true;
                }
                false
            }),
        );
        let interrupt = Arc::new(connection.get_interrupt_handle());

        let mut statement = connection.prepare(sql).map_err(sqlite_error)?;
        if !options.read_write && !statement.readonly() {
            return Err(Error::config(
                "only read-only statements may run here (the database is opened read-only)",
            ));
        }
        let expected = statement.parameter_count();
        if expected != params.len() {
            return Err(Error::config(format!(
                "the query has {expected} parameter{} but {} value{} given",
                if expected == 1 { "" } else { "s" },
                params.len(),
                if params.len() == 1 { " was" } else { "s were" },
            )));
        }
        for (index, param) in params.iter().enumerate() {
            statement
                .raw_bind_parameter(index + 1, param)
                .map_err(sqlite_error)?;
        }
        let declared: Vec<(String, Option<String>)> = statement
            .columns()
            .iter()
            .map(|column| {
                (
                    column.name().to_owned(),
                    column.decl_type().map(str::to_owned),
                )
            })
            .collect();
        let width = declared.len();
        let mut rows = statement.raw_query();
        let first = rows.next().map_err(|error| self.failed(error))?;
        let columns: Vec<Column> = declared
            .iter()
            .enumerate()
            .map(|(index, (name, declared))| {
                let kind = declared
                    .as_deref()
                    .and_then(kind_of_declared)
                    .or_else(|| first.and_then(|row| row.get_ref(index).ok().map(kind_of_storage)));
                let kind = kind.unwrap_or(Kind::Text);
                let type_name = match declared {
                    Some(declared) => declared.to_ascii_lowercase(),
                    None => kind_name(&kind).to_owned(),
                };
                Column::new(name.clone(), kind, type_name)
            })
            .collect();
        let schema = Schema { columns };
        let Some(started) = started.take() else {
            return Ok(());
        };
        if started.send(Ok((schema.clone(), interrupt))).is_err() {
            // The caller stopped waiting for the query to start.
            return Ok(());
        }

        let mut batch = Batch::new(width);
        let mut number = 0u64;
        let mut row = first;
        while let Some(current) = row {
            number += 1;
            for (index, column) in schema.columns.iter().enumerate() {
                let value = current.get_ref(index).map_err(sqlite_error)?;
                push_value(&mut batch, &column.kind, value).map_err(|mismatch| {
                    Error::new(
                        ErrorKind::Data,
                        format!(
                            "row {number}, column {:?} ({}): a {} value ({:?}) cannot be \
                             written as {}",
                            column.name,
                            column.type_name,
                            mismatch.class,
                            mismatch.excerpt,
                            kind_name(&column.kind)
                        ),
                    )
                })?;
            }
            if batch.data_len() >= BATCH_BYTES || batch.num_rows() >= BATCH_ROWS {
                let spare = self
                    .recycled
                    .try_recv()
                    .unwrap_or_else(|_| Batch::new(width));
                let full = std::mem::replace(&mut batch, spare);
                if self.sender.blocking_send(Message::Batch(full)).is_err() {
                    // The reader is gone: stop stepping.
                    return Ok(());
                }
                batch.clear();
            }
            row = rows.next().map_err(|error| self.failed(error))?;
        }
        if !batch.is_empty() && self.sender.blocking_send(Message::Batch(batch)).is_err() {
            return Ok(());
        }
        Ok(())
    }
}

/// A short name of a kind, for messages and inferred column types.
fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Bool => "boolean",
        Kind::Integer => "integer",
        Kind::Float => "real",
        Kind::Decimal => "decimal",
        Kind::Text => "text",
        Kind::Bytes => "blob",
        Kind::Json => "json",
        Kind::Date => "date",
        Kind::Time => "time",
        Kind::TimeTz => "timetz",
        Kind::Timestamp => "timestamp",
        Kind::TimestampTz => "timestamptz",
        Kind::Interval => "interval",
        Kind::Array(_) => "array",
        Kind::Composite(_) => "composite",
        Kind::Other => "other",
    }
}
