//! PostgreSQL framing without I/O: frontend messages encoded into a buffer and
//! backend messages framed and decoded out of one, the way `postgres-protocol`
//! stands apart from `tokio-postgres`. Nothing here touches a socket, awaits or
//! meters: `wire` moves the bytes and calls these, and the tests below check
//! them byte for byte against the protocol's message formats.
//!
//! Framing is checked here once for the whole crate: a message's declared length
//! must cover its own length word and fit the protocol's signed 32-bit length
//! before anything is sliced, and a `DataRow`'s values must fit inside its
//! message exactly, so a broken or hostile server gets a protocol error, never a
//! panic and never a wait for bytes that cannot come. `DataRow`s decode straight
//! from the read buffer into a [`Batch`]: one length check per row and one per
//! value, no allocation.
//!
//! Every encoder that can fail leaves the buffer as it found it: a refused
//! request queues nothing, so the exchange can still be ended cleanly.

use bytes::{Buf, BufMut, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::{DataRowBody, Message};
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;
use sluice_core::{Batch, Error};

/// What the front of the read buffer held.
pub(crate) enum Received {
    /// A `DataRow`, decoded into the caller's batch and consumed.
    Row,
    /// Any other complete message, consumed.
    Message(Message),
    /// Less than a whole message: more must be read.
    Incomplete,
}

/// Runs `encode` on `buffer`, cutting off whatever it appended if it fails: the
/// `postgres-protocol` encoders can stop half way through a message.
fn all_or_nothing<E>(
    buffer: &mut BytesMut,
    encode: impl FnOnce(&mut BytesMut) -> Result<(), E>,
) -> Result<(), E> {
    let start = buffer.len();
    let encoded = encode(buffer);
    if encoded.is_err() {
        buffer.truncate(start);
    }
    encoded
}

/// `Parse`: `sql` as prepared statement `statement` (empty: the unnamed one),
/// its parameter types left to the server.
pub(crate) fn encode_parse(buffer: &mut BytesMut, statement: &str, sql: &str) -> Result<(), Error> {
    all_or_nothing(buffer, |buffer| {
        frontend::parse(statement, sql, std::iter::empty(), buffer)
    })
    .map_err(Error::io)
}

/// `Describe` of a prepared statement: its parameter and result types.
pub(crate) fn encode_describe_statement(
    buffer: &mut BytesMut,
    statement: &str,
) -> Result<(), Error> {
    all_or_nothing(buffer, |buffer| frontend::describe(b'S', statement, buffer)).map_err(Error::io)
}

/// `Bind` of `statement` to the unnamed portal: the one Bind encoding of the
/// crate. `values` are the parameters' bytes (`None`: NULL) in the formats
/// `parameter_formats` gives (0 text, 1 binary; one format applies to all);
/// `result_formats` likewise for the result columns.
pub(crate) fn encode_bind<'v>(
    buffer: &mut BytesMut,
    statement: &str,
    parameter_formats: impl IntoIterator<Item = i16>,
    values: impl IntoIterator<Item = Option<&'v [u8]>>,
    result_formats: impl IntoIterator<Item = i16>,
) -> Result<(), Error> {
    let put_value = |value: Option<&[u8]>, buffer: &mut BytesMut| match value {
        Some(bytes) => {
            buffer.put_slice(bytes);
            Ok(IsNull::No)
        }
        None => Ok(IsNull::Yes),
    };
    all_or_nothing(buffer, |buffer| {
        frontend::bind(
            "",
            statement,
            parameter_formats,
            values,
            put_value,
            result_formats,
            buffer,
        )
    })
    // The only way a Bind of byte values fails: a count past the 16 bits the
    // protocol gives it.
    .map_err(|_| Error::config("too many parameters"))
}

/// `Execute` of the unnamed portal, for at most `max_rows` rows (0: all; more
/// than the protocol's i32 holds: as many as it holds).
pub(crate) fn encode_execute(buffer: &mut BytesMut, max_rows: u32) -> Result<(), Error> {
    let max_rows = i32::try_from(max_rows).unwrap_or(i32::MAX);
    all_or_nothing(buffer, |buffer| frontend::execute("", max_rows, buffer)).map_err(Error::io)
}

/// `Close` of a prepared statement.
pub(crate) fn encode_close_statement(buffer: &mut BytesMut, statement: &str) -> Result<(), Error> {
    all_or_nothing(buffer, |buffer| frontend::close(b'S', statement, buffer)).map_err(Error::io)
}

/// `Sync`: ends an extended-protocol exchange; the server answers
/// `ReadyForQuery`.
pub(crate) fn encode_sync(buffer: &mut BytesMut) {
    frontend::sync(buffer);
}

/// `Flush`: the server sends what it has without ending the exchange.
pub(crate) fn encode_flush(buffer: &mut BytesMut) {
    frontend::flush(buffer);
}

/// `Query`: SQL through the simple protocol; the server ends it with
/// `ReadyForQuery`.
pub(crate) fn encode_query(buffer: &mut BytesMut, sql: &str) -> Result<(), Error> {
    all_or_nothing(buffer, |buffer| frontend::query(sql, buffer)).map_err(Error::io)
}

/// `CopyData` whose content `write` appends; its length is filled in after, so
/// a row is encoded once, straight into the buffer.
pub(crate) fn encode_copy_data(
    buffer: &mut BytesMut,
    write: impl FnOnce(&mut BytesMut),
) -> Result<(), Error> {
    all_or_nothing(buffer, |buffer| {
        let start = buffer.len();
        buffer.put_u8(b'd');
        buffer.put_u32(0);
        write(buffer);
        let Ok(length) = i32::try_from(buffer.len() - start - 1) else {
            return Err(Error::config("a row too large for one COPY message"));
        };
        buffer[start + 1..start + 5].copy_from_slice(&length.to_be_bytes());
        Ok(())
    })
}

/// `CopyDone`: the data is complete.
pub(crate) fn encode_copy_done(buffer: &mut BytesMut) {
    frontend::copy_done(buffer);
}

/// `CopyFail`: the server discards the COPY with `reason`.
pub(crate) fn encode_copy_fail(buffer: &mut BytesMut, reason: &str) -> Result<(), Error> {
    all_or_nothing(buffer, |buffer| frontend::copy_fail(reason, buffer)).map_err(Error::io)
}

/// A message the server sent that the protocol does not allow.
fn malformed(detail: impl std::fmt::Display) -> Error {
    Error::protocol(format!("malformed message from the server: {detail}"))
}

/// The header of the message at the front of `buffer`, once its five bytes are
/// there: the tag and the total length (tag and length word included). A length
/// that does not even cover the length word is an error (slicing the body with
/// it would panic), and so is one past the protocol's signed 32 bits (waiting
/// for it would never end).
pub(crate) fn frame_header(buffer: &[u8]) -> Result<Option<(u8, usize)>, Error> {
    let Some(header) = buffer.get(..5) else {
        return Ok(None);
    };
    let tag = header[0];
    let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    if length < 4 {
        return Err(malformed(format_args!(
            "tag {:?} declares {length} bytes, fewer than its length field",
            char::from(tag)
        )));
    }
    Ok(Some((tag, length as usize + 1)))
}

/// Copies the values of a `DataRow` body (after its tag and length) into `batch`,
/// which must have as many columns as the row has values. Every value must lie
/// inside the body and the last must end it; a value length below -1 (NULL) is
/// not one the protocol has.
fn decode_data_row(body: &[u8], batch: &mut Batch) -> Result<(), Error> {
    let overrun = || Error::protocol("malformed DataRow message: its values overrun it");
    let count = body.get(..2).ok_or_else(overrun)?;
    let count = u16::from_be_bytes([count[0], count[1]]) as usize;
    if count != batch.num_columns() {
        return Err(Error::protocol(format!(
            "DataRow has {count} values for {} columns",
            batch.num_columns()
        )));
    }
    let mut position = 2;
    for _ in 0..count {
        let header = body.get(position..position + 4).ok_or_else(overrun)?;
        let length = i32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        position += 4;
        match length {
            -1 => batch.push_null(),
            ..-1 => {
                return Err(Error::protocol(format!(
                    "malformed DataRow message: a value of length {length}"
                )))
            }
            _ => {
                let end = position + length as usize;
                batch.push_value(body.get(position..end).ok_or_else(overrun)?);
                position = end;
            }
        }
    }
    if position != body.len() {
        return Err(Error::protocol(
            "malformed DataRow message: bytes after its last value",
        ));
    }
    Ok(())
}

/// The length of the whole message at the front of `buffer`, if all of it is
/// there.
fn whole_frame(buffer: &[u8]) -> Result<Option<(u8, usize)>, Error> {
    Ok(frame_header(buffer)?.filter(|&(_, total)| buffer.len() >= total))
}

/// Parses the whole message at the front of `buffer` and consumes it. An
/// unknown tag or a body that does not match its tag is the server's fault: a
/// protocol error, not an I/O one.
fn parse_whole(buffer: &mut BytesMut) -> Result<Message, Error> {
    Message::parse(buffer)
        .map_err(malformed)?
        .ok_or_else(|| malformed("a whole message parsed as incomplete"))
}

/// The next message in `buffer`, consumed: a `DataRow` is decoded into `rows`
/// (the hot path of every result), anything else parsed.
pub(crate) fn receive(buffer: &mut BytesMut, rows: &mut Batch) -> Result<Received, Error> {
    let Some((tag, total)) = whole_frame(buffer)? else {
        return Ok(Received::Incomplete);
    };
    if tag == b'D' {
        decode_data_row(&buffer[5..total], rows)?;
        buffer.advance(total);
        return Ok(Received::Row);
    }
    parse_whole(buffer).map(Received::Message)
}

/// The next whole message in `buffer`, consumed, `DataRow`s included.
pub(crate) fn next_message(buffer: &mut BytesMut) -> Result<Option<Message>, Error> {
    match whole_frame(buffer)? {
        Some(_) => parse_whole(buffer).map(Some),
        None => Ok(None),
    }
}

/// The count at the end of a command tag (`INSERT 0 5`, `UPDATE 3`, `COPY 7`).
pub(crate) fn tag_count(tag: &str) -> Option<u64> {
    tag.rsplit(' ').next().and_then(|count| count.parse().ok())
}

/// A `DataRow` of text values as strings (`None` for NULL).
pub(super) fn text_row(body: &DataRowBody) -> Result<Vec<Option<String>>, Error> {
    let buffer = body.buffer();
    let mut ranges = body.ranges();
    let mut row = Vec::new();
    while let Some(range) = ranges.next().map_err(Error::io)? {
        row.push(match range {
            Some(range) => Some(
                std::str::from_utf8(&buffer[range])
                    .map_err(|_| Error::protocol("invalid UTF-8 from the server"))?
                    .to_owned(),
            ),
            None => None,
        });
    }
    Ok(row)
}

/// Text parameters (`None`: NULL) as the bytes `Connection::encode_bind` takes.
pub(crate) fn text_values<'v, T: AsRef<str> + 'v>(
    values: &'v [Option<T>],
) -> impl Iterator<Item = Option<&'v [u8]>> {
    values
        .iter()
        .map(|value| value.as_ref().map(|text| text.as_ref().as_bytes()))
}

#[cfg(test)]
mod tests;
