//! Databases behind the server: a pool per database and a [`Source`] per query.
//!
//! PostgreSQL sessions live in a `deadpool` pool. A session that runs a query is
//! taken out of its pool slot for the query's duration and put back only when the
//! result was read to the end; a query that ends any other way (client gone, error,
//! shutdown) leaves the slot empty, so the pool discards it and connects afresh
//! next time rather than reusing a session in an unknown state. Before reuse, an
//! idle session is checked without a round trip ([`sluice_postgres::Connection::check_idle`]),
//! which catches sessions a database restart has ended.
//!
//! A pooled session remembers the settings it was given (`statement_timeout`,
//! `default_transaction_read_only`), so each request sends a `SET` only when it
//! needs something else than the session's last user, in the message it sends
//! anyway when nothing changes: none.
//!
//! Ad-hoc SQL (`POST /sql`) runs in `BEGIN READ ONLY`, as the `[sql] role` when
//! one is set (`SET LOCAL ROLE`, gone with the transaction), after
//! [`crate::privileges::QUERY`] has found the login unprivileged — all in one
//! message before the statement — on a session that is discarded afterwards.
//!
//! SQLite needs no pool of connections (opening a file costs microseconds); a
//! semaphore of `pool_size` permits bounds concurrent queries instead, with the
//! same wait-then-503 behaviour.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadpool::managed::{self, Object, PoolError, RecycleError, TimeoutType};
use sluice_core::{Batch, BatchSource, Error, ErrorKind, Meter, MeterSnapshot, Schema};
use sluice_postgres::{CancelToken, Connection, QueryOptions, QueryStream};
use sluice_sqlite::{SqliteOptions, SqliteStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use crate::config::{DatabaseConfig, DatabaseKind};
use crate::params::Typed;

/// How long a cancel request may take before it is given up.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// Creates and checks PostgreSQL sessions for the pool.
#[derive(Debug)]
pub struct PgManager {
    config: Arc<sluice_postgres::Config>,
}

/// A pooled PostgreSQL session. `connection` is `None` while a query owns it and
/// stays `None` if the query did not end cleanly, which makes the pool drop it.
#[derive(Debug)]
pub struct PgSession {
    connection: Option<Connection>,
    /// The settings this session has, so they are only SET when they change;
    /// `None` when unknown (a new session, or a SET that failed).
    settings: Option<Settings>,
}

/// The session settings a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Settings {
    /// `statement_timeout` (`None`: none).
    statement_timeout: Option<Duration>,
    /// `default_transaction_read_only = on`; false is the server's default for the
    /// login (RESET), not a forced `off`.
    read_only: bool,
}

impl Settings {
    /// The SQL that takes a session from `current` to these settings; empty when
    /// nothing changes.
    fn sql_from(self, current: Option<Settings>) -> String {
        let mut statements = Vec::new();
        if current.map(|current| current.statement_timeout) != Some(self.statement_timeout) {
            let milliseconds = self
                .statement_timeout
                .map_or(0, |timeout| timeout.as_millis());
            statements.push(format!("SET statement_timeout = {milliseconds}"));
        }
        if current.map(|current| current.read_only) != Some(self.read_only) {
            statements.push(if self.read_only {
                "SET default_transaction_read_only = on".to_owned()
            } else {
                "RESET default_transaction_read_only".to_owned()
            });
        }
        statements.join("; ")
    }

    /// Gives `connection` these settings, `current` being what it has (updated).
    async fn apply(
        self,
        connection: &mut Connection,
        current: &mut Option<Settings>,
    ) -> Result<(), Error> {
        let sql = self.sql_from(*current);
        if sql.is_empty() {
            return Ok(());
        }
        // Until it succeeded, the session's settings are unknown.
        *current = None;
        connection.simple_query(&sql).await?;
        *current = Some(self);
        Ok(())
    }
}

impl managed::Manager for PgManager {
    type Type = PgSession;
    type Error = Error;

    async fn create(&self) -> Result<PgSession, Error> {
        let connection = Connection::connect(&self.config, &Meter::new()).await?;
        Ok(PgSession {
            connection: Some(connection),
            settings: None,
        })
    }

    async fn recycle(
        &self,
        session: &mut PgSession,
        _: &managed::Metrics,
    ) -> managed::RecycleResult<Error> {
        match session.connection.as_mut() {
            None => Err(RecycleError::message(
                "the session's last query did not end cleanly",
            )),
            Some(connection) => connection.check_idle().map_err(RecycleError::Backend),
        }
    }
}

enum Pool {
    Postgres {
        pool: managed::Pool<PgManager>,
        config: Arc<sluice_postgres::Config>,
    },
    Sqlite {
        path: PathBuf,
        permits: Arc<Semaphore>,
        size: usize,
        wait: Duration,
        /// Queries waiting for a permit (a semaphore does not count them).
        waiting: AtomicUsize,
    },
}

/// One configured database.
pub struct Database {
    name: String,
    pool: Pool,
}

/// How a query runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode<'a> {
    /// A named query from the configuration, with `default_transaction_read_only
    /// = on` when `read_only` (the request may not write), on a pooled session.
    Named {
        /// The request may not write.
        read_only: bool,
    },
    /// Ad-hoc SQL: inside a READ ONLY transaction, as `role` when given, once the
    /// login is found unprivileged, on a session that is discarded afterwards so
    /// nothing it changed (settings, roles) outlives the request.
    ReadOnly {
        /// `SET LOCAL ROLE` to this role first.
        role: Option<&'a str>,
    },
}

/// Why a query did not start.
#[derive(Debug)]
pub enum StartError {
    /// Every connection stayed busy for the configured wait.
    Busy,
    /// The database cannot be reached.
    Unavailable(Error),
    /// The database refused the query (bad SQL, a parameter it cannot convert, …).
    Query(Error),
    /// Ad-hoc SQL may not run here.
    Refused(Refusal),
}

/// Why ad-hoc SQL may not run on a database.
#[derive(Debug)]
pub enum Refusal {
    /// The login may do what read-only transactions do not stop.
    Privileged(crate::privileges::Privileges),
    /// `SET ROLE` to the `[sql] role` failed (no such role, or the login is not a member).
    Role(Error),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Privileged(privileges) => write!(f, "{privileges}"),
            Refusal::Role(error) => write!(f, "SET ROLE failed: {error}"),
        }
    }
}

fn classify(error: Error) -> StartError {
    match error.kind() {
        ErrorKind::Connect | ErrorKind::Authentication | ErrorKind::Closed | ErrorKind::Io => {
            StartError::Unavailable(error)
        }
        _ => StartError::Query(error),
    }
}

impl Database {
    /// A database with an empty pool; connections are made on first use, so a
    /// database that is down at start only makes requests fail until it is back.
    pub fn new(config: &DatabaseConfig) -> Database {
        let pool = match &config.kind {
            DatabaseKind::Postgres(postgres) => {
                let postgres = Arc::new(postgres.clone());
                let pool = managed::Pool::builder(PgManager {
                    config: postgres.clone(),
                })
                .max_size(config.pool_size)
                .wait_timeout(Some(config.pool_wait))
                .create_timeout(Some(postgres.connect_timeout))
                .recycle_timeout(Some(Duration::from_secs(1)))
                .runtime(deadpool::Runtime::Tokio1)
                .build()
                .expect("a runtime and a size are set");
                Pool::Postgres {
                    pool,
                    config: postgres,
                }
            }
            DatabaseKind::Sqlite(path) => Pool::Sqlite {
                path: path.clone(),
                permits: Arc::new(Semaphore::new(config.pool_size)),
                size: config.pool_size,
                wait: config.pool_wait,
                waiting: AtomicUsize::new(0),
            },
        };
        Database {
            name: config.name.clone(),
            pool,
        }
    }

    /// The database's name in the configuration.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True for SQLite (parameters bind by storage class; no round trips).
    pub fn is_sqlite(&self) -> bool {
        matches!(self.pool, Pool::Sqlite { .. })
    }

    /// Connections (or SQLite queries) in use, and the pool's size.
    pub fn usage(&self) -> (usize, usize) {
        match &self.pool {
            Pool::Postgres { pool, .. } => {
                let status = pool.status();
                (
                    status.size.saturating_sub(status.available),
                    status.max_size,
                )
            }
            Pool::Sqlite { permits, size, .. } => (size - permits.available_permits(), *size),
        }
    }

    /// Requests waiting for a connection (SQLite: for a permit) right now.
    pub fn waiting(&self) -> usize {
        match &self.pool {
            Pool::Postgres { pool, .. } => pool.status().waiting,
            Pool::Sqlite { waiting, .. } => waiting.load(Ordering::Relaxed),
        }
    }

    /// Runs `select 1` (PostgreSQL through the pool, SQLite on the file).
    pub async fn check(&self) -> Result<(), StartError> {
        let mut source = self
            .start(
                "select 1",
                Vec::new(),
                Some(Duration::from_secs(2)),
                Mode::Named { read_only: true },
            )
            .await?;
        while source.next_batch().await.map_err(classify)?.is_some() {}
        source.complete();
        Ok(())
    }

    /// Starts `sql` with `params` bound (`None` is SQL NULL), waiting for a connection up to the pool's
    /// `pool_wait`.
    pub async fn start(
        &self,
        sql: &str,
        params: Vec<Option<Typed>>,
        statement_timeout: Option<Duration>,
        mode: Mode<'_>,
    ) -> Result<Source, StartError> {
        match &self.pool {
            Pool::Postgres { pool, config } => {
                let (mut session, mut connection) = checkout(pool).await?;
                match mode {
                    Mode::Named { read_only } => {
                        let wanted = Settings {
                            statement_timeout,
                            read_only,
                        };
                        wanted
                            .apply(&mut connection, &mut session.settings)
                            .await
                            .map_err(classify)?;
                    }
                    Mode::ReadOnly { role } => {
                        begin_ad_hoc(&mut connection, statement_timeout, role).await?;
                    }
                }
                let meter = connection.meter().clone();
                let meter_start = meter.snapshot();
                let cancel = connection.cancel_token();
                let options = QueryOptions {
                    params: params
                        .into_iter()
                        .map(|param| param.map(|param| param.text))
                        .collect(),
                    fetch_size: None,
                    lob_inline: false,
                };
                let stream = QueryStream::start(connection, sql, options)
                    .await
                    .map_err(classify)?;
                Ok(Source {
                    inner: Inner::Postgres {
                        stream: Box::new(stream),
                        session,
                        cancel,
                        config: config.clone(),
                        reuse: matches!(mode, Mode::Named { .. }),
                    },
                    meter: Some((meter, meter_start)),
                })
            }
            Pool::Sqlite {
                path,
                permits,
                wait,
                waiting,
                ..
            } => {
                let waiter = Waiter::enter(waiting);
                let acquired = tokio::time::timeout(*wait, permits.clone().acquire_owned()).await;
                drop(waiter);
                let permit = match acquired {
                    Ok(Ok(permit)) => permit,
                    Ok(Err(_)) => {
                        return Err(StartError::Unavailable(Error::new(
                            ErrorKind::Closed,
                            "the database is closed",
                        )))
                    }
                    Err(_) => return Err(StartError::Busy),
                };
                let options = SqliteOptions {
                    statement_timeout,
                    read_write: false,
                };
                let params = params
                    .into_iter()
                    .map(|param| param.map_or(sluice_sqlite::Param::Null, |param| param.sqlite))
                    .collect();
                let stream = SqliteStream::start(path, sql, params, options)
                    .await
                    .map_err(classify)?;
                Ok(Source {
                    inner: Inner::Sqlite {
                        stream,
                        _permit: permit,
                    },
                    meter: None,
                })
            }
        }
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

/// Opens the READ ONLY transaction of an ad-hoc statement, as `role` if given,
/// and checks the login in the same message (see [`crate::privileges`]). The
/// check's `SELECT` also takes the transaction's first snapshot, after which the
/// statement can no longer make it read-write (`SET TRANSACTION READ WRITE`).
async fn begin_ad_hoc(
    connection: &mut Connection,
    statement_timeout: Option<Duration>,
    role: Option<&str>,
) -> Result<(), StartError> {
    let rows = connection
        .simple_query(&ad_hoc_setup(statement_timeout, role))
        .await
        .map_err(|error| match error.kind() {
            // BEGIN and SET LOCAL statement_timeout cannot fail: it is the role.
            ErrorKind::Database => StartError::Refused(Refusal::Role(error)),
            _ => classify(error),
        })?;
    let privileges = crate::privileges::Privileges::from_rows(&rows);
    if privileges.is_safe() {
        Ok(())
    } else {
        Err(StartError::Refused(Refusal::Privileged(privileges)))
    }
}

/// The statements [`begin_ad_hoc`] sends, as one simple query.
fn ad_hoc_setup(statement_timeout: Option<Duration>, role: Option<&str>) -> String {
    let milliseconds = statement_timeout.map_or(0, |timeout| timeout.as_millis());
    let mut sql = format!("BEGIN READ ONLY; SET LOCAL statement_timeout = {milliseconds}; ");
    if let Some(role) = role {
        sql.push_str(&format!(
            "SET LOCAL ROLE {}; ",
            crate::privileges::quote_identifier(role)
        ));
    }
    sql.push_str(&crate::privileges::QUERY);
    sql
}

/// [`Database::describe`] for SQLite.
fn describe_sqlite(path: &std::path::Path, sql: &str) -> Result<Described, StartError> {
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
    Ok(Described::Sqlite {
        parameters: statement.parameter_count(),
        read_only: statement.readonly(),
    })
}

/// Takes a session out of `pool`, waiting up to `pool_wait`.
async fn checkout(
    pool: &managed::Pool<PgManager>,
) -> Result<(Object<PgManager>, Connection), StartError> {
    let mut session = match pool.get().await {
        Ok(session) => session,
        Err(PoolError::Timeout(TimeoutType::Wait)) => return Err(StartError::Busy),
        Err(PoolError::Timeout(_)) => {
            return Err(StartError::Unavailable(Error::new(
                ErrorKind::Connect,
                "timed out connecting to the database",
            )))
        }
        Err(PoolError::Backend(error)) => return Err(classify(error)),
        Err(other) => {
            return Err(StartError::Unavailable(Error::new(
                ErrorKind::Connect,
                other.to_string(),
            )))
        }
    };
    let Some(connection) = session.connection.take() else {
        return Err(StartError::Unavailable(Error::new(
            ErrorKind::Closed,
            "the pool handed out an empty session",
        )));
    };
    Ok((session, connection))
}

/// What a database says of a statement it prepared without running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Described {
    /// PostgreSQL: the type OID it inferred for each parameter, `$1` first.
    Postgres(Vec<u32>),
    /// SQLite: its number of parameters (the highest `?n`), and whether it only reads.
    Sqlite {
        /// The highest parameter number.
        parameters: usize,
        /// False for a statement that would write.
        read_only: bool,
    },
}

impl Database {
    /// Prepares `sql` without running it (PostgreSQL: Parse and Describe on a
    /// pooled session; SQLite: on the file, opened read-only). A statement the
    /// database refuses is `StartError::Query`.
    pub async fn describe(&self, sql: &str) -> Result<Described, StartError> {
        match &self.pool {
            Pool::Postgres { pool, .. } => {
                let (mut session, mut connection) = checkout(pool).await?;
                let described = connection.parameter_types(sql).await;
                if described.is_ok()
                    || described
                        .as_ref()
                        .is_err_and(|error| error.kind() == ErrorKind::Database)
                {
                    // The session is idle again (also after the server refused
                    // the SQL): back to the pool.
                    session.connection = Some(connection);
                }
                described.map(Described::Postgres).map_err(classify)
            }
            Pool::Sqlite { path, .. } => {
                let path = path.clone();
                let sql = sql.to_owned();
                tokio::task::spawn_blocking(move || describe_sqlite(&path, &sql))
                    .await
                    .map_err(|error| {
                        StartError::Unavailable(Error::new(ErrorKind::Io, error.to_string()))
                    })?
            }
        }
    }

    /// Sets up a session as `POST /sql` does (as `role`, with the login checked),
    /// then closes it: `Refused` says why ad-hoc SQL could not run here. SQLite,
    /// opened read-only with no server behind it, passes.
    pub async fn check_ad_hoc(&self, role: Option<&str>) -> Result<(), StartError> {
        let Pool::Postgres { pool, .. } = &self.pool else {
            return Ok(());
        };
        // The session's slot stays empty, so the pool discards it.
        let (_session, mut connection) = checkout(pool).await?;
        let checked = begin_ad_hoc(&mut connection, Some(Duration::from_secs(10)), role).await;
        connection.close().await;
        checked
    }

    /// A PostgreSQL session held for one request that drives the connection
    /// itself (an import, a batch of calls), waiting up to `pool_wait` for it;
    /// `None` for SQLite, which is served read-only.
    pub async fn session(&self) -> Option<Result<Session, StartError>> {
        let Pool::Postgres { pool, .. } = &self.pool else {
            return None;
        };
        Some(checkout(pool).await.map(|(object, connection)| Session {
            meter_start: connection.meter().snapshot(),
            object,
            connection: Some(connection),
        }))
    }
}

/// A PostgreSQL session taken from its pool for one request. [`Session::release`]
/// puts it back; dropped without that (an error, a client gone, shutdown), it is
/// discarded: its socket is closed, so the server rolls back whatever was open.
pub struct Session {
    object: Object<PgManager>,
    connection: Option<Connection>,
    meter_start: MeterSnapshot,
}

impl Session {
    /// The connection, idle.
    pub fn connection(&mut self) -> &mut Connection {
        self.connection
            .as_mut()
            .expect("the connection is only taken by release")
    }

    /// Round trips to the database since the session was taken.
    pub fn round_trips(&self) -> u64 {
        self.connection.as_ref().map_or(0, |connection| {
            (connection.meter().snapshot() - self.meter_start).round_trips
        })
    }

    /// Gives the session this `statement_timeout` and, when `read_only`,
    /// `default_transaction_read_only = on` (else the login's default); a round
    /// trip only when the session had other settings.
    pub async fn prepare(
        &mut self,
        statement_timeout: Option<Duration>,
        read_only: bool,
    ) -> Result<(), Error> {
        let wanted = Settings {
            statement_timeout,
            read_only,
        };
        let connection = self
            .connection
            .as_mut()
            .expect("the connection is only taken by release");
        wanted.apply(connection, &mut self.object.settings).await
    }

    /// The request is done and the session idle: back to the pool.
    pub fn release(mut self) {
        self.object.connection = self.connection.take();
    }
}

enum Inner {
    Postgres {
        // Boxed: its read buffer state is large beside the SQLite variant.
        stream: Box<QueryStream>,
        session: Object<PgManager>,
        cancel: CancelToken,
        config: Arc<sluice_postgres::Config>,
        reuse: bool,
    },
    Sqlite {
        stream: SqliteStream,
        _permit: OwnedSemaphorePermit,
    },
}

/// A running query on any database.
pub struct Source {
    inner: Inner,
    meter: Option<(Meter, MeterSnapshot)>,
}

impl Source {
    /// Round trips to the database since the query started (0 for SQLite).
    pub fn round_trips(&self) -> u64 {
        self.meter
            .as_ref()
            .map_or(0, |(meter, start)| (meter.snapshot() - *start).round_trips)
    }

    /// The result was read to the end: the session goes back to its pool.
    pub fn complete(self) {
        if let Inner::Postgres {
            stream,
            mut session,
            reuse: true,
            ..
        } = self.inner
        {
            session.connection = stream.into_connection();
        }
    }

    /// The result was not read to the end: the query is cancelled on the server
    /// (the cancel request is sent by a task `tracker` follows, so shutdown can wait
    /// for it) and the session is discarded.
    pub fn abandon(self, tracker: &TaskTracker) {
        match self.inner {
            Inner::Postgres {
                stream,
                session,
                cancel,
                config,
                ..
            } => {
                if tokio::runtime::Handle::try_current().is_ok() {
                    tracker.spawn(async move {
                        let _ = tokio::time::timeout(CANCEL_TIMEOUT, cancel.cancel(&config)).await;
                        // Close our side only once the server was told, so the
                        // backend stops at the cancel, not at a failed write.
                        drop(stream);
                        drop(session);
                    });
                }
            }
            // Dropping the stream interrupts SQLite.
            Inner::Sqlite { .. } => {}
        }
    }
}

impl BatchSource for Source {
    fn schema(&self) -> &Schema {
        match &self.inner {
            Inner::Postgres { stream, .. } => stream.schema(),
            Inner::Sqlite { stream, .. } => stream.schema(),
        }
    }

    async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
        match &mut self.inner {
            Inner::Postgres { stream, .. } => stream.next_batch().await,
            Inner::Sqlite { stream, .. } => stream.next_batch().await,
        }
    }
}
