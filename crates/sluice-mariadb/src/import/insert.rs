//! Rows as prepared multi-row `INSERT`s (`Method::Insert`, or a server
//! that refuses `LOCAL INFILE`): on the fallback path several are sent back
//! to back before their answers are read, each sized to stay under
//! `max_allowed_packet`; an `INSERT`'s error is tied to the input line of the
//! row it names.

use std::collections::VecDeque;

use sluice_core::load::{ImportSummary, LineMap, RowFeed};
use sluice_core::{Batch, Decoded, Error};

use super::plan::Plan;
use super::values::parameter;
use super::warnings::{at_row, reason_of};
use crate::connection::Connection;
use crate::error::server_error;
use crate::protocol::OkPacket;
use crate::statement::{prepare, queue_close, queue_execute};

/// The whole input as prepared multi-row INSERTs. `batch_size` is the rows
/// per statement asked for, each sent and answered before the next (one
/// round trip each: the seeds' experiment); without it, statements are sized
/// to `max_allowed_packet` and sent back to back, [`PIPELINE_DEPTH`] answers
/// outstanding.
pub(super) async fn insert_all(
    connection: &mut Connection,
    plan: &Plan,
    input: &mut dyn RowFeed,
    decoded: &mut Decoded,
    mut more: bool,
    batch_size: Option<usize>,
) -> Result<ImportSummary, Error> {
    let mut summary = ImportSummary::default();
    let rows_per_statement = batch_size
        .unwrap_or_else(|| rows_per_packet(connection, plan, &decoded.batch))
        .max(1);
    let depth = if batch_size.is_some() {
        1
    } else {
        PIPELINE_DEPTH
    };
    let mut inserts = Inserts::new(depth);
    let sent: Result<(), Error> = async {
        loop {
            if let Some(first) = decoded.rejected.first() {
                return Err(Error::bad_row(first.error.clone()));
            }
            let rows = decoded.batch.num_rows();
            inserts.lines.extend(&decoded.lines);
            for index in 0..rows {
                inserts.push_row(plan, &decoded.batch, index);
                if inserts.pending_rows == rows_per_statement {
                    inserts.send(connection, plan).await?;
                }
            }
            input.progress().add_rows(rows as u64);
            summary.accepted += rows as u64;
            decoded.clear();
            if !more {
                return inserts.send(connection, plan).await;
            }
            more = input.next(decoded).await?;
        }
    }
    .await;
    let finished = inserts.finish(connection).await;
    sent?;
    summary.written = finished?;
    Ok(summary)
}

/// INSERTs sent back to back when the server refuses local files: enough to
/// keep it busy, few enough that their parameters stay a bounded amount.
const PIPELINE_DEPTH: usize = 4;

/// Rows gathered into INSERT statements of one prepared size, executed with
/// answers read up to `depth` statements behind.
struct Inserts {
    depth: usize,
    /// Prepared statement ids by row count (the full size and the last, shorter one).
    statements: Vec<(usize, u32)>,
    /// Parameters of the rows gathered for the next statement.
    pending: Vec<Option<Vec<u8>>>,
    pending_rows: usize,
    /// Rows sent so far (the next statement's first row is the one after).
    rows_sent: u64,
    /// For each statement sent and not yet answered: its first row (1-based)
    /// and its row count.
    in_flight: VecDeque<(u64, usize)>,
    lines: LineMap,
    written: u64,
    failure: Option<Error>,
}

impl Inserts {
    fn new(depth: usize) -> Inserts {
        Inserts {
            depth,
            statements: Vec::new(),
            pending: Vec::new(),
            pending_rows: 0,
            rows_sent: 0,
            in_flight: VecDeque::new(),
            lines: LineMap::default(),
            written: 0,
            failure: None,
        }
    }

    fn push_row(&mut self, plan: &Plan, batch: &Batch, index: usize) {
        let row = batch.row(index);
        for (column, convert) in plan.converts.iter().enumerate() {
            self.pending
                .push(row.get(column).map(|value| parameter(*convert, value)));
        }
        self.pending_rows += 1;
    }

    /// Executes the gathered rows (preparing a statement of that size first
    /// if there is none), reading answers as far as the depth requires.
    async fn send(&mut self, connection: &mut Connection, plan: &Plan) -> Result<(), Error> {
        if let Some(error) = self.failure.take() {
            // Stop reading the input: the import has failed.
            return Err(error);
        }
        let rows = self.pending_rows;
        if rows == 0 {
            return Ok(());
        }
        let statement = match self.statements.iter().find(|(size, _)| *size == rows) {
            Some((_, statement)) => *statement,
            None => {
                // The prepare's answer comes after those outstanding: read them first.
                self.drain(connection).await?;
                let statement = prepare(connection, &plan.insert_statement(rows)).await?;
                self.statements.push((rows, statement));
                statement
            }
        };
        queue_execute(connection, statement, &self.pending, false);
        connection.wire.flush().await?;
        self.in_flight.push_back((self.rows_sent + 1, rows));
        self.rows_sent += rows as u64;
        self.pending.clear();
        self.pending_rows = 0;
        while self.in_flight.len() >= self.depth {
            self.read_answer(connection).await?;
        }
        Ok(())
    }

    /// Reads the oldest outstanding answer; a refusal is kept (tied to its
    /// input line) and ends the sending.
    async fn read_answer(&mut self, connection: &mut Connection) -> Result<(), Error> {
        let Some((first_row, rows)) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let answer = connection.wire.read_payload().await?;
        match answer.first() {
            Some(0x00) => self.written += OkPacket::parse(&answer)?.affected_rows,
            Some(0xFF) if self.failure.is_none() => {
                let error = server_error(&answer, connection.capabilities);
                self.failure = Some(self.at_line(error, first_row, rows));
            }
            Some(0xFF) => {}
            _ => return Err(connection.unexpected_answer("the INSERT", &answer).await),
        }
        Ok(())
    }

    /// Ties an INSERT's error to the input line of the row it names ("at row
    /// N" within the statement), or of its only row.
    fn at_line(&self, error: Error, first_row: u64, rows: usize) -> Error {
        let within = error
            .as_db_error()
            .and_then(|db| at_row(&db.message))
            .or((rows == 1).then_some(1));
        match within.and_then(|within| self.lines.line(first_row + within - 1)) {
            Some(line) => {
                let reason = reason_of(&error, line);
                error.at_row(reason)
            }
            None => error,
        }
    }

    async fn drain(&mut self, connection: &mut Connection) -> Result<(), Error> {
        while !self.in_flight.is_empty() {
            self.read_answer(connection).await?;
        }
        match self.failure.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Reads every outstanding answer and closes the statements: the rows
    /// written, or the first refusal.
    async fn finish(mut self, connection: &mut Connection) -> Result<u64, Error> {
        let drained = self.drain(connection).await;
        for (_, statement) in &self.statements {
            queue_close(connection, *statement);
        }
        drained.map(|()| self.written)
    }
}

/// Rows per INSERT so one statement's parameters stay under the server's
/// packet limit and the protocol's 65,535 placeholders.
fn rows_per_packet(connection: &Connection, plan: &Plan, batch: &Batch) -> usize {
    let columns = plan.columns.len().max(1);
    let by_placeholders = 65_535 / columns;
    let rows = batch.num_rows().max(1);
    let bytes_per_row = batch.data_len() / rows + columns * 9 + 1;
    let limit = (connection.server().max_allowed_packet as usize).clamp(1 << 20, 1 << 30);
    let by_packet = (limit * 3 / 4) / bytes_per_row;
    by_placeholders.min(by_packet).max(1)
}

/// One prepared INSERT of `rows` of `batch`: rows written.
pub(super) async fn insert_segment(
    connection: &mut Connection,
    plan: &Plan,
    batch: &Batch,
    rows: &[usize],
) -> Result<u64, Error> {
    let mut params: Vec<Option<Vec<u8>>> = Vec::with_capacity(rows.len() * plan.columns.len());
    for &index in rows {
        let row = batch.row(index);
        for (column, convert) in plan.converts.iter().enumerate() {
            params.push(row.get(column).map(|value| parameter(*convert, value)));
        }
    }
    connection
        .execute_prepared(&plan.insert_statement(rows.len()), &params)
        .await
}
