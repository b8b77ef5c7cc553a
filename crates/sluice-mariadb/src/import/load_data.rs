//! `LOAD DATA LOCAL INFILE` fed from the decoders as a stream (no
//! temporary file): the server asks for the "file" and the rows go as they
//! are decoded, in tab-separated text; its warnings are then read, as
//! `LOCAL` turns every refused value into one.

use sluice_core::load::{ImportSummary, LineMap, RowFeed};
use sluice_core::{Batch, Decoded, Error};

use super::plan::{Plan, INPUT_NAME};
use super::values::{encode_row, Convert};
use super::warnings::check_warnings;
use crate::connection::Connection;
use crate::error::{server_error, unexpected};
use crate::protocol::OkPacket;

/// Data is sent to the server in packets of about this size.
const SEND_BYTES: usize = 256 * 1024;

/// The whole input in one `LOAD DATA`.
pub(super) async fn load_all(
    connection: &mut Connection,
    plan: &Plan,
    input: &mut dyn RowFeed,
    decoded: &mut Decoded,
    mut more: bool,
) -> Result<ImportSummary, Error> {
    let mut summary = ImportSummary::default();
    let mut lines = LineMap::default();
    let mut load = LoadData::start(connection, plan).await?;
    let sent: Result<(), Error> = async {
        loop {
            if let Some(first) = decoded.rejected.first() {
                return Err(Error::bad_row(first.error.clone()));
            }
            lines.extend(&decoded.lines);
            let rows = decoded.batch.num_rows();
            load.write_rows(&decoded.batch, 0..rows).await?;
            input.progress().add_rows(rows as u64);
            summary.accepted += rows as u64;
            decoded.clear();
            if !more {
                return Ok(());
            }
            more = input.next(decoded).await?;
        }
    }
    .await;
    // The load is ended either way (an empty packet); a client-side failure
    // then rolls back what the server took.
    let finished = load.finish().await;
    sent?;
    let loaded = finished?;
    check_warnings(connection, plan, loaded.warnings, |row| lines.line(row)).await?;
    summary.written = loaded.affected_rows;
    Ok(summary)
}

/// One `LOAD DATA` of some rows of `batch`; warnings become its error.
pub(super) async fn load_segment(
    connection: &mut Connection,
    plan: &Plan,
    batch: &Batch,
    rows: &[usize],
) -> Result<u64, Error> {
    let mut load = LoadData::start(connection, plan).await?;
    let written = load.write_rows(batch, rows.iter().copied()).await;
    let finished = load.finish().await;
    written?;
    let loaded = finished?;
    check_warnings(connection, plan, loaded.warnings, Some).await?;
    Ok(loaded.affected_rows)
}

/// What `LOAD DATA` reported.
struct Loaded {
    affected_rows: u64,
    warnings: u16,
}

/// A `LOAD DATA LOCAL INFILE` in progress: the server has asked for the file.
struct LoadData<'a> {
    connection: &'a mut Connection,
    converts: &'a [Convert],
    buffer: Vec<u8>,
}

impl<'a> LoadData<'a> {
    async fn start(connection: &'a mut Connection, plan: &'a Plan) -> Result<LoadData<'a>, Error> {
        let answer = connection.simple_query_head(&plan.load_statement()).await?;
        match answer.first() {
            Some(0xFB) if &answer[1..] == INPUT_NAME.as_bytes() => {}
            // A server asking for another file than the statement named is
            // hostile: sluice sends only its own rows, never a file.
            Some(0xFB) => {
                let what = "a LOAD DATA statement that named another";
                return Err(connection.unexpected_answer(what, &answer).await);
            }
            Some(0xFF) => return Err(server_error(&answer, connection.capabilities)),
            _ => return Err(unexpected("a request for the load's data", &answer)),
        }
        Ok(LoadData {
            connection,
            converts: &plan.converts,
            buffer: Vec::with_capacity(SEND_BYTES + 64 * 1024),
        })
    }

    async fn write_rows(
        &mut self,
        batch: &Batch,
        rows: impl Iterator<Item = usize>,
    ) -> Result<(), Error> {
        for index in rows {
            encode_row(batch, index, self.converts, &mut self.buffer)?;
            if self.buffer.len() >= SEND_BYTES {
                self.send().await?;
            }
        }
        Ok(())
    }

    async fn send(&mut self) -> Result<(), Error> {
        self.connection.wire.queue(&self.buffer);
        self.buffer.clear();
        self.connection.wire.flush().await
    }

    /// Sends what is left and the empty packet that ends the file; reads the
    /// server's answer.
    async fn finish(self) -> Result<Loaded, Error> {
        if !self.buffer.is_empty() {
            self.connection.wire.queue(&self.buffer);
        }
        self.connection.wire.queue(&[]);
        self.connection.wire.flush().await?;
        let answer = self.connection.wire.read_payload().await?;
        match answer.first() {
            Some(0x00) => {
                let ok = OkPacket::parse(&answer)?;
                Ok(Loaded {
                    affected_rows: ok.affected_rows,
                    warnings: ok.warnings,
                })
            }
            Some(0xFF) => Err(server_error(&answer, self.connection.capabilities)),
            _ => Err(unexpected("the load's result", &answer)),
        }
    }
}
