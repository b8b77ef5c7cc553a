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
//! A pooled session remembers the settings it was given, and a request sends
//! a `SET` only for what differs, queued to travel with the query (no round
//! trip of its own):
//!
//! - the statement timeout: MariaDB's `max_statement_time` (seconds; any
//!   statement; error 1969, SQLSTATE `70100`), MySQL's `max_execution_time`
//!   (milliseconds), which MySQL applies to read-only `SELECT`s only: other
//!   statements run unbounded there;
//! - read-only requests: `SET SESSION TRANSACTION READ ONLY` (a write fails
//!   with error 1792, SQLSTATE `25006`, as it does on PostgreSQL; so does
//!   DDL, which a read-only *transaction* alone would let through by
//!   committing it implicitly), and `READ WRITE` back.
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
//! writing a table (`SELECT … INTO OUTFILE`, `KILL`, `SET GLOBAL`,
//! `SHUTDOWN`), and the statement may `SET ROLE` to any role granted to the
//! login, so the login and every role it holds must be free of
//! [`SERVER_RIGHTS`] and of `GRANT OPTION` on `*.*`. The login's global
//! privileges come from `information_schema.USER_PRIVILEGES`; a role's are
//! visible to an unprivileged login only while the role is its current one,
//! so each role granted to the login is set in turn and `SHOW GRANTS FOR
//! CURRENT_ROLE` read (it lists the roles the role holds too). On every
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
//! - MySQL's role checks use `SHOW GRANTS … USING` and `APPLICABLE_ROLES`
//!   (MySQL 8.0.19 or later); they were written from MySQL's manual and have
//!   not run against a MySQL server.
//! - `PROCESS` is allowed: it shows the text of other sessions' statements
//!   (with any values written in them), not their tables.
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
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sluice_core::connect::{Dialect, PoolOptions, Session};
use sluice_core::database::{
    Access, BoxFuture, Database, DeclaredKind, Query, QueryEnd, QueryRequest, Refusal,
    RunningQuery, StartError, StatementCheck, StatementProblem, Usage,
};
use sluice_core::pool::{Connector, SessionPool, Taken};
use sluice_core::{Error, ErrorKind, Meter, Schema};
use tokio::sync::oneshot;

pub use crate::calls::param_text;
use crate::connection::TextResult;
use crate::dialect::dialect_of_scheme;
use crate::driver::MariaDbSession;
use crate::query::{queue_close, queue_prepare, read_prepare_answer};
use crate::sql::identifier;
use crate::types::described_column;
use crate::{CancelToken, Config, Connection, QueryOptions, QueryStream};

/// How long a `KILL QUERY` may take before it is given up.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// The statement timeout of the session [`MariaDbDatabase`]'s ad-hoc check sets up.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// How long after its timeout an ad-hoc statement is killed by the watchdog:
/// the server's own timer goes first, with its own error.
const WATCHDOG_GRACE: Duration = Duration::from_secs(1);

const READ_ONLY: &str = "SET SESSION TRANSACTION READ ONLY";
const READ_WRITE: &str = "SET SESSION TRANSACTION READ WRITE";

/// Global rights that reach past the fence around ad-hoc SQL (see the module
/// docs), spelled as `USER_PRIVILEGES` and `SHOW GRANTS` spell them, with
/// MySQL's underscores read as spaces:
///
/// - files on the server (`INTO OUTFILE`, `LOAD_FILE()`, `LOAD DATA INFILE`):
///   `FILE`;
/// - everything (`SET GLOBAL`, `KILL` of anyone, …): `SUPER`, `ALL PRIVILEGES`;
/// - the server itself: `SHUTDOWN`, `RELOAD` (`FLUSH`, `RESET`; `FLUSH TABLES
///   WITH READ LOCK` stops every writer);
/// - accounts: `CREATE USER`, `SET USER` (routines and views defined as
///   anyone);
/// - other logins' sessions (`KILL`): `CONNECTION ADMIN`;
/// - the binary log, which shows every database's changes or changes the
///   server: `BINLOG MONITOR` (MariaDB's `SHOW BINLOG EVENTS`), `REPLICATION
///   SLAVE` (MySQL's), `BINLOG ADMIN`, `BINLOG REPLAY`, and replication:
///   `REPLICATION MASTER ADMIN`, `REPLICATION SLAVE ADMIN`;
/// - writes on a read-only server, links to other servers: `READ_ONLY
///   ADMIN`, `FEDERATED ADMIN`;
/// - MySQL 8's dynamic rights of the same kinds.
pub const SERVER_RIGHTS: [&str; 31] = [
    "FILE",
    "SUPER",
    "ALL PRIVILEGES",
    "SHUTDOWN",
    "RELOAD",
    "CREATE USER",
    "SET USER",
    "CONNECTION ADMIN",
    "BINLOG MONITOR",
    "REPLICATION SLAVE",
    "BINLOG ADMIN",
    "BINLOG REPLAY",
    "REPLICATION MASTER ADMIN",
    "REPLICATION SLAVE ADMIN",
    "READ ONLY ADMIN",
    "FEDERATED ADMIN",
    "SYSTEM VARIABLES ADMIN",
    "SYSTEM USER",
    "SET USER ID",
    "ROLE ADMIN",
    "CREATE ROLE",
    "DROP ROLE",
    "ENCRYPTION KEY ADMIN",
    "GROUP REPLICATION ADMIN",
    "REPLICATION APPLIER",
    "CLONE ADMIN",
    "PERSIST RO VARIABLES ADMIN",
    "INNODB REDO LOG ARCHIVE",
    "BACKUP ADMIN",
    "AUDIT ADMIN",
    "FIREWALL ADMIN",
];

/// Opens and checks the pool's sessions.
#[derive(Debug)]
pub(crate) struct MariaDbConnector {
    config: Arc<Config>,
}

impl Connector for MariaDbConnector {
    type Connection = Connection;
    type Settings = Settings;

    async fn connect(&self) -> Result<Connection, Error> {
        Connection::connect(&self.config, &Meter::new()).await
    }

    fn check_idle(connection: &mut Connection) -> Result<(), Error> {
        connection.check_idle()
    }
}

/// The session settings a named query needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    /// The statement timeout (`None`: none).
    statement_timeout: Option<Duration>,
    /// Read-only transactions.
    read_only: bool,
}

impl Settings {
    /// The statements that take a session from `current` to these settings;
    /// none when nothing changes.
    fn statements_from(self, current: Option<Settings>, mariadb: bool) -> Vec<String> {
        let mut statements = Vec::new();
        if current.map(|current| current.statement_timeout) != Some(self.statement_timeout) {
            statements.push(timeout_setting(self.statement_timeout, mariadb));
        }
        if current.map(|current| current.read_only) != Some(self.read_only) {
            let setting = if self.read_only {
                READ_ONLY
            } else {
                READ_WRITE
            };
            statements.push(setting.to_owned());
        }
        statements
    }
}

/// The `SET` of a statement timeout: MariaDB's `max_statement_time` in
/// seconds, MySQL's `max_execution_time` in milliseconds; 0 is none for both,
/// so a timeout is never rounded down to it.
fn timeout_setting(timeout: Option<Duration>, mariadb: bool) -> String {
    match (timeout, mariadb) {
        (None, true) => "SET SESSION max_statement_time = 0".to_owned(),
        (None, false) => "SET SESSION max_execution_time = 0".to_owned(),
        (Some(timeout), true) => {
            let micros = timeout.as_micros().max(1);
            format!(
                "SET SESSION max_statement_time = {}.{:06}",
                micros / 1_000_000,
                micros % 1_000_000
            )
        }
        (Some(timeout), false) => {
            let millis = timeout.as_millis().clamp(1, u128::from(u32::MAX));
            format!("SET SESSION max_execution_time = {millis}")
        }
    }
}

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

/// A pool slot taken for one request.
pub(crate) type PooledSlot = Taken<MariaDbConnector>;

/// Queues what takes `connection` from its `current` settings to `wanted`, to
/// travel with the next command and be answered before it.
fn queue_settings(connection: &mut Connection, wanted: Settings, current: Option<Settings>) {
    let mariadb = connection.server().mariadb;
    for statement in wanted.statements_from(current, mariadb) {
        connection.queue_setting(&statement);
    }
}

/// Sends `statements` in one round trip and reads each one's answer, so a
/// failure is known by statement. Errors the server reported are answers (the
/// session stays in step); anything else ends the exchange.
async fn exchange(
    connection: &mut Connection,
    statements: &[String],
) -> Result<Vec<Result<TextResult, Error>>, Error> {
    for statement in statements {
        connection.queue_query(statement);
    }
    connection.wire.flush().await?;
    let mut answers = Vec::with_capacity(statements.len());
    for _ in statements {
        match connection.read_text_result().await {
            Err(error) if error.as_db_error().is_none() => return Err(error),
            answer => answers.push(answer),
        }
    }
    Ok(answers)
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
    let answers = exchange(connection, &statements)
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
    let mut privileges = Privileges::from_rows(&text_rows(rows));
    if !privileges.roles.is_empty() {
        read_role_rights(connection, &mut privileges, role, mariadb).await?;
    }
    if privileges.is_safe() {
        Ok(())
    } else {
        Err(StartError::Refused(Refusal::Privileged(
            privileges.to_string(),
        )))
    }
}

/// Fills in the rights of each role the login holds, and leaves the session
/// with the configured role (or the login's default one) current again.
async fn read_role_rights(
    connection: &mut Connection,
    privileges: &mut Privileges,
    configured: Option<&str>,
    mariadb: bool,
) -> Result<(), StartError> {
    let statements = role_probes(privileges, configured, mariadb);
    let mut answers = exchange(connection, &statements)
        .await
        .map_err(StartError::classify)?
        .into_iter();
    for role in &mut privileges.roles {
        // MariaDB answers SET ROLE, then SHOW GRANTS FOR CURRENT_ROLE; a role
        // whose rights cannot be read keeps `None`, which refuses.
        let set = if mariadb { answers.next() } else { None };
        let shown = answers.next();
        if let (None | Some(Ok(_)), Some(Ok(grants))) = (set, shown) {
            role.rights = Some(Rights::from_grants(&text_rows(grants.rows)));
        }
    }
    match answers.next() {
        Some(Err(error)) => Err(StartError::classify(error)),
        _ => Ok(()),
    }
}

/// The statements that show each role's global rights: on MariaDB the role
/// must be current (`SET ROLE`, `SHOW GRANTS FOR CURRENT_ROLE`), and the role
/// the request runs as is set again after them; MySQL shows them for the
/// login `USING` the role.
fn role_probes(privileges: &Privileges, configured: Option<&str>, mariadb: bool) -> Vec<String> {
    let mut statements = Vec::new();
    for role in &privileges.roles {
        if mariadb {
            statements.push(format!("SET ROLE {}", identifier(&role.name)));
            statements.push("SHOW GRANTS FOR CURRENT_ROLE".to_owned());
        } else {
            let host = role.host.as_deref().unwrap_or("%");
            statements.push(format!(
                "SHOW GRANTS FOR CURRENT_USER() USING {}@{}",
                identifier(&role.name),
                identifier(host)
            ));
        }
    }
    if mariadb {
        let current = configured.or_else(|| {
            privileges
                .roles
                .iter()
                .find(|role| role.default)
                .map(|role| role.name.as_str())
        });
        statements.push(match current {
            Some(role) => format!("SET ROLE {}", identifier(role)),
            None => "SET ROLE NONE".to_owned(),
        });
    }
    statements
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

/// A text result's rows as strings (NULL as `None`).
fn text_rows(rows: Vec<Vec<Option<Vec<u8>>>>) -> Vec<Vec<Option<String>>> {
    rows.into_iter()
        .map(|row| {
            row.into_iter()
                .map(|value| value.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
                .collect()
        })
        .collect()
}

/// Finds what [`Privileges`] holds about the login, one row per finding,
/// `(kind, name, detail)`: `('login', CURRENT_USER(), NULL)`, then `('global',
/// privilege, is_grantable)` for each of its global privileges, then
/// `('role' | 'default role', role, host)` for each role granted to it
/// directly (the roles those hold come with them).
fn privilege_query(mariadb: bool) -> String {
    // USER_PRIVILEGES names the login 'user'@'host'; CURRENT_USER() is
    // user@host, and only the host is sure to hold no '@'.
    const GRANTEE: &str = "CONCAT('''', LEFT(CURRENT_USER(), CHAR_LENGTH(CURRENT_USER()) \
         - CHAR_LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)) - 1), '''@''', \
         SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')";
    let roles = if mariadb {
        "SELECT IF(IS_DEFAULT = 'YES', 'default role', 'role'), ROLE_NAME, NULL \
         FROM information_schema.APPLICABLE_ROLES WHERE GRANTEE = CURRENT_USER()"
    } else {
        "SELECT IF(IS_DEFAULT = 'YES' OR IS_MANDATORY = 'YES', 'default role', 'role'), \
         ROLE_NAME, ROLE_HOST FROM information_schema.APPLICABLE_ROLES \
         WHERE GRANTEE = USER AND GRANTEE_HOST = HOST"
    };
    format!(
        "SELECT 'login', CURRENT_USER(), NULL \
         UNION ALL \
         SELECT 'global', PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema.USER_PRIVILEGES \
          WHERE GRANTEE = {GRANTEE} \
         UNION ALL \
         {roles}"
    )
}

/// Global rights that matter for ad-hoc SQL, of a login or a role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Rights {
    /// Rights of [`SERVER_RIGHTS`] held on `*.*`, as the server spells them.
    server: Vec<String>,
    /// `GRANT OPTION` on `*.*`: its rights can be handed to any account.
    grant_option: bool,
}

impl Rights {
    fn add(&mut self, privilege: &str, grantable: bool) {
        if is_server_right(privilege) && !self.server.iter().any(|known| known == privilege) {
            self.server.push(privilege.to_owned());
        }
        self.grant_option |= grantable || privilege.eq_ignore_ascii_case("GRANT OPTION");
    }

    /// The global rights in `SHOW GRANTS` lines (`GRANT FILE, SUPER ON *.* TO
    /// …`, `… WITH GRANT OPTION`); other lines grant roles or rights on
    /// databases and tables.
    fn from_grants(rows: &[Vec<Option<String>>]) -> Rights {
        let mut rights = Rights::default();
        for line in rows.iter().filter_map(|row| row.first()?.as_deref()) {
            let Some((list, target)) = line
                .strip_prefix("GRANT ")
                .and_then(|rest| rest.split_once(" ON *.* TO "))
            else {
                continue;
            };
            let grantable = target.contains(" WITH GRANT OPTION");
            for privilege in list.split(',') {
                rights.add(privilege.trim(), grantable);
            }
        }
        rights
    }

    fn is_empty(&self) -> bool {
        self.server.is_empty() && !self.grant_option
    }

    /// `FILE, SUPER on *.*`, `GRANT OPTION on *.*`.
    fn describe(&self) -> String {
        let mut names = self.server.clone();
        if self.grant_option {
            names.push("GRANT OPTION".to_owned());
        }
        format!("{} on *.*", names.join(", "))
    }
}

/// Whether `privilege` is one of [`SERVER_RIGHTS`] (MySQL's `BINLOG_ADMIN`
/// too).
fn is_server_right(privilege: &str) -> bool {
    let spaced = privilege.trim().replace('_', " ");
    SERVER_RIGHTS
        .iter()
        .any(|right| right.eq_ignore_ascii_case(&spaced))
}

/// A role granted to the login.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Role {
    name: String,
    /// MySQL's role host.
    host: Option<String>,
    /// On from the login (MariaDB's default role, MySQL's default or
    /// mandatory roles).
    default: bool,
    /// Its global rights with those of the roles it holds; `None` until read,
    /// or when they could not be.
    rights: Option<Rights>,
}

/// What [`privilege_query`] and the role probes found about a login.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Privileges {
    /// `user@host`.
    login: String,
    /// Whether the login's own global privileges were found (every login has
    /// at least `USAGE`): if not, nothing can be said of it.
    found: bool,
    rights: Rights,
    roles: Vec<Role>,
}

impl Privileges {
    /// Reads [`privilege_query`]'s rows.
    fn from_rows(rows: &[Vec<Option<String>>]) -> Privileges {
        let mut privileges = Privileges::default();
        for row in rows {
            let column = |index: usize| row.get(index).cloned().flatten();
            let (Some(kind), Some(name)) = (column(0), column(1)) else {
                continue;
            };
            match kind.as_str() {
                "login" => privileges.login = name,
                "global" => {
                    privileges.found = true;
                    let grantable = column(2).is_some_and(|value| value == "YES");
                    privileges.rights.add(&name, grantable);
                }
                "role" | "default role" => privileges.roles.push(Role {
                    name,
                    host: column(2),
                    default: kind == "default role",
                    rights: None,
                }),
                _ => {}
            }
        }
        privileges
    }

    /// True when neither the login nor any role it holds reaches past the fence.
    fn is_safe(&self) -> bool {
        self.found
            && self.rights.is_empty()
            && self
                .roles
                .iter()
                .all(|role| role.rights.as_ref().is_some_and(Rights::is_empty))
    }
}

impl fmt::Display for Privileges {
    /// `the login "app@%" has FILE, SUPER on *.*; the login "app@%" can SET
    /// ROLE `admin`, which has …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let login = &self.login;
        let mut findings = Vec::new();
        if !self.found {
            findings.push(format!(
                "the login {login:?} could not be checked: information_schema.USER_PRIVILEGES \
                 shows none of its global privileges"
            ));
        }
        if !self.rights.is_empty() {
            findings.push(format!(
                "the login {login:?} has {}",
                self.rights.describe()
            ));
        }
        for role in &self.roles {
            let default = if role.default { " (on by default)" } else { "" };
            let rights = match &role.rights {
                Some(rights) if rights.is_empty() => continue,
                Some(rights) => format!("which has {}", rights.describe()),
                None => "whose rights could not be read".to_owned(),
            };
            findings.push(format!(
                "the login {login:?} can SET ROLE {}{default}, {rights}",
                identifier(&role.name)
            ));
        }
        f.write_str(&findings.join("; "))
    }
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
    use sluice_core::database::Param;

    use super::*;

    fn rows(values: &[&[Option<&str>]]) -> Vec<Vec<Option<String>>> {
        values
            .iter()
            .map(|row| row.iter().map(|value| value.map(str::to_owned)).collect())
            .collect()
    }

    #[test]
    fn settings_are_sent_only_when_they_change() {
        let named = Settings {
            statement_timeout: Some(Duration::from_millis(300)),
            read_only: true,
        };
        assert_eq!(
            named.statements_from(None, true),
            [
                "SET SESSION max_statement_time = 0.300000",
                "SET SESSION TRANSACTION READ ONLY"
            ]
        );
        assert!(named.statements_from(Some(named), true).is_empty());
        let writer = Settings {
            read_only: false,
            ..named
        };
        assert_eq!(
            writer.statements_from(Some(named), true),
            ["SET SESSION TRANSACTION READ WRITE"]
        );
        assert_eq!(
            named.statements_from(Some(writer), false),
            ["SET SESSION TRANSACTION READ ONLY"]
        );
    }

    #[test]
    fn timeouts_are_spelled_per_product_and_never_become_none() {
        assert_eq!(
            timeout_setting(None, true),
            "SET SESSION max_statement_time = 0"
        );
        assert_eq!(
            timeout_setting(Some(Duration::from_secs(90)), true),
            "SET SESSION max_statement_time = 90.000000"
        );
        assert_eq!(
            timeout_setting(Some(Duration::from_nanos(10)), true),
            "SET SESSION max_statement_time = 0.000001"
        );
        assert_eq!(
            timeout_setting(Some(Duration::from_millis(1500)), false),
            "SET SESSION max_execution_time = 1500"
        );
        assert_eq!(
            timeout_setting(Some(Duration::from_micros(10)), false),
            "SET SESSION max_execution_time = 1"
        );
    }

    #[test]
    fn parameters_are_spelled_as_mariadb_reads_text() {
        let spelled = |param: Param| param_text(&param);
        assert_eq!(spelled(Param::Bool(true)).as_deref(), Some("1"));
        assert_eq!(spelled(Param::Integer(-42)).as_deref(), Some("-42"));
        assert_eq!(
            spelled(Param::Numeric("12.50".into())).as_deref(),
            Some("12.50")
        );
        // The session's time zone is UTC: a moment in UTC is written as it is.
        assert_eq!(
            spelled(Param::TimestampUtc("2024-03-01 10:00:00.25".into())).as_deref(),
            Some("2024-03-01 10:00:00.25")
        );
        assert_eq!(
            spelled(Param::Date("2024-03-01".into())).as_deref(),
            Some("2024-03-01")
        );
        assert_eq!(
            spelled(Param::Json("{\"a\":1}".into())).as_deref(),
            Some("{\"a\":1}")
        );
        assert_eq!(spelled(Param::Null), None);
    }

    #[test]
    fn the_login_is_judged_by_its_global_rights() {
        let root = Privileges::from_rows(&rows(&[
            &[Some("login"), Some("root@localhost"), None],
            &[Some("global"), Some("SELECT"), Some("YES")],
            &[Some("global"), Some("PROCESS"), Some("YES")],
            &[Some("global"), Some("FILE"), Some("YES")],
            &[Some("global"), Some("SUPER"), Some("YES")],
            &[Some("global"), Some("READ_ONLY ADMIN"), Some("YES")],
        ]));
        assert!(!root.is_safe());
        assert_eq!(
            root.to_string(),
            "the login \"root@localhost\" has FILE, SUPER, READ_ONLY ADMIN, GRANT OPTION on *.*"
        );

        let plain = Privileges::from_rows(&rows(&[
            &[Some("login"), Some("app@%"), None],
            &[Some("global"), Some("USAGE"), Some("NO")],
            &[Some("global"), Some("PROCESS"), Some("NO")],
        ]));
        assert!(plain.is_safe(), "{plain}");

        let unseen = Privileges::from_rows(&rows(&[&[Some("login"), Some("o'dd@%"), None]]));
        assert!(!unseen.is_safe());
        assert!(unseen.to_string().contains("could not be checked"));
        assert!(is_server_right("BINLOG_ADMIN"), "MySQL's spelling");
    }

    #[test]
    fn every_role_the_login_holds_is_judged_by_its_grants() {
        let mut privileges = Privileges::from_rows(&rows(&[
            &[Some("login"), Some("app@%"), None],
            &[Some("global"), Some("USAGE"), Some("NO")],
            &[Some("role"), Some("outer"), None],
            &[Some("default role"), Some("reader"), None],
        ]));
        assert!(!privileges.is_safe(), "roles not yet read");
        assert_eq!(
            role_probes(&privileges, None, true),
            [
                "SET ROLE `outer`",
                "SHOW GRANTS FOR CURRENT_ROLE",
                "SET ROLE `reader`",
                "SHOW GRANTS FOR CURRENT_ROLE",
                "SET ROLE `reader`",
            ]
        );
        assert_eq!(
            role_probes(&privileges, Some("we`ird"), false),
            [
                "SHOW GRANTS FOR CURRENT_USER() USING `outer`@`%`",
                "SHOW GRANTS FOR CURRENT_USER() USING `reader`@`%`",
            ]
        );
        privileges.roles[0].rights = Some(Rights::from_grants(&rows(&[
            &[Some("GRANT `filer` TO `outer`")],
            &[Some("GRANT USAGE ON *.* TO `outer`")],
            &[Some("GRANT FILE ON *.* TO `filer`")],
            &[Some(
                "GRANT SELECT, INSERT ON `shop`.* TO `outer` WITH GRANT OPTION",
            )],
        ])));
        privileges.roles[1].rights = Some(Rights::from_grants(&rows(&[&[Some(
            "GRANT SELECT ON `shop`.* TO `reader`",
        )]])));
        assert!(!privileges.is_safe());
        assert_eq!(
            privileges.to_string(),
            "the login \"app@%\" can SET ROLE `outer`, which has FILE on *.*"
        );
        privileges.roles[0].rights = Some(Rights::from_grants(&rows(&[&[Some(
            "GRANT ALL PRIVILEGES ON *.* TO `outer` WITH GRANT OPTION",
        )]])));
        assert!(privileges
            .to_string()
            .ends_with("which has ALL PRIVILEGES, GRANT OPTION on *.*"));
        privileges.roles[0].rights = None;
        assert!(privileges
            .to_string()
            .ends_with("whose rights could not be read"));
        privileges.roles[0].rights = Some(Rights::default());
        assert!(privileges.is_safe());
    }

    #[test]
    fn fence_ids_differ_and_fit_an_xid() {
        let (first, second) = (fence_id(), fence_id());
        assert_ne!(first, second);
        assert_eq!(first.len(), "sluice-".len() + 32);
        assert!(first.len() <= 64);
    }
}
