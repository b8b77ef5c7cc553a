//! One run of [`PreparedCalls`](super::PreparedCalls) under way: what it
//! holds ([`Run`]: the lines read, the answers still to come, the summary),
//! how it opens and ends (`autocommit` for the mode, the statement closed),
//! how it reads its input and reports each call, and how single mode rolls
//! everything back after a failure. What each round sends is
//! `super::rounds`'s, what each answer settles `super::settle`'s.

use std::collections::VecDeque;

use sluice_core::calls::{CallOutcome, Feed, ParamSet, ParamSource, PipelineSummary, Transaction};
use sluice_core::connect::CallReport;
use sluice_core::{Batch, Error, Schema};

use crate::config::ZeroDates;
use crate::connection::Connection;
use crate::statement::queue_close;

/// `SET`s of `autocommit` for the run (off: single mode's transaction; on:
/// each mode's calls commit, even where the server's default is off),
/// remembering the session's own to put it back.
const AUTOCOMMIT_OFF: &str = "SET @sluice_autocommit = @@autocommit, autocommit = 0";
const AUTOCOMMIT_ON: &str = "SET @sluice_autocommit = @@autocommit, autocommit = 1";
const AUTOCOMMIT_BACK: &str = "SET autocommit = @sluice_autocommit";

/// One input line, read and checked against the statement.
#[derive(Debug)]
pub(super) enum Member {
    /// Values to send.
    Set {
        line: u64,
        values: Vec<Option<String>>,
    },
    /// A line that is no parameter set; it fails its own call.
    Invalid { line: u64, reason: String },
}

impl Member {
    pub(super) fn line(&self) -> u64 {
        match self {
            Member::Set { line, .. } | Member::Invalid { line, .. } => *line,
        }
    }
}

/// What the server's answers will be for, in order.
#[derive(Debug)]
pub(super) enum Expected {
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
pub(super) enum BulkEnd {
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

/// One [`PreparedCalls::run`](super::PreparedCalls::run) under way.
pub(super) struct Run<'c, 'r, 'x> {
    pub(super) connection: &'c mut Connection,
    pub(super) statement: u32,
    pub(super) parameters: usize,
    pub(super) schema: Schema,
    pub(super) bulk: bool,
    pub(super) zero_dates: ZeroDates,
    pub(super) mode: Transaction,
    pub(super) window_bytes: usize,
    pub(super) report: &'r mut CallReport<'x>,
    pub(super) summary: PipelineSummary,
    /// What the answers still to come are for, in order.
    pub(super) expected: VecDeque<Expected>,
    /// Bytes of calls queued in this round (not counting sluice's own statements).
    pub(super) round_bytes: usize,
    /// The sets of a failed bulk, to run one by one before any new input.
    pub(super) retry: VecDeque<Member>,
    /// A set read that did not fit in the last bulk's packet: the next bulk's first.
    pub(super) carried: Option<Member>,
    /// What the last bulk's answer asks of the next round.
    pub(super) bulk_end: Option<BulkEnd>,
    /// The source has no more sets.
    pub(super) input_done: bool,
    /// Single mode: a call failed or a line was invalid: roll everything back.
    pub(super) failed: bool,
    /// The statement's close (and, in single mode, the transaction's end) is queued.
    pub(super) ended: bool,
    /// A statement of sluice's own was refused (COMMIT).
    pub(super) commit_error: Option<Error>,
    /// Calls that ran.
    pub(super) ran: u64,
    /// The rows of the call being answered.
    pub(super) rows: Batch,
}

/// Opening and end: `autocommit` for the mode, the statement closed, the summary settled.
impl Run<'_, '_, '_> {
    /// Sets `autocommit` for the mode; the `SET` travels with the first calls.
    pub(super) fn begin(&mut self) {
        self.connection.queue_query(match self.mode {
            Transaction::Single => AUTOCOMMIT_OFF,
            Transaction::Each => AUTOCOMMIT_ON,
        });
        self.expected.push_back(Expected::Control);
    }

    /// Once every call is answered and no more will be sent: closes the
    /// statement, in single mode ends the transaction, and puts `autocommit`
    /// back, all in one round.
    pub(super) fn end_when_due(&mut self) {
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
    pub(super) fn is_complete(&self) -> bool {
        self.ended && self.expected.is_empty()
    }

    /// Settles the summary as PostgreSQL's pipeline does: in single mode every
    /// call failed if anything did.
    pub(super) fn finish(mut self) -> Result<PipelineSummary, Error> {
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
    pub(super) async fn next_member<S: ParamSource + ?Sized>(
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

/// Reporting: each call's outcome, in input order.
impl Run<'_, '_, '_> {
    /// Counts a call that ran; in each mode it has succeeded, in single mode
    /// it waits for the `COMMIT`.
    pub(super) fn call_ran(&mut self) {
        self.ran += 1;
        self.summary.succeeded += u64::from(self.mode == Transaction::Each);
    }

    /// Reports a call's error; in single mode everything after it rolls back.
    pub(super) fn call_failed(&mut self, line: u64, error: &Error) -> Result<(), Error> {
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
    pub(super) fn report_invalid_lines(&mut self) -> Result<(), Error> {
        while let Some(Expected::Invalid { .. }) = self.expected.front() {
            if let Some(Expected::Invalid { line, reason }) = self.expected.pop_front() {
                self.report_invalid(line, &reason)?;
            }
        }
        Ok(())
    }

    /// Reports a line that could not be sent, as a failed call.
    pub(super) fn report_invalid(&mut self, line: u64, reason: &str) -> Result<(), Error> {
        (self.report)(line, CallOutcome::Invalid(reason))?;
        self.summary.failed += u64::from(self.mode == Transaction::Each);
        Ok(())
    }
}

/// Single mode after a failure: everything after it rolled back.
impl Run<'_, '_, '_> {
    /// Single mode after a failed call: every call sent or read after it is
    /// rolled back (the server still runs those already sent: their answers
    /// are read and dropped), and no more input is read.
    pub(super) fn roll_back_queued(&mut self) -> Result<(), Error> {
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
