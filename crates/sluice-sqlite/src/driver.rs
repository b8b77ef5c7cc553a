//! [`SqliteDriver`]: SQLite files for front ends that open databases by URL
//! ([`sluice_core::connect`]). `sqlite:///absolute/path.db`, `sqlite://relative.db`
//! and `sqlite:path.db` name a file, and so does a bare path the driver claims
//! ([`claims_path`]: a SQLite file name extension, or an existing file that
//! begins with SQLite's header); the file is opened read-only: a session exports query
//! results ([`SqliteStream`]), describes tables (for copies out of SQLite that
//! create their target) and serves the gateway ([`SqliteDatabase`]); loading
//! tables and calls are not offered (the trait's defaults say so).

use std::path::PathBuf;
use std::sync::Arc;

use sluice_core::connect::{
    Canceller, Dialect, Driver, Export, ExportOptions, PoolOptions, Session, Target,
};
use sluice_core::database::{BoxFuture, Database, Query};
use sluice_core::load::TableInfo;
use sluice_core::{Error, ErrorKind, Meter};

use crate::dialect::SQLITE;
use crate::gateway::SqliteDatabase;
use crate::{Param, SqliteOptions, SqliteStream};

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
        &["sqlite:///path/to/file.db", "path/to/file.db"]
    }

    fn recognizes(&self, target: &str) -> bool {
        has_scheme(target) || claims_path(target)
    }

    fn target(&self, target: &str) -> Result<Arc<dyn Target>, Error> {
        if !has_scheme(target) {
            return Ok(Arc::new(SqliteTarget {
                path: PathBuf::from(target),
            }));
        }
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

/// The file name extensions that say a path is a SQLite file.
const EXTENSIONS: &[&str] = &["db", "sqlite", "sqlite3", "db3"];

/// What every SQLite database file begins with.
const HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Whether `target` begins with the `sqlite:` scheme.
fn has_scheme(target: &str) -> bool {
    target
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("sqlite:"))
}

/// Whether `target` is a path this driver takes as a SQLite file, written
/// without `sqlite:`: no URL scheme and no `=` (other databases' forms), and
/// either a SQLite extension (the file may not exist yet: it is opened when a
/// query runs) or an existing file that begins with SQLite's header.
pub fn claims_path(target: &str) -> bool {
    if target.trim().is_empty() || target.contains("://") || target.contains('=') {
        return false;
    }
    let path = std::path::Path::new(target);
    let extension = path.extension().and_then(|extension| extension.to_str());
    extension.is_some_and(|extension| {
        EXTENSIONS
            .iter()
            .any(|known| known.eq_ignore_ascii_case(extension))
    }) || begins_with_header(path)
}

/// Whether the file at `path` exists and begins with SQLite's header.
fn begins_with_header(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut start = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut start))
        .is_ok_and(|()| &start == HEADER)
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

    #[test]
    fn a_path_is_claimed_by_its_extension_or_by_the_header_of_the_file_it_names() {
        let driver = SqliteDriver;
        for path in ["/var/lib/app.db", "data/app.SQLite", "x.sqlite3", "rel.db3"] {
            assert!(driver.recognizes(path), "{path}");
            assert_eq!(
                format!("{:?}", driver.target(path).unwrap()),
                format!("SqliteTarget {{ path: {path:?} }}")
            );
        }
        for other in ["host=db dbname=app", "postgres://h/db.db", "", "notes.txt"] {
            assert!(!driver.recognizes(other), "{other:?}");
        }
        let directory = tempfile::tempdir().unwrap();
        let database = directory.path().join("data");
        rusqlite::Connection::open(&database)
            .unwrap()
            .execute_batch("create table t (id integer);")
            .unwrap();
        assert!(driver.recognizes(database.to_str().unwrap()));
        let text = directory.path().join("text");
        std::fs::write(&text, "not a database, though long enough").unwrap();
        assert!(!driver.recognizes(text.to_str().unwrap()));
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
