//! Reading a run's answers off the wire: one command's (an OK, an error, or
//! results, several for a procedure), a bulk's (one OK or one error), and a
//! result's rows, kept for the call's report or read past. What an answer
//! means for the calls is the run's business, not this module's.

use mysql_common::constants::StatusFlags;
use sluice_core::{Batch, Error, ErrorKind, Schema};

use crate::config::ZeroDates;
use crate::connection::Connection;
use crate::error::{server_error, unexpected};
use crate::protocol::{end_status, read_lenenc_int, OkPacket};
use crate::rows::RowFormat;
use crate::statement::read_definitions;
use crate::types::{column, Decode};

/// One command's whole answer.
pub(super) enum Answer {
    /// OK (its rows affected), or a result whose rows are in the reader's rows.
    Done { affected: Option<u64> },
    /// The server's error.
    Failed(Error),
}

/// How one result ended: its status flags, or the server's error in the
/// middle of it.
type ResultEnd = Result<StatusFlags, Error>;

/// Reads answers for a run, borrowing its connection and rows for the read.
pub(super) struct AnswerReader<'a> {
    pub(super) connection: &'a mut Connection,
    /// The prepared statement's result columns, which a kept result must match.
    pub(super) schema: &'a Schema,
    pub(super) zero_dates: ZeroDates,
    /// Where a kept result's rows go.
    pub(super) rows: &'a mut Batch,
}

impl AnswerReader<'_> {
    /// Reads one command's answer: an OK, an error, or results (several for a
    /// procedure: each says whether more follow). Rows go into the reader's
    /// rows when `keep_rows`, and are read past otherwise.
    pub(super) async fn read_answer(&mut self, keep_rows: bool) -> Result<Answer, Error> {
        let mut affected = None;
        loop {
            let status = match self.read_one_result(keep_rows, &mut affected).await? {
                Ok(status) => status,
                Err(error) => return Ok(Answer::Failed(error)),
            };
            if !status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS) {
                return Ok(Answer::Done { affected });
            }
        }
    }

    /// Reads a bulk's answer: one OK for all its sets, or one error.
    pub(super) async fn read_bulk_answer(&mut self) -> Result<Answer, Error> {
        let answer = self.connection.wire.read_payload().await?;
        match answer.first() {
            Some(0x00) => Ok(Answer::Done {
                affected: Some(OkPacket::parse(&answer)?.affected_rows),
            }),
            Some(0xFF) => Ok(Answer::Failed(server_error(
                &answer,
                self.connection.capabilities,
            ))),
            _ => Err(self
                .connection
                .unexpected_answer("a bulk execution", &answer)
                .await),
        }
    }

    /// Reads one result of a command's answer: an OK (whose rows affected
    /// go to `affected`), an error, or a result set.
    async fn read_one_result(
        &mut self,
        keep_rows: bool,
        affected: &mut Option<u64>,
    ) -> Result<ResultEnd, Error> {
        let first = self.connection.wire.read_payload().await?;
        match first.first() {
            Some(0x00) => {
                let ok = OkPacket::parse(&first)?;
                *affected = Some(ok.affected_rows);
                Ok(Ok(ok.status))
            }
            Some(0xFF) => Ok(Err(server_error(&first, self.connection.capabilities))),
            _ => {
                let columns = read_lenenc_int(&mut &first[..])?;
                self.read_result(columns, keep_rows).await
            }
        }
    }

    /// Reads a binary result of `columns` columns after its column count.
    async fn read_result(&mut self, columns: u64, keep_rows: bool) -> Result<ResultEnd, Error> {
        let definitions = read_definitions(self.connection, columns).await?;
        let (columns, decoders): (Vec<_>, Vec<Decode>) = definitions.iter().map(column).unzip();
        if !keep_rows {
            return self.read_rows(None).await;
        }
        self.check_width(columns.len())?;
        let format = RowFormat::new(columns, decoders, self.zero_dates);
        self.read_rows(Some(&format)).await
    }

    /// A kept result must have the prepared statement's columns: the report
    /// gives every call's rows over those.
    fn check_width(&self, columns: usize) -> Result<(), Error> {
        if columns == self.schema.len() {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "a call returned {columns} columns where the prepared statement announced {}: \
                 results that change shape (a procedure's) cannot be reported per call",
                self.schema.len()
            ),
        ))
    }

    /// Reads a result's rows to its end, decoding them with `format` into the
    /// reader's rows, or reading past them without one.
    async fn read_rows(&mut self, format: Option<&RowFormat>) -> Result<ResultEnd, Error> {
        let deprecate_eof = self.connection.deprecate_eof();
        let capabilities = self.connection.capabilities;
        let wire = &mut self.connection.wire;
        let mut keep = |payload: &[u8]| match format {
            Some(format) => format.decode(payload, self.rows),
            None => Ok(()),
        };
        loop {
            let Some(header) = wire.front() else {
                wire.fill().await?;
                continue;
            };
            if header.continued {
                // A row over 16 MiB, joined.
                keep(&wire.read_payload().await?)?;
                continue;
            }
            let payload = wire.front_payload(header);
            let end = match payload.first() {
                Some(0x00) => {
                    keep(payload)?;
                    None
                }
                Some(0xFE) => Some(Ok(end_status(payload, deprecate_eof))),
                Some(0xFF) => Some(Err(server_error(payload, capabilities))),
                _ => return Err(unexpected("a result row", payload)),
            };
            wire.consume(header);
            if let Some(end) = end {
                return Ok(end);
            }
        }
    }
}
