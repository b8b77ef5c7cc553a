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

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;
use sluice_core::{Batch, BatchSource, Column, Error, Schema};

use crate::connection::Connection;
use crate::error::db_error;
use crate::types::{self, Oid};

/// A batch is handed on once it holds this many bytes of values.
const BATCH_BYTES: usize = 64 * 1024;

/// How to run a query.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Values for `$1`, `$2`, … in order, as text the server converts to each
    /// parameter's type (as psql does); `None` is SQL NULL. Default: none.
    pub params: Vec<Option<String>>,
    /// Rows per round trip through a portal; `None` (the default) streams the whole
    /// result from one `Execute`.
    pub fetch_size: Option<u32>,
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
    batch: Batch,
    state: State,
    fetch_size: Option<u32>,
    command_tag: Option<String>,
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
        frontend::parse("", sql, std::iter::empty(), &mut connection.write_buffer)
            .map_err(Error::io)?;
        frontend::describe(b'S', "", &mut connection.write_buffer).map_err(Error::io)?;
        frontend::flush(&mut connection.write_buffer);
        connection.send().await?;

        let mut parameter_count = 0usize;
        let mut columns: Vec<(String, Oid)> = Vec::new();
        loop {
            match connection.read_message().await? {
                Message::ParseComplete => {}
                Message::ParameterDescription(body) => {
                    parameter_count = body.parameters().count().map_err(Error::io)?;
                }
                Message::RowDescription(body) => {
                    let mut fields = body.fields();
                    while let Some(field) = fields.next().map_err(Error::io)? {
                        columns.push((field.name().to_owned(), field.type_oid()));
                    }
                    break;
                }
                Message::NoData => break,
                Message::NoticeResponse(_) | Message::ParameterStatus(_) => {}
                Message::ErrorResponse(body) => {
                    return Err(abort(connection, db_error(&body)).await);
                }
                _ => return Err(Error::protocol("unexpected message while preparing")),
            }
        }
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
        let schema = Schema {
            columns: columns
                .iter()
                .map(|(name, oid)| Column {
                    name: name.clone(),
                    kind: types::kind_of(*oid, &catalog, 0),
                    type_name: types::name_of(*oid, &catalog),
                })
                .collect(),
        };
        // Binary only where the raw bytes are the canonical form: no hex on the
        // server, half the bytes on the wire.
        let result_formats: Vec<i16> = schema
            .columns
            .iter()
            .map(|column| i16::from(column.kind == sluice_core::Kind::Bytes))
            .collect();

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
            result_formats,
            &mut connection.write_buffer,
        );
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
            batch: Batch::new(schema.len()),
            schema,
            state: State::Streaming,
            fetch_size,
            command_tag: None,
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

    async fn finish_result(&mut self) -> Result<(), Error> {
        if self.fetch_size.is_some() {
            frontend::sync(&mut self.connection.write_buffer);
            self.connection.send().await?;
        }
        self.state = State::AwaitingReady;
        Ok(())
    }
}

impl BatchSource for QueryStream {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
        self.batch.clear();
        loop {
            while self.state != State::Done {
                let Some((tag, total)) = self.connection.complete_message() else {
                    break;
                };
                if tag == b'D' {
                    self.push_row(total)?;
                    self.connection.consume(total);
                    if self.batch.data_len() >= BATCH_BYTES {
                        return Ok(Some(&self.batch));
                    }
                    continue;
                }
                let message = Message::parse(&mut self.connection.read_buffer)
                    .map_err(Error::io)?
                    .ok_or_else(|| Error::protocol("incomplete message"))?;
                self.handle(message).await?;
            }
            if !self.batch.is_empty() {
                return Ok(Some(&self.batch));
            }
            match self.state {
                State::Done => return Ok(None),
                State::Suspended => {
                    let size = self.fetch_size.unwrap_or(0) as i32;
                    frontend::execute("", size, &mut self.connection.write_buffer)
                        .map_err(Error::io)?;
                    frontend::flush(&mut self.connection.write_buffer);
                    self.connection.send().await?;
                    self.state = State::Streaming;
                }
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
