//! [`SqliteDatabase`]: a SQLite file behind the gateway's
//! [`sluice_core::database::Database`] trait, served read-only.
//!
//! SQLite needs no pool of connections (opening a file costs microseconds); a
//! semaphore of `size` permits bounds concurrent queries instead, with the same
//! wait-then-busy behaviour as a pool. Parameters bind by storage class, with
//! dates and times as the canonical text the demo stores (UTC moments end in
//! `+00`), so comparisons of stored text work.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_core::connect::Dialect;
use sluice_core::database::{
    BoxFuture, Database, DeclaredKind, Param, Query, QueryEnd, QueryRequest, RunningQuery,
    StartError, StatementCheck, StatementProblem, Usage,
};
use sluice_core::{Error, ErrorKind};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::dialect::SQLITE;
use crate::{SqliteOptions, SqliteStream};

/// A SQLite file served read-only.
pub struct SqliteDatabase {
    path: PathBuf,
    permits: Arc<Semaphore>,
    size: usize,
    wait: Duration,
    /// Queries waiting for a permit (a semaphore does not count them).
    waiting: AtomicUsize,
}

impl SqliteDatabase {
    /// The file at `path`, with at most `size` queries at once, each waiting up
    /// to `wait` for its turn.
    pub fn new(path: impl Into<PathBuf>, size: usize, wait: Duration) -> SqliteDatabase {
        SqliteDatabase {
            path: path.into(),
            permits: Arc::new(Semaphore::new(size)),
            size,
            wait,
            waiting: AtomicUsize::new(0),
        }
    }

    async fn permit(&self) -> Result<OwnedSemaphorePermit, StartError> {
        let waiter = Waiter::enter(&self.waiting);
        let acquired = tokio::time::timeout(self.wait, self.permits.clone().acquire_owned()).await;
        drop(waiter);
        match acquired {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(StartError::Unavailable(Error::new(
                ErrorKind::Closed,
                "the database is closed",
            ))),
            Err(_) => Err(StartError::Busy),
        }
    }

    async fn start_query(
        &self,
        request: QueryRequest<'_>,
    ) -> Result<Box<dyn RunningQuery>, StartError> {
        let permit = self.permit().await?;
        let options = SqliteOptions {
            statement_timeout: request.statement_timeout,
            read_write: false,
        };
        let params = request.params.into_iter().map(bound).collect();
        let stream = SqliteStream::start(&self.path, request.sql, params, options)
            .await
            .map_err(StartError::classify)?;
        Ok(Box::new(Query::new(stream, PermitEnd { _permit: permit })))
    }

    async fn check(
        &self,
        sql: &str,
        declared: &[DeclaredKind],
    ) -> Result<StatementCheck, StartError> {
        let path = self.path.clone();
        let sql = sql.to_owned();
        let (parameters, read_only) =
            tokio::task::spawn_blocking(move || prepare_read_only(&path, &sql))
                .await
                .map_err(|error| {
                    StartError::Unavailable(Error::new(ErrorKind::Io, error.to_string()))
                })??;
        let mut problems = Vec::new();
        if parameters != declared.len() {
            problems.push(StatementProblem::Count {
                found: parameters,
                declared: declared.len(),
            });
        }
        if !read_only {
            problems.push(StatementProblem::Writes);
        }
        // A column without a declared type takes the kind of its first value,
        // which only running the statement tells.
        Ok(StatementCheck {
            problems,
            columns: None,
        })
    }
}

/// Prepares `sql` on the file opened read-only: its number of parameters (the
/// highest `?n`) and whether it only reads.
fn prepare_read_only(path: &Path, sql: &str) -> Result<(usize, bool), StartError> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let connection = rusqlite::Connection::open_with_flags(path, flags).map_err(|error| {
        StartError::Unavailable(Error::new(
            ErrorKind::Connect,
            format!("cannot open SQLite database {}: {error}", path.display()),
        ))
    })?;
    let statement = connection
        .prepare(sql)
        .map_err(|error| StartError::Query(Error::new(ErrorKind::Config, error.to_string())))?;
    Ok((statement.parameter_count(), statement.readonly()))
}

/// The storage class a checked value binds as.
fn bound(param: Param) -> crate::Param {
    use crate::Param as Sqlite;
    match param {
        Param::Null => Sqlite::Null,
        Param::Bool(value) => Sqlite::Integer(i64::from(value)),
        Param::Integer(value) => Sqlite::Integer(value),
        Param::Real { value, .. } => Sqlite::Real(value),
        Param::TimestampUtc(text) => Sqlite::Text(text + "+00"),
        // SQLite compares a decimal's text against a column of numeric affinity.
        Param::Numeric(text)
        | Param::Text(text)
        | Param::Date(text)
        | Param::Timestamp(text)
        | Param::Uuid(text)
        | Param::Json(text) => Sqlite::Text(text),
    }
}

impl Database for SqliteDatabase {
    fn dialect(&self) -> Dialect {
        SQLITE
    }

    fn placeholder(&self, number: usize) -> String {
        format!("?{number}")
    }

    fn read_only(&self) -> bool {
        true
    }

    fn usage(&self) -> Usage {
        Usage {
            in_use: self.size - self.permits.available_permits(),
            size: self.size,
            waiting: self.waiting.load(Ordering::Relaxed),
        }
    }

    fn start<'a>(
        &'a self,
        request: QueryRequest<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn RunningQuery>, StartError>> {
        Box::pin(self.start_query(request))
    }

    fn check_statement<'a>(
        &'a self,
        sql: &'a str,
        declared: &'a [DeclaredKind],
    ) -> BoxFuture<'a, Result<StatementCheck, StartError>> {
        Box::pin(self.check(sql, declared))
    }

    /// The file is opened read-only, with no server and no logins behind it:
    /// ad-hoc SQL can do nothing a read cannot.
    fn check_ad_hoc<'a>(&'a self, _: Option<&'a str>) -> BoxFuture<'a, Result<(), StartError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Counts one waiter for as long as it lives, so a request dropped while it
/// waits (its client left) is uncounted too.
struct Waiter<'a>(&'a AtomicUsize);

impl<'a> Waiter<'a> {
    fn enter(count: &'a AtomicUsize) -> Waiter<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Waiter(count)
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A query's end: it holds one of the permits until it is dropped.
struct PermitEnd {
    _permit: OwnedSemaphorePermit,
}

impl QueryEnd<SqliteStream> for PermitEnd {
    fn round_trips(&self) -> u64 {
        0
    }

    fn complete(self, _: SqliteStream) {}

    /// Dropping the stream interrupts the statement; nothing runs elsewhere.
    fn abandon(self, _: SqliteStream) -> Option<BoxFuture<'static, ()>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_bind_by_storage_class_and_utc_moments_carry_their_offset() {
        use crate::Param as Sqlite;
        assert_eq!(bound(Param::Bool(true)), Sqlite::Integer(1));
        assert_eq!(
            bound(Param::Real {
                value: 1.5,
                text: "1.50".into()
            }),
            Sqlite::Real(1.5)
        );
        assert_eq!(
            bound(Param::TimestampUtc("2024-03-01 10:00:00.25".into())),
            Sqlite::Text("2024-03-01 10:00:00.25+00".into())
        );
        assert_eq!(
            bound(Param::Numeric("12.50".into())),
            Sqlite::Text("12.50".into())
        );
    }
}
