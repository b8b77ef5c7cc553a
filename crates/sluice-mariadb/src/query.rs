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

use mysql_common::constants::StatusFlags;
use sluice_core::{Batch, BatchSource, Chunk, Encoding, Error, ErrorKind, Schema};

use crate::config::ZeroDates;
use crate::connection::Connection;
use crate::error::{server_error, unexpected};
use crate::large_row::{LargeRow, PIECE_BYTES, SMALL_VALUE_BYTES};
use crate::protocol::{read_lenenc_int, write_lenenc_int, ColumnDefinition};
use crate::types::{column, read_value, Decode};
use crate::wire::{Header, Wire, MAX_PAYLOAD};

/// Bytes of row data gathered before a batch is handed over.
const BATCH_BYTES: usize = 64 * 1024;

const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_CLOSE: u8 = 0x19;
const COM_STMT_FETCH: u8 = 0x1C;

/// MariaDB's id for "the statement prepared just before, in this pipeline".
const LAST_PREPARED: u32 = 0xFFFF_FFFF;

/// `MYSQL_TYPE_VAR_STRING`: parameters are sent as text the server converts.
const VAR_STRING: u8 = 253;

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
            format: RowFormat {
                schema: Schema { columns },
                decoders,
                bitmap_bytes: (width + 7 + 2) / 8,
                zero_dates: options.zero_dates,
            },
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
        self.connection.wire.start_command();
        self.connection.wire.queue_with(|payload| {
            payload.push(COM_STMT_FETCH);
            payload.extend_from_slice(&statement.to_le_bytes());
            payload.extend_from_slice(&rows.to_le_bytes());
        });
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

/// The wire bytes of one value of a large row that is not verbatim text:
/// fixed-size numbers, length-prefixed moments, bits and geometries (whole:
/// they are converted, and bounded by the server's packet limit).
async fn value_bytes(
    row: &mut LargeRow,
    wire: &mut Wire,
    decode: Decode,
) -> Result<Vec<u8>, Error> {
    match decode {
        Decode::Integer { width, .. } | Decode::BinaryInteger { width, .. } => {
            row.take(wire, usize::from(width)).await
        }
        Decode::Float32 | Decode::BinaryFloat32 => row.take(wire, 4).await,
        Decode::Float64 | Decode::BinaryFloat64 => row.take(wire, 8).await,
        Decode::Date
        | Decode::DateTime { .. }
        | Decode::Time
        | Decode::BinaryDate
        | Decode::BinaryDateTime => {
            let mut encoded = row.take(wire, 1).await?;
            let length = usize::from(encoded[0]);
            encoded.extend(row.take(wire, length).await?);
            Ok(encoded)
        }
        Decode::Verbatim | Decode::Bits { .. } | Decode::Geometry => {
            let (length, mut encoded) = row.take_length(wire).await?;
            let length = usize::try_from(length)
                .map_err(|_| Error::protocol("a value longer than this machine can address"))?;
            encoded.extend(row.take(wire, length).await?);
            Ok(encoded)
        }
    }
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

/// The status flags of an EOF packet, or of an OK packet ending a result.
pub(crate) fn end_status(payload: &[u8], deprecate_eof: bool) -> StatusFlags {
    let mut rest = &payload[1..];
    let bits = if deprecate_eof {
        // OK: affected rows, last insert id, then the status.
        let _ = read_lenenc_int(&mut rest);
        let _ = read_lenenc_int(&mut rest);
        rest.get(..2)
            .map_or(0, |bytes| u16::from_le_bytes([bytes[0], bytes[1]]))
    } else {
        // EOF: warnings, then the status.
        rest.get(2..4)
            .map_or(0, |bytes| u16::from_le_bytes([bytes[0], bytes[1]]))
    };
    StatusFlags::from_bits_truncate(bits)
}

/// How a result's rows read: its columns and their decoders, chosen once.
#[derive(Debug)]
struct RowFormat {
    schema: Schema,
    decoders: Vec<Decode>,
    /// The null bitmap's length in a row (columns + 2 offset bits).
    bitmap_bytes: usize,
    zero_dates: ZeroDates,
}

impl RowFormat {
    /// One binary-protocol row into `batch`.
    fn decode(&self, payload: &[u8], batch: &mut Batch) -> Result<(), Error> {
        decode_row(
            payload,
            &self.decoders,
            &self.schema,
            self.bitmap_bytes,
            self.zero_dates,
            batch,
        )
    }
}

/// One binary-protocol row into `batch`.
pub(crate) fn decode_row(
    payload: &[u8],
    decoders: &[Decode],
    schema: &Schema,
    bitmap_bytes: usize,
    zero_dates: ZeroDates,
    batch: &mut Batch,
) -> Result<(), Error> {
    if payload.len() < 1 + bitmap_bytes {
        return Err(Error::protocol("a row shorter than its null bitmap"));
    }
    let bitmap = &payload[1..1 + bitmap_bytes];
    let mut rest = &payload[1 + bitmap_bytes..];
    let mark = batch.mark();
    for (index, decode) in decoders.iter().enumerate() {
        let bit = index + 2;
        if bitmap[bit / 8] >> (bit % 8) & 1 == 1 {
            batch.push_null();
            continue;
        }
        if let Err(error) = read_value(
            *decode,
            &mut rest,
            batch,
            &schema.columns[index],
            zero_dates,
        ) {
            batch.rollback(mark);
            return Err(error);
        }
    }
    Ok(())
}

/// Queues `COM_STMT_CLOSE`, which has no answer: it leaves with the next command.
pub(crate) fn queue_close(connection: &mut Connection, statement: u32) {
    connection.wire.start_command();
    connection.wire.queue_with(|payload| {
        payload.push(COM_STMT_CLOSE);
        payload.extend_from_slice(&statement.to_le_bytes());
    });
}

/// Prepares and runs a statement without a result (an `INSERT` of many rows)
/// with `params` as text; returns the rows it changed. On MariaDB the prepare
/// and the execute travel together: one round trip.
pub(crate) async fn execute<P: AsRef<[u8]>>(
    connection: &mut Connection,
    sql: &str,
    params: &[Option<P>],
) -> Result<u64, Error> {
    let direct = connection.server().mariadb;
    queue_prepare(connection, sql);
    if direct {
        queue_execute(connection, LAST_PREPARED, params, false);
    }
    connection.wire.flush().await?;
    let settings = connection.read_settings_answers().await;
    let prepared = read_prepared(connection).await;
    let statement = match settings.and(prepared) {
        Ok(statement) => statement,
        Err(error) => {
            if direct && error.kind() == ErrorKind::Database {
                // The execute of a statement that failed to prepare fails too.
                connection.wire.read_payload().await?;
            }
            return Err(error);
        }
    };
    if !direct {
        queue_execute(connection, statement, params, false);
        connection.wire.flush().await?;
    }
    let answer = connection.wire.read_payload().await;
    queue_close(connection, statement);
    let answer = answer?;
    match answer.first() {
        Some(0x00) => read_lenenc_int(&mut &answer[1..]),
        Some(0xFF) => Err(server_error(&answer, connection.capabilities)),
        _ => Err(connection
            .unexpected_answer("the statement's result", &answer)
            .await),
    }
}

/// Prepares `sql` (after any queued settings) and returns its statement id.
pub(crate) async fn prepare(connection: &mut Connection, sql: &str) -> Result<u32, Error> {
    queue_prepare(connection, sql);
    connection.wire.flush().await?;
    let settings = connection.read_settings_answers().await;
    let prepared = read_prepared(connection).await;
    settings.and(prepared)
}

pub(crate) fn queue_prepare(connection: &mut Connection, sql: &str) {
    connection.wire.start_command();
    connection.wire.queue_with(|payload| {
        payload.push(COM_STMT_PREPARE);
        payload.extend_from_slice(sql.as_bytes());
    });
}

/// Queues `COM_STMT_EXECUTE` of `statement` with `params`, all sent as
/// strings for the server to convert; behind a read-only cursor when `cursor`.
pub(crate) fn queue_execute<P: AsRef<[u8]>>(
    connection: &mut Connection,
    statement: u32,
    params: &[Option<P>],
    cursor: bool,
) {
    connection.wire.start_command();
    connection.wire.queue_with(|payload| {
        payload.push(COM_STMT_EXECUTE);
        payload.extend_from_slice(&statement.to_le_bytes());
        payload.push(u8::from(cursor));
        payload.extend_from_slice(&1u32.to_le_bytes());
        if params.is_empty() {
            return;
        }
        let mut bitmap = vec![0u8; params.len().div_ceil(8)];
        for (index, value) in params.iter().enumerate() {
            if value.is_none() {
                bitmap[index / 8] |= 1 << (index % 8);
            }
        }
        payload.extend_from_slice(&bitmap);
        payload.push(1); // types follow
        for _ in params {
            payload.extend_from_slice(&[VAR_STRING, 0]);
        }
        for value in params.iter().flatten() {
            let value = value.as_ref();
            write_lenenc_int(value.len() as u64, payload);
            payload.extend_from_slice(value);
        }
    });
}

/// The parts of a `COM_STMT_PREPARE` answer.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) statement: u32,
    pub(crate) parameters: usize,
    pub(crate) columns: Vec<ColumnDefinition>,
}

/// Reads the answer to `COM_STMT_PREPARE`: the statement's id, its parameter
/// count and its result columns (parameter definitions say nothing useful:
/// every value is sent as text).
pub(crate) async fn read_prepare_answer(connection: &mut Connection) -> Result<Prepared, Error> {
    let answer = connection.wire.read_payload().await?;
    match answer.first() {
        Some(0x00) if answer.len() >= 9 => {}
        Some(0xFF) => return Err(server_error(&answer, connection.capabilities)),
        _ => {
            return Err(connection
                .unexpected_answer("the statement's prepare", &answer)
                .await)
        }
    }
    let statement = u32::from_le_bytes([answer[1], answer[2], answer[3], answer[4]]);
    let columns = u16::from_le_bytes([answer[5], answer[6]]);
    let parameters = u16::from_le_bytes([answer[7], answer[8]]);
    read_definitions(connection, u64::from(parameters)).await?;
    let columns = read_definitions(connection, u64::from(columns)).await?;
    Ok(Prepared {
        statement,
        parameters: usize::from(parameters),
        columns,
    })
}

/// Reads `count` column (or parameter) definitions and, where the protocol
/// has one, the EOF packet after them.
pub(crate) async fn read_definitions(
    connection: &mut Connection,
    count: u64,
) -> Result<Vec<ColumnDefinition>, Error> {
    let extended = connection.server().extended_metadata;
    let mut definitions = Vec::with_capacity(count.min(4096) as usize);
    for _ in 0..count {
        let packet = connection.wire.read_payload().await?;
        definitions.push(ColumnDefinition::parse(&packet, extended)?);
    }
    if count > 0 && !connection.deprecate_eof() {
        connection.wire.read_payload().await?;
    }
    Ok(definitions)
}

/// The statement id of a `COM_STMT_PREPARE` answer.
async fn read_prepared(connection: &mut Connection) -> Result<u32, Error> {
    Ok(read_prepare_answer(connection).await?.statement)
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
    let extended = connection.server().extended_metadata;
    let mut definitions = Vec::with_capacity(count.min(4096) as usize);
    for _ in 0..count {
        let packet = connection.wire.read_payload().await?;
        definitions.push(ColumnDefinition::parse(&packet, extended)?);
    }
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
