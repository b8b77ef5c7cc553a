//! [`QueryStream`]: one query's rows, streamed from the socket into batches.
//!
//! The exchange, with the round trips it costs:
//!
//! 1. `Parse` + `Describe` + `Flush`: the server checks the SQL and reports the
//!    parameter and column types (1 trip; one more per level of nesting when a
//!    column has a type outside the built-in table, looked up in `pg_type`).
//! 2. `Bind` with per-column result formats (binary for `bytea`, text otherwise) and
//!    `Execute`:
//!    - default, streaming: `Execute` without a row limit and `Sync` in the same
//!      write; the whole result then flows in one trip, and TCP flow control holds
//!      the server back whenever the consumer is slower (constant trips in N);
//!    - with a fetch size F: `Execute(F)` + `Flush`, and another `Execute(F)` each
//!      time the server reports `PortalSuspended`, then `Sync` (⌊N/F⌋ + 3 trips).
//!
//! Rows are parsed straight out of the connection's read buffer into a reused
//! [`Batch`]; memory is one read buffer plus one batch, whatever the row count.

use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;
use sluice_core::{Batch, BatchSource, Chunk, Error, Schema};

use crate::connection::Connection;
use crate::error::db_error;
use crate::types::{self, Oid};

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
    /// The column of the next value (or of the value in pieces).
    column: usize,
    /// Bytes still to come of the value in pieces, if one is under way.
    value_left: Option<usize>,
}

/// How to run a query.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Values for `$1`, `$2`, … in order, as text the server converts to each
    /// parameter's type (as psql does); `None` is SQL NULL. Default: none.
    pub params: Vec<Option<String>>,
    /// Rows per round trip through a portal; `None` (the default) streams the whole
    /// result from one `Execute`.
    pub fetch_size: Option<u32>,
    /// Read every `oid` column as a large object and hand over its bytes in place
    /// of the OID, in the same query (see [`crate::lob`]). Default: false.
    pub lob_inline: bool,
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

/// A running query; read it through [`BatchSource::next_batch`].
#[derive(Debug)]
pub struct QueryStream {
    connection: Connection,
    schema: Schema,
    pub(crate) batch: Batch,
    state: State,
    fetch_size: Option<u32>,
    command_tag: Option<String>,
    large_row: Option<LargeRow>,
    /// Bytes of the read buffer lent out in the last chunk, dropped on the next call.
    lent: usize,
    /// Set when large objects are read inline (see [`crate::lob`]).
    pub(crate) lob: Option<crate::lob::LobPlan>,
}

impl QueryStream {
    /// Prepares `sql`, binds `options.params` and starts the result flowing.
    ///
    /// Errors the server reports here (syntax, unknown table, wrong parameter count
    /// or type) come back with their SQLSTATE and position; the connection is then
    /// dropped.
    pub async fn start(
        mut connection: Connection,
        sql: &str,
        options: QueryOptions,
    ) -> Result<QueryStream, Error> {
        let description = match connection.prepare("", sql).await {
            Ok(description) => description,
            Err(error) if error.kind() == sluice_core::ErrorKind::Database => {
                return Err(abort(connection, error).await)
            }
            Err(error) => return Err(error),
        };
        let parameter_count = description.parameters;
        let columns = description.columns;
        if options.params.len() != parameter_count {
            let message = format!(
                "the query has {parameter_count} parameter{} but {} value{} given",
                if parameter_count == 1 { "" } else { "s" },
                options.params.len(),
                if options.params.len() == 1 {
                    " was"
                } else {
                    "s were"
                },
            );
            return Err(abort(connection, Error::config(message)).await);
        }

        let oids: Vec<Oid> = columns.iter().map(|(_, oid)| *oid).collect();
        let catalog = match types::resolve(&mut connection, &oids).await {
            Ok(catalog) => catalog,
            Err(error) => return Err(abort(connection, error).await),
        };
        let schema = types::schema_of(&columns, &catalog);
        // Binary only where the raw bytes are the canonical form: no hex on the
        // server, half the bytes on the wire.
        let mut result_formats: Vec<i16> = schema
            .columns
            .iter()
            .map(|column| i16::from(column.kind == sluice_core::Kind::Bytes))
            .collect();
        let mut schema = schema;
        let mut lob = None;
        let oids: Vec<Oid> = columns.iter().map(|(_, oid)| *oid).collect();
        if options.lob_inline && oids.contains(&crate::lob::OID) {
            // Replace the unnamed statement by the rewritten one; its columns are
            // the user's columns, then the piece columns.
            let rewritten = crate::lob::rewrite(sql, &oids);
            frontend::parse(
                "",
                &rewritten,
                std::iter::empty(),
                &mut connection.write_buffer,
            )
            .map_err(Error::io)?;
            frontend::flush(&mut connection.write_buffer);
            connection.send().await?;
            match connection.read_message().await? {
                Message::ParseComplete => {}
                Message::ErrorResponse(body) => {
                    return Err(abort(connection, db_error(&body)).await)
                }
                _ => return Err(Error::protocol("unexpected message while preparing")),
            }
            for (column, oid) in schema.columns.iter_mut().zip(&oids) {
                if *oid == crate::lob::OID {
                    column.kind = sluice_core::Kind::Bytes;
                    column.type_name = "lo".into();
                }
            }
            let mut internal = result_formats.clone();
            // The OID columns themselves travel as text; their bytes come as pieces.
            for (format, oid) in internal.iter_mut().zip(&oids) {
                if *oid == crate::lob::OID {
                    *format = 0;
                }
            }
            internal.extend([0, 0, 1]);
            result_formats = internal;
            lob = Some(crate::lob::LobPlan::new(&oids));
        }

        let bound = frontend::bind(
            "",
            "",
            std::iter::once(0i16),
            options.params.iter(),
            |value, buffer| match value {
                Some(text) => {
                    buffer.extend_from_slice(text.as_bytes());
                    Ok(IsNull::No)
                }
                None => Ok(IsNull::Yes),
            },
            result_formats.iter().copied(),
            &mut connection.write_buffer,
        );
        let result_formats_len = result_formats.len();
        if bound.is_err() {
            return Err(abort(connection, Error::config("too many parameters")).await);
        }
        let fetch_size = options.fetch_size.filter(|&size| size > 0);
        frontend::execute(
            "",
            fetch_size.unwrap_or(0) as i32,
            &mut connection.write_buffer,
        )
        .map_err(Error::io)?;
        match fetch_size {
            None => frontend::sync(&mut connection.write_buffer),
            Some(_) => frontend::flush(&mut connection.write_buffer),
        }
        connection.send().await?;
        Ok(QueryStream {
            connection,
            batch: Batch::new(result_formats_len),
            schema,
            state: State::Streaming,
            fetch_size,
            command_tag: None,
            large_row: None,
            lent: 0,
            lob,
        })
    }

    /// The server's completion tag (e.g. `SELECT 1000`) once the result is complete.
    pub fn command_tag(&self) -> Option<&str> {
        self.command_tag.as_deref()
    }

    /// The connection, once the result has been read to the end.
    pub fn into_connection(self) -> Option<Connection> {
        (self.state == State::Done).then_some(self.connection)
    }

    /// The connection, for its cancel token or meter.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// Copies the `DataRow` at the front of the read buffer into the batch.
    fn push_row(&mut self, total: usize) -> Result<(), Error> {
        parse_data_row(&self.connection.read_buffer[5..total], &mut self.batch)
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
                if self.fetch_size.is_some() {
                    frontend::sync(&mut self.connection.write_buffer);
                    self.connection.send().await?;
                }
                let _ = self.connection.drain_until_ready().await;
                self.state = State::Done;
                return Err(error);
            }
            _ => return Err(Error::protocol("unexpected message in a query result")),
        }
        Ok(())
    }

    /// Asks for the next `fetch_size` rows of the suspended portal.
    async fn resume(&mut self) -> Result<(), Error> {
        let size = self.fetch_size.unwrap_or(0) as i32;
        frontend::execute("", size, &mut self.connection.write_buffer).map_err(Error::io)?;
        frontend::flush(&mut self.connection.write_buffer);
        self.connection.send().await?;
        self.state = State::Streaming;
        Ok(())
    }

    async fn finish_result(&mut self) -> Result<(), Error> {
        if self.fetch_size.is_some() {
            frontend::sync(&mut self.connection.write_buffer);
            self.connection.send().await?;
        }
        self.state = State::AwaitingReady;
        Ok(())
    }
}

impl QueryStream {
    /// Waits until the read buffer holds at least `bytes` bytes.
    async fn buffered(&mut self, bytes: usize) -> Result<(), Error> {
        while self.connection.read_buffer.len() < bytes {
            self.connection.fill().await?;
        }
        Ok(())
    }

    /// The next step through a large row.
    async fn large_row_chunk(&mut self, mut row: LargeRow) -> Result<Chunk<'_>, Error> {
        if let Some(left) = row.value_left {
            let column = row.column;
            if left == 0 {
                self.large_row = Some(LargeRow {
                    fields_left: row.fields_left - 1,
                    column: column + 1,
                    value_left: None,
                });
                return Ok(Chunk::ValueEnd { column });
            }
            self.buffered(1).await?;
            let length = left.min(self.connection.read_buffer.len()).min(PIECE_BYTES);
            row.value_left = Some(left - length);
            self.large_row = Some(row);
            self.lent = length;
            return Ok(Chunk::Piece {
                column,
                bytes: &self.connection.read_buffer[..length],
            });
        }
        if row.fields_left == 0 {
            self.large_row = None;
            return Ok(Chunk::RowEnd);
        }
        self.buffered(4).await?;
        let header = &self.connection.read_buffer[..4];
        let length = i32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        self.connection.consume(4);
        let column = row.column;
        if length < 0 || length as usize <= SMALL_VALUE_BYTES {
            self.large_row = Some(LargeRow {
                fields_left: row.fields_left - 1,
                column: column + 1,
                value_left: None,
            });
            if length < 0 {
                return Ok(Chunk::Value {
                    column,
                    value: None,
                });
            }
            let length = length as usize;
            self.buffered(length).await?;
            self.lent = length;
            return Ok(Chunk::Value {
                column,
                value: Some(&self.connection.read_buffer[..length]),
            });
        }
        row.value_left = Some(length as usize);
        self.large_row = Some(row);
        Ok(Chunk::ValueStart { column })
    }

    /// The length of a `DataRow` at the front of the read buffer too long to hold,
    /// if that is what is there.
    fn large_row_ahead(&self) -> Option<usize> {
        let buffer = &self.connection.read_buffer;
        if buffer.len() < 5 || buffer[0] != b'D' {
            return None;
        }
        let length = u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
        (length + 1 > LARGE_ROW_BYTES).then_some(length + 1)
    }
}

impl BatchSource for QueryStream {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
        if self.lob.is_some() {
            return Err(Error::config(
                "large objects inline are handed over value by value: read them with next_chunk",
            ));
        }
        match self.step(false).await? {
            Step::Rows => Ok(Some(&self.batch)),
            Step::End => Ok(None),
            Step::LargeRow => Err(Error::protocol("large row where none was allowed")),
        }
    }

    async fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        self.connection.consume(std::mem::take(&mut self.lent));
        if self.lob.is_some() {
            return self.lob_chunk().await;
        }
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

/// What [`QueryStream::step`] produced.
pub(crate) enum Step {
    /// `self.batch` holds rows.
    Rows,
    /// A large row has begun (only when large rows are allowed).
    LargeRow,
    /// The result is complete.
    End,
}

impl QueryStream {
    /// Reads until the batch is worth handing over, a large row begins (when
    /// `allow_large`; otherwise such a row is read whole), or the result ends.
    pub(crate) async fn step(&mut self, allow_large: bool) -> Result<Step, Error> {
        self.batch.clear();
        loop {
            while self.state != State::Done {
                if allow_large && self.large_row_ahead().is_some() {
                    if !self.batch.is_empty() {
                        return Ok(Step::Rows);
                    }
                    self.buffered(7).await?;
                    let count = u16::from_be_bytes([
                        self.connection.read_buffer[5],
                        self.connection.read_buffer[6],
                    ]) as usize;
                    if count != self.batch.num_columns() {
                        return Err(Error::protocol("DataRow with the wrong number of values"));
                    }
                    self.connection.consume(7);
                    self.large_row = Some(LargeRow {
                        fields_left: count,
                        column: 0,
                        value_left: None,
                    });
                    return Ok(Step::LargeRow);
                }
                let Some((tag, total)) = self.connection.complete_message() else {
                    break;
                };
                if tag == b'D' {
                    self.push_row(total)?;
                    self.connection.consume(total);
                    if self.batch.data_len() >= BATCH_BYTES {
                        return Ok(Step::Rows);
                    }
                    continue;
                }
                let message = Message::parse(&mut self.connection.read_buffer)
                    .map_err(Error::io)?
                    .ok_or_else(|| Error::protocol("incomplete message"))?;
                self.handle(message).await?;
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
}

/// Copies the values of a `DataRow` body (after its tag and length) into `batch`,
/// which must have as many columns as the row has values.
pub(crate) fn parse_data_row(message: &[u8], batch: &mut Batch) -> Result<(), Error> {
    let malformed = || Error::protocol("malformed DataRow message");
    if message.len() < 2 {
        return Err(malformed());
    }
    let count = u16::from_be_bytes([message[0], message[1]]) as usize;
    if count != batch.num_columns() {
        return Err(Error::protocol(format!(
            "DataRow has {count} values for {} columns",
            batch.num_columns()
        )));
    }
    let mut position = 2;
    for _ in 0..count {
        let header = message.get(position..position + 4).ok_or_else(malformed)?;
        let length = i32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        position += 4;
        if length < 0 {
            batch.push_null();
        } else {
            let end = position + length as usize;
            batch.push_value(message.get(position..end).ok_or_else(malformed)?);
            position = end;
        }
    }
    Ok(())
}

/// Ends a failed extended-protocol exchange (`Sync`, then reads to `ReadyForQuery`)
/// and returns the error that caused it.
async fn abort(mut connection: Connection, error: Error) -> Error {
    frontend::sync(&mut connection.write_buffer);
    if connection.send().await.is_ok() {
        let _ = connection.drain_until_ready().await;
    }
    error
}
