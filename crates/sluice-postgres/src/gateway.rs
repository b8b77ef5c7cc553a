//! [`PostgresDatabase`]: PostgreSQL behind the gateway's [`sluice_core::database::Database`]
//! trait — a pool of sessions, named queries with their settings, ad-hoc SQL
//! fenced in, statements checked without running them.
//!
//! Sessions live in a [`sluice_core::pool::SessionPool`]. A session that runs a query is taken out
//! of its pool slot for the query's duration and put back only when the result
//! was read to the end; a query that ends any other way (client gone, error,
//! shutdown) leaves the slot empty, so the pool discards it and connects afresh
//! next time rather than reusing a session in an unknown state. Before reuse, an
//! idle session is checked without a round trip ([`Connection::check_idle`]),
//! which catches sessions a database restart has ended.
//!
//! A pooled session remembers the settings it was given (`statement_timeout`,
//! `default_transaction_read_only`), so a request sends a `SET` only when it
//! needs something else than the session's last user.
//!
//! Ad-hoc SQL runs in `BEGIN READ ONLY`, as the configured role when one is set
//! (`SET LOCAL ROLE`, gone with the transaction), after
//! [`crate::privileges::QUERY`] has found the login unprivileged — all in one
//! message before the statement — on a session that is discarded afterwards.

use std::sync::Arc;
use std::time::Duration;

use postgres_protocol::escape::escape_identifier;
pub use sluice_core::connect::PoolOptions;
use sluice_core::connect::{Dialect, Session};
use sluice_core::database::Refusal;
use sluice_core::database::{
    Access, BoxFuture, Database, DeclaredKind, Query, QueryEnd, QueryRequest, RunningQuery,
    StartError, StatementCheck, StatementProblem, Usage,
};
use sluice_core::pool::SessionPool;
use sluice_core::{Error, ErrorKind, Meter, MeterSnapshot};

pub use crate::dialect::param_text;
use crate::dialect::POSTGRESQL;
use crate::pool::{milliseconds, PooledSlot, PostgresConnector, Settings};
use crate::privileges::{Privileges, QUERY};
use crate::session::PostgresSession;
use crate::split::join_snapshot;
use crate::types::Oid;
use crate::{CancelToken, Config, Connection, QueryOptions, QueryStream};

/// How long a cancel request may take before it is given up.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// A PostgreSQL database served by the gateway.
pub struct PostgresDatabase {
    pool: SessionPool<PostgresConnector>,
    config: Arc<Config>,
}

impl PostgresDatabase {
    /// A database with an empty pool; sessions are made on first use, so a
    /// database that is down at start only makes requests fail until it is back.
    pub fn new(config: Config, options: PoolOptions) -> PostgresDatabase {
        let config = Arc::new(config);
        let connector = PostgresConnector {
            config: config.clone(),
        };
        let pool = SessionPool::new(connector, options, config.connect_timeout);
        PostgresDatabase { pool, config }
    }

    /// A session held for one request that drives it itself (an import, a
    /// batch of calls), waiting up to the pool's wait for it, with this
    /// `statement_timeout` and, when `read_only`, read-only transactions (a
    /// round trip only when the session's last user had other settings).
    async fn checkout_session(
        &self,
        statement_timeout: Option<Duration>,
        read_only: bool,
    ) -> Result<PostgresSession, StartError> {
        let (mut slot, mut connection) = self.pool.checkout().await?;
        let start = connection.meter().snapshot().round_trips;
        let wanted = Settings {
            statement_timeout,
            read_only,
        };
        wanted
            .apply(&mut connection, &mut slot.settings)
            .await
            .map_err(StartError::classify)?;
        Ok(PostgresSession::pooled(
            connection,
            self.config.clone(),
            slot,
            start,
        ))
    }

    async fn start_query(
        &self,
        request: QueryRequest<'_>,
    ) -> Result<Box<dyn RunningQuery>, StartError> {
        let (mut session, mut connection) = self.pool.checkout().await?;
        match request.access {
            Access::Named { read_only } => {
                let wanted = Settings {
                    statement_timeout: request.statement_timeout,
                    read_only,
                };
                wanted
                    .apply(&mut connection, &mut session.settings)
                    .await
                    .map_err(StartError::classify)?;
            }
            Access::AdHoc { role } => {
                begin_ad_hoc(&mut connection, request.statement_timeout, role).await?;
            }
            Access::InSnapshot { snapshot } => {
                let setup = in_snapshot_setup(snapshot, request.statement_timeout);
                connection
                    .simple_command(&setup)
                    .await
                    .map_err(|error| StartError::classify(snapshot_gone(error)))?;
            }
        }
        let meter = connection.meter().clone();
        let meter_start = meter.snapshot();
        let cancel = connection.cancel_token();
        let options = QueryOptions {
            params: request.params.iter().map(param_text).collect(),
            fetch_size: None,
            lob_inline: request.inline_large_objects,
            binary_values: request.binary_values,
            native_values: false,
            // A named query runs again on this session: keep it prepared.
            reuse_statement: matches!(request.access, Access::Named { .. }),
        };
        let stream = QueryStream::start(connection, request.sql, options)
            .await
            .map_err(StartError::classify)?;
        let end = SessionEnd {
            session,
            cancel,
            config: self.config.clone(),
            reuse: matches!(request.access, Access::Named { .. }),
            meter,
            meter_start,
        };
        Ok(Box::new(Query::new(stream, end)))
    }

    async fn check(
        &self,
        sql: &str,
        declared: &[DeclaredKind],
    ) -> Result<StatementCheck, StartError> {
        let (mut session, mut connection) = self.pool.checkout().await?;
        let described = connection.describe(sql).await;
        if described.is_ok()
            || described
                .as_ref()
                .is_err_and(|error| error.kind() == ErrorKind::Database)
        {
            // The session is idle again (also after the server refused the
            // SQL): back to the pool.
            session.connection = Some(connection);
        }
        let (types, columns) = described.map_err(StartError::classify)?;
        let mut problems = Vec::new();
        if types.len() != declared.len() {
            problems.push(StatementProblem::Count {
                found: types.len(),
                declared: declared.len(),
            });
        }
        for (index, (&kind, &oid)) in declared.iter().zip(&types).enumerate() {
            if !accepts(kind, oid) {
                problems.push(StatementProblem::Type {
                    index,
                    inferred: builtin_name(oid).unwrap_or("another type").to_owned(),
                });
            }
        }
        Ok(StatementCheck {
            problems,
            columns: Some(columns),
        })
    }

    async fn check_ad_hoc_session(&self, role: Option<&str>) -> Result<(), StartError> {
        // The session's slot stays empty, so the pool discards it.
        let (_session, mut connection) = self.pool.checkout().await?;
        let checked = begin_ad_hoc(&mut connection, Some(Duration::from_secs(10)), role).await;
        connection.close().await;
        checked
    }
}

impl Database for PostgresDatabase {
    fn dialect(&self) -> Dialect {
        POSTGRESQL
    }

    fn placeholder(&self, number: usize) -> String {
        format!("${number}")
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
            let session: Box<dyn Session> =
                Box::new(self.checkout_session(statement_timeout, read_only).await?);
            Ok(session)
        }))
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
            _ => StartError::classify(error),
        })?;
    let privileges = Privileges::from_rows(&rows);
    if privileges.is_safe() {
        Ok(())
    } else {
        Err(StartError::Refused(Refusal::Privileged(
            privileges.to_string(),
        )))
    }
}

/// The statements [`begin_ad_hoc`] sends, as one simple query.
fn ad_hoc_setup(statement_timeout: Option<Duration>, role: Option<&str>) -> String {
    let mut sql = format!(
        "BEGIN READ ONLY; SET LOCAL statement_timeout = {}; ",
        milliseconds(statement_timeout)
    );
    if let Some(role) = role {
        sql.push_str(&format!("SET LOCAL ROLE {}; ", escape_identifier(role)));
    }
    sql.push_str(&QUERY);
    sql
}

/// `SET TRANSACTION SNAPSHOT` refuses a snapshot no session exports any more
/// with 22023 (invalid_parameter_value): for the caller, the plan is gone,
/// not the request's data at fault.
fn snapshot_gone(error: Error) -> Error {
    match error.code() {
        Some("22023") => error.with_db_cause(sluice_core::DbCause::SnapshotGone),
        _ => error,
    }
}

/// The statements that open a part's transaction in `snapshot`, with its
/// statement timeout, as one simple query (one round trip).
fn in_snapshot_setup(snapshot: &str, statement_timeout: Option<Duration>) -> String {
    format!(
        "{}; SET LOCAL statement_timeout = {}",
        join_snapshot(snapshot),
        milliseconds(statement_timeout)
    )
}

/// What a query on a pooled session needs besides its rows: the session to
/// give back, how to cancel it, its meter.
struct SessionEnd {
    session: PooledSlot,
    cancel: CancelToken,
    config: Arc<Config>,
    /// False for ad-hoc SQL and parts of split reads, whose sessions are
    /// never reused (a part's transaction is still open).
    reuse: bool,
    meter: Meter,
    meter_start: MeterSnapshot,
}

impl QueryEnd<QueryStream> for SessionEnd {
    fn round_trips(&self) -> u64 {
        (self.meter.snapshot() - self.meter_start).round_trips
    }

    fn complete(mut self, stream: QueryStream) {
        if self.reuse {
            self.session.connection = stream.into_connection();
        }
    }

    fn abandon(self, stream: QueryStream) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(async move {
            let _ = tokio::time::timeout(CANCEL_TIMEOUT, self.cancel.cancel(&self.config)).await;
            // Close our side only once the server was told, so the backend
            // stops at the cancel, not at a failed write.
            drop(stream);
            drop(self.session);
        }))
    }
}

/// The built-in types the comparison knows, by OID.
const BUILTINS: [(Oid, &str); 20] = [
    (16, "bool"),
    (17, "bytea"),
    (19, "name"),
    (20, "bigint"),
    (21, "smallint"),
    (23, "int"),
    (25, "text"),
    (114, "json"),
    (700, "real"),
    (701, "double precision"),
    (1042, "character"),
    (1043, "varchar"),
    (1082, "date"),
    (1083, "time"),
    (1114, "timestamp"),
    (1184, "timestamptz"),
    (1186, "interval"),
    (1700, "numeric"),
    (2950, "uuid"),
    (3802, "jsonb"),
];

fn builtin_name(oid: Oid) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|(known, _)| *known == oid)
        .map(|(_, name)| *name)
}

/// Whether a parameter declared of kind `declared` may be taken by PostgreSQL
/// as type `oid` (values are sent as text, which the server converts). The
/// kinds must agree: a number as a number, a moment as a date or time, and so
/// on; widths may differ (an `int` value out of `smallint` range is refused
/// when the value is checked), but a fraction may not meet an integer, nor
/// anything but text meet text (an `int` compared as text sorts `10` before
/// `9`). Text is sent as given, for the server to convert to whatever the SQL
/// needs, so it goes with any type; types the comparison does not know
/// (arrays, domains, enums, extensions' types) are not judged.
pub fn accepts(declared: DeclaredKind, oid: Oid) -> bool {
    const INT2: Oid = 21;
    const INT4: Oid = 23;
    const INT8: Oid = 20;
    const NUMERIC: Oid = 1700;
    const FLOAT4: Oid = 700;
    const FLOAT8: Oid = 701;
    const DATE: Oid = 1082;
    const TIMESTAMP: Oid = 1114;
    const TIMESTAMPTZ: Oid = 1184;
    if builtin_name(oid).is_none() {
        return true;
    }
    let takes: &[Oid] = match declared {
        DeclaredKind::Text => return true,
        DeclaredKind::Integer => &[INT2, INT4, INT8, NUMERIC, FLOAT4, FLOAT8],
        DeclaredKind::Fractional => &[NUMERIC, FLOAT4, FLOAT8],
        DeclaredKind::Bool => &[16],
        DeclaredKind::Moment => &[DATE, TIMESTAMP, TIMESTAMPTZ],
        DeclaredKind::Uuid => &[2950],
        DeclaredKind::Json => &[114, 3802],
    };
    takes.contains(&oid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_kinds_go_with_the_types_that_take_all_their_values() {
        assert!(accepts(DeclaredKind::Integer, 20));
        assert!(accepts(DeclaredKind::Integer, 21), "a width is not a kind");
        assert!(accepts(DeclaredKind::Integer, 1700));
        assert!(
            !accepts(DeclaredKind::Integer, 25),
            "an int compared as text"
        );
        assert!(!accepts(DeclaredKind::Fractional, 23), "12.5 is not an int");
        assert!(accepts(DeclaredKind::Moment, 1184));
        assert!(accepts(DeclaredKind::Moment, 1082));
        assert!(
            !accepts(DeclaredKind::Moment, 1186),
            "a moment is not an interval"
        );
        assert!(!accepts(DeclaredKind::Bool, 23));
        assert!(accepts(DeclaredKind::Json, 3802));
        assert!(!accepts(DeclaredKind::Uuid, 25));
        assert!(
            accepts(DeclaredKind::Text, 23),
            "text is the server's to convert"
        );
        assert!(
            accepts(DeclaredKind::Integer, 1007),
            "arrays are not judged"
        );
        assert!(
            accepts(DeclaredKind::Integer, 16_400),
            "user types are not judged"
        );
    }

    #[test]
    fn settings_are_sent_only_when_they_change() {
        let named = Settings {
            statement_timeout: Some(Duration::from_secs(30)),
            read_only: true,
        };
        assert_eq!(
            named.sql_from(None),
            "SET statement_timeout = 30000; SET default_transaction_read_only = on"
        );
        assert_eq!(named.sql_from(Some(named)), "");
        let writer = Settings {
            read_only: false,
            ..named
        };
        assert_eq!(
            writer.sql_from(Some(named)),
            "RESET default_transaction_read_only"
        );
    }

    #[test]
    fn ad_hoc_roles_are_quoted_identifiers() {
        let sql = ad_hoc_setup(None, Some("report \"x\""));
        assert!(sql.starts_with(
            "BEGIN READ ONLY; SET LOCAL statement_timeout = 0; SET LOCAL ROLE \"report \"\"x\"\"\"; "
        ));
    }
}
