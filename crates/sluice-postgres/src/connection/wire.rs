//! The wire under a [`Connection`]: bytes moved between its buffers and its
//! socket, with the frontend messages encoded into the write buffer and the
//! backend messages framed out of the read buffer by [`frames`], which does no
//! I/O of its own.
//!
//! Every wait on the server (`fill`, `send`, `exchange`) is bounded by the
//! connection's wait timeout, when one is set: a server, or a network, that
//! stops moving bytes fails the work instead of hanging it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use postgres_protocol::message::backend::Message;
use sluice_core::{Batch, Error, ErrorKind};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::frames::{self, Received};
use super::transport::Transport;
use super::{Connection, READ_CHUNK};

/// The error of a socket that ended: the server hung up mid-exchange.
fn closed() -> Error {
    Error::new(
        ErrorKind::Closed,
        "the database server closed the connection unexpectedly",
    )
}

/// Requests: each appends one frontend message ([`frames`]) to the write
/// buffer; they leave together on the next [`Connection::send`] or
/// [`Connection::exchange`].
impl Connection {
    /// `Parse`: `sql` as prepared statement `statement` (empty: the unnamed one).
    pub(crate) fn encode_parse(&mut self, statement: &str, sql: &str) -> Result<(), Error> {
        frames::encode_parse(&mut self.write_buffer, statement, sql)
    }

    /// `Describe` of a prepared statement: its parameter and result types.
    pub(crate) fn encode_describe_statement(&mut self, statement: &str) -> Result<(), Error> {
        frames::encode_describe_statement(&mut self.write_buffer, statement)
    }

    /// `Bind` of `statement` to the unnamed portal ([`frames::encode_bind`]).
    pub(crate) fn encode_bind<'v>(
        &mut self,
        statement: &str,
        parameter_formats: impl IntoIterator<Item = i16>,
        values: impl IntoIterator<Item = Option<&'v [u8]>>,
        result_formats: impl IntoIterator<Item = i16>,
    ) -> Result<(), Error> {
        frames::encode_bind(
            &mut self.write_buffer,
            statement,
            parameter_formats,
            values,
            result_formats,
        )
    }

    /// `Execute` of the unnamed portal, for at most `max_rows` rows (0: all).
    pub(crate) fn encode_execute(&mut self, max_rows: u32) -> Result<(), Error> {
        frames::encode_execute(&mut self.write_buffer, max_rows)
    }

    /// `Close` of a prepared statement.
    pub(crate) fn encode_close_statement(&mut self, statement: &str) -> Result<(), Error> {
        frames::encode_close_statement(&mut self.write_buffer, statement)
    }

    /// `Sync`: ends an extended-protocol exchange; the server answers
    /// `ReadyForQuery`.
    pub(crate) fn encode_sync(&mut self) {
        frames::encode_sync(&mut self.write_buffer);
    }

    /// `Flush`: the server sends what it has without ending the exchange.
    pub(crate) fn encode_flush(&mut self) {
        frames::encode_flush(&mut self.write_buffer);
    }

    /// `Query`: SQL through the simple protocol; the server ends it with
    /// `ReadyForQuery`.
    pub(crate) fn encode_query(&mut self, sql: &str) -> Result<(), Error> {
        frames::encode_query(&mut self.write_buffer, sql)
    }

    /// `CopyData` whose content `write` appends.
    pub(crate) fn encode_copy_data(
        &mut self,
        write: impl FnOnce(&mut BytesMut),
    ) -> Result<(), Error> {
        frames::encode_copy_data(&mut self.write_buffer, write)
    }

    /// `CopyDone`: the data is complete.
    pub(crate) fn encode_copy_done(&mut self) {
        frames::encode_copy_done(&mut self.write_buffer);
    }

    /// `CopyFail`: the server discards the COPY with `reason`.
    pub(crate) fn encode_copy_fail(&mut self, reason: &str) -> Result<(), Error> {
        frames::encode_copy_fail(&mut self.write_buffer, reason)
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

/// Answers: backend messages framed out of the read buffer ([`frames`]).
impl Connection {
    /// The header of the message at the front of the read buffer, complete or
    /// not: `(tag, total length)`.
    pub(crate) fn front_header(&self) -> Result<Option<(u8, usize)>, Error> {
        frames::frame_header(&self.read_buffer)
    }

    /// The next message in the read buffer, without waiting: a `DataRow` is
    /// decoded into `rows` (the hot path of every result), anything else parsed.
    pub(crate) fn receive_buffered(&mut self, rows: &mut Batch) -> Result<Received, Error> {
        frames::receive(&mut self.read_buffer, rows)
    }

    /// The next whole message in the read buffer, without waiting; a
    /// `ParameterStatus` is noted on the way.
    pub(crate) fn buffered_message(&mut self) -> Result<Option<Message>, Error> {
        let message = frames::next_message(&mut self.read_buffer)?;
        if let Some(Message::ParameterStatus(body)) = &message {
            self.note_parameter(body)?;
        }
        Ok(message)
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
