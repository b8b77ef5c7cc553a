//! [`MariaDbDatabase`]: MariaDB and MySQL behind the gateway's
//! [`sluice_core::database::Database`] trait — a pool of sessions, named
//! queries with their session settings, ad-hoc SQL fenced in, statements
//! checked without running them.
//!
//! # The pool
//!
//! Sessions live in a [`sluice_core::pool::SessionPool`]. A session that runs a query is taken
//! out of its slot for the query's duration and put back only when the result
//! was read to the end; a query that ends any other way (client gone, error,
//! shutdown) leaves the slot empty, so the pool discards it and connects afresh
//! next time rather than reuse a session in an unknown state. An abandoned
//! query is stopped on the server with `KILL QUERY` from a second session
//! before its socket is closed. Before reuse, an idle session is checked
//! without a round trip (`Connection::check_idle`), which catches sessions
//! the server ended (`wait_timeout`, a restart).
//!
//! # Settings of named queries
//!
//! A pooled session remembers the settings it was given (its statement
//! timeout, read-only or not: `crate::pool`), and a request sends a `SET`
//! only for what differs, queued to travel with the query (no round trip of
//! its own).
//!
//! # Ad-hoc SQL
//!
//! `START TRANSACTION READ ONLY` does not hold a MariaDB statement: DDL
//! commits it implicitly and then runs, and an anonymous block (`BEGIN NOT
//! ATOMIC SET SESSION TRANSACTION READ WRITE; COMMIT; INSERT …; END`, which
//! prepares like any statement) ends it and writes. So ad-hoc SQL runs in a
//! read-only session inside an XA transaction whose id is random and never
//! shown: MariaDB (and, by its manual, MySQL) refuses `COMMIT`, `ROLLBACK`,
//! `START TRANSACTION` and implicit commits while an XA transaction is
//! active, and only `XA END` with the id ends one. The session is closed after the request, which rolls
//! the transaction back.
//!
//! Nothing in a transaction stops what a privileged login does without
//! writing a table, so the login and every role it holds must be free of
//! [`SERVER_RIGHTS`](crate::privileges::SERVER_RIGHTS) and of `GRANT OPTION`
//! on `*.*` ([`crate::privileges`] says why and how they are read). On every
//! request, before the statement is sent:
//!
//! 1. one round trip: the timeout, `SET SESSION TRANSACTION READ ONLY`, `SET
//!    ROLE` (when configured), `XA START`, and the privilege query;
//! 2. one more only when the login holds roles: each role's rights, then the
//!    configured (or default) role back;
//! 3. the statement.
//!
//! An ad-hoc statement can lift its own `max_statement_time` (`SET STATEMENT
//! max_statement_time = 0 FOR …`), so its session also has a watchdog that
//! sends `KILL QUERY` once the timeout and a grace period have passed.
//!
//! # Limits
//!
//! - A login with `SELECT` on `performance_schema` could read the XA id from
//!   its own statement history (MariaDB turns `performance_schema` off by
//!   default); grant the ad-hoc login no rights there.
//! - Stored routines run with their definer's rights when they say so: a
//!   routine the login may `EXECUTE` is part of what ad-hoc SQL can do.
//!
//! # Sessions for imports and batches
//!
//! [`Database::session`] hands out a pooled session with the request's
//! statement timeout and read-only setting (sent with its first command);
//! closed, it goes back to its slot, dropped, it is discarded.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sluice_core::connect::{Dialect, PoolOptions, Session};
use sluice_core::database::{
    Access, BoxFuture, Database, DeclaredKind, Query, QueryEnd, QueryRequest, Refusal,
    RunningQuery, StartError, StatementCheck, StatementProblem, Usage,
};
use sluice_core::pool::{SessionPool, Taken};
use sluice_core::{Error, ErrorKind, Meter, Schema};
use tokio::sync::oneshot;

use crate::dialect::dialect_of_scheme;
pub use crate::dialect::param_text;
use crate::pool::{queue_settings, timeout_setting, MariaDbConnector, Settings, READ_ONLY};
use crate::privileges::{check_login, privilege_query};
use crate::session::MariaDbSession;
use crate::sql::identifier;
use crate::statement::{queue_close, queue_prepare, read_prepare_answer};
use crate::types::described_column;
use crate::{CancelToken, Config, Connection, QueryOptions, QueryStream};

/// How long a `KILL QUERY` may take before it is given up.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// The statement timeout of the session [`MariaDbDatabase`]'s ad-hoc check sets up.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// How long after its timeout an ad-hoc statement is killed by the watchdog:
/// the server's own timer goes first, with its own error.
const WATCHDOG_GRACE: Duration = Duration::from_secs(1);

/// A MariaDB or MySQL database served by the gateway; see the module docs.
pub struct MariaDbDatabase {
    pool: SessionPool<MariaDbConnector>,
    config: Arc<Config>,
}

impl MariaDbDatabase {
    /// A database with an empty pool; sessions are made on first use, so a
    /// database that is down at start only makes requests fail until it is back.
    pub fn new(config: Config, options: PoolOptions) -> MariaDbDatabase {
        let config = Arc::new(config);
        let connector = MariaDbConnector {
            config: config.clone(),
        };
        let pool = SessionPool::new(connector, options, config.connect_timeout);
        MariaDbDatabase { pool, config }
    }

    async fn start_query(
        &self,
        request: QueryRequest<'_>,
    ) -> Result<Box<dyn RunningQuery>, StartError> {
        let (mut slot, mut connection) = self.pool.checkout().await?;
        let meter = connection.meter().clone();
        let meter_start = meter.snapshot().round_trips;
        let cancel = CancelToken::new((*self.config).clone(), connection.server().connection_id);
        let (named, watchdog) = match request.access {
            Access::Named { read_only } => {
                let wanted = Settings {
                    statement_timeout: request.statement_timeout,
                    read_only,
                };
                queue_settings(&mut connection, wanted, slot.settings);
                (Some(wanted), None)
            }
            Access::AdHoc { role } => {
                begin_ad_hoc(&mut connection, request.statement_timeout, role).await?;
                let watchdog = request
                    .statement_timeout
                    .map(|timeout| start_watchdog(cancel.clone(), timeout));
                (None, watchdog)
            }
            Access::InSnapshot { .. } => {
                return Err(StartError::Query(Error::new(
                    ErrorKind::Unsupported,
                    "MariaDB/MySQL sessions cannot read in a snapshot another session exported",
                )))
            }
        };
        let options = QueryOptions {
            params: request.params.iter().map(param_text).collect(),
            fetch_size: None,
            zero_dates: self.config.zero_dates,
            binary_values: request.binary_values,
        };
        let stream = QueryStream::start(connection, request.sql, options)
            .await
            .map_err(StartError::classify)?;
        // The settings travelled with the query and were answered before it.
        if named.is_some() {
            slot.settings = named;
        }
        let end = SessionEnd {
            slot,
            cancel,
            reuse: named.is_some(),
            meter,
            meter_start,
            _watchdog: watchdog,
        };
        Ok(Box::new(Query::new(stream, end)))
    }

    async fn check(
        &self,
        sql: &str,
        declared: &[DeclaredKind],
    ) -> Result<StatementCheck, StartError> {
        let (mut slot, mut connection) = self.pool.checkout().await?;
        let described = describe(&mut connection, sql).await;
        if described
            .as_ref()
            .map_or_else(|error| error.as_db_error().is_some(), |_| true)
        {
            // The session is idle again (also after the server refused the
            // SQL): back to the pool.
            slot.connection = Some(connection);
        }
        // MariaDB describes every parameter as a string of unknown type, so
        // only the count can disagree with the declaration.
        let (found, columns) = described.map_err(StartError::classify)?;
        let mut problems = Vec::new();
        if found != declared.len() {
            problems.push(StatementProblem::Count {
                found,
                declared: declared.len(),
            });
        }
        Ok(StatementCheck {
            problems,
            columns: Some(columns),
        })
    }

    async fn check_ad_hoc_session(&self, role: Option<&str>) -> Result<(), StartError> {
        // The session's slot stays empty, so the pool discards it.
        let (_slot, mut connection) = self.pool.checkout().await?;
        let checked = begin_ad_hoc(&mut connection, Some(CHECK_TIMEOUT), role).await;
        connection.close().await;
        checked
    }
}

impl Database for MariaDbDatabase {
    fn dialect(&self) -> Dialect {
        // The greeting says which it is, but only once connected.
        dialect_of_scheme(self.config.scheme)
    }

    fn placeholder(&self, _number: usize) -> String {
        "?".to_owned()
    }

    fn read_only(&self) -> bool {
        false
    }

    fn usage(&self) -> Usage {
        self.pool.usage()
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

    fn check_ad_hoc<'a>(&'a self, role: Option<&'a str>) -> BoxFuture<'a, Result<(), StartError>> {
        Box::pin(self.check_ad_hoc_session(role))
    }

    fn session(
        &self,
        statement_timeout: Option<Duration>,
        read_only: bool,
    ) -> Option<BoxFuture<'_, Result<Box<dyn Session>, StartError>>> {
        Some(Box::pin(async move {
            let (mut slot, mut connection) = self.pool.checkout().await?;
            let start = connection.meter().snapshot().round_trips;
            let wanted = Settings {
                statement_timeout,
                read_only,
            };
            // Sent with the session's first command. A SET that fails fails
            // that command, and a session that fails is discarded, so the
            // slot may say these are its settings from now on.
            queue_settings(&mut connection, wanted, slot.settings);
            slot.settings = Some(wanted);
            let session: Box<dyn Session> = Box::new(MariaDbSession::pooled(
                connection,
                self.config.clone(),
                slot,
                start,
            ));
            Ok(session)
        }))
    }
}

/// Fences `connection` in for an ad-hoc statement (see the module docs):
/// `Refused` when the role cannot be set or the login or a role it holds is
/// privileged.
async fn begin_ad_hoc(
    connection: &mut Connection,
    statement_timeout: Option<Duration>,
    role: Option<&str>,
) -> Result<(), StartError> {
    let mariadb = connection.server().mariadb;
    let mut statements = vec![
        timeout_setting(statement_timeout, mariadb),
        READ_ONLY.to_owned(),
    ];
    let role_index = role.map(|role| {
        statements.push(format!("SET ROLE {}", identifier(role)));
        statements.len() - 1
    });
    statements.push(format!("XA START '{}'", fence_id()));
    statements.push(privilege_query(mariadb));
    let answers = connection
        .exchange(&statements)
        .await
        .map_err(StartError::classify)?;
    let last = statements.len() - 1;
    let mut rows = Vec::new();
    for (index, answer) in answers.into_iter().enumerate() {
        match answer {
            Err(error) if Some(index) == role_index => {
                return Err(StartError::Refused(Refusal::Role(error)))
            }
            Err(error) => return Err(StartError::classify(error)),
            Ok(result) if index == last => rows = result.rows,
            Ok(_) => {}
        }
    }
    check_login(connection, rows, role, mariadb).await
}

/// An XA transaction id no statement can guess: 128 bits from the standard
/// library's randomly keyed hasher.
fn fence_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let mut id = String::from("sluice-");
    for part in 0..2u8 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u8(part);
        hasher.write_u128(nanos);
        id.push_str(&format!("{:016x}", hasher.finish()));
    }
    id
}

/// Prepares `sql` without running it (`COM_STMT_PREPARE`, then a
/// `COM_STMT_CLOSE` that leaves with the next command): the number of
/// parameters it takes and its result's columns.
async fn describe(connection: &mut Connection, sql: &str) -> Result<(usize, Schema), Error> {
    queue_prepare(connection, sql);
    connection.wire.flush().await?;
    let prepared = read_prepare_answer(connection).await?;
    queue_close(connection, prepared.statement);
    let columns = prepared.columns.iter().map(described_column).collect();
    Ok((prepared.parameters, Schema { columns }))
}

/// Kills the session's statement once `timeout` and a grace period have
/// passed, unless the returned sender is dropped first (the query ended).
fn start_watchdog(cancel: CancelToken, timeout: Duration) -> oneshot::Sender<()> {
    let (ended, watched) = oneshot::channel::<()>();
    tokio::spawn(async move {
        if tokio::time::timeout(timeout + WATCHDOG_GRACE, watched)
            .await
            .is_err()
        {
            let _ = tokio::time::timeout(CANCEL_TIMEOUT, cancel.cancel()).await;
        }
    });
    ended
}

/// What a query on a pooled session needs besides its rows: the slot to give
/// the session back to, how to stop its statement, its meter.
struct SessionEnd {
    slot: Taken<MariaDbConnector>,
    cancel: CancelToken,
    /// False for ad-hoc SQL, whose session is never reused.
    reuse: bool,
    meter: Meter,
    /// The meter's round trips when the request took the session.
    meter_start: u64,
    /// Dropped with the query, which stands an ad-hoc statement's watchdog down.
    _watchdog: Option<oneshot::Sender<()>>,
}

impl QueryEnd<QueryStream> for SessionEnd {
    fn round_trips(&self) -> u64 {
        self.meter.snapshot().round_trips - self.meter_start
    }

    fn complete(mut self, stream: QueryStream) {
        let connection = stream.into_connection();
        if self.reuse {
            self.slot.connection = connection;
        } else if let Some(connection) = connection {
            // Closing politely rolls the fence's XA transaction back; it needs
            // a write, so it runs on its own.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(connection.close());
            }
        }
    }

    fn abandon(self, stream: QueryStream) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(async move {
            let _ = tokio::time::timeout(CANCEL_TIMEOUT, self.cancel.cancel()).await;
            // Close our side only once the server was told, so the statement
            // stops at the kill, not at a failed write.
            drop(stream);
            drop(self.slot);
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_ids_differ_and_fit_an_xid() {
        let (first, second) = (fence_id(), fence_id());
        assert_ne!(first, second);
        assert_eq!(first.len(), "sluice-".len() + 32);
        assert!(first.len() <= 64);
    }
}
