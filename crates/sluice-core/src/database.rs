//! [`Database`]: what a database crate implements so the HTTP gateway (and any
//! later front end) can serve it without knowing which database it is — a pool
//! of sessions, queries started with bound [`Param`]s under a [`Access`] mode,
//! statements checked without running them, and a [`RunningQuery`] that streams
//! its result and is either completed (its session reused) or abandoned (its
//! query cancelled).
//!
//! The traits are object-safe (`Box<dyn …>`), because the gateway holds databases
//! of several kinds in one map; their futures are boxed for the same reason. The
//! cost is one allocation per call, which is nothing beside a round trip.

use std::fmt;
use std::time::Duration;

use crate::dialect::Dialect;
use crate::session::Session;
use crate::{Error, Schema};

pub use crate::future::BoxFuture;
pub use crate::param::Param;
pub use crate::running::{Query, QueryEnd, RunningQuery};

/// How a query runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access<'a> {
    /// A query from the configuration, on a pooled session; read-only
    /// (`default_transaction_read_only` or the database's equivalent) when the
    /// request may not write.
    Named {
        /// The request may not write.
        read_only: bool,
    },
    /// Ad-hoc SQL: in a read-only transaction, as `role` when given, once the
    /// login is found unprivileged, on a session discarded afterwards so nothing
    /// it changed outlives the request.
    AdHoc {
        /// Run as this role.
        role: Option<&'a str>,
    },
    /// One part of a split read ([`crate::split`]): a query from the
    /// configuration (or a part made of one) in a read-only transaction that
    /// reads in `snapshot`, one that [`crate::connect::Session::split_read`]
    /// exported on another session, so that every part sees the same moment.
    /// The session is discarded afterwards rather than reused, since its
    /// transaction is still open when the last row has been read. Databases
    /// that cannot split reads refuse it as [`StartError::Query`] with an
    /// [`crate::ErrorKind::Unsupported`] error.
    InSnapshot {
        /// The snapshot, as the split gave it.
        snapshot: &'a str,
    },
}

/// A query to start.
#[derive(Debug, Clone)]
pub struct QueryRequest<'a> {
    /// The statement, with the database's own placeholders.
    pub sql: &'a str,
    /// Its parameters, in placeholder order.
    pub params: Vec<Param>,
    /// The statement timeout (`None`: none).
    pub statement_timeout: Option<Duration>,
    /// How it runs.
    pub access: Access<'a>,
    /// Send columns in their binary form where the database can (see
    /// [`crate::connect::ExportOptions::binary_values`]): for formats that read it.
    pub binary_values: bool,
    /// Read large objects in the place of their references, in pieces (see
    /// [`crate::connect::ExportOptions::inline_large_objects`]); only where
    /// [`crate::connect::Target::has_large_objects`].
    pub inline_large_objects: bool,
}

/// Why a query did not start.
#[derive(Debug)]
pub enum StartError {
    /// Every session stayed busy for the configured wait.
    Busy,
    /// The database cannot be reached.
    Unavailable(Error),
    /// The database refused the query (bad SQL, a parameter it cannot convert, …).
    Query(Error),
    /// Ad-hoc SQL may not run here.
    Refused(Refusal),
}

impl StartError {
    /// Sorts an error from starting a query: the database unreachable, or the
    /// query refused.
    pub fn classify(error: Error) -> StartError {
        use crate::ErrorKind;
        match error.kind() {
            ErrorKind::Connect | ErrorKind::Authentication | ErrorKind::Closed | ErrorKind::Io => {
                StartError::Unavailable(error)
            }
            _ => StartError::Query(error),
        }
    }
}

/// Why ad-hoc SQL may not run on a database.
#[derive(Debug)]
pub enum Refusal {
    /// The login may do what read-only transactions do not stop; the text lists
    /// those rights (e.g. "the login is a superuser").
    Privileged(String),
    /// Taking on the configured role failed (no such role, or the login may not).
    Role(Error),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Privileged(privileges) => write!(f, "{privileges}"),
            Refusal::Role(error) => write!(f, "SET ROLE failed: {error}"),
        }
    }
}

/// A pool's state right now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Sessions (or query slots) in use.
    pub in_use: usize,
    /// The most there may be.
    pub size: usize,
    /// Requests waiting for one.
    pub waiting: usize,
}

/// A parameter type a query declares, as far as a database judges whether a
/// statement takes it: the kinds that must agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeclaredKind {
    /// Any text, converted by the database.
    Text,
    /// An integer of some width.
    Integer,
    /// A decimal or floating-point number.
    Fractional,
    /// A boolean.
    Bool,
    /// A date or a moment.
    Moment,
    /// A UUID.
    Uuid,
    /// A JSON document.
    Json,
}

/// A disagreement between a statement and its declaration, found by preparing
/// it without running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatementProblem {
    /// The statement takes `found` parameters, `declared` are declared.
    Count {
        /// Parameters the statement takes.
        found: usize,
        /// Parameters declared.
        declared: usize,
    },
    /// Parameter `index` (0-based) is declared of a kind the statement does not
    /// take there.
    Type {
        /// 0-based.
        index: usize,
        /// The type the database infers there, by its own name.
        inferred: String,
    },
    /// The statement writes, but this database is served read-only.
    Writes,
}

/// What preparing a statement without running it found: its disagreements
/// with the declaration, and the result it would return.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatementCheck {
    /// Disagreements with the declaration; none is an empty list.
    pub problems: Vec<StatementProblem>,
    /// The result's columns as the database describes the prepared statement
    /// (names, kinds, type names, decimal shapes, nullability where known);
    /// `None` where it cannot say before running (SQLite's values have no
    /// declared types in expressions), empty for a statement without rows.
    pub columns: Option<Schema>,
}

/// A configured database the gateway serves.
///
/// The smallest database: a read-only one, whose every query answers one
/// row at once. A real one takes a session from its pool in
/// [`Database::start`], and gives it back (or discards it) when its
/// [`QueryEnd`] is told how the result was read:
///
/// ```
/// use sluice_core::connect::{Dialect, Family};
/// use sluice_core::database::{
///     Access, BoxFuture, Database, DeclaredKind, Query, QueryEnd, QueryRequest, RunningQuery,
///     StartError, StatementCheck, Usage,
/// };
/// use sluice_core::{Batch, BatchSource, Column, Error, Kind, Schema};
///
/// const TOY: Dialect = Dialect::new("Toy", Family::new("Toy"));
///
/// /// One row, `42`.
/// struct Answer {
///     schema: Schema,
///     batch: Batch,
///     read: bool,
/// }
///
/// impl BatchSource for Answer {
///     fn schema(&self) -> &Schema {
///         &self.schema
///     }
///
///     async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
///         let first = !std::mem::replace(&mut self.read, true);
///         Ok(first.then_some(&self.batch))
///     }
/// }
///
/// /// The answer holds no session: nothing to give back or cancel.
/// struct NoSession;
///
/// impl QueryEnd<Answer> for NoSession {
///     fn round_trips(&self) -> u64 {
///         0
///     }
///
///     fn complete(self, _answer: Answer) {}
///
///     fn abandon(self, _answer: Answer) -> Option<BoxFuture<'static, ()>> {
///         None
///     }
/// }
///
/// struct Toy;
///
/// impl Database for Toy {
///     fn dialect(&self) -> Dialect {
///         TOY
///     }
///
///     fn placeholder(&self, number: usize) -> String {
///         format!("?{number}")
///     }
///
///     fn read_only(&self) -> bool {
///         true
///     }
///
///     fn usage(&self) -> Usage {
///         Usage::default()
///     }
///
///     fn start<'a>(
///         &'a self,
///         _request: QueryRequest<'a>,
///     ) -> BoxFuture<'a, Result<Box<dyn RunningQuery>, StartError>> {
///         let mut batch = Batch::new(1);
///         batch.push_value(b"42");
///         let schema = Schema { columns: vec![Column::new("answer", Kind::Integer, "int")] };
///         let answer = Answer { schema, batch, read: false };
///         let query: Box<dyn RunningQuery> = Box::new(Query::new(answer, NoSession));
///         Box::pin(async move { Ok(query) })
///     }
///
///     /// Any statement with any parameters: a real database prepares it and
///     /// compares.
///     fn check_statement<'a>(
///         &'a self,
///         _sql: &'a str,
///         _declared: &'a [DeclaredKind],
///     ) -> BoxFuture<'a, Result<StatementCheck, StartError>> {
///         Box::pin(async { Ok(StatementCheck::default()) })
///     }
///
///     /// No logins and no writes: ad-hoc SQL can do nothing a query cannot.
///     fn check_ad_hoc<'a>(&'a self, _role: Option<&'a str>) -> BoxFuture<'a, Result<(), StartError>> {
///         Box::pin(async { Ok(()) })
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let database: Box<dyn Database> = Box::new(Toy);
/// let request = QueryRequest {
///     sql: "select 42 as answer",
///     params: Vec::new(),
///     statement_timeout: None,
///     access: Access::Named { read_only: true },
///     binary_values: false,
///     inline_large_objects: false,
/// };
/// let mut query = database.start(request).await.expect("the toy always answers");
/// assert_eq!(query.next_batch().await?.map(|batch| batch.row(0).get(0)), Some(Some(&b"42"[..])));
/// assert!(query.next_batch().await?.is_none());
/// query.complete();
/// assert!(database.session(None, false).is_none());
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
pub trait Database: Send + Sync {
    /// The database served, as far as its configuration says (MariaDB's URL
    /// scheme; the server's greeting comes only with a session).
    fn dialect(&self) -> Dialect;

    /// The product's name for messages (`PostgreSQL`, `SQLite`): its dialect's.
    fn product(&self) -> &'static str {
        self.dialect().name()
    }

    /// How the statement's parameters are written, given their 1-based number
    /// (`$1`, `?1`), for messages.
    fn placeholder(&self, number: usize) -> String;

    /// Whether the database is served read-only whatever the token may do.
    fn read_only(&self) -> bool;

    /// The pool's state.
    fn usage(&self) -> Usage;

    /// Starts a query, waiting for a session up to the pool's wait.
    fn start<'a>(
        &'a self,
        request: QueryRequest<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn RunningQuery>, StartError>>;

    /// Prepares `sql` without running it, compares it with the declared
    /// parameter kinds and describes its result. A statement the database
    /// refuses is [`StartError::Query`].
    fn check_statement<'a>(
        &'a self,
        sql: &'a str,
        declared: &'a [DeclaredKind],
    ) -> BoxFuture<'a, Result<StatementCheck, StartError>>;

    /// Sets up a session as ad-hoc SQL would be run (as `role`, with the login
    /// checked) and closes it: `Refused` says why ad-hoc SQL could not run here.
    fn check_ad_hoc<'a>(&'a self, role: Option<&'a str>) -> BoxFuture<'a, Result<(), StartError>>;

    /// A session held for one request that drives it itself (loading a table,
    /// a batch of calls), waiting up to the pool's wait, with this
    /// `statement_timeout` and, when `read_only`, read-only transactions.
    /// Closing it gives it back; dropping it discards it. `None` for a database
    /// served read-only (the default).
    fn session(
        &self,
        statement_timeout: Option<Duration>,
        read_only: bool,
    ) -> Option<BoxFuture<'_, Result<Box<dyn Session>, StartError>>> {
        let _ = (statement_timeout, read_only);
        None
    }
}
