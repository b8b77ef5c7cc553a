//! What each round of a run sends: the last bulk's end, then a failed
//! bulk's sets again, or else new input — as one `COM_STMT_BULK_EXECUTE`
//! within the window and the server's packet limit, or as
//! `COM_STMT_EXECUTE`s one by one, at most [`ROUND_BYTES`] of them.

use sluice_core::calls::{Feed, ParamSource, Transaction};
use sluice_core::Error;

use super::run::{BulkEnd, Expected, Member, Run};
use crate::connection::Connection;
use crate::protocol::{bulk_header_bytes, bulk_set_bytes, execute_bytes, write_bulk_execute};
use crate::statement::queue_execute;

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

/// Single mode: where a bulk's sets are undone to if it fails.
const SAVEPOINT: &str = "SAVEPOINT sluice_bulk";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT sluice_bulk";

/// The lines read for one bulk.
struct Gathered {
    members: Vec<Member>,
    /// The encoded size of the bulk, header included.
    bytes: usize,
    /// How many of `members` are sets (the rest are invalid lines).
    sets: usize,
}

/// Rounds: what each round sends: the last bulk's end, then a failed bulk's
/// sets again, or else new input as a bulk or as calls one by one.
impl Run<'_, '_, '_> {
    /// Queues the next round: the end of the last bulk's transaction or
    /// savepoint, then a failed bulk's sets, or else new input.
    pub(super) async fn queue_requests<S: ParamSource + ?Sized>(
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

/// Queues one `COM_STMT_BULK_EXECUTE` of `statement` for the sets among
/// `members` (the invalid lines among them are left out).
fn queue_bulk_execute(
    connection: &mut Connection,
    statement: u32,
    parameters: usize,
    members: &[Member],
) {
    let sets = members.iter().filter_map(|member| match member {
        Member::Set { values, .. } => Some(&values[..]),
        Member::Invalid { .. } => None,
    });
    connection
        .wire
        .queue_command(|payload| write_bulk_execute(statement, parameters, sets, payload));
}

/// Bytes of the `COM_STMT_EXECUTE` of a line (none for an invalid one).
fn execute_bytes_of(member: &Member) -> usize {
    match member {
        Member::Set { values, .. } => execute_bytes(values),
        Member::Invalid { .. } => 0,
    }
}
