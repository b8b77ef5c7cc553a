//! [`PreparedCalls`]: one statement run for a stream of parameter sets
//! (`sluice call`), in as few round trips as the server allows, with every
//! call's outcome reported in input order.
//!
//! The statement is prepared once (`COM_STMT_PREPARE`, 1 round trip: its
//! parameter count and result columns). Then the sets travel one of two ways:
//!
//! - **Bulk** (MariaDB, a statement with parameters and without result
//!   columns): a round's sets go in one `COM_STMT_BULK_EXECUTE`, as large as
//!   the window and `max_allowed_packet` allow, answered by one OK carrying
//!   the rows affected in total. MariaDB 10.11 has no per-set results (11.5's
//!   `STMT_BULK_FLAG_SEND_UNIT_RESULTS` needs a capability sluice does not ask
//!   for), so a set's own count is reported only when the total tells it: a
//!   bulk of one set, or nothing affected. A failing bulk answers one ERR
//!   that does not say which set failed; what it leaves behind depends on the
//!   statement: a bulk `INSERT` is one statement, undone whole, but a bulk
//!   `UPDATE` or `DELETE` runs once per set and keeps the sets before the
//!   failing one, even inside a transaction. So every bulk runs where it can
//!   be undone alone (after a `SAVEPOINT` in single mode, in a transaction of
//!   its own in each mode, both travelling with it); a failed bulk is undone
//!   and its sets run again one by one, pipelined, which gives each call its
//!   own outcome. Errors of the whole statement (a deadlock, a timeout, a
//!   killed query) are not run again; a statement MariaDB cannot bulk-execute
//!   (`CALL`) is run again and the rest of its sets go pipelined.
//! - **Pipelined** (statements with rows, MySQL, no bulk support):
//!   `COM_STMT_EXECUTE`s back to back; the server answers commands in order,
//!   so a round trip carries up to [`ROUND_BYTES`] of calls.
//!
//! Each round is written whole, then its answers are read to the end before
//! the next is written (the wire cannot write and read at once). A round
//! holds at most the window's bytes of calls (pipelined, at most
//! [`ROUND_BYTES`] too), or one set larger than that alone: memory stays
//! bounded however many sets there are, and neither end waits on the other,
//! since a round's requests fit in the socket buffers even when the server
//! stops reading until its answers (rows) are read, so the write ends and the
//! reading starts (a set alone is read whole before it is answered). Round
//! trips are one per round: 10,000 `INSERT` calls take 1 (prepare) + 1 (one
//! bulk) + 1 (`COMMIT`) on MariaDB in either mode, and 1 + ⌈bytes / 64 KiB⌉
//! (+ 1 for `COMMIT` in single mode) pipelined.
//!
//! - [`Transaction::Single`]: `autocommit` is switched off for the run rather
//!   than `START TRANSACTION`, so an error that rolls the transaction back (a
//!   deadlock) cannot leave the calls already sent behind it committing one
//!   by one; `COMMIT` (or `ROLLBACK`) and putting `autocommit` back take the
//!   last round. MariaDB keeps a transaction going after a failed statement,
//!   so `COMMIT` cannot travel with calls that might fail: it waits for their
//!   answers (1 round trip).
//! - [`Transaction::Each`]: calls commit on their own (`autocommit` is
//!   switched on for the run, whatever the server's default); a bulk's calls
//!   are committed together by a `COMMIT` that travels with the next round,
//!   and are reported done once it is answered.
//!
//! Both modes put the session's own `autocommit` back at the end.
//!
//! `COM_STMT_CLOSE` has no answer: it leaves with the last round, or with the
//! next command (at worst `COM_QUIT`).
//!
//! `INSERT … RETURNING` is refused when prepared: MariaDB announces no result
//! columns for it until it runs (MDEV-27013), and a call's rows are reported
//! over the columns known before the first call.

use std::collections::VecDeque;

use sluice_core::calls::Feed;
pub use sluice_core::calls::{CallOutcome, ParamSet, ParamSource, PipelineSummary, Transaction};
use sluice_core::connect::{CallReport, Calls};
use sluice_core::database::BoxFuture;
use sluice_core::{Batch, Error, ErrorKind, Schema};

use crate::config::ZeroDates;
use crate::connection::Connection;
use crate::statement::{queue_close, queue_prepare, read_prepare_answer};
use crate::types::column;

mod answers;
mod returning;
mod rounds;
mod run;
mod settle;

use returning::has_returning;
pub use rounds::ROUND_BYTES;
use run::Run;

/// A statement prepared to run for many parameter sets.
pub struct PreparedCalls<'c> {
    connection: &'c mut Connection,
    statement: u32,
    parameters: usize,
    schema: Schema,
    bulk: bool,
    zero_dates: ZeroDates,
}

impl<'c> PreparedCalls<'c> {
    /// Prepares `sql` (1 round trip, with any queued settings) and learns its
    /// parameter count and result columns. Values in returned rows that are
    /// zero dates become what `zero_dates` says.
    pub async fn prepare(
        connection: &'c mut Connection,
        sql: &str,
        zero_dates: ZeroDates,
    ) -> Result<PreparedCalls<'c>, Error> {
        queue_prepare(connection, sql);
        connection.wire.flush().await?;
        let settings = connection.read_settings_answers().await;
        let prepared = read_prepare_answer(connection).await?;
        if let Err(error) = settings {
            queue_close(connection, prepared.statement);
            return Err(error);
        }
        if prepared.columns.is_empty() && has_returning(sql) {
            queue_close(connection, prepared.statement);
            return Err(Error::new(
                ErrorKind::Unsupported,
                "MariaDB does not announce the columns a statement with RETURNING returns until it \
                 runs (MDEV-27013), so its calls cannot report their rows: leave RETURNING out, \
                 or read the rows back with a query afterwards",
            ));
        }
        let schema = Schema {
            columns: prepared
                .columns
                .iter()
                .map(|definition| column(definition).0)
                .collect(),
        };
        let server = connection.server();
        // Bulk execution needs parameters, and answers with an OK: no rows.
        let bulk =
            server.mariadb && server.bulk_execute && schema.is_empty() && prepared.parameters > 0;
        Ok(PreparedCalls {
            connection,
            statement: prepared.statement,
            parameters: prepared.parameters,
            schema,
            bulk,
            zero_dates,
        })
    }

    /// The columns each call returns (empty for statements without rows).
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Number of parameters each set must have.
    pub fn parameters(&self) -> usize {
        self.parameters
    }

    /// Whether the sets travel as `COM_STMT_BULK_EXECUTE`s.
    pub fn uses_bulk(&self) -> bool {
        self.bulk
    }

    /// Sends one `COM_STMT_EXECUTE` per set even where bulk execution would
    /// do (to compare the two, or for a server whose bulk path misbehaves).
    pub fn without_bulk(mut self) -> PreparedCalls<'c> {
        self.bulk = false;
        self
    }

    /// Runs the statement for every set `source` yields, grouped into
    /// transactions by `mode`, with at most `window_bytes` of requests
    /// unanswered (at least one set goes each round), and reports each call's
    /// outcome to `report` in input order, as soon as it is known.
    ///
    /// As with PostgreSQL's pipeline: in [`Transaction::Single`] mode the
    /// calls are reported as their answers come, before the transaction ends;
    /// the first failure (or invalid line) stops the reading of input, the
    /// calls already sent behind it are reported [`CallOutcome::RolledBack`],
    /// and the summary counts every call failed. In [`Transaction::Each`] mode
    /// `succeeded + failed == calls`.
    pub async fn run<S: ParamSource + ?Sized>(
        self,
        source: &mut S,
        mode: Transaction,
        window_bytes: usize,
        report: &mut CallReport<'_>,
    ) -> Result<PipelineSummary, Error> {
        let mut run = Run {
            rows: Batch::new(self.schema.len()),
            connection: self.connection,
            statement: self.statement,
            parameters: self.parameters,
            schema: self.schema,
            bulk: self.bulk,
            zero_dates: self.zero_dates,
            mode,
            window_bytes: window_bytes.max(1),
            report,
            summary: PipelineSummary::default(),
            expected: VecDeque::new(),
            round_bytes: 0,
            retry: VecDeque::new(),
            carried: None,
            bulk_end: None,
            input_done: false,
            failed: false,
            ended: false,
            commit_error: None,
            ran: 0,
        };
        let mut feed = Feed::new(source);
        run.begin();
        loop {
            run.queue_requests(&mut feed).await?;
            run.end_when_due();
            // Lines that could not be sent are reported when their turn comes.
            run.report_invalid_lines()?;
            if run.is_complete() {
                break;
            }
            run.connection.wire.flush().await?;
            run.read_answers().await?;
        }
        run.finish()
    }
}

impl Calls for PreparedCalls<'_> {
    fn schema(&self) -> &Schema {
        PreparedCalls::schema(self)
    }

    fn parameters(&self) -> usize {
        PreparedCalls::parameters(self)
    }

    fn run<'a>(
        self: Box<Self>,
        source: &'a mut dyn ParamSource,
        mode: Transaction,
        window_bytes: usize,
        report: &'a mut CallReport<'_>,
    ) -> BoxFuture<'a, Result<PipelineSummary, Error>>
    where
        Self: 'a,
    {
        Box::pin((*self).run(source, mode, window_bytes, report))
    }
}
