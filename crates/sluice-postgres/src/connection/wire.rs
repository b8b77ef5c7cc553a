//! The wire under a [`Connection`]: frontend messages encoded into the write
//! buffer (`encode_*`), bytes moved between the buffers and the socket, and
//! backend messages framed out of the read buffer.
//!
//! Every wait on the server (`fill`, `send`, `exchange`) is bounded by the
//! connection's wait timeout, when one is set: a server, or a network, that
//! stops moving bytes fails the work instead of hanging it.
//!
//! Framing is checked here once for the whole crate: a message's declared length
//! must cover its own length word before anything is sliced, and a `DataRow`'s
//! values must fit inside its message exactly, so a broken or hostile server gets
//! a protocol error, never a panic. `DataRow`s decode straight from the read
//! buffer into a [`Batch`]: one length check per row and one per value, no
//! allocation.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, BytesMut};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;
use sluice_core::{Batch, Error, ErrorKind};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::transport::Transport;
use super::{Connection, READ_CHUNK};

/// What the front of the read buffer held.
pub(crate) enum Received {
    /// A `DataRow`, decoded into the caller's batch and consumed.
    Row,
    /// Any other complete message, consumed.
    Message(Message),
    /// Less than a whole message: more must be read.
    Incomplete,
}

/// The header of the message at the front of `buffer`, once its five bytes are
/// there: the tag and the total length (tag and length word included). A length
/// that does not even cover the length word is an error: slicing the body with
/// it would panic.
pub(crate) fn frame_header(buffer: &[u8]) -> Result<Option<(u8, usize)>, Error> {
    let Some(header) = buffer.get(..5) else {
        return Ok(None);
    };
    let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if length < 4 {
        return Err(Error::protocol(format!(
            "malformed message from the server: tag {:?} declares {length} bytes, \
             fewer than its length field",
            char::from(header[0])
        )));
    }
    Ok(Some((header[0], length + 1)))
}

/// Copies the values of a `DataRow` body (after its tag and length) into `batch`,
/// which must have as many columns as the row has values. Every value must lie
/// inside the body and the last must end it.
pub(crate) fn decode_data_row(body: &[u8], batch: &mut Batch) -> Result<(), Error> {
    let malformed = || Error::protocol("malformed DataRow message: its values overrun it");
    let Some(count) = body.get(..2) else {
        return Err(malformed());
    };
    let count = u16::from_be_bytes([count[0], count[1]]) as usize;
    if count != batch.num_columns() {
        return Err(Error::protocol(format!(
            "DataRow has {count} values for {} columns",
            batch.num_columns()
        )));
    }
    let mut position = 2;
    for _ in 0..count {
        let header = body.get(position..position + 4).ok_or_else(malformed)?;
        let length = i32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        position += 4;
        if length < 0 {
            batch.push_null();
        } else {
            let end = position + length as usize;
            batch.push_value(body.get(position..end).ok_or_else(malformed)?);
            position = end;
        }
    }
    if position != body.len() {
        return Err(Error::protocol(
            "malformed DataRow message: bytes after its last value",
        ));
    }
    Ok(())
}

fn closed() -> Error {
    Error::new(
        ErrorKind::Closed,
        "the database server closed the connection unexpectedly",
    )
}

/// Requests: each appends one frontend message to the write buffer; they leave
/// together on the next [`Connection::send`] or [`Connection::exchange`].
impl Connection {
    /// `Parse`: `sql` as prepared statement `statement` (empty: the unnamed one).
    pub(crate) fn encode_parse(&mut self, statement: &str, sql: &str) -> Result<(), Error> {
        frontend::parse(statement, sql, std::iter::empty(), &mut self.write_buffer)
            .map_err(Error::io)
    }

    /// `Describe` of a prepared statement: its parameter and result types.
    pub(crate) fn encode_describe_statement(&mut self, statement: &str) -> Result<(), Error> {
        frontend::describe(b'S', statement, &mut self.write_buffer).map_err(Error::io)
    }

    /// `Bind` of `statement` to the unnamed portal: the one Bind encoding of the
    /// crate. `values` are the parameters' bytes (`None`: NULL) in the formats
    /// `parameter_formats` gives (0 text, 1 binary; one format applies to all);
    /// `result_formats` likewise for the result columns. On error nothing is
    /// queued, so the exchange can still be ended cleanly.
    pub(crate) fn encode_bind<'v>(
        &mut self,
        statement: &str,
        parameter_formats: impl IntoIterator<Item = i16>,
        values: impl IntoIterator<Item = Option<&'v [u8]>>,
        result_formats: impl IntoIterator<Item = i16>,
    ) -> Result<(), Error> {
        let start = self.write_buffer.len();
        let encoded = frontend::bind(
            "",
            statement,
            parameter_formats,
            values,
            |value, buffer| match value {
                Some(bytes) => {
                    buffer.put_slice(bytes);
                    Ok(IsNull::No)
                }
                None => Ok(IsNull::Yes),
            },
            result_formats,
            &mut self.write_buffer,
        );
        if encoded.is_err() {
            self.write_buffer.truncate(start);
            return Err(Error::config("too many parameters"));
        }
        Ok(())
    }

    /// `Execute` of the unnamed portal, for at most `max_rows` rows (0: all).
    pub(crate) fn encode_execute(&mut self, max_rows: u32) -> Result<(), Error> {
        let max_rows = i32::try_from(max_rows).unwrap_or(i32::MAX);
        frontend::execute("", max_rows, &mut self.write_buffer).map_err(Error::io)
    }

    /// `Close` of a prepared statement.
    pub(crate) fn encode_close_statement(&mut self, statement: &str) -> Result<(), Error> {
        frontend::close(b'S', statement, &mut self.write_buffer).map_err(Error::io)
    }

    /// `Sync`: ends an extended-protocol exchange; the server answers
    /// `ReadyForQuery`.
    pub(crate) fn encode_sync(&mut self) {
        frontend::sync(&mut self.write_buffer);
    }

    /// `Flush`: the server sends what it has without ending the exchange.
    pub(crate) fn encode_flush(&mut self) {
        frontend::flush(&mut self.write_buffer);
    }

    /// `Query`: SQL through the simple protocol; the server ends it with
    /// `ReadyForQuery`.
    pub(crate) fn encode_query(&mut self, sql: &str) -> Result<(), Error> {
        frontend::query(sql, &mut self.write_buffer).map_err(Error::io)
    }

    /// `CopyData` whose content `write` appends; its length is filled in after.
    pub(crate) fn encode_copy_data(
        &mut self,
        write: impl FnOnce(&mut BytesMut),
    ) -> Result<(), Error> {
        let start = self.write_buffer.len();
        self.write_buffer.put_u8(b'd');
        self.write_buffer.put_u32(0);
        write(&mut self.write_buffer);
        let Ok(length) = i32::try_from(self.write_buffer.len() - start - 1) else {
            self.write_buffer.truncate(start);
            return Err(Error::config("a row too large for one COPY message"));
        };
        self.write_buffer[start + 1..start + 5].copy_from_slice(&length.to_be_bytes());
        Ok(())
    }

    /// `CopyDone`: the data is complete.
    pub(crate) fn encode_copy_done(&mut self) {
        frontend::copy_done(&mut self.write_buffer);
    }

    /// `CopyFail`: the server discards the COPY with `reason`.
    pub(crate) fn encode_copy_fail(&mut self, reason: &str) -> Result<(), Error> {
        frontend::copy_fail(reason, &mut self.write_buffer).map_err(Error::io)
    }

    /// Bytes encoded and not yet written to the socket.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.write_buffer.len()
    }
}

/// Moving bytes between the buffers and the socket.
impl Connection {
    /// Runs `wait` (on the socket and the read and write buffers) within the
    /// wait limit ([`sluice_core::WaitLimit::run`]): once a wait has timed out the
    /// connection is spent and every later wait fails at once. The wait gets
    /// those parts rather than the connection because the limit, held across
    /// the wait, is a part of the connection too.
    pub(crate) async fn bounded<T>(
        &mut self,
        wait: impl AsyncFnOnce(&mut Transport, &mut BytesMut, &mut BytesMut) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let Connection {
            stream,
            read_buffer,
            write_buffer,
            target,
            wait_limit,
            ..
        } = self;
        wait_limit
            .run(target, wait(stream, read_buffer, write_buffer))
            .await
    }

    /// Writes everything queued in the write buffer. Each write is a wait of
    /// its own: a slow link that keeps taking bytes is not a stalled one.
    pub(crate) async fn send(&mut self) -> Result<(), Error> {
        while !self.write_buffer.is_empty() {
            self.bounded(async |stream, _, write_buffer| {
                let written = stream.write(write_buffer).await.map_err(Error::io)?;
                if written == 0 {
                    return Err(closed());
                }
                write_buffer.advance(written);
                Ok(())
            })
            .await?;
        }
        // TLS may hold the last records back until flushed.
        self.bounded(async |stream, _, _| stream.flush().await.map_err(Error::io))
            .await
    }

    /// Reads more bytes from the socket into the read buffer; EOF is an error.
    pub(crate) async fn fill(&mut self) -> Result<(), Error> {
        self.bounded(async |stream, read_buffer, _| {
            read_buffer.reserve(READ_CHUNK);
            let read = stream.read_buf(read_buffer).await.map_err(Error::io)?;
            if read == 0 {
                return Err(closed());
            }
            Ok(())
        })
        .await
    }

    /// Waits until the read buffer holds at least `bytes` bytes.
    pub(crate) async fn fill_to(&mut self, bytes: usize) -> Result<(), Error> {
        while self.read_buffer.len() < bytes {
            self.fill().await?;
        }
        Ok(())
    }

    /// The bytes received and not yet consumed.
    pub(crate) fn buffered(&self) -> &[u8] {
        &self.read_buffer
    }

    /// Drops `length` received bytes.
    pub(crate) fn consume(&mut self, length: usize) {
        self.read_buffer.advance(length);
    }

    /// Writes what is queued and reads what has arrived, returning as soon as
    /// either made progress: the two directions never wait on each other, so the
    /// server keeps answering while more requests go out.
    pub(crate) async fn exchange(&mut self) -> Result<(), Error> {
        self.bounded(async |stream, read_buffer, write_buffer| {
            std::future::poll_fn(|context| {
                poll_exchange(stream, read_buffer, write_buffer, context)
            })
            .await
        })
        .await
    }
}

/// One poll of [`Connection::exchange`]: writes what it can, reads what has
/// arrived, ready once either moved.
fn poll_exchange(
    stream: &mut Transport,
    read_buffer: &mut BytesMut,
    write_buffer: &mut BytesMut,
    context: &mut Context<'_>,
) -> Poll<Result<(), Error>> {
    let mut progressed = false;
    while !write_buffer.is_empty() {
        match Pin::new(&mut *stream).poll_write(context, write_buffer) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Err(closed())),
            Poll::Ready(Ok(count)) => {
                write_buffer.advance(count);
                progressed = true;
            }
            Poll::Ready(Err(error)) => return Poll::Ready(Err(Error::io(error))),
            Poll::Pending => break,
        }
    }
    if write_buffer.is_empty() {
        // TLS may hold the last records back until flushed; pending is
        // fine (the flush resumes with the next poll), an error is not.
        if let Poll::Ready(Err(error)) = Pin::new(&mut *stream).poll_flush(context) {
            return Poll::Ready(Err(Error::io(error)));
        }
    }
    read_buffer.reserve(READ_CHUNK);
    match tokio_util::io::poll_read_buf(Pin::new(&mut *stream), context, read_buffer) {
        Poll::Ready(Ok(0)) => return Poll::Ready(Err(closed())),
        Poll::Ready(Ok(_)) => progressed = true,
        Poll::Ready(Err(error)) => return Poll::Ready(Err(Error::io(error))),
        Poll::Pending => {}
    }
    if progressed {
        Poll::Ready(Ok(()))
    } else {
        Poll::Pending
    }
}

/// Answers: backend messages framed out of the read buffer.
impl Connection {
    /// The header of the message at the front of the read buffer, complete or
    /// not: `(tag, total length)`.
    pub(crate) fn front_header(&self) -> Result<Option<(u8, usize)>, Error> {
        frame_header(&self.read_buffer)
    }

    /// The next message in the read buffer, without waiting: a `DataRow` is
    /// decoded into `rows` (the hot path of every result), anything else parsed.
    pub(crate) fn receive_buffered(&mut self, rows: &mut Batch) -> Result<Received, Error> {
        let Some((tag, total)) = self.front_header()? else {
            return Ok(Received::Incomplete);
        };
        if self.read_buffer.len() < total {
            return Ok(Received::Incomplete);
        }
        if tag == b'D' {
            decode_data_row(&self.read_buffer[5..total], rows)?;
            self.read_buffer.advance(total);
            return Ok(Received::Row);
        }
        Message::parse(&mut self.read_buffer)
            .map_err(Error::io)?
            .map_or(Ok(Received::Incomplete), |message| {
                Ok(Received::Message(message))
            })
    }

    /// The next whole message in the read buffer, without waiting.
    pub(crate) fn buffered_message(&mut self) -> Result<Option<Message>, Error> {
        match self.front_header()? {
            Some((_, total)) if self.read_buffer.len() >= total => {
                let message = Message::parse(&mut self.read_buffer).map_err(Error::io)?;
                if let Some(Message::ParameterStatus(body)) = &message {
                    self.note_parameter(body)?;
                }
                Ok(message)
            }
            _ => Ok(None),
        }
    }

    /// Reads one whole message, waiting for the socket as needed.
    pub(crate) async fn read_message(&mut self) -> Result<Message, Error> {
        loop {
            if let Some(message) = self.buffered_message()? {
                return Ok(message);
            }
            self.fill().await?;
        }
    }
}
