//! What a round's answers settle, reported in input order: a call's rows
//! and rows affected or its error, a bulk's calls done (each mode: once
//! committed), refused whole, or undone to run again one by one, and
//! sluice's own statements (`COMMIT`, `SET`) refused. Reading the answers off
//! the wire is `super::answers`'s.

use sluice_core::calls::{CallOutcome, Transaction};
use sluice_core::Error;

use super::answers::{Answer, AnswerReader};
use super::run::{BulkEnd, Expected, Member, Run};

/// Errors of a whole statement rather than of one parameter set: running a
/// failed bulk's sets again one by one would not find the set to blame (or,
/// for a killed query, would undo the kill). Deadlock (which also rolls the
/// transaction back), lock wait timeout, lock table full, query interrupted,
/// connection killed, MariaDB's and MySQL's statement timeouts.
const WHOLE_STATEMENT_ERRORS: [u32; 7] = [1213, 1205, 1206, 1317, 1927, 1969, 3024];

/// `ER_UNSUPPORTED_PS`: the statement cannot be bulk-executed (`CALL`).
const UNSUPPORTED_IN_BULK: u32 = 1295;

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
    pub(super) async fn read_answers(&mut self) -> Result<(), Error> {
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

/// Each set's rows affected when a bulk of `sets` affected `total`: known
/// only for one set, or when nothing was affected.
fn each_affected(total: Option<u64>, sets: usize) -> Option<u64> {
    match (total, sets) {
        (Some(total), 1) => Some(total),
        (Some(0), _) => Some(0),
        _ => None,
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
}
