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
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use postgres_protocol::message::backend::Message;
use sluice_core::{Batch, DbError, Error, Schema};

use crate::connection::{text_values, Connection, Received};
use crate::error::db_error;
use crate::types::{self, Oid};

const STATEMENT: &str = "sluice_call";

/// How the calls are grouped into transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transaction {
    /// All or nothing (default).
    #[default]
    Single,
    /// Each parameter set on its own.
    Each,
}

/// One parameter set, with the input line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSet {
    /// 1-based input line.
    pub line: u64,
    /// Text values for `$1`, `$2`, …; `None` is NULL. `Err` holds why the line
    /// could not be read as a parameter set: it fails that call (and, in single
    /// mode, the transaction) in its place in the order.
    pub values: Result<Vec<Option<String>>, String>,
}

/// Where parameter sets come from.
pub trait ParamSource: Send {
    /// The next set, or `None` at the end of the input.
    fn next(&mut self) -> impl Future<Output = Result<Option<ParamSet>, Error>> + Send;
}

/// What one call did.
#[derive(Debug)]
pub enum CallOutcome<'a> {
    /// It ran; `rows` holds what it returned (over [`Pipeline::schema`]) and
    /// `affected` the count from its command tag (rows inserted, updated, …).
    Done {
        /// Returned rows.
        rows: &'a Batch,
        /// Rows affected, when the command reports it.
        affected: Option<u64>,
    },
    /// The database refused it.
    Failed(&'a DbError),
    /// Its input line was not a valid parameter set.
    Invalid(&'a str),
    /// It was not run, or was rolled back, because another call of the same
    /// transaction failed.
    RolledBack,
}

/// Counts of a finished pipeline. `succeeded + failed == calls`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipelineSummary {
    /// Parameter sets read.
    pub calls: u64,
    /// Calls that ran and were committed.
    pub succeeded: u64,
    /// Calls that failed or were rolled back.
    pub failed: u64,
}

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
        let oids: Vec<Oid> = columns.iter().map(|(_, oid)| *oid).collect();
        let catalog = match failure {
            Some(error) => Err(error),
            None => types::resolve(connection, &oids).await,
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
    pub async fn run<S: ParamSource>(
        self,
        source: &mut S,
        mode: Transaction,
        window_bytes: usize,
        report: &mut (dyn FnMut(u64, CallOutcome<'_>) -> Result<(), Error> + Send),
    ) -> Result<PipelineSummary, Error> {
        let mut summary = PipelineSummary::default();
        let mut expected: VecDeque<Expected> = VecDeque::new();
        let mut in_flight_bytes = 0usize;
        let mut input_done = false;
        // ReadyForQuery answers still owed (one per Sync or simple query).
        let mut ready_pending = 0usize;
        let mut ended = false;
        // Single mode: a call failed (or a line was invalid): roll everything back.
        let mut failed = false;
        let mut commit_error: Option<Error> = None;
        let mut ran = 0u64;
        let mut rows = Batch::new(self.schema.len());
        let connection = self.connection;
        // Single mode: calls written since the last Flush or Sync.
        let mut unflushed = false;
        let mut feed = Feed {
            source: Some(source),
            next: None,
        };
        if mode == Transaction::Single {
            connection.encode_query("begin")?;
            expected.push_back(Expected::Control);
            ready_pending += 1;
        }
        loop {
            // Queue more requests while the window allows.
            while !input_done && !failed && in_flight_bytes < window_bytes {
                // Wait for input only when nothing is in flight; otherwise take what
                // is ready and go on answering, so a client that waits for each
                // result before sending the next set never stalls the pipeline.
                let idle = expected.is_empty() && connection.queued_bytes() == 0;
                let Some(ready) = feed.next(idle).await else {
                    break;
                };
                let Some(set) = ready? else {
                    input_done = true;
                    break;
                };
                summary.calls += 1;
                let values = match set.values {
                    Ok(values) if values.len() == self.parameters => values,
                    Ok(values) => {
                        let reason = format!(
                            "the statement has {} parameters but the line has {} values",
                            self.parameters,
                            values.len()
                        );
                        expected.push_back(Expected::Invalid {
                            line: set.line,
                            reason,
                        });
                        failed |= mode == Transaction::Single;
                        continue;
                    }
                    Err(reason) => {
                        expected.push_back(Expected::Invalid {
                            line: set.line,
                            reason,
                        });
                        failed |= mode == Transaction::Single;
                        continue;
                    }
                };
                let before = connection.queued_bytes();
                connection.encode_bind(
                    STATEMENT,
                    [0],
                    text_values(&values),
                    self.bytes_columns.iter().map(|&bytes| i16::from(bytes)),
                )?;
                connection.encode_execute(0)?;
                if mode == Transaction::Each {
                    connection.encode_sync();
                    ready_pending += 1;
                } else {
                    unflushed = true;
                }
                let bytes = connection.queued_bytes() - before;
                in_flight_bytes += bytes;
                expected.push_back(Expected::Call {
                    line: set.line,
                    bytes,
                });
            }
            if (input_done || failed) && mode == Transaction::Single && !ended {
                // Sync ends the pipeline; COMMIT on a transaction a failed call
                // aborted rolls it back, so only an invalid line needs ROLLBACK.
                connection.encode_sync();
                unflushed = false;
                let end = if failed { "rollback" } else { "commit" };
                connection.encode_query(end)?;
                expected.push_back(Expected::Control);
                ready_pending += 2;
                ended = true;
            }
            // Lines that could not be sent are reported when their turn comes.
            report_invalid_lines(&mut expected, report, &mut summary, mode)?;
            if (input_done || failed)
                && expected.is_empty()
                && ready_pending == 0
                && connection.queued_bytes() == 0
            {
                break;
            }
            // Before waiting on the server, make it send what it has: without a
            // Sync (single mode keeps one transaction open) it would hold its
            // answers, and an input that is not ready yet would wait for them.
            if unflushed {
                connection.encode_flush();
                unflushed = false;
            }
            // Write what is queued and read what has arrived, whichever can go.
            connection.exchange().await?;
            loop {
                let message = match connection.receive_buffered(&mut rows)? {
                    Received::Row => continue,
                    Received::Message(message) => message,
                    Received::Incomplete => break,
                };
                if matches!(
                    message,
                    Message::CommandComplete(_) | Message::ErrorResponse(_)
                ) {
                    // Lines that could not be sent come before this answer's call.
                    report_invalid_lines(&mut expected, report, &mut summary, mode)?;
                }
                match message {
                    Message::BindComplete
                    | Message::NoticeResponse(_)
                    | Message::ParameterStatus(_)
                    | Message::EmptyQueryResponse => {}
                    Message::CommandComplete(body) => {
                        let affected = crate::connection::tag_count(body.tag().map_err(Error::io)?);
                        match expected.pop_front() {
                            Some(Expected::Call { line, bytes }) => {
                                in_flight_bytes -= bytes;
                                report(
                                    line,
                                    CallOutcome::Done {
                                        rows: &rows,
                                        affected,
                                    },
                                )?;
                                ran += 1;
                                summary.succeeded += u64::from(mode == Transaction::Each);
                            }
                            Some(Expected::Control) => {}
                            _ => return Err(Error::protocol("an answer for no call")),
                        }
                        rows.clear();
                    }
                    Message::ErrorResponse(body) => {
                        let error = db_error(&body);
                        let db = error.as_db_error().cloned().unwrap_or_default();
                        rows.clear();
                        match expected.pop_front() {
                            Some(Expected::Call { line, bytes }) => {
                                in_flight_bytes -= bytes;
                                report(line, CallOutcome::Failed(&db))?;
                                if mode == Transaction::Each {
                                    summary.failed += 1;
                                } else {
                                    // The server skips every call up to the Sync.
                                    while let Some(
                                        Expected::Call { .. } | Expected::Invalid { .. },
                                    ) = expected.front()
                                    {
                                        if let Some(
                                            Expected::Call { line, .. }
                                            | Expected::Invalid { line, .. },
                                        ) = expected.pop_front()
                                        {
                                            report(line, CallOutcome::RolledBack)?;
                                        }
                                    }
                                    in_flight_bytes = 0;
                                    failed = true;
                                }
                            }
                            // BEGIN or COMMIT refused (e.g. a deferred constraint).
                            Some(Expected::Control) => {
                                failed = true;
                                commit_error.get_or_insert(error);
                            }
                            _ => return Err(Error::protocol("an error for no call")),
                        }
                    }
                    Message::ReadyForQuery(_) => ready_pending = ready_pending.saturating_sub(1),
                    _ => return Err(Error::protocol("unexpected message in a pipeline")),
                }
            }
        }
        if mode == Transaction::Single {
            if failed {
                summary.failed = summary.calls;
            } else {
                summary.succeeded = ran;
            }
        }
        // Drop the prepared statement so the session is as it was.
        connection.encode_close_statement(STATEMENT)?;
        connection.sync_and_drain().await?;
        match commit_error {
            Some(error) => Err(error),
            None => Ok(summary),
        }
    }
}

type Next<'s, S> =
    Pin<Box<dyn Future<Output = (Result<Option<ParamSet>, Error>, &'s mut S)> + Send + 's>>;

/// A [`ParamSource`] whose `next()` can be polled without waiting and resumed
/// later: the future under way owns the source until it completes, so a line read
/// halfway is never dropped.
struct Feed<'s, S> {
    source: Option<&'s mut S>,
    next: Option<Next<'s, S>>,
}

impl<'s, S: ParamSource> Feed<'s, S> {
    /// The next set: waits for it with `wait`, otherwise only takes it if ready.
    async fn next(&mut self, wait: bool) -> Option<Result<Option<ParamSet>, Error>> {
        if self.next.is_none() {
            let source = self
                .source
                .take()
                .expect("the source is home when no read is under way");
            self.next = Some(Box::pin(async move {
                let result = source.next().await;
                (result, source)
            }));
        }
        let future = self.next.as_mut().expect("a read under way");
        let (result, source) = if wait {
            future.await
        } else {
            match std::future::poll_fn(|context| Poll::Ready(future.as_mut().poll(context))).await {
                Poll::Ready(done) => done,
                Poll::Pending => return None,
            }
        };
        self.next = None;
        self.source = Some(source);
        Some(result)
    }
}

/// Reports the input lines at the front of the queue that could not be sent:
/// their turn has come.
fn report_invalid_lines(
    expected: &mut VecDeque<Expected>,
    report: &mut (dyn FnMut(u64, CallOutcome<'_>) -> Result<(), Error> + Send),
    summary: &mut PipelineSummary,
    mode: Transaction,
) -> Result<(), Error> {
    while let Some(Expected::Invalid { .. }) = expected.front() {
        if let Some(Expected::Invalid { line, reason }) = expected.pop_front() {
            report(line, CallOutcome::Invalid(&reason))?;
            summary.failed += u64::from(mode == Transaction::Each);
        }
    }
    Ok(())
}
