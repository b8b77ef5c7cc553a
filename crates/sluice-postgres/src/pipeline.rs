//! Many calls, one trip: one statement run for a stream of parameter sets,
//! pipelined.
//!
//! The statement is prepared once (1 round trip). Then `Bind` + `Execute` for each
//! parameter set are written back to back while the answers are read as they
//! come, so the client never stops to wait: a window bounds the bytes of sets sent
//! but not yet answered (and with it memory), not the number of round trips.
//!
//! - [`Transaction::Single`]: one `Sync` after the last set, so the whole pipeline
//!   is one implicit transaction: any failure rolls everything back, and the
//!   server skips the remaining sets.
//! - [`Transaction::Each`]: a `Sync` after every set, so each commits or fails on
//!   its own, still without waiting between sets.

use std::collections::VecDeque;

use postgres_protocol::message::backend::Message;
use sluice_core::{Batch, Error, Schema};

use sluice_core::calls::Feed;
pub use sluice_core::calls::{CallOutcome, ParamSet, ParamSource, PipelineSummary, Transaction};

use crate::connection::{text_values, Connection, Received};
use crate::error::db_error;
use crate::types::{self, Oid};

const STATEMENT: &str = "sluice_call";

/// A prepared statement ready to be run for many parameter sets.
pub struct Pipeline<'c> {
    connection: &'c mut Connection,
    schema: Schema,
    parameters: usize,
    bytes_columns: Vec<bool>,
}

/// What the server's answers will be for, in order.
#[derive(Debug)]
enum Expected {
    /// A call of this input line, whose request took `bytes`.
    Call { line: u64, bytes: usize },
    /// An input line that could not be sent; reported when its turn comes.
    Invalid { line: u64, reason: String },
    /// `BEGIN`, `COMMIT` or `ROLLBACK` of single mode.
    Control,
}

impl<'c> Pipeline<'c> {
    /// Prepares `sql` and learns its parameter count and result columns.
    pub async fn prepare(connection: &'c mut Connection, sql: &str) -> Result<Pipeline<'c>, Error> {
        let (parameters, columns, failure) = match connection.prepare(STATEMENT, sql).await {
            Ok(description) => (description.parameters, description.columns, None),
            Err(error) if error.kind() == sluice_core::ErrorKind::Database => {
                (0, Vec::new(), Some(error))
            }
            Err(error) => return Err(error),
        };
        let oids: Vec<Oid> = columns.iter().map(|(_, oid, _)| *oid).collect();
        let catalog = match failure {
            Some(error) => Err(error),
            None => connection.resolve_types(&oids).await,
        };
        // End the preparing exchange; the named statement outlives it.
        let catalog = connection.end_exchange(catalog).await?;
        let schema = types::schema_of(&columns, &catalog);
        Ok(Pipeline {
            connection,
            bytes_columns: schema
                .columns
                .iter()
                .map(|column| column.kind == sluice_core::Kind::Bytes)
                .collect(),
            schema,
            parameters,
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

    /// Runs the statement for every set `source` yields, keeping at most
    /// `window_bytes` of unanswered requests in flight, and reports each call's
    /// outcome to `report` in input order, as soon as it is known.
    ///
    /// In [`Transaction::Single`] mode outcomes are reported as calls complete,
    /// before the transaction's end: when a later call fails, the summary (and
    /// the failing call's outcome) say that everything was rolled back; memory
    /// stays bounded however many sets there are.
    pub async fn run<S: ParamSource + ?Sized>(
        self,
        source: &mut S,
        mode: Transaction,
        window_bytes: usize,
        report: &mut Report<'_>,
    ) -> Result<PipelineSummary, Error> {
        let mut run = Run {
            rows: Batch::new(self.schema.len()),
            connection: self.connection,
            parameters: self.parameters,
            bytes_columns: self.bytes_columns,
            mode,
            window_bytes,
            report,
            summary: PipelineSummary::default(),
            expected: VecDeque::new(),
            in_flight_bytes: 0,
            input_done: false,
            ready_pending: 0,
            ended: false,
            failed: false,
            commit_error: None,
            ran: 0,
            unflushed: false,
        };
        let mut feed = Feed::new(source);
        run.begin()?;
        loop {
            run.queue_calls(&mut feed).await?;
            run.end_transaction_when_due()?;
            // Lines that could not be sent are reported when their turn comes.
            run.report_invalid_lines()?;
            if run.is_complete() {
                break;
            }
            if run.expected.is_empty()
                && run.ready_pending == 0
                && run.connection.queued_bytes() == 0
            {
                // Nothing sent awaits an answer (the last set was an invalid
                // line): wait for input, not for the server.
                continue;
            }
            run.flush_calls();
            // Write what is queued and read what has arrived, whichever can go.
            run.connection.exchange().await?;
            run.read_answers()?;
        }
        run.finish().await
    }
}

/// Receives each call's outcome, with its input line.
pub type Report<'r> = dyn FnMut(u64, CallOutcome<'_>) -> Result<(), Error> + Send + 'r;

/// One [`Pipeline::run`] under way: what has been sent, what the server's
/// answers will be for, and how the transaction stands.
struct Run<'c, 'r> {
    connection: &'c mut Connection,
    parameters: usize,
    bytes_columns: Vec<bool>,
    mode: Transaction,
    window_bytes: usize,
    report: &'r mut Report<'r>,
    summary: PipelineSummary,
    /// What the answers still to come are for, in order.
    expected: VecDeque<Expected>,
    /// Bytes of calls sent and not yet answered: bounded by `window_bytes`.
    in_flight_bytes: usize,
    /// The source has no more sets.
    input_done: bool,
    /// `ReadyForQuery` answers still owed (one per `Sync` or simple query).
    ready_pending: usize,
    /// Single mode: the transaction's end is queued.
    ended: bool,
    /// Single mode: a call failed (or a line was invalid): roll everything back.
    failed: bool,
    /// `BEGIN` or `COMMIT` refused.
    commit_error: Option<Error>,
    /// Calls that completed.
    ran: u64,
    /// The rows of the call being answered.
    rows: Batch,
    /// Single mode: calls queued since the last `Flush` or `Sync`.
    unflushed: bool,
}

impl Run<'_, '_> {
    /// Single mode opens the transaction all calls run in.
    fn begin(&mut self) -> Result<(), Error> {
        if self.mode == Transaction::Single {
            self.connection.encode_query("begin")?;
            self.expected.push_back(Expected::Control);
            self.ready_pending += 1;
        }
        Ok(())
    }

    /// Queues calls while the window allows. Waits for input only when nothing
    /// is in flight; otherwise takes what is ready and goes on answering, so a
    /// client that waits for each result before sending the next set never
    /// stalls the pipeline.
    async fn queue_calls<S: ParamSource + ?Sized>(
        &mut self,
        feed: &mut Feed<'_, S>,
    ) -> Result<(), Error> {
        while !self.input_done && !self.failed && self.in_flight_bytes < self.window_bytes {
            let idle = self.expected.is_empty() && self.connection.queued_bytes() == 0;
            let Some(ready) = feed.next(idle).await else {
                break;
            };
            match ready? {
                Some(set) => self.queue_call(set)?,
                None => self.input_done = true,
            }
        }
        Ok(())
    }

    /// Queues `Bind` + `Execute` for one set, or notes why it cannot be sent.
    fn queue_call(&mut self, set: ParamSet) -> Result<(), Error> {
        self.summary.calls += 1;
        let values = match set.values {
            Ok(values) if values.len() == self.parameters => values,
            Ok(values) => {
                let reason = format!(
                    "the statement has {} parameters but the line has {} values",
                    self.parameters,
                    values.len()
                );
                self.queue_invalid(set.line, reason);
                return Ok(());
            }
            Err(reason) => {
                self.queue_invalid(set.line, reason);
                return Ok(());
            }
        };
        let before = self.connection.queued_bytes();
        self.connection.encode_bind(
            STATEMENT,
            [0],
            text_values(&values),
            self.bytes_columns.iter().map(|&bytes| i16::from(bytes)),
        )?;
        self.connection.encode_execute(0)?;
        if self.mode == Transaction::Each {
            self.connection.encode_sync();
            self.ready_pending += 1;
        } else {
            self.unflushed = true;
        }
        let bytes = self.connection.queued_bytes() - before;
        self.in_flight_bytes += bytes;
        self.expected.push_back(Expected::Call {
            line: set.line,
            bytes,
        });
        Ok(())
    }

    fn queue_invalid(&mut self, line: u64, reason: String) {
        self.expected.push_back(Expected::Invalid { line, reason });
        self.failed |= self.mode == Transaction::Single;
    }

    /// Single mode, once the input is done or a call failed: `Sync` ends the
    /// pipeline, then COMMIT (on a transaction a failed call aborted, COMMIT
    /// rolls back, so only an invalid line needs ROLLBACK).
    fn end_transaction_when_due(&mut self) -> Result<(), Error> {
        if (self.input_done || self.failed) && self.mode == Transaction::Single && !self.ended {
            self.connection.encode_sync();
            self.unflushed = false;
            let end = if self.failed { "rollback" } else { "commit" };
            self.connection.encode_query(end)?;
            self.expected.push_back(Expected::Control);
            self.ready_pending += 2;
            self.ended = true;
        }
        Ok(())
    }

    /// Everything is sent and answered.
    fn is_complete(&self) -> bool {
        (self.input_done || self.failed)
            && self.expected.is_empty()
            && self.ready_pending == 0
            && self.connection.queued_bytes() == 0
    }

    /// Before waiting on the server, makes it send what it has: without a Sync
    /// (single mode keeps one transaction open) it would hold its answers, and
    /// an input that is not ready yet would wait for them.
    fn flush_calls(&mut self) {
        if self.unflushed {
            self.connection.encode_flush();
            self.unflushed = false;
        }
    }

    /// Handles every answer already received.
    fn read_answers(&mut self) -> Result<(), Error> {
        loop {
            let message = match self.connection.receive_buffered(&mut self.rows)? {
                Received::Row => continue,
                Received::Message(message) => message,
                Received::Incomplete => return Ok(()),
            };
            match message {
                Message::BindComplete
                | Message::NoticeResponse(_)
                | Message::ParameterStatus(_)
                | Message::EmptyQueryResponse => {}
                Message::CommandComplete(body) => {
                    // Lines that could not be sent come before this answer's call.
                    self.report_invalid_lines()?;
                    let affected = crate::connection::tag_count(body.tag().map_err(Error::io)?);
                    self.call_completed(affected)?;
                }
                Message::ErrorResponse(body) => {
                    self.report_invalid_lines()?;
                    self.call_failed(db_error(&body))?;
                }
                Message::ReadyForQuery(_) => {
                    self.ready_pending = self.ready_pending.saturating_sub(1)
                }
                _ => return Err(Error::protocol("unexpected message in a pipeline")),
            }
        }
    }

    fn call_completed(&mut self, affected: Option<u64>) -> Result<(), Error> {
        match self.expected.pop_front() {
            Some(Expected::Call { line, bytes }) => {
                self.in_flight_bytes -= bytes;
                let rows = &self.rows;
                (self.report)(line, CallOutcome::Done { rows, affected })?;
                self.ran += 1;
                self.summary.succeeded += u64::from(self.mode == Transaction::Each);
            }
            Some(Expected::Control) => {}
            _ => return Err(Error::protocol("an answer for no call")),
        }
        self.rows.clear();
        Ok(())
    }

    fn call_failed(&mut self, error: Error) -> Result<(), Error> {
        self.rows.clear();
        match self.expected.pop_front() {
            Some(Expected::Call { line, bytes }) => {
                self.in_flight_bytes -= bytes;
                let db = error.as_db_error().cloned().unwrap_or_default();
                (self.report)(line, CallOutcome::Failed(&db))?;
                if self.mode == Transaction::Each {
                    self.summary.failed += 1;
                } else {
                    self.roll_back_queued()?;
                }
            }
            // BEGIN or COMMIT refused (e.g. a deferred constraint).
            Some(Expected::Control) => {
                self.failed = true;
                self.commit_error.get_or_insert(error);
            }
            _ => return Err(Error::protocol("an error for no call")),
        }
        Ok(())
    }

    /// Single mode after a failed call: the server skips every call up to the
    /// Sync, and the transaction is lost.
    fn roll_back_queued(&mut self) -> Result<(), Error> {
        while let Some(Expected::Call { .. } | Expected::Invalid { .. }) = self.expected.front() {
            if let Some(Expected::Call { line, .. } | Expected::Invalid { line, .. }) =
                self.expected.pop_front()
            {
                (self.report)(line, CallOutcome::RolledBack)?;
            }
        }
        self.in_flight_bytes = 0;
        self.failed = true;
        Ok(())
    }

    /// Reports the input lines at the front of the queue that could not be
    /// sent: their turn has come.
    fn report_invalid_lines(&mut self) -> Result<(), Error> {
        while let Some(Expected::Invalid { .. }) = self.expected.front() {
            if let Some(Expected::Invalid { line, reason }) = self.expected.pop_front() {
                (self.report)(line, CallOutcome::Invalid(&reason))?;
                self.summary.failed += u64::from(self.mode == Transaction::Each);
            }
        }
        Ok(())
    }

    /// Settles the summary and drops the prepared statement, so the session is
    /// as it was.
    async fn finish(mut self) -> Result<PipelineSummary, Error> {
        if self.mode == Transaction::Single {
            if self.failed {
                self.summary.failed = self.summary.calls;
            } else {
                self.summary.succeeded = self.ran;
            }
        }
        self.connection.encode_close_statement(STATEMENT)?;
        self.connection.sync_and_drain().await?;
        match self.commit_error {
            Some(error) => Err(error),
            None => Ok(self.summary),
        }
    }
}
