//! [`Session`]: one connection of a database, as the CLI's one-shot commands
//! use it (export, import, copy, call), and what it hands out: an
//! [`Export`] of a query's rows, [`Calls`] of one statement, a
//! [`Canceller`] for another task.

use std::sync::Arc;
use std::time::Duration;

use crate::calls::{CallOutcome, ParamSource, PipelineSummary, Transaction};
use crate::dialect::Dialect;
use crate::future::BoxFuture;
use crate::load::{ImportOptions, ImportSummary, RejectSink, RowFeed, TableInfo, TableSetup};
use crate::param::Param;
use crate::running::Query;
use crate::source::DynSource;
use crate::split::{SplitRead, SplitRequest};
use crate::word::spelled_enum;
use crate::{BatchSource, Error, ErrorKind, RowError, Schema};

/// Stops the statement a session is running, from another task (Ctrl-C, a
/// reader that went away). Cancelling when nothing runs does nothing.
pub trait Canceller: Send + Sync {
    /// Asks the database to stop the running statement.
    fn cancel(&self) -> BoxFuture<'_, Result<(), Error>>;
}

/// The table, rows and settings of one [`Session::import`].
pub struct ImportRequest<'a> {
    /// The table, as [`Session::describe_table`] (or [`Session::begin_load`]) found it.
    pub table: &'a TableInfo,
    /// The rows of the table's columns: decoded from an input
    /// ([`crate::load::ImportInput`]) or read from another database
    /// ([`crate::load::SourceRows`]); it counts the progress too.
    pub rows: &'a mut dyn RowFeed,
    /// What to do with bad records, conflicts; how rows travel.
    pub options: &'a ImportOptions,
    /// Receives each rejected record when bad records are skipped.
    pub rejects: &'a mut RejectSink<'a>,
}

/// Receives each call's outcome, in input order, as soon as it is known.
pub type CallReport<'a> = dyn FnMut(u64, CallOutcome<'_>) -> Result<(), Error> + Send + 'a;

/// A statement prepared to run for many parameter sets.
pub trait Calls: Send {
    /// The columns each call returns (none for a statement without rows).
    fn schema(&self) -> &Schema;

    /// How many parameters the statement takes.
    fn parameters(&self) -> usize;

    /// Runs the statement for every set `source` gives, grouped into
    /// transactions by `mode`, with at most `window_bytes` of requests
    /// unanswered, reporting each outcome to `report`.
    fn run<'a>(
        self: Box<Self>,
        source: &'a mut dyn ParamSource,
        mode: Transaction,
        window_bytes: usize,
        report: &'a mut CallReport<'_>,
    ) -> BoxFuture<'a, Result<PipelineSummary, Error>>
    where
        Self: 'a;
}

/// One query's result, streamed, owning the session it runs on. A database's
/// [`BatchSource`] becomes one as a [`Query`] whose end is a function that
/// gets the source back, read to its end, and ends its session its own way.
pub trait Export: DynSource {
    /// After the last row: ends the session cleanly.
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}

impl<S, C> Query<S, C>
where
    S: BatchSource + 'static,
    C: FnOnce(S) -> BoxFuture<'static, ()> + Send + 'static,
{
    /// `source`'s rows as an [`Export`], ended by `close`.
    pub fn export(source: S, close: C) -> Box<dyn Export> {
        Box::new(Query::new(source, close))
    }
}

impl<S, C> Export for Query<S, C>
where
    S: BatchSource,
    C: FnOnce(S) -> BoxFuture<'static, ()> + Send,
{
    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        (self.end)(self.source)
    }
}

spelled_enum! {
    /// What an export writes for a reference to a large object (`sluice export
    /// --lob`, a query's `lob` in `sluice serve`'s configuration).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub enum LargeObjects {
        /// The reference itself (PostgreSQL's `oid` number; default).
        #[default]
        Oid = "oid",
        /// The object's bytes in its place
        /// ([`ExportOptions::inline_large_objects`]).
        Inline = "inline",
    }
}

/// What a query export asks for beyond its SQL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// Values for the statement's parameters, as text the database converts to
    /// each parameter's type; `None` is NULL. Default: none.
    pub params: Vec<Option<String>>,
    /// Rows per round trip through a cursor; `None` streams the whole result
    /// from one execute (fewest round trips). Default: `None`.
    pub fetch_size: Option<u32>,
    /// Read large-object references as their contents. Default: false.
    pub inline_large_objects: bool,
    /// Hand over the columns the database can send in a binary form of their
    /// kind ([`crate::value`]'s "Binary values") that way, marked
    /// [`crate::Encoding::Binary`]: for formats that store numbers as numbers.
    /// Default: false, every value in canonical text.
    pub binary_values: bool,
    /// Hand over every column in the database's own binary form of its type
    /// ([`crate::Encoding::Native`]) when all of them have a form another
    /// database of the same product reads alike; otherwise every column as
    /// without this option. For a copy into a table of the same product with
    /// the same column types. Default: false.
    pub native_values: bool,
    /// Read in this snapshot, one that [`Session::split_read`] opened on
    /// another session, so that the parts of a split read see one moment.
    /// Default: `None`, the database's own snapshot for the statement.
    pub snapshot: Option<String>,
}

/// A connection to one database, for one command's work.
///
/// Methods a database cannot honour return [`ErrorKind::Unsupported`]; the
/// defaults do exactly that, so a read-only database implements only
/// [`Session::export`] and [`Session::close`] (with the few facts every
/// session gives: its dialect, round trips and canceller):
///
/// ```
/// use std::sync::Arc;
///
/// use sluice_core::connect::{Canceller, Dialect, Export, ExportOptions, Family, Session};
/// use sluice_core::database::{BoxFuture, Query};
/// use sluice_core::{Batch, BatchSource, Column, Error, ErrorKind, Kind, Schema};
///
/// const TOY: Dialect = Dialect::new("Toy", Family::new("Toy"));
///
/// /// A result without rows, as the toy database gives for any statement.
/// struct NoRows(Schema);
///
/// impl BatchSource for NoRows {
///     fn schema(&self) -> &Schema {
///         &self.0
///     }
///
///     async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
///         Ok(None)
///     }
/// }
///
/// /// Nothing runs for long enough to be cancelled.
/// struct NothingToCancel;
///
/// impl Canceller for NothingToCancel {
///     fn cancel(&self) -> BoxFuture<'_, Result<(), Error>> {
///         Box::pin(async { Ok(()) })
///     }
/// }
///
/// struct ToySession;
///
/// impl Session for ToySession {
///     fn round_trips(&self) -> u64 {
///         0
///     }
///
///     fn canceller(&self) -> Arc<dyn Canceller> {
///         Arc::new(NothingToCancel)
///     }
///
///     fn export(
///         self: Box<Self>,
///         _sql: String,
///         _options: ExportOptions,
///     ) -> BoxFuture<'static, Result<Box<dyn Export>, Error>> {
///         let result = NoRows(Schema { columns: vec![Column::new("x", Kind::Text, "text")] });
///         // Once read, the result ends its session: here there is nothing to end.
///         let close = |_: NoRows| -> BoxFuture<'static, ()> { Box::pin(async {}) };
///         Box::pin(async move { Ok(Query::export(result, close)) })
///     }
///
///     fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
///         Box::pin(async {})
///     }
///
///     fn dialect(&self) -> Dialect {
///         TOY
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let session: Box<dyn Session> = Box::new(ToySession);
/// let mut result = session.export("select x".into(), ExportOptions::default()).await?;
/// assert_eq!(result.schema().columns[0].name, "x");
/// assert!(result.next_batch().await?.is_none());
/// result.close().await;
/// // What it does not implement, it refuses.
/// let mut session: Box<dyn Session> = Box::new(ToySession);
/// let refused = session.describe_table("t").await.unwrap_err();
/// assert_eq!(refused.kind(), ErrorKind::Unsupported);
/// session.close().await;
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
pub trait Session: Send {
    /// Round trips made on this session so far.
    fn round_trips(&self) -> u64;

    /// How the connection to the database is encrypted (`TLSv1_3
    /// TLS13_AES_256_GCM_SHA384`); `None` when it is not, or is no network
    /// connection (the default).
    fn encryption(&self) -> Option<String> {
        None
    }

    /// What the server is and which paths this session's work takes, as
    /// `(label, value)` pairs for a command's statistics (`("server",
    /// "MariaDB 10.11.6")`, `("import path", "LOAD DATA LOCAL INFILE")`).
    /// Default: none.
    fn facts(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Things the user should hear about how the work was done (a slower path
    /// taken because the server refused the fast one), each once: the list is
    /// emptied. Default: none.
    fn take_notices(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// A handle that cancels this session's running statement from elsewhere.
    fn canceller(&self) -> Arc<dyn Canceller>;

    /// Gives the server up once nothing has moved on the connection, either
    /// way, for `timeout` while the session waits on it (`None`, the
    /// default: wait for ever, as a long query may rightly keep its first row
    /// for hours). The work then fails with an [`ErrorKind::Closed`] error
    /// carrying [`crate::Stalled`], and the session is spent. Connecting is
    /// not covered: each database's connection settings bound it. The
    /// default refuses a timeout as [`ErrorKind::Unsupported`].
    fn set_wait_timeout(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        match timeout {
            None => Ok(()),
            Some(_) => Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{} sessions cannot give up on a silent server through sluice yet",
                    self.product()
                ),
            )),
        }
    }

    /// Runs `sql` and streams its result; the session goes with it.
    fn export(
        self: Box<Self>,
        sql: String,
        options: ExportOptions,
    ) -> BoxFuture<'static, Result<Box<dyn Export>, Error>>;

    /// Opens a snapshot other sessions can read in and splits the read into
    /// parts for them ([`crate::split`]). The snapshot lasts while this
    /// session does: keep it until every part's export has started.
    fn split_read<'a>(
        &'a mut self,
        request: &'a SplitRequest,
    ) -> BoxFuture<'a, Result<SplitRead, Error>> {
        let _ = request;
        unsupported(self.product(), "reading in parallel parts of one snapshot")
    }

    /// The table's columns, as the catalog describes them; a table that does not
    /// exist is an [`ErrorKind::Config`] error.
    fn describe_table<'a>(&'a mut self, table: &'a str) -> BoxFuture<'a, Result<TableInfo, Error>> {
        let _ = table;
        unsupported(self.product(), "loading tables")
    }

    /// Starts one unit of work on `table` that imports join until
    /// [`Session::end_load`] ends it, so that setting the table up as `setup`
    /// says and loading it succeed or fail together (`sluice copy`). Returns the
    /// table as the catalog then describes it. When it fails, nothing is left
    /// begun. How each database keeps the unit whole where its DDL cannot be
    /// rolled back is its own documentation's to say.
    fn begin_load<'a>(
        &'a mut self,
        table: &'a str,
        setup: &'a TableSetup,
    ) -> BoxFuture<'a, Result<TableInfo, Error>> {
        let _ = (table, setup);
        unsupported(self.product(), "loading tables")
    }

    /// Ends the unit [`Session::begin_load`] started: commits it, or undoes it
    /// (`commit` false) as far as the database can, the table it created included.
    fn end_load(&mut self, commit: bool) -> BoxFuture<'_, Result<(), Error>> {
        let _ = commit;
        unsupported(self.product(), "loading tables")
    }

    /// Loads the request's rows into its table, as one unit: see
    /// [`ImportOptions`] for what is committed when records are bad. Inside a
    /// unit begun by [`Session::begin_load`], the import joins it and leaves
    /// committing to [`Session::end_load`].
    fn import<'a>(
        &'a mut self,
        request: ImportRequest<'a>,
    ) -> BoxFuture<'a, Result<ImportSummary, Error>> {
        let _ = request;
        unsupported(self.product(), "loading tables")
    }

    /// For an import that failed without naming a row (a constraint checked at
    /// the end): reads the input again and finds the first row the table
    /// refuses, changing nothing. `None` when every row is accepted on its own.
    fn locate_refused_row<'a>(
        &'a mut self,
        request: ImportRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<RowError>, Error>> {
        let _ = request;
        Box::pin(async { Ok(None) })
    }

    /// Prepares `sql` to run for many parameter sets.
    fn prepare_calls<'a>(
        &'a mut self,
        sql: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn Calls + 'a>, Error>> {
        let _ = sql;
        unsupported(self.product(), "running calls")
    }

    /// How this database wants a typed parameter spelled as text, for calls
    /// (whose parameter sets are text). Default: [`Param::text`].
    fn param_spelling(&self) -> fn(&Param) -> Option<String> {
        Param::text
    }

    /// Ends the session: closes the connection, or gives a pooled session back.
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;

    /// The database the session is connected to, as its server says.
    fn dialect(&self) -> Dialect;

    /// The database's name for people, for messages: its dialect's.
    fn product(&self) -> &'static str {
        self.dialect().name()
    }
}

/// A future failing with "`product` does not support `what`".
fn unsupported<'a, T: Send + 'a>(
    product: &'static str,
    what: &'static str,
) -> BoxFuture<'a, Result<T, Error>> {
    Box::pin(async move {
        Err(Error::new(
            ErrorKind::Unsupported,
            format!("{product} does not support {what} through sluice"),
        ))
    })
}
