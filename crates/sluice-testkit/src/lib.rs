//! Test support for sluice: a **real** PostgreSQL server for integration tests,
//! with one fresh schema per test (and a real MariaDB server, with one fresh
//! database per test: see [MariaDB](#mariadb)).
//!
//! # Which server
//!
//! The server is chosen once per test process (the first time [`TestDb::new`] or
//! [`server_url`] is called):
//!
//! 1. If the environment variable `SLUICE_TEST_PG_URL` is set (and not empty), that
//!    `postgres://` URL is used as is. It must point at a database in which the user
//!    may create schemas.
//! 2. Otherwise an **ephemeral cluster** is created: `initdb` into a directory
//!    `sluice-test-pg-<pid>-*` under [`std::env::temp_dir`], then `postgres` is started
//!    as a child of the test process, listening on a free TCP port of `127.0.0.1` only,
//!    with durability switched off for speed. A database `sluice_test` is created in it.
//!    The binaries are looked up in `pg_config --bindir`, then the newest
//!    `/usr/lib/postgresql/*/bin`, then `PATH`. If they cannot be found the tests
//!    **panic** (they are never skipped silently): install PostgreSQL (Debian/Ubuntu:
//!    `apt-get install postgresql`) or set `SLUICE_TEST_PG_URL`.
//!
//! When the test process runs as root (`initdb` refuses to), the cluster is owned by
//! and runs as the user `nobody` (its directory then goes to `/tmp` if the temp dir is
//! not reachable by other users).
//!
//! # Lifetime of the ephemeral server
//!
//! On Linux the postmaster is started with `PR_SET_PDEATHSIG = SIGQUIT` from a
//! dedicated thread that never exits, so it shuts down (immediately) as soon as the
//! test process ends, however it ends — even on `SIGKILL`. A small `sh` watcher,
//! detached in its own process group, removes the cluster's directory once the test
//! process is gone and the postmaster has exited; directories left behind anyway
//! (for example if the watcher was killed too) are removed by the next test process
//! that starts an ephemeral cluster, once their owning process is dead.
//!
//! # Dedicated clusters
//!
//! A test that needs server settings of its own (a tiny `max_connections`,
//! `pg_hba.conf` lines for an authentication method) starts its own ephemeral cluster
//! with [`ClusterBuilder`], whatever `SLUICE_TEST_PG_URL` says; the server binaries
//! are then required. Dropping the [`Cluster`] stops it.
//!
//! # Isolation
//!
//! Each [`TestDb`] is a new, empty schema named `t_<pid>_<counter>_<random>`; its
//! [`TestDb::url`] makes every connection use that schema as `search_path`, and the
//! schema is dropped (`CASCADE`) when the `TestDb` is dropped. Tests of one process
//! run in parallel threads and share one server; everything here is thread-safe.
//!
//! SQL helpers ([`TestDb::execute`], [`TestDb::query_text`], [`TestDb::psql_bytes`])
//! run the `psql` command-line client, which must therefore be installed too.
//!
//! # MariaDB
//!
//! [`TestMariaDb`] is the same for MariaDB, with a fresh, empty **database** per
//! test (named `t_<pid>_<counter>_<random>`, utf8mb4, dropped on Drop) and
//! [`TestMariaDb::url`] a `mariadb://` URL with that database as its path. The
//! server is chosen once per process, independently of PostgreSQL's:
//!
//! 1. `SLUICE_TEST_MARIADB_URL` (a `mariadb://` or `mysql://` URL), when set and not
//!    empty, used as is; its user must be able to create databases.
//! 2. Otherwise an **ephemeral server**: `mariadb-install-db` into a directory
//!    `sluice-test-mariadb-<pid>-*` of the temp dir, then `mariadbd` as a child of
//!    the test process on a free port of `127.0.0.1` (durability and the binary log
//!    off, utf8mb4), with a user `sluice` (password `sluice`, every privilege); URLs
//!    are `mariadb://sluice:sluice@127.0.0.1:<port>/…`. The binaries are looked up
//!    in `PATH`, then `/usr/bin` and `/usr/sbin`; if they are missing the tests
//!    **panic**: install `mariadb-server` and `mariadb-client` or set
//!    `SLUICE_TEST_MARIADB_URL`.
//!
//! As for PostgreSQL, a root test process runs the server as `nobody`; the server
//! gets `PR_SET_PDEATHSIG = SIGKILL` (its data is thrown away, so there is nothing
//! to shut down cleanly), a detached `sh` watcher removes its directory once the
//! process and the server are gone, and leftovers of dead processes are removed by
//! the next process that starts one. The SQL helpers ([`TestMariaDb::execute`],
//! [`TestMariaDb::query_text`]) run the `mariadb` command-line client.
//!
//! # Example
//!
//! ```no_run
//! use sluice_testkit::TestDb;
//!
//! let db = TestDb::new();
//! db.execute("create table t (id int, name text); insert into t values (1, 'a'), (2, 'b');");
//! assert_eq!(db.query_text("select count(*) from t"), "2");
//! let csv = db.psql_bytes("copy (select id, name from t order by id) to stdout with (format csv)");
//! assert_eq!(csv, b"1,a\n2,b\n");
//! // `db.url()` is what the code under test connects to.
//! assert!(db.url().contains("search_path"));
//! ```

#![warn(missing_docs)]

mod cluster;
mod http;
mod java;
mod mariadb;
mod names;
mod process;
mod psql;
mod python;
mod tls;
mod wait;

pub use cluster::{Cluster, ClusterBuilder};
pub use http::http_exchange;
pub use java::{jdbc_url, JavaProgram, JDBC_JAR};
pub use mariadb::{mariadb_server_url, MariaDbServer, TestMariaDb};
pub use python::{python_oracle, python_output, run_python, REQUIREMENTS as PYTHON_REQUIREMENTS};
pub use tls::{CertificateFiles, TestCertificates};
pub use wait::{eventually, wait_until};

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::names::{random_suffix, unique_name};
use crate::process::output_text;
use crate::psql::{run_psql, PSQL_NOT_FOUND};

/// Environment variable naming an existing server to use instead of an ephemeral one.
const ENV_URL: &str = "SLUICE_TEST_PG_URL";

/// The shared server of this test process.
struct Server {
    /// URL of the server's test database, without schema options.
    url: String,
    /// The `psql` binary used for all SQL helpers.
    psql: PathBuf,
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

/// The shared server, started on first use. A failure to get one is remembered and
/// reported (by a panic) to every caller, so it is only attempted once per process.
fn server() -> &'static Server {
    match SERVER.get_or_init(init_server) {
        Ok(server) => server,
        Err(message) => panic!("sluice-testkit: no PostgreSQL server for tests: {message}"),
    }
}

/// The write end of a pipe whose read end is already closed: every write to it
/// fails with EPIPE, as a command's output does in `command 2>&1 | head -1` once
/// `head` has left. For testing that a child process survives closed standard
/// streams: pass it (or a `try_clone` of it) as the child's stdout or stderr.
///
/// # Panics
///
/// If the pipe cannot be created.
pub fn closed_pipe() -> OwnedFd {
    // Close-on-exec keeps the write end out of children spawned by other tests meanwhile.
    let (read, write) = process::pipe().unwrap_or_else(|e| panic!("pipe2 failed: {e}"));
    drop(read);
    write
}

/// URL of the shared server itself (no schema option), starting it if needed.
///
/// This is `SLUICE_TEST_PG_URL` when that is set, otherwise
/// `postgres://postgres@127.0.0.1:<port>/sluice_test` of the ephemeral cluster.
/// Connections made with it use the server's default `search_path`; prefer
/// [`TestDb::url`] in tests.
///
/// # Panics
///
/// If no server can be had (see the [crate documentation](crate)).
pub fn server_url() -> &'static str {
    &server().url
}

/// The `psql` binary the SQL helpers run, for tests that point it somewhere else
/// (through a proxy, say) and look at what a libpq client makes of the answer.
///
/// # Panics
///
/// As [`server_url`].
pub fn psql_path() -> &'static Path {
    &server().psql
}

/// The longest a test helper's SQL waits for a lock before it fails.
const HELPER_LOCK_TIMEOUT: &str = "120s";

/// Drops `value` on a thread of its own and says whether that ended within
/// `limit`: a test of a drop that could wait for ever fails instead of
/// hanging (the thread is left behind if it does not end).
pub fn dropped_within<T: Send + 'static>(value: T, limit: std::time::Duration) -> bool {
    let (done, dropped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(value);
        let _ = done.send(());
    });
    dropped.recv_timeout(limit).is_ok()
}

/// A fresh, empty schema on a real PostgreSQL server, dropped (CASCADE) on Drop (best effort, errors ignored).
///
/// See the [crate documentation](crate) for how the server is chosen.
#[derive(Debug)]
pub struct TestDb {
    schema: String,
    url: String,
    pgoptions: String,
    /// Roles made by [`TestDb::create_role`], dropped after the schema.
    roles: std::sync::Mutex<Vec<String>>,
}

/// A login role made for one test by [`TestDb::create_role`].
#[derive(Debug, Clone)]
pub struct TestRole {
    /// The role's name (unique in the cluster).
    pub name: String,
    /// Like [`TestDb::url`] (same server, database and `search_path`), logging in as this role.
    pub url: String,
}

impl TestDb {
    /// Creates a new schema named like `t_<pid>_<counter>_<short random>` on the shared server.
    ///
    /// # Panics
    ///
    /// If no server can be had, or the schema cannot be created.
    #[allow(clippy::new_without_default)] // creating a schema is a side effect, not a default
    pub fn new() -> TestDb {
        let server = server();
        let schema = unique_name();
        let sql = format!("CREATE SCHEMA {schema};");
        if let Err(failure) = run_psql(&server.psql, &server.url, None, &[], &sql) {
            panic!("sluice-testkit: could not create schema {schema}: {failure}");
        }
        TestDb {
            url: url_with_search_path(&server.url, &schema),
            pgoptions: format!("-c search_path={schema}"),
            schema,
            roles: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Creates a login role named `<schema>_<suffix>` with a random password and
    /// `USAGE` on this schema, and nothing else (no superuser, no other grants:
    /// grant what the test needs with [`TestDb::execute`]). Roles are cluster-wide,
    /// so the schema in the name keeps parallel tests apart; the role is dropped
    /// (best effort) when the `TestDb` is.
    ///
    /// # Panics
    ///
    /// If `suffix` is not lowercase letters, digits and `_`, or the role cannot be
    /// created, or the server's URL has no `user@` to replace.
    pub fn create_role(&self, suffix: &str) -> TestRole {
        assert!(
            !suffix.is_empty()
                && suffix
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "sluice-testkit: role suffix {suffix:?} must be lowercase letters, digits and _"
        );
        let name = format!("{}_{suffix}", self.schema);
        let password = format!(
            "{}{}",
            random_suffix(name.len() as u64),
            random_suffix(u64::MAX - name.len() as u64)
        );
        self.execute(&format!(
            "CREATE ROLE {name} LOGIN PASSWORD '{password}'; GRANT USAGE ON SCHEMA {} TO {name};",
            self.schema
        ));
        self.roles
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push(name.clone());
        let url = url_with_user(&self.url, &name, &password).unwrap_or_else(|| {
            panic!(
                "sluice-testkit: cannot put a user into the URL {}",
                self.url
            )
        });
        TestRole { name, url }
    }

    /// postgres:// URL whose connections use this schema: it carries `options=-c search_path=<schema>` URL-encoded
    /// (e.g. postgres://user@127.0.0.1:PORT/dbname?options=-c%20search_path%3Dt_123_1_ab). Host is TCP, never a socket path.
    ///
    /// (With `SLUICE_TEST_PG_URL` the host is whatever that URL says. If that URL
    /// already has an `options` parameter, the `search_path` setting is appended to it.)
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema name.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Runs SQL through `psql -X -q -v ON_ERROR_STOP=1` with this schema as search_path (PGOPTIONS), panics with psql's stderr on failure.
    ///
    /// The SQL is fed to psql on its standard input, so it may hold several statements
    /// (and psql meta-commands); they run one after another, stopping at the first error.
    pub fn execute(&self, sql: &str) {
        self.run(&[], sql);
    }

    /// Runs SQL with psql in unaligned tuples-only mode (-A -t) and returns stdout as a String (trailing newline trimmed).
    ///
    /// Columns are separated by `|` and rows by `\n`; NULL prints as an empty string.
    /// Only one trailing newline is removed.
    ///
    /// # Panics
    ///
    /// Like [`TestDb::execute`], or if the output is not UTF-8.
    pub fn query_text(&self, sql: &str) -> String {
        output_text(self.run(&["-A", "-t"], sql), "psql", sql)
    }

    /// Runs SQL with psql and returns raw stdout bytes untouched (used to capture `COPY (...) TO STDOUT ...` output byte for byte).
    ///
    /// psql runs as for [`TestDb::execute`] (`-q` keeps command tags such as `COPY 2` out
    /// of the output); the client encoding is UTF8.
    pub fn psql_bytes(&self, sql: &str) -> Vec<u8> {
        self.run(&[], sql)
    }

    /// A `psql` connected to this schema that reads SQL from its piped
    /// standard input and runs it as it comes, for tests that hold a session
    /// open (a transaction, a lock) while something else happens. Its output
    /// goes nowhere; it ends when its standard input closes.
    ///
    /// # Panics
    ///
    /// If psql cannot be started.
    pub fn open_session(&self) -> std::process::Child {
        let server = server();
        Command::new(&server.psql)
            .args(["-X", "-q", "-w", "-d", &self.url, "-f", "-"])
            .env("PGOPTIONS", &self.pgoptions)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("sluice-testkit: starting psql: {error}"))
    }

    fn run(&self, extra_args: &[&str], sql: &str) -> Vec<u8> {
        let server = server();
        // A helper's statement waiting on a lock a session of the test holds
        // (whose task may run on the thread psql blocks) fails, naming its
        // SQL, instead of hanging the test. On the SQL's first line, so
        // psql's line numbers stay the SQL's own.
        let limited = format!("SET lock_timeout = '{HELPER_LOCK_TIMEOUT}'; {sql}");
        match run_psql(
            &server.psql,
            &self.url,
            Some(&self.pgoptions),
            extra_args,
            &limited,
        ) {
            Ok(stdout) => stdout,
            Err(failure) => panic!(
                "sluice-testkit: SQL failed in schema {}: {failure}\n--- SQL ---\n{sql}",
                self.schema
            ),
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(Ok(server)) = SERVER.get() {
            let mut sql = drop_schema_sql(&self.schema);
            let roles = self
                .roles
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            for role in roles.iter() {
                sql.push_str(&format!(" DROP ROLE IF EXISTS {role};"));
            }
            let _ = run_psql(&server.psql, &server.url, None, &[], &sql);
        }
    }
}

/// SQL dropping `schema`, and the large objects its `oid` columns refer to,
/// even while sessions the test left open hold locks in it.
///
/// Large objects live outside every schema, so dropping the schema would
/// leave them behind (gigabytes, for the large-value tests): they are
/// unlinked first.
///
/// The test is over, but its sessions may not be: a server's pooled
/// connection still ending the transaction of a part it has streamed, or a
/// snapshot still held. DROP SCHEMA would wait for their locks, and a
/// `#[tokio::test]` runs those sessions' tasks on the very thread this drop
/// blocks, so they would never end and the suite would hang (it did, once,
/// in CI). So whoever holds a lock in the schema is terminated first (where
/// this role may), and a lock taken in the meantime is waited for a few
/// seconds at a time.
fn drop_schema_sql(schema: &str) -> String {
    format!(
        "SET lock_timeout = '5s';
DO $drop$
DECLARE
  holder int;
  c record;
BEGIN
  FOR attempt IN 1..12 LOOP
    FOR holder IN
      SELECT DISTINCT l.pid FROM pg_locks l
       WHERE l.pid <> pg_backend_pid()
         AND (l.relation IN (SELECT k.oid FROM pg_class k
                               JOIN pg_namespace n ON n.oid = k.relnamespace
                              WHERE n.nspname = '{schema}')
              OR (l.classid = 'pg_namespace'::regclass
                  AND l.objid = (SELECT oid FROM pg_namespace WHERE nspname = '{schema}')))
    LOOP
      BEGIN
        PERFORM pg_terminate_backend(holder, 5000);
      EXCEPTION WHEN insufficient_privilege THEN NULL;
      END;
    END LOOP;
    BEGIN
      BEGIN
        FOR c IN SELECT table_name, column_name FROM information_schema.columns
                  WHERE table_schema = '{schema}' AND data_type = 'oid' LOOP
          EXECUTE format('SELECT lo_unlink(m.oid) FROM pg_largeobject_metadata m
                          WHERE m.oid IN (SELECT %I FROM %I.%I)',
                         c.column_name, '{schema}', c.table_name);
        END LOOP;
      EXCEPTION
        WHEN lock_not_available THEN RAISE;
        WHEN OTHERS THEN NULL;
      END;
      DROP SCHEMA IF EXISTS {schema} CASCADE;
      RETURN;
    EXCEPTION WHEN lock_not_available THEN NULL;
    END;
  END LOOP;
END $drop$;"
    )
}

/// `url` (`postgres://[user[:password]@]host…`) logging in as `user` with `password`.
fn url_with_user(url: &str, user: &str, password: &str) -> Option<String> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let host = match rest[..authority_end].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    Some(format!("postgres://{user}:{password}@{host}"))
}

/// `base` with `options=-c search_path=<schema>` (URL-encoded) added to its query
/// string, or appended to an `options` parameter it already has.
fn url_with_search_path(base: &str, schema: &str) -> String {
    let option = format!("-c%20search_path%3D{schema}");
    let (head, query) = match base.split_once('?') {
        Some((head, query)) => (head, query),
        None => (base, ""),
    };
    let mut params: Vec<String> = Vec::new();
    let mut merged = false;
    for param in query.split('&').filter(|p| !p.is_empty()) {
        if !merged && param.starts_with("options=") {
            merged = true;
            params.push(format!("{param}%20{option}"));
        } else {
            params.push(param.to_owned());
        }
    }
    if !merged {
        params.push(format!("options={option}"));
    }
    format!("{head}?{}", params.join("&"))
}

// ---------------------------------------------------------------------------
// Server selection
// ---------------------------------------------------------------------------

fn init_server() -> Result<Server, String> {
    match std::env::var(ENV_URL) {
        Ok(url) if !url.trim().is_empty() => external_server(url.trim().to_owned()),
        _ => shared_cluster(),
    }
}

/// The server named by `SLUICE_TEST_PG_URL`, checked to be reachable.
fn external_server(url: String) -> Result<Server, String> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(format!(
            "{ENV_URL} must be a postgres:// or postgresql:// URL, got {url:?}"
        ));
    }
    let psql = cluster::find_binary("psql", None).ok_or_else(|| PSQL_NOT_FOUND.to_owned())?;
    run_psql(&psql, &url, None, &[], "SELECT 1;")
        .map_err(|e| format!("{ENV_URL} is set but its server cannot be used: {e}"))?;
    Ok(Server { url, psql })
}

/// An ephemeral cluster that lives as long as this process.
fn shared_cluster() -> Result<Server, String> {
    let cluster = cluster::start_shared()?;
    let server = Server {
        url: cluster.url().to_owned(),
        psql: cluster.psql().to_path_buf(),
    };
    cluster.keep_for_process();
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_path_is_added_to_urls_without_query() {
        assert_eq!(
            url_with_search_path("postgres://u@127.0.0.1:5432/db", "t_1_2_ab"),
            "postgres://u@127.0.0.1:5432/db?options=-c%20search_path%3Dt_1_2_ab"
        );
        assert_eq!(
            url_with_search_path("postgres://u@127.0.0.1:5432/db?", "s"),
            "postgres://u@127.0.0.1:5432/db?options=-c%20search_path%3Ds"
        );
    }

    #[test]
    fn search_path_is_appended_to_existing_query() {
        assert_eq!(
            url_with_search_path("postgres://u@h/db?sslmode=disable", "s"),
            "postgres://u@h/db?sslmode=disable&options=-c%20search_path%3Ds"
        );
        assert_eq!(
            url_with_search_path(
                "postgres://u@h/db?options=-c%20work_mem%3D1MB&sslmode=disable",
                "s"
            ),
            "postgres://u@h/db?options=-c%20work_mem%3D1MB%20-c%20search_path%3Ds&sslmode=disable"
        );
    }

    #[test]
    fn a_user_replaces_the_one_in_the_url() {
        assert_eq!(
            url_with_user("postgres://postgres@127.0.0.1:5432/db?options=x", "r", "pw").unwrap(),
            "postgres://r:pw@127.0.0.1:5432/db?options=x"
        );
        assert_eq!(
            url_with_user("postgresql://u:secret@h/db", "r", "pw").unwrap(),
            "postgres://r:pw@h/db"
        );
        assert_eq!(
            url_with_user("postgres://h/db", "r", "pw").unwrap(),
            "postgres://r:pw@h/db"
        );
        assert!(url_with_user("mysql://h/db", "r", "pw").is_none());
    }
}
