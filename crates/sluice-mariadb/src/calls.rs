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

use mysql_common::constants::{
    ColumnType, Command, MariadbBulkIndicator, StatusFlags, StmtBulkExecuteFlags,
};
use sluice_core::calls::Feed;
pub use sluice_core::calls::{CallOutcome, ParamSet, ParamSource, PipelineSummary, Transaction};
use sluice_core::connect::{CallReport, Calls};
use sluice_core::database::{BoxFuture, Param};
use sluice_core::{Batch, Error, ErrorKind, Schema};

use crate::config::ZeroDates;
use crate::connection::Connection;
use crate::protocol::{read_lenenc_int, write_lenenc_int};
use crate::query::{queue_close, queue_execute, queue_prepare, read_prepare_answer};

mod answers;

use crate::types::column;
use answers::{Answer, AnswerReader};

/// Bytes of `COM_STMT_EXECUTE`s written in one round, at most. Half of the
/// smallest receive buffer a server socket gets by default (Linux: 128 KiB),
/// so a round's write ends even if the server has stopped reading to wait for
/// its answers to be read.
pub const ROUND_BYTES: usize = 64 * 1024;

/// Room left under `max_allowed_packet` for what the bulk estimate leaves out
/// (the headers of a payload continued over 16 MiB packets).
const PACKET_MARGIN: u64 = 1024;

/// The packet limit assumed when the server did not say (MySQL 5's default).
const DEFAULT_PACKET_LIMIT: u64 = 1024 * 1024;

/// Errors of a whole statement rather than of one parameter set: running a
/// failed bulk's sets again one by one would not find the set to blame (or,
/// for a killed query, would undo the kill). Deadlock (which also rolls the
/// transaction back), lock wait timeout, lock table full, query interrupted,
/// connection killed, MariaDB's and MySQL's statement timeouts.
const WHOLE_STATEMENT_ERRORS: [u32; 7] = [1213, 1205, 1206, 1317, 1927, 1969, 3024];

/// `ER_UNSUPPORTED_PS`: the statement cannot be bulk-executed (`CALL`).
const UNSUPPORTED_IN_BULK: u32 = 1295;

/// `SET`s of `autocommit` for the run (off: single mode's transaction; on:
/// each mode's calls commit, even where the server's default is off),
/// remembering the session's own to put it back.
const AUTOCOMMIT_OFF: &str = "SET @sluice_autocommit = @@autocommit, autocommit = 0";
const AUTOCOMMIT_ON: &str = "SET @sluice_autocommit = @@autocommit, autocommit = 1";
const AUTOCOMMIT_BACK: &str = "SET autocommit = @sluice_autocommit";

/// Single mode: where a bulk's sets are undone to if it fails.
const SAVEPOINT: &str = "SAVEPOINT sluice_bulk";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT sluice_bulk";

/// The text MariaDB converts to a parameter's type (`None` is NULL): booleans
/// as `1`/`0`, which every numeric column takes (`true` is refused by a
/// strict `INT` column); the rest as [`Param::text`] (moments in UTC are right
/// as they are: the session's time zone is UTC).
pub fn param_text(param: &Param) -> Option<String> {
    match param {
        Param::Bool(value) => Some(u8::from(*value).to_string()),
        other => other.text(),
    }
}

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

/// One input line, read and checked against the statement.
#[derive(Debug)]
enum Member {
    /// Values to send.
    Set {
        line: u64,
        values: Vec<Option<String>>,
    },
    /// A line that is no parameter set; it fails its own call.
    Invalid { line: u64, reason: String },
}

impl Member {
    fn line(&self) -> u64 {
        match self {
            Member::Set { line, .. } | Member::Invalid { line, .. } => *line,
        }
    }
}

/// What the server's answers will be for, in order.
#[derive(Debug)]
enum Expected {
    /// The `COM_STMT_EXECUTE` of one input line.
    Call { line: u64 },
    /// An input line that could not be sent; reported when its turn comes.
    Invalid { line: u64, reason: String },
    /// One `COM_STMT_BULK_EXECUTE` for these lines (the invalid ones among
    /// them were left out of it, and are reported in their place).
    Bulk { members: Vec<Member> },
    /// Each mode: the `COMMIT` of a bulk that succeeded; its calls are done
    /// once it is answered.
    Commit {
        members: Vec<Member>,
        affected: Option<u64>,
    },
    /// A statement of sluice's own (`SET autocommit`, `SAVEPOINT`, `COMMIT`).
    Control,
    /// A call already reported rolled back: its answer is read and dropped.
    Discard,
}

/// What must open the next round after a bulk was answered.
#[derive(Debug)]
enum BulkEnd {
    /// Each mode: the bulk succeeded; its transaction commits. Its lines are
    /// held until then, beside the next bulk's: two windows at most.
    Commit {
        members: Vec<Member>,
        affected: Option<u64>,
    },
    /// Each mode: the bulk failed; its transaction rolls back whatever sets it ran.
    RollBack,
    /// Single mode: the bulk failed; its sets are undone, the calls before it kept.
    RollBackToSavepoint,
}

/// One [`PreparedCalls::run`] under way.
struct Run<'c, 'r, 'x> {
    connection: &'c mut Connection,
    statement: u32,
    parameters: usize,
    schema: Schema,
    bulk: bool,
    zero_dates: ZeroDates,
    mode: Transaction,
    window_bytes: usize,
    report: &'r mut CallReport<'x>,
    summary: PipelineSummary,
    /// What the answers still to come are for, in order.
    expected: VecDeque<Expected>,
    /// Bytes of calls queued in this round (not counting sluice's own statements).
    round_bytes: usize,
    /// The sets of a failed bulk, to run one by one before any new input.
    retry: VecDeque<Member>,
    /// A set read that did not fit in the last bulk's packet: the next bulk's first.
    carried: Option<Member>,
    /// What the last bulk's answer asks of the next round.
    bulk_end: Option<BulkEnd>,
    /// The source has no more sets.
    input_done: bool,
    /// Single mode: a call failed or a line was invalid: roll everything back.
    failed: bool,
    /// The statement's close (and, in single mode, the transaction's end) is queued.
    ended: bool,
    /// A statement of sluice's own was refused (COMMIT).
    commit_error: Option<Error>,
    /// Calls that ran.
    ran: u64,
    /// The rows of the call being answered.
    rows: Batch,
}

/// The lines read for one bulk.
struct Gathered {
    members: Vec<Member>,
    /// The encoded size of the bulk, header included.
    bytes: usize,
    /// How many of `members` are sets (the rest are invalid lines).
    sets: usize,
}

/// Opening and end: `autocommit` for the mode, the statement closed, the summary settled.
impl Run<'_, '_, '_> {
    /// Sets `autocommit` for the mode; the `SET` travels with the first calls.
    fn begin(&mut self) {
        self.connection.queue_query(match self.mode {
            Transaction::Single => AUTOCOMMIT_OFF,
            Transaction::Each => AUTOCOMMIT_ON,
        });
        self.expected.push_back(Expected::Control);
    }

    /// Once every call is answered and no more will be sent: closes the
    /// statement, in single mode ends the transaction, and puts `autocommit`
    /// back, all in one round.
    fn end_when_due(&mut self) {
        if self.ended || !self.nothing_left_to_send() {
            return;
        }
        queue_close(self.connection, self.statement);
        if self.mode == Transaction::Single {
            let end = if self.failed { "ROLLBACK" } else { "COMMIT" };
            self.connection.queue_query(end);
            self.expected.push_back(Expected::Control);
        }
        self.queue_autocommit_back();
        self.ended = true;
    }

    /// No input, retry, carried set or bulk ending is left, and the round
    /// holds no call.
    fn nothing_left_to_send(&self) -> bool {
        (self.input_done || self.failed)
            && self.retry.is_empty()
            && self.carried.is_none()
            && self.bulk_end.is_none()
            && self.round_bytes == 0
    }

    /// Puts the session's `autocommit` back: with the round when anything in
    /// it is answered; otherwise the `SET` waits for the session's next
    /// command (as settings do) rather than costing a round trip of its own.
    fn queue_autocommit_back(&mut self) {
        let answered = self
            .expected
            .iter()
            .any(|expected| !matches!(expected, Expected::Invalid { .. }));
        if answered {
            self.connection.queue_query(AUTOCOMMIT_BACK);
            self.expected.push_back(Expected::Control);
        } else {
            self.connection.queue_setting(AUTOCOMMIT_BACK);
        }
    }

    /// Everything is sent and answered.
    fn is_complete(&self) -> bool {
        self.ended && self.expected.is_empty()
    }

    /// Settles the summary as PostgreSQL's pipeline does: in single mode every
    /// call failed if anything did.
    fn finish(mut self) -> Result<PipelineSummary, Error> {
        if self.mode == Transaction::Single {
            if self.failed {
                self.summary.failed = self.summary.calls;
            } else {
                self.summary.succeeded = self.ran;
            }
        }
        match self.commit_error {
            Some(error) => Err(error),
            None => Ok(self.summary),
        }
    }
}

/// Input: the parameter sets read from the source and checked.
impl Run<'_, '_, '_> {
    /// The next line: one carried over from the last round first, then
    /// input, waited for only when `wait`; `None` when none is ready.
    async fn next_member<S: ParamSource + ?Sized>(
        &mut self,
        feed: &mut Feed<'_, S>,
        wait: bool,
    ) -> Result<Option<Member>, Error> {
        if let Some(member) = self.carried.take() {
            return Ok(Some(member));
        }
        if self.input_done {
            return Ok(None);
        }
        let Some(ready) = feed.next(wait).await else {
            return Ok(None);
        };
        match ready? {
            Some(set) => Ok(Some(self.check(set))),
            None => {
                self.input_done = true;
                Ok(None)
            }
        }
    }

    /// Counts a set read and checks it has one value per parameter; an
    /// invalid line in single mode ends the input.
    fn check(&mut self, set: ParamSet) -> Member {
        self.summary.calls += 1;
        let reason = match set.values {
            Ok(values) if values.len() == self.parameters => {
                return Member::Set {
                    line: set.line,
                    values,
                }
            }
            Ok(values) => format!(
                "the statement has {} parameters but the line has {} values",
                self.parameters,
                values.len()
            ),
            Err(reason) => reason,
        };
        self.failed |= self.mode == Transaction::Single;
        Member::Invalid {
            line: set.line,
            reason,
        }
    }
}

/// Rounds: what each round sends: the last bulk's end, then a failed bulk's
/// sets again, or else new input as a bulk or as calls one by one.
impl Run<'_, '_, '_> {
    /// Queues the next round: the end of the last bulk's transaction or
    /// savepoint, then a failed bulk's sets, or else new input.
    async fn queue_requests<S: ParamSource + ?Sized>(
        &mut self,
        feed: &mut Feed<'_, S>,
    ) -> Result<(), Error> {
        self.queue_bulk_end();
        if !self.retry.is_empty() {
            self.queue_retry();
            Ok(())
        } else if self.bulk {
            self.queue_bulk(feed).await
        } else {
            self.queue_calls(feed).await
        }
    }

    /// Queues what the last bulk's answer asked for: its `COMMIT`, or its undoing.
    fn queue_bulk_end(&mut self) {
        let (sql, expected) = match self.bulk_end.take() {
            None => return,
            Some(BulkEnd::Commit { members, affected }) => {
                ("COMMIT", Expected::Commit { members, affected })
            }
            Some(BulkEnd::RollBack) => ("ROLLBACK", Expected::Control),
            Some(BulkEnd::RollBackToSavepoint) => (ROLLBACK_TO_SAVEPOINT, Expected::Control),
        };
        self.connection.queue_query(sql);
        self.expected.push_back(expected);
    }

    /// Whether nothing is queued whose answer someone may be waiting for:
    /// only then may the round wait for input.
    fn idle(&self) -> bool {
        self.round_bytes == 0
            && !self
                .expected
                .iter()
                .any(|expected| matches!(expected, Expected::Commit { .. }))
    }

    /// Queues `COM_STMT_EXECUTE`s while the round has room. Waits for input
    /// only when idle; otherwise takes what is ready, so a client that waits
    /// for each result before sending the next set never stalls the calls.
    async fn queue_calls<S: ParamSource + ?Sized>(
        &mut self,
        feed: &mut Feed<'_, S>,
    ) -> Result<(), Error> {
        let limit = self.window_bytes.min(ROUND_BYTES);
        while !self.failed {
            let Some(member) = self.next_member(feed, self.idle()).await? else {
                break;
            };
            if self.round_bytes > 0 && self.round_bytes + execute_bytes_of(&member) > limit {
                self.carried = Some(member);
                break;
            }
            self.queue_member(member);
        }
        Ok(())
    }

    /// Queues a failed bulk's sets as single calls, as many as a round holds.
    fn queue_retry(&mut self) {
        let limit = self.window_bytes.min(ROUND_BYTES);
        while let Some(member) = self.retry.pop_front() {
            if self.round_bytes > 0 && self.round_bytes + execute_bytes_of(&member) > limit {
                self.retry.push_front(member);
                break;
            }
            self.queue_member(member);
        }
    }

    /// Queues one call, or notes why its line cannot be sent.
    fn queue_member(&mut self, member: Member) {
        match member {
            Member::Set { line, values } => {
                queue_execute(self.connection, self.statement, &values, false);
                self.round_bytes += execute_bytes(&values);
                self.expected.push_back(Expected::Call { line });
            }
            Member::Invalid { line, reason } => {
                self.expected.push_back(Expected::Invalid { line, reason })
            }
        }
    }
}

/// Bulks: sets gathered into one `COM_STMT_BULK_EXECUTE`.
impl Run<'_, '_, '_> {
    /// Gathers sets into one `COM_STMT_BULK_EXECUTE` within the window and
    /// the server's packet limit, waiting for input only for the first.
    async fn queue_bulk<S: ParamSource + ?Sized>(
        &mut self,
        feed: &mut Feed<'_, S>,
    ) -> Result<(), Error> {
        let gathered = self.gather_bulk(feed).await?;
        if gathered.sets == 0 {
            // Only invalid lines: nothing to execute, their turn to be reported.
            for member in gathered.members {
                self.queue_member(member);
            }
            return Ok(());
        }
        self.queue_gathered_bulk(gathered);
        Ok(())
    }

    /// Reads the lines of one bulk: sets while they fit the window and the
    /// packet limit (the first always does), and the invalid lines among them.
    async fn gather_bulk<S: ParamSource + ?Sized>(
        &mut self,
        feed: &mut Feed<'_, S>,
    ) -> Result<Gathered, Error> {
        let limit = self.window_bytes.min(self.packet_limit());
        let mut gathered = Gathered {
            members: Vec::new(),
            bytes: bulk_header_bytes(self.parameters),
            sets: 0,
        };
        while !self.failed {
            let wait = gathered.sets == 0 && self.idle();
            let Some(member) = self.next_member(feed, wait).await? else {
                break;
            };
            if let Member::Set { values, .. } = &member {
                let size = bulk_set_bytes(values);
                if gathered.sets > 0 && gathered.bytes + size > limit {
                    self.carried = Some(member);
                    break;
                }
                gathered.bytes += size;
                gathered.sets += 1;
            }
            gathered.members.push(member);
        }
        Ok(gathered)
    }

    /// Queues a bulk of at least one set, where it can be undone alone should
    /// it fail halfway: after a savepoint (single mode) or in a transaction of
    /// its own (each mode).
    fn queue_gathered_bulk(&mut self, gathered: Gathered) {
        let opening = match self.mode {
            Transaction::Single => SAVEPOINT,
            Transaction::Each => "START TRANSACTION",
        };
        self.connection.queue_query(opening);
        self.expected.push_back(Expected::Control);
        queue_bulk_execute(
            self.connection,
            self.statement,
            self.parameters,
            &gathered.members,
        );
        self.round_bytes += gathered.bytes;
        self.expected.push_back(Expected::Bulk {
            members: gathered.members,
        });
    }

    /// The largest bulk the server accepts.
    fn packet_limit(&self) -> usize {
        let limit = match self.connection.server().max_allowed_packet {
            0 => DEFAULT_PACKET_LIMIT,
            limit => limit.saturating_sub(PACKET_MARGIN),
        };
        usize::try_from(limit).unwrap_or(usize::MAX)
    }
}

/// Answers: what each round's answers settle, reported in input order.
impl Run<'_, '_, '_> {
    /// The reader of the answers, over the run's connection and rows.
    fn answers(&mut self) -> AnswerReader<'_> {
        AnswerReader {
            connection: self.connection,
            schema: &self.schema,
            zero_dates: self.zero_dates,
            rows: &mut self.rows,
        }
    }

    /// Reads the round's answers to the last, reporting each call's as it comes.
    async fn read_answers(&mut self) -> Result<(), Error> {
        while let Some(expected) = self.expected.pop_front() {
            match expected {
                Expected::Invalid { line, reason } => self.report_invalid(line, &reason)?,
                Expected::Call { line } => {
                    let answer = self.answers().read_answer(true).await?;
                    self.settle_call(line, answer)?;
                }
                Expected::Bulk { members } => {
                    let answer = self.answers().read_bulk_answer().await?;
                    self.settle_bulk(members, answer)?;
                }
                Expected::Commit { members, affected } => {
                    let answer = self.answers().read_answer(false).await?;
                    self.settle_commit(members, affected, answer)?;
                }
                Expected::Control => {
                    let answer = self.answers().read_answer(false).await?;
                    self.settle_control(answer);
                }
                Expected::Discard => {
                    self.answers().read_answer(false).await?;
                }
            }
        }
        self.round_bytes = 0;
        Ok(())
    }

    /// A statement of sluice's own refused (a `COMMIT`, a `SET`): the run
    /// fails with the first such error.
    fn settle_control(&mut self, answer: Answer) {
        if let Answer::Failed(error) = answer {
            self.failed = true;
            self.commit_error.get_or_insert(error);
        }
    }

    /// A call's answer: its rows and rows affected reported, or its error.
    fn settle_call(&mut self, line: u64, answer: Answer) -> Result<(), Error> {
        match answer {
            Answer::Done { affected } => {
                (self.report)(
                    line,
                    CallOutcome::Done {
                        rows: &self.rows,
                        affected,
                    },
                )?;
                self.rows.clear();
                self.call_ran();
            }
            Answer::Failed(error) => {
                self.rows.clear();
                self.call_failed(line, &error)?;
            }
        }
        Ok(())
    }

    /// Counts a call that ran; in each mode it has succeeded, in single mode
    /// it waits for the `COMMIT`.
    fn call_ran(&mut self) {
        self.ran += 1;
        self.summary.succeeded += u64::from(self.mode == Transaction::Each);
    }

    /// Reports a call's error; in single mode everything after it rolls back.
    fn call_failed(&mut self, line: u64, error: &Error) -> Result<(), Error> {
        let db = error.as_db_error().cloned().unwrap_or_default();
        (self.report)(line, CallOutcome::Failed(&db))?;
        if self.mode == Transaction::Each {
            self.summary.failed += 1;
            Ok(())
        } else {
            self.roll_back_queued()
        }
    }

    /// Reports the input lines at the front of the queue that could not be
    /// sent: their turn has come.
    fn report_invalid_lines(&mut self) -> Result<(), Error> {
        while let Some(Expected::Invalid { .. }) = self.expected.front() {
            if let Some(Expected::Invalid { line, reason }) = self.expected.pop_front() {
                self.report_invalid(line, &reason)?;
            }
        }
        Ok(())
    }

    /// Reports a line that could not be sent, as a failed call.
    fn report_invalid(&mut self, line: u64, reason: &str) -> Result<(), Error> {
        (self.report)(line, CallOutcome::Invalid(reason))?;
        self.summary.failed += u64::from(self.mode == Transaction::Each);
        Ok(())
    }
}

/// Bulk answers: a bulk's calls done, failed, or to run again one by one.
impl Run<'_, '_, '_> {
    /// A bulk's answer: its calls done (each mode: once committed), or its
    /// sets to undo and run again one by one.
    fn settle_bulk(&mut self, members: Vec<Member>, answer: Answer) -> Result<(), Error> {
        let error = match answer {
            Answer::Done { affected } if self.mode == Transaction::Each => {
                self.bulk_end = Some(BulkEnd::Commit { members, affected });
                return Ok(());
            }
            Answer::Done { affected } => return self.bulk_done(members, affected),
            Answer::Failed(error) => error,
        };
        let code = error.as_db_error().and_then(|db| db.vendor_code);
        if code.is_some_and(|code| WHOLE_STATEMENT_ERRORS.contains(&code)) {
            return self.bulk_refused(members, &error);
        }
        if code == Some(UNSUPPORTED_IN_BULK) {
            self.bulk = false;
        }
        self.bulk_end = Some(match self.mode {
            Transaction::Single => BulkEnd::RollBackToSavepoint,
            Transaction::Each => BulkEnd::RollBack,
        });
        // Run again, the server says which set it refuses.
        self.retry.extend(members);
        Ok(())
    }

    /// A bulk failed as a whole. Each mode: none of its calls ran. Single
    /// mode: the first carries the error, the rest roll back with it
    /// (reported before the lines after the bulk).
    fn bulk_refused(&mut self, members: Vec<Member>, error: &Error) -> Result<(), Error> {
        if self.mode == Transaction::Each {
            self.bulk_end = Some(BulkEnd::RollBack);
            return self.all_failed(members, error);
        }
        let db = error.as_db_error().cloned().unwrap_or_default();
        let mut blamed = false;
        for member in members {
            match member {
                Member::Set { line, .. } if !blamed => {
                    blamed = true;
                    (self.report)(line, CallOutcome::Failed(&db))?;
                }
                Member::Invalid { line, reason } if !blamed => {
                    self.report_invalid(line, &reason)?
                }
                rolled_back => (self.report)(rolled_back.line(), CallOutcome::RolledBack)?,
            }
        }
        self.roll_back_queued()
    }

    /// Each mode: the answer to a bulk's `COMMIT` settles its calls.
    fn settle_commit(
        &mut self,
        members: Vec<Member>,
        affected: Option<u64>,
        answer: Answer,
    ) -> Result<(), Error> {
        match answer {
            Answer::Done { .. } => self.bulk_done(members, affected),
            Answer::Failed(error) => self.all_failed(members, &error),
        }
    }

    /// Each mode: every call of `members` failed with `error`.
    fn all_failed(&mut self, members: Vec<Member>, error: &Error) -> Result<(), Error> {
        for member in members {
            match member {
                Member::Set { line, .. } => self.call_failed(line, error)?,
                Member::Invalid { line, reason } => self.report_invalid(line, &reason)?,
            }
        }
        Ok(())
    }

    /// Every set of a bulk ran: each reported done, with its rows affected
    /// when the total tells them.
    fn bulk_done(&mut self, members: Vec<Member>, affected: Option<u64>) -> Result<(), Error> {
        let sets = members
            .iter()
            .filter(|member| matches!(member, Member::Set { .. }))
            .count();
        let each = each_affected(affected, sets);
        for member in members {
            match member {
                Member::Set { line, .. } => {
                    let done = CallOutcome::Done {
                        rows: &self.rows,
                        affected: each,
                    };
                    (self.report)(line, done)?;
                    self.call_ran();
                }
                Member::Invalid { line, reason } => self.report_invalid(line, &reason)?,
            }
        }
        Ok(())
    }
}

/// Single mode after a failure: everything after it rolled back.
impl Run<'_, '_, '_> {
    /// Single mode after a failed call: every call sent or read after it is
    /// rolled back (the server still runs those already sent: their answers
    /// are read and dropped), and no more input is read.
    fn roll_back_queued(&mut self) -> Result<(), Error> {
        let report = &mut self.report;
        for expected in self.expected.iter_mut() {
            match expected {
                Expected::Call { line } | Expected::Invalid { line, .. } => {
                    report(*line, CallOutcome::RolledBack)?;
                }
                Expected::Bulk { members } => {
                    for member in members.iter() {
                        report(member.line(), CallOutcome::RolledBack)?;
                    }
                }
                Expected::Commit { .. } | Expected::Control | Expected::Discard => continue,
            }
            if !matches!(expected, Expected::Invalid { .. }) {
                *expected = Expected::Discard;
            }
        }
        self.expected
            .retain(|expected| !matches!(expected, Expected::Invalid { .. }));
        for member in self.retry.drain(..).chain(self.carried.take()) {
            report(member.line(), CallOutcome::RolledBack)?;
        }
        self.failed = true;
        Ok(())
    }
}

/// Each set's rows affected when a bulk of `sets` affected `total`: known
/// only for one set, or when nothing was affected.
fn each_affected(total: Option<u64>, sets: usize) -> Option<u64> {
    match (total, sets) {
        (Some(total), 1) => Some(total),
        (Some(0), _) => Some(0),
        _ => None,
    }
}

/// Whether `sql` has the word `RETURNING` outside strings, quoted names and
/// comments (the text of MariaDB's executable comments `/*! … */` counts).
fn has_returning(sql: &str) -> bool {
    let bytes = sql.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        let rest = &bytes[index..];
        index += match rest {
            [quote @ (b'\'' | b'"' | b'`'), ..] => quoted_length(rest, *quote),
            [b'#', ..] | [b'-', b'-', b' ' | b'\t' | b'\n' | b'\r', ..] => rest
                .iter()
                .position(|&byte| byte == b'\n')
                .unwrap_or(rest.len()),
            [b'/', b'*', b'!', ..] | [b'/', b'*', b'M', b'!', ..] => 3,
            [b'/', b'*', ..] => rest
                .windows(2)
                .skip(2)
                .position(|pair| pair == b"*/")
                .map_or(rest.len(), |end| end + 4),
            [first, ..] if is_word_byte(*first) => {
                let length = rest.iter().take_while(|&&byte| is_word_byte(byte)).count();
                if rest[..length].eq_ignore_ascii_case(b"returning") {
                    return true;
                }
                length
            }
            _ => 1,
        };
    }
    false
}

/// Bytes of the quoted string or name at the start of `text` (to its end if
/// it is not closed); a backslash escapes the next byte in strings.
fn quoted_length(text: &[u8], quote: u8) -> usize {
    let mut index = 1;
    while index < text.len() {
        match text[index] {
            b'\\' if quote != b'`' => index += 2,
            byte if byte == quote => return index + 1,
            _ => index += 1,
        }
    }
    text.len()
}

fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80
}

/// An OK packet's rows affected and status.
fn ok_packet(payload: &[u8]) -> Result<(u64, StatusFlags), Error> {
    let mut rest = &payload[1..];
    let affected = read_lenenc_int(&mut rest)?;
    let _last_insert_id = read_lenenc_int(&mut rest)?;
    let status = rest
        .get(..2)
        .map_or(0, |bytes| u16::from_le_bytes([bytes[0], bytes[1]]));
    Ok((affected, StatusFlags::from_bits_truncate(status)))
}

/// Queues one `COM_STMT_BULK_EXECUTE` of `statement` for the sets among
/// `members`: every parameter typed as a string for the server to convert,
/// then each set's values behind an indicator byte (NULL or a value).
///
/// Written here rather than with `mysql_common`'s
/// `ComStmtBulkExecuteRequestBuilder`, which wants every value copied into a
/// `Value` of a `Vec<Vec<Value>>` and serialized into a buffer of its own
/// (two copies of a bulk that may be the whole window), and splits by
/// `max_allowed_packet` alone, where a run also splits by its window and
/// needs the sets again if the bulk fails.
fn queue_bulk_execute(
    connection: &mut Connection,
    statement: u32,
    parameters: usize,
    members: &[Member],
) {
    connection.wire.start_command();
    connection.wire.queue_with(|payload| {
        payload.push(Command::COM_STMT_BULK_EXECUTE as u8);
        payload.extend_from_slice(&statement.to_le_bytes());
        payload.extend_from_slice(
            &StmtBulkExecuteFlags::SEND_TYPES_TO_SERVER
                .bits()
                .to_le_bytes(),
        );
        for _ in 0..parameters {
            payload.extend_from_slice(&[ColumnType::MYSQL_TYPE_VAR_STRING as u8, 0]);
        }
        for member in members {
            let Member::Set { values, .. } = member else {
                continue;
            };
            for value in values {
                match value {
                    None => payload.push(MariadbBulkIndicator::BULK_INDICATOR_NULL as u8),
                    Some(text) => {
                        payload.push(MariadbBulkIndicator::BULK_INDICATOR_NONE as u8);
                        write_lenenc_int(text.len() as u64, payload);
                        payload.extend_from_slice(text.as_bytes());
                    }
                }
            }
        }
    });
}

/// Bytes of a bulk before its sets: packet header, command, statement id,
/// flags and a type per parameter.
fn bulk_header_bytes(parameters: usize) -> usize {
    4 + 1 + 4 + 2 + 2 * parameters
}

/// Bytes one set adds to a bulk.
fn bulk_set_bytes(values: &[Option<String>]) -> usize {
    values
        .iter()
        .map(|value| {
            1 + value
                .as_ref()
                .map_or(0, |text| lenenc_bytes(text.len()) + text.len())
        })
        .sum()
}

/// Bytes of the `COM_STMT_EXECUTE` of a line (none for an invalid one).
fn execute_bytes_of(member: &Member) -> usize {
    match member {
        Member::Set { values, .. } => execute_bytes(values),
        Member::Invalid { .. } => 0,
    }
}

/// Bytes of the `COM_STMT_EXECUTE` `queue_execute` writes for `values`.
fn execute_bytes(values: &[Option<String>]) -> usize {
    let fixed = 4 + 1 + 4 + 1 + 4;
    if values.is_empty() {
        return fixed;
    }
    let texts: usize = values
        .iter()
        .flatten()
        .map(|text| lenenc_bytes(text.len()) + text.len())
        .sum();
    fixed + values.len().div_ceil(8) + 1 + 2 * values.len() + texts
}

/// Bytes of a length-encoded integer.
fn lenenc_bytes(value: usize) -> usize {
    match value {
        0..=0xFA => 1,
        0xFB..=0xFFFF => 3,
        0x1_0000..=0xFF_FFFF => 4,
        _ => 9,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bulk_says_each_sets_count_only_when_the_total_does() {
        assert_eq!(each_affected(Some(3), 1), Some(3));
        assert_eq!(each_affected(Some(0), 500), Some(0));
        assert_eq!(each_affected(Some(500), 500), None);
        assert_eq!(each_affected(None, 2), None);
    }

    #[test]
    fn sizes_follow_the_encodings() {
        let values = vec![Some("12".to_owned()), None, Some("x".repeat(300))];
        // indicator + length + text, indicator, indicator + 3-byte length + text
        assert_eq!(bulk_set_bytes(&values), (1 + 1 + 2) + 1 + (1 + 3 + 300));
        // header, command, id, flags, iterations, bitmap, bound flag, types, values
        assert_eq!(
            execute_bytes(&values),
            4 + 1 + 4 + 1 + 4 + 1 + 1 + 6 + (1 + 2) + (3 + 300)
        );
        assert_eq!(execute_bytes(&[]), 14);
        assert_eq!(bulk_header_bytes(2), 15);
    }

    #[test]
    fn returning_is_found_as_a_word_of_the_statement_only() {
        assert!(has_returning("insert into t values (?) returning id"));
        assert!(has_returning("DELETE FROM t WHERE id = ?\nRETURNING *"));
        assert!(has_returning(
            "insert into t values (?) /*! returning id */"
        ));
        assert!(!has_returning("insert into t (returning_id) values (?)"));
        assert!(!has_returning("insert into t values ('returning', ?)"));
        assert!(!has_returning(
            "insert into t values ('it\\'s returning', ?)"
        ));
        assert!(!has_returning(
            "insert into `returning` values (?) -- returning\n"
        ));
        assert!(!has_returning("insert into t values (?) # returning"));
        assert!(!has_returning("insert /* returning */ into t values (?)"));
        assert!(!has_returning("update t set n = ? where id = ?"));
    }

    #[test]
    fn booleans_are_spelled_as_numbers() {
        assert_eq!(param_text(&Param::Bool(true)).as_deref(), Some("1"));
        assert_eq!(param_text(&Param::Bool(false)).as_deref(), Some("0"));
        assert_eq!(param_text(&Param::Null), None);
        assert_eq!(param_text(&Param::Text("a".into())).as_deref(), Some("a"));
    }
}
