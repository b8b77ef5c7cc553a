//! [`QueryStream`]: a statement's result read off the socket as it arrives,
//! into batches, in memory bounded by one batch whatever the result's size.
//!
//! The statement is prepared and executed with the binary protocol (exact
//! values: see `crate::types`). On MariaDB the `COM_STMT_PREPARE` and the
//! `COM_STMT_EXECUTE` travel together (MariaDB executes "the statement just
//! prepared" when given the id `0xFFFFFFFF`), so a query costs one round trip
//! however many rows it returns; MySQL needs the prepared statement's id first,
//! one trip more. Without a fetch size the server streams every row and the
//! reader's pace is the back-pressure (TCP flow control); with one, the
//! statement runs behind a read-only cursor and each `COM_STMT_FETCH` brings
//! that many rows.
//!
//! The commands are queued by `crate::statement`; the rows are read by
//! `crate::rows` (and, over 16 MiB, `crate::large_row`).

use mysql_common::constants::StatusFlags;
use sluice_core::{Batch, BatchSource, Chunk, Encoding, Error, ErrorKind, Schema};

use crate::config::ZeroDates;
use crate::connection::Connection;
use crate::error::{server_error, unexpected};
use crate::large_row::{value_bytes, LargeRow, PIECE_BYTES, SMALL_VALUE_BYTES};
use crate::protocol::{end_status, read_lenenc_int, write_fetch, ColumnDefinition, LAST_PREPARED};
use crate::rows::RowFormat;
use crate::statement::{
    queue_close, queue_execute, queue_prepare, read_definition_packets, read_prepared,
};
use crate::types::{column, read_value, Decode};
use crate::wire::{Header, MAX_PAYLOAD};

/// Bytes of row data gathered before a batch is handed over.
const BATCH_BYTES: usize = 64 * 1024;

/// How a query runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryOptions {
    /// Parameter values, as text (`None` is NULL).
    pub params: Vec<Option<String>>,
    /// Rows per `COM_STMT_FETCH` through a cursor; `None` streams the result
    /// from one execute.
    pub fetch_size: Option<u32>,
    /// What zero dates become.
    pub zero_dates: ZeroDates,
    /// Hand over integers (but `BIGINT UNSIGNED`), floats, dates and
    /// datetimes in the binary forms of [`sluice_core::value`], marked
    /// [`Encoding::Binary`], for formats that store numbers as numbers.
    /// Default: false, every value in canonical text.
    pub binary_values: bool,
}

/// Where the stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Rows are arriving.
    Rows,
    /// The cursor's last fetch ended; the next needs a `COM_STMT_FETCH`.
    Fetch,
    /// The result is complete; the session is ready for the next command.
    Done,
}

/// A query's result being read; see the module docs.
#[derive(Debug)]
pub struct QueryStream {
    connection: Connection,
    statement: u32,
    format: RowFormat,
    batch: Batch,
    state: State,
    options: QueryOptions,
    /// The session is usable after the stream (false after a protocol error).
    healthy: bool,
    /// A row over 16 MiB being handed over value by value.
    large: Option<LargeRow>,
    /// Bytes of the buffer lent out as the last piece, dropped at the next call.
    lent: usize,
    /// One value of a large row, converted.
    scratch: Batch,
}

impl QueryStream {
    /// Prepares and executes `sql` on `connection`; returns once the columns
    /// are known.
    pub async fn start(
        mut connection: Connection,
        sql: &str,
        options: QueryOptions,
    ) -> Result<QueryStream, Error> {
        let direct = connection.server().mariadb;
        let cursor = options.fetch_size.is_some();
        queue_prepare(&mut connection, sql);
        if direct {
            queue_execute(&mut connection, LAST_PREPARED, &options.params, cursor);
        }
        connection.wire.flush().await?;
        let settings = connection.read_settings_answers().await;
        let prepared = read_prepared(&mut connection).await;
        let prepared = settings.and(prepared);
        let statement = match prepared {
            Ok(statement) => statement,
            Err(error) => {
                // The execute of a statement the server refused to prepare
                // fails too; after a server that broke the protocol nothing
                // more is read (it may never answer).
                if direct && error.kind() == ErrorKind::Database {
                    let _ = connection.wire.read_payload().await;
                }
                return Err(error);
            }
        };
        if !direct {
            queue_execute(&mut connection, statement, &options.params, cursor);
            connection.wire.flush().await?;
        }
        let (definitions, status) = read_result_head(&mut connection).await?;
        let (columns, decoders): (Vec<_>, Vec<_>) = definitions
            .iter()
            .map(column)
            .map(|(column, decode)| match decode.in_binary() {
                Some(binary) if options.binary_values => {
                    (column.with_encoding(Encoding::Binary), binary)
                }
                _ => (column, decode),
            })
            .unzip();
        let width = columns.len();
        let format = RowFormat::new(columns, decoders, options.zero_dates);
        let state = match status {
            _ if width == 0 => State::Done,
            // Metadata ending with a cursor open: the rows come by fetching.
            Some(status) if status.contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS) => {
                after_end(status)
            }
            _ => State::Rows,
        };
        Ok(QueryStream {
            connection,
            statement,
            format,
            batch: Batch::new(width),
            state,
            options,
            healthy: true,
            large: None,
            lent: 0,
            scratch: Batch::new(1),
        })
    }

    /// The session back, once the result was read to its end (and the
    /// statement closed); `None` if it was not.
    pub fn into_connection(mut self) -> Option<Connection> {
        if self.state != State::Done || !self.healthy || self.large.is_some() {
            return None;
        }
        queue_close(&mut self.connection, self.statement);
        Some(self.connection)
    }

    /// The connection the stream reads.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// Reads rows until the batch is worth handing over, a large row begins
    /// (when `allow_large`; otherwise such a row is joined whole), or the
    /// result ends.
    async fn step(&mut self, allow_large: bool) -> Result<Step, Error> {
        self.batch.clear();
        loop {
            match self.state {
                State::Done if self.batch.is_empty() => return Ok(Step::End),
                State::Done => return Ok(Step::Rows),
                State::Fetch => self.fetch().await?,
                State::Rows => {}
            }
            while self.state == State::Rows {
                if self.connection.wire.peek_length() == Some(MAX_PAYLOAD) && allow_large {
                    if !self.batch.is_empty() {
                        return Ok(Step::Rows);
                    }
                    let row = LargeRow::begin(&mut self.connection.wire, self.format.bitmap_bytes)
                        .await?;
                    self.large = Some(row);
                    return Ok(Step::LargeRow);
                }
                let Some(header) = self.connection.wire.front() else {
                    break;
                };
                if header.continued {
                    // A row over 16 MiB where whole rows are asked for.
                    let payload = self.connection.wire.read_payload().await?;
                    self.take_packet(&payload)?;
                } else {
                    let result = {
                        let payload = self.connection.wire.front_payload(header);
                        Self::classify(payload)
                    };
                    self.take_front(header, result)?;
                }
                if self.batch.data_len() >= BATCH_BYTES {
                    return Ok(Step::Rows);
                }
            }
            if self.state == State::Rows {
                if !self.batch.is_empty() {
                    return Ok(Step::Rows);
                }
                self.connection.wire.fill().await?;
            }
        }
    }

    /// The next step through a large row.
    async fn large_row_chunk(&mut self, mut row: LargeRow) -> Result<Chunk<'_>, Error> {
        let wire = &mut self.connection.wire;
        if let Some(left) = row.value_left {
            let column = row.column;
            if left == 0 {
                row.value_left = None;
                row.column += 1;
                self.large = Some(row);
                return Ok(Chunk::ValueEnd { column });
            }
            let length = row.ready(wire).await?.min(left).min(PIECE_BYTES);
            row.value_left = Some(left - length);
            self.large = Some(row);
            self.lent = length;
            return Ok(Chunk::Piece {
                column,
                bytes: &self.connection.wire.buffered()[..length],
            });
        }
        let column = row.column;
        if column == self.format.decoders.len() {
            row.finish(wire).await?;
            return Ok(Chunk::RowEnd);
        }
        if row.is_null(column) {
            row.column += 1;
            self.large = Some(row);
            return Ok(Chunk::Value {
                column,
                value: None,
            });
        }
        let decode = self.format.decoders[column];
        let encoded = match decode {
            Decode::Verbatim => {
                let (length, mut encoded) = row.take_length(wire).await?;
                if length > SMALL_VALUE_BYTES as u64 {
                    row.value_left = Some(usize::try_from(length).map_err(|_| {
                        Error::protocol("a value longer than this machine can address")
                    })?);
                    self.large = Some(row);
                    return Ok(Chunk::ValueStart { column });
                }
                encoded.extend(row.take(wire, length as usize).await?);
                encoded
            }
            _ => value_bytes(&mut row, wire, decode).await?,
        };
        row.column += 1;
        self.large = Some(row);
        self.scratch.clear();
        read_value(
            decode,
            &mut &encoded[..],
            &mut self.scratch,
            &self.format.schema.columns[column],
            self.format.zero_dates,
        )?;
        Ok(Chunk::Value {
            column,
            value: self.scratch.row(0).get(0),
        })
    }

    /// What kind of packet `payload` is.
    fn classify(payload: &[u8]) -> Packet {
        match payload.first() {
            Some(0x00) => Packet::Row,
            Some(0xFE) if payload.len() < 0xFF_FFFF => Packet::End,
            Some(0xFF) => Packet::Error,
            _ => Packet::Other,
        }
    }

    /// Handles the packet at the front of the buffer.
    fn take_front(&mut self, header: Header, packet: Packet) -> Result<(), Error> {
        let wire = &self.connection.wire;
        let payload = wire.front_payload(header);
        let outcome = match packet {
            Packet::Row => self.format.decode(payload, &mut self.batch),
            Packet::End => {
                let status = end_status(payload, self.connection.deprecate_eof());
                self.state = after_end(status);
                Ok(())
            }
            Packet::Error => {
                let error = server_error(payload, self.connection.capabilities);
                self.state = State::Done;
                Err(error)
            }
            Packet::Other => {
                self.healthy = false;
                Err(unexpected("a result row", payload))
            }
        };
        self.connection.wire.consume(header);
        outcome
    }

    /// [`QueryStream::take_front`] for a packet already joined.
    fn take_packet(&mut self, payload: &[u8]) -> Result<(), Error> {
        match Self::classify(payload) {
            Packet::Row => self.format.decode(payload, &mut self.batch),
            _ => {
                self.healthy = false;
                Err(unexpected("a result row", payload))
            }
        }
    }

    /// Asks the cursor for the next rows.
    async fn fetch(&mut self) -> Result<(), Error> {
        let rows = self.options.fetch_size.unwrap_or(u32::MAX);
        let statement = self.statement;
        self.connection
            .wire
            .queue_command(|payload| write_fetch(statement, rows, payload));
        self.connection.wire.flush().await?;
        self.state = State::Rows;
        Ok(())
    }
}

/// What [`QueryStream::step`] produced.
enum Step {
    /// `batch` holds rows.
    Rows,
    /// A large row has begun.
    LargeRow,
    /// The result is complete.
    End,
}

/// What a packet in a result is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Packet {
    Row,
    End,
    Error,
    Other,
}

/// The state after a result's terminator with `status`.
fn after_end(status: StatusFlags) -> State {
    if status.contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS)
        && !status.contains(StatusFlags::SERVER_STATUS_LAST_ROW_SENT)
    {
        State::Fetch
    } else {
        State::Done
    }
}

/// Reads the answer to `COM_STMT_EXECUTE` up to the first row: the column
/// definitions (none for a statement without a result) and, where the
/// protocol ends them with an EOF packet, its status (a cursor opened).
async fn read_result_head(
    connection: &mut Connection,
) -> Result<(Vec<ColumnDefinition>, Option<StatusFlags>), Error> {
    let first = connection.wire.read_payload().await?;
    let count = match first.first() {
        Some(0x00) => return Ok((Vec::new(), None)),
        Some(0xFF) => return Err(server_error(&first, connection.capabilities)),
        _ => read_lenenc_int(&mut &first[..])?,
    };
    let definitions = read_definition_packets(connection, count).await?;
    if connection.deprecate_eof() {
        return Ok((definitions, None));
    }
    let eof = connection.wire.read_payload().await?;
    Ok((definitions, Some(end_status(&eof, false))))
}

impl BatchSource for QueryStream {
    fn schema(&self) -> &Schema {
        &self.format.schema
    }

    async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
        if self.format.schema.is_empty() {
            self.state = State::Done;
            return Ok(None);
        }
        match self.step(false).await? {
            Step::Rows => Ok(Some(&self.batch)),
            Step::End => Ok(None),
            Step::LargeRow => Err(Error::protocol("large row where none was allowed")),
        }
    }

    async fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        if self.lent > 0 {
            if let Some(row) = self.large.as_mut() {
                row.consume(&mut self.connection.wire, self.lent);
            }
            self.lent = 0;
        }
        if let Some(row) = self.large.take() {
            return self.large_row_chunk(row).await.map(Some);
        }
        if self.format.schema.is_empty() {
            self.state = State::Done;
            return Ok(None);
        }
        match self.step(true).await? {
            Step::Rows => Ok(Some(Chunk::Rows(&self.batch))),
            Step::LargeRow => Ok(Some(Chunk::RowStart)),
            Step::End => Ok(None),
        }
    }
}
