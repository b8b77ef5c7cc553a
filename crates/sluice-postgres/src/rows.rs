//! [`RowStream`]: the rows of one bound statement, parsed from the socket
//! into a reused batch, with its portal's round trips (an `Execute` per
//! `fetch_size` rows, or one for the whole result) and rows too long to hold
//! handed over value by value. [`crate::query`] prepares and describes the
//! statement and starts one; [`crate::lob`] reads large objects around one.
//!
//! Rows are parsed straight out of the connection's read buffer into a reused
//! [`Batch`]; memory is one read buffer plus one batch, whatever the row count.

use std::sync::Arc;

use postgres_protocol::message::backend::Message;
use sluice_core::{Batch, BatchSource, Chunk, Encoding, Error, ErrorKind, Schema};

use crate::connection::{text_values, Connection, Received};
use crate::error::db_error;

/// A batch is handed on once it holds this many bytes of values.
const BATCH_BYTES: usize = 64 * 1024;

/// Rows longer than this are handed over value by value through
/// [`BatchSource::next_chunk`], never held whole: every PostgreSQL driver buffers
/// a whole row, so one 900 MB value costs 900 MB of client memory; here it costs
/// one piece.
pub const LARGE_ROW_BYTES: usize = 8 * 1024 * 1024;

/// The largest piece of a value handed over at once.
pub const PIECE_BYTES: usize = 1024 * 1024;

/// Values of a large row up to this size are handed over whole.
const SMALL_VALUE_BYTES: usize = 64 * 1024;

/// Where the reading of a large row stands.
#[derive(Debug, Clone, Copy)]
struct LargeRow {
    /// Values not yet begun.
    fields_left: usize,
    /// Bytes of the message not yet read: every value must fit in them, and
    /// the last must use them up.
    bytes_left: usize,
    /// The column of the next value (or of the value in pieces).
    column: usize,
    /// Bytes still to come of the value in pieces, if one is under way.
    value_left: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Rows are arriving.
    Streaming,
    /// The portal returned its `fetch_size` rows; the next `Execute` is due.
    Suspended,
    /// The result is complete; `ReadyForQuery` is still to be read.
    AwaitingReady,
    /// The session is idle again.
    Done,
}

/// The rows of one query, parsed from the socket into a reused batch.
#[derive(Debug)]
pub(crate) struct RowStream {
    connection: Connection,
    schema: Arc<Schema>,
    batch: Batch,
    state: State,
    fetch_size: Option<u32>,
    command_tag: Option<String>,
    large_row: Option<LargeRow>,
    /// Bytes of the read buffer lent out in the last chunk, dropped on the next call.
    lent: usize,
}

impl RowStream {
    /// The server's completion tag once the result is complete.
    pub(crate) fn command_tag(&self) -> Option<&str> {
        self.command_tag.as_deref()
    }

    /// The connection, for its cancel token or meter.
    pub(crate) fn connection(&self) -> &Connection {
        &self.connection
    }

    /// The connection, once the result has been read to the end.
    pub(crate) fn into_connection(self) -> Option<Connection> {
        if self.state != State::Done {
            return None;
        }
        let mut connection = self.connection;
        connection.keep_batch(self.batch);
        Some(connection)
    }
}

impl RowStream {
    /// Binds `statement` (empty: the unnamed one), whose result columns
    /// `schema` describes, and starts the result flowing.
    pub(crate) async fn bind(
        mut connection: Connection,
        statement: &str,
        schema: Arc<Schema>,
        params: &[Option<String>],
        fetch_size: Option<u32>,
    ) -> Result<RowStream, Error> {
        // A cancel asked while the statement was described may have reached
        // the server while it waited for this Bind, and been dropped there.
        if connection.cancel_asked().is_raised() {
            let cancelled = Error::new(
                ErrorKind::Cancelled,
                "the statement was cancelled before it ran",
            );
            return Err(connection.abort_exchange(cancelled).await);
        }
        // Binary where the raw bytes are the canonical form (no hex on the
        // server, half the bytes on the wire) and where the caller asked for
        // binary or native values.
        let result_formats = schema.columns.iter().map(|column| {
            i16::from(column.kind == sluice_core::Kind::Bytes || column.encoding != Encoding::Text)
        });
        let bound = connection.encode_bind(statement, [0], text_values(params), result_formats);
        if let Err(error) = bound {
            return Err(connection.abort_exchange(error).await);
        }
        let fetch_size = fetch_size.filter(|&size| size > 0);
        connection.encode_execute(fetch_size.unwrap_or(0))?;
        match fetch_size {
            None => connection.encode_sync(),
            Some(_) => connection.encode_flush(),
        }
        connection.send().await?;
        Ok(RowStream {
            batch: connection.take_batch(schema.len()),
            connection,
            schema,
            state: State::Streaming,
            fetch_size,
            command_tag: None,
            large_row: None,
            lent: 0,
        })
    }

    /// Handles one non-row message.
    async fn handle(&mut self, message: Message) -> Result<(), Error> {
        match message {
            Message::BindComplete
            | Message::NoticeResponse(_)
            | Message::ParameterStatus(_)
            | Message::NotificationResponse(_) => {}
            Message::CommandComplete(body) => {
                self.command_tag = Some(body.tag().map_err(Error::io)?.to_owned());
                self.finish_result().await?;
            }
            Message::EmptyQueryResponse => self.finish_result().await?,
            Message::PortalSuspended => self.state = State::Suspended,
            Message::ReadyForQuery(_) => self.state = State::Done,
            Message::ErrorResponse(body) => {
                let error = db_error(&body);
                // Streaming, the Sync is already sent; through a portal, it ends
                // the exchange the error broke off.
                let _ = match self.fetch_size {
                    Some(_) => self.connection.sync_and_drain().await,
                    None => self.connection.drain_until_ready().await,
                };
                self.state = State::Done;
                return Err(error);
            }
            _ => return Err(Error::protocol("unexpected message in a query result")),
        }
        Ok(())
    }

    /// Asks for the next `fetch_size` rows of the suspended portal.
    async fn resume(&mut self) -> Result<(), Error> {
        self.connection
            .encode_execute(self.fetch_size.unwrap_or(0))?;
        self.connection.encode_flush();
        self.connection.send().await?;
        self.state = State::Streaming;
        Ok(())
    }

    async fn finish_result(&mut self) -> Result<(), Error> {
        if self.fetch_size.is_some() {
            self.connection.encode_sync();
            self.connection.send().await?;
        }
        self.state = State::AwaitingReady;
        Ok(())
    }
}

impl RowStream {
    /// The next step through a large row: each value's length is checked against
    /// what is left of the row's message before a byte of it is handed over.
    async fn large_row_chunk(&mut self, mut row: LargeRow) -> Result<Chunk<'_>, Error> {
        if let Some(left) = row.value_left {
            return self.large_value_piece(row, left).await;
        }
        if row.fields_left == 0 {
            if row.bytes_left != 0 {
                return Err(Error::protocol(
                    "malformed DataRow message: bytes after its last value",
                ));
            }
            self.large_row = None;
            return Ok(Chunk::RowEnd);
        }
        let overrun = || Error::protocol("malformed DataRow message: its values overrun it");
        row.bytes_left = row.bytes_left.checked_sub(4).ok_or_else(overrun)?;
        self.connection.fill_to(4).await?;
        let header = &self.connection.buffered()[..4];
        let length = i32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        self.connection.consume(4);
        let column = row.column;
        let Ok(length) = usize::try_from(length) else {
            self.large_row = Some(row.next_value());
            return Ok(Chunk::Value {
                column,
                value: None,
            });
        };
        row.bytes_left = row.bytes_left.checked_sub(length).ok_or_else(overrun)?;
        if length > SMALL_VALUE_BYTES {
            row.value_left = Some(length);
            self.large_row = Some(row);
            return Ok(Chunk::ValueStart { column });
        }
        self.large_row = Some(row.next_value());
        self.connection.fill_to(length).await?;
        self.lent = length;
        Ok(Chunk::Value {
            column,
            value: Some(&self.connection.buffered()[..length]),
        })
    }

    /// The next piece of a value handed over in pieces, `left` bytes of it to come.
    async fn large_value_piece(
        &mut self,
        mut row: LargeRow,
        left: usize,
    ) -> Result<Chunk<'_>, Error> {
        let column = row.column;
        if left == 0 {
            self.large_row = Some(row.next_value());
            return Ok(Chunk::ValueEnd { column });
        }
        self.connection.fill_to(1).await?;
        let length = left.min(self.connection.buffered().len()).min(PIECE_BYTES);
        row.value_left = Some(left - length);
        self.large_row = Some(row);
        self.lent = length;
        Ok(Chunk::Piece {
            column,
            bytes: &self.connection.buffered()[..length],
        })
    }

    /// Begins the large row at the front of the read buffer, its message `total`
    /// bytes long, if the batch has been handed over.
    async fn begin_large_row(&mut self, total: usize) -> Result<Step, Error> {
        if !self.batch.is_empty() {
            return Ok(Step::Rows);
        }
        self.connection.fill_to(7).await?;
        let buffered = self.connection.buffered();
        let count = u16::from_be_bytes([buffered[5], buffered[6]]) as usize;
        if count != self.batch.num_columns() {
            return Err(Error::protocol("DataRow with the wrong number of values"));
        }
        self.connection.consume(7);
        self.large_row = Some(LargeRow {
            fields_left: count,
            bytes_left: total - 7,
            column: 0,
            value_left: None,
        });
        Ok(Step::LargeRow)
    }
}

impl LargeRow {
    /// The row once its current value has been handed over.
    fn next_value(self) -> LargeRow {
        LargeRow {
            fields_left: self.fields_left - 1,
            column: self.column + 1,
            value_left: None,
            ..self
        }
    }
}

impl RowStream {
    /// The batch the last [`BatchSource::next_batch`] handed over.
    pub(crate) fn current_batch(&self) -> &Batch {
        &self.batch
    }
}

impl BatchSource for RowStream {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
        match self.step(false).await? {
            Step::Rows => Ok(Some(&self.batch)),
            Step::End => Ok(None),
            Step::LargeRow => Err(Error::protocol("large row where none was allowed")),
        }
    }

    async fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        self.connection.consume(std::mem::take(&mut self.lent));
        if let Some(row) = self.large_row {
            return self.large_row_chunk(row).await.map(Some);
        }
        match self.step(true).await? {
            Step::Rows => Ok(Some(Chunk::Rows(&self.batch))),
            Step::End => Ok(None),
            Step::LargeRow => Ok(Some(Chunk::RowStart)),
        }
    }
}

/// What [`RowStream::step`] produced.
enum Step {
    /// `self.batch` holds rows.
    Rows,
    /// A large row has begun (only when large rows are allowed).
    LargeRow,
    /// The result is complete.
    End,
}

impl RowStream {
    /// Reads until the batch is worth handing over, a large row begins (when
    /// `allow_large`; otherwise such a row is read whole), or the result ends.
    async fn step(&mut self, allow_large: bool) -> Result<Step, Error> {
        self.batch.clear();
        loop {
            while self.state != State::Done {
                if allow_large {
                    if let Some(total) = self.large_row_ahead()? {
                        return self.begin_large_row(total).await;
                    }
                }
                match self.connection.receive_buffered(&mut self.batch)? {
                    Received::Row if self.batch.data_len() >= BATCH_BYTES => return Ok(Step::Rows),
                    Received::Row => {}
                    Received::Message(message) => self.handle(message).await?,
                    Received::Incomplete => break,
                }
            }
            if !self.batch.is_empty() {
                return Ok(Step::Rows);
            }
            match self.state {
                State::Done => return Ok(Step::End),
                State::Suspended => self.resume().await?,
                State::Streaming | State::AwaitingReady => {}
            }
            self.connection.fill().await?;
        }
    }

    /// The length of a `DataRow` at the front of the read buffer too long to hold,
    /// if that is what is there.
    fn large_row_ahead(&self) -> Result<Option<usize>, Error> {
        Ok(match self.connection.front_header()? {
            Some((b'D', total)) if total > LARGE_ROW_BYTES => Some(total),
            _ => None,
        })
    }
}
