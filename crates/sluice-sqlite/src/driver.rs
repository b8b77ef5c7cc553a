//! [`SqliteDriver`]: SQLite files for front ends that open databases by URL
//! ([`sluice_core::connect`]). `sqlite:///absolute/path.db`, `sqlite://relative.db`
//! and `sqlite:path.db` name a file, opened read-only: a session exports query
//! results ([`SqliteStream`]), describes tables (for copies out of SQLite that
//! create their target) and serves the gateway ([`SqliteDatabase`]); loading
//! tables and calls are not offered (the trait's defaults say so).

use std::path::PathBuf;
use std::sync::Arc;

use sluice_core::connect::{
    Canceller, Dialect, Driver, Export, ExportOptions, Family, PoolOptions, Session, Target,
};
use sluice_core::database::{BoxFuture, Database, Query};
use sluice_core::load::TableInfo;
use sluice_core::{Error, ErrorKind, Meter};

use crate::gateway::SqliteDatabase;
use crate::{Param, SqliteOptions, SqliteStream};

/// SQLite, the one place this crate says which database it is.
pub(crate) const SQLITE: Dialect = Dialect::new("SQLite", Family::new("SQLite"));

/// SQLite's [`Driver`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SqliteDriver;

impl Driver for SqliteDriver {
    fn dialect(&self) -> Dialect {
        SQLITE
    }

    fn placeholders(&self) -> &'static str {
        "`?`"
    }

    fn takes_writes(&self) -> bool {
        false
    }

    fn url_forms(&self) -> &'static [&'static str] {
        &["sqlite:///path/to/file.db"]
    }

    fn recognizes(&self, target: &str) -> bool {
        target
            .get(..7)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("sqlite:"))
    }

    fn target(&self, target: &str) -> Result<Arc<dyn Target>, Error> {
        let rest = &target[7..];
        // sqlite:///abs → /abs; sqlite://rel → rel; sqlite:rel → rel.
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() {
            return Err(Error::config(
                "a SQLite URL names a file: sqlite:///path/to/file.db",
            ));
        }
        Ok(Arc::new(SqliteTarget {
            path: PathBuf::from(path),
        }))
    }
}

/// A SQLite file.
#[derive(Debug)]
struct SqliteTarget {
    path: PathBuf,
}

impl Target for SqliteTarget {
    fn dialect(&self) -> Dialect {
        SQLITE
    }

    fn connect<'a>(&'a self, _meter: &'a Meter) -> BoxFuture<'a, Result<Box<dyn Session>, Error>> {
        // Nothing to connect to: the file is opened by each query's own thread,
        // so a missing file is reported when the query starts.
        let session: Box<dyn Session> = Box::new(SqliteSession {
            path: self.path.clone(),
        });
        Box::pin(async move { Ok(session) })
    }

    fn read_only(&self) -> bool {
        true
    }

    fn gateway(&self, options: PoolOptions) -> Arc<dyn Database> {
        Arc::new(SqliteDatabase::new(
            self.path.clone(),
            options.size,
            options.wait,
        ))
    }
}

/// SQLite runs in this process: there is no statement on a server to cancel.
/// Dropping a query's stream interrupts it, and Ctrl-C ends the process.
struct NothingToCancel;

impl Canceller for NothingToCancel {
    fn cancel(&self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async { Ok(()) })
    }
}

/// A SQLite file for one command; no round trips, ever.
struct SqliteSession {
    path: PathBuf,
}

impl Session for SqliteSession {
    fn dialect(&self) -> Dialect {
        SQLITE
    }

    fn round_trips(&self) -> u64 {
        0
    }

    fn canceller(&self) -> Arc<dyn Canceller> {
        Arc::new(NothingToCancel)
    }

    /// A file has no server to stop answering: there is nothing to time out.
    fn set_wait_timeout(&mut self, _timeout: Option<std::time::Duration>) -> Result<(), Error> {
        Ok(())
    }

    fn export(
        self: Box<Self>,
        sql: String,
        options: ExportOptions,
    ) -> BoxFuture<'static, Result<Box<dyn Export>, Error>> {
        Box::pin(async move {
            if options.inline_large_objects {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    "SQLite has no large objects to inline",
                ));
            }
            // Text parameters, as PostgreSQL takes them: SQLite's type affinity
            // converts them where the column says so.
            let params = options
                .params
                .into_iter()
                .map(|value| value.map_or(Param::Null, Param::Text))
                .collect();
            let stream =
                SqliteStream::start(self.path, &sql, params, SqliteOptions::default()).await?;
            // The statement's thread ends with the stream: nothing else to close.
            Ok(Query::export(stream, |_| {
                let ended: BoxFuture<'static, ()> = Box::pin(async {});
                ended
            }))
        })
    }

    fn describe_table<'a>(&'a mut self, table: &'a str) -> BoxFuture<'a, Result<TableInfo, Error>> {
        let (path, table) = (self.path.clone(), table.to_owned());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || crate::describe::describe_table(&path, &table))
                .await
                .map_err(|error| Error::new(ErrorKind::Io, format!("describing failed: {error}")))?
        })
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_name_files() {
        let driver = SqliteDriver;
        assert!(driver.recognizes("sqlite:///tmp/x.db"));
        assert!(driver.recognizes("SQLite:x.db"));
        assert!(!driver.recognizes("postgres://h/db"));
        assert_eq!(
            format!("{:?}", driver.target("sqlite:///tmp/x.db").unwrap()),
            "SqliteTarget { path: \"/tmp/x.db\" }"
        );
        assert_eq!(
            format!("{:?}", driver.target("sqlite:x.db").unwrap()),
            "SqliteTarget { path: \"x.db\" }"
        );
        assert_eq!(
            driver.target("sqlite://").unwrap_err().kind(),
            ErrorKind::Config
        );
    }

    #[tokio::test]
    async fn a_session_exports_a_query_with_text_parameters() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("t.db");
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute_batch(
                "create table t (id integer, name text); insert into t values (1, 'a'), (2, 'b');",
            )
            .unwrap();
        drop(connection);
        let target = SqliteDriver
            .target(&format!("sqlite://{}", path.display()))
            .unwrap();
        let session = target.connect(&Meter::new()).await.unwrap();
        let options = ExportOptions {
            params: vec![Some("2".into())],
            ..ExportOptions::default()
        };
        let mut export = session
            .export("select name from t where id = ?1".into(), options)
            .await
            .unwrap();
        let batch = export.next_batch().await.unwrap().unwrap();
        assert_eq!(batch.num_rows(), 1);
        assert_eq!(batch.row(0).get(0), Some(&b"b"[..]));
        assert!(export.next_batch().await.unwrap().is_none());
        export.close().await;
    }
}
