//! `COPY … FROM STDIN`: rows of [`Batch`]es streamed into a table, with the
//! server's errors noticed as soon as they arrive.
//!
//! Canonical values go in COPY's text format: each is already the server's
//! text input form, so encoding is escaping (`\\`, `\t`, `\n`, `\r`) plus hex for
//! `bytea`, and the server's parsers do the typing, reporting bad values with the
//! row and column (which sluice maps back to the input line).
//!
//! Values already in PostgreSQL's own binary form ([`sluice_core::Encoding::Native`],
//! read from another PostgreSQL by `sluice copy`) go in COPY's binary format,
//! framed but never read: neither side spends time printing and parsing them.

use std::time::Duration;

use bytes::BufMut;
use postgres_protocol::message::backend::Message;
use sluice_core::{Batch, Error, Kind};

use crate::connection::Connection;
use crate::error::db_error;

/// Data is sent once this much is queued: large writes, bounded memory.
const SEND_BYTES: usize = 256 * 1024;

/// The start of a binary COPY's data: signature, flags (none), header
/// extension length (none).
const BINARY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// A binary COPY's end: a field count of -1.
const BINARY_TRAILER: &[u8] = &[0xff, 0xff];

/// How rows are spelled on the wire.
enum RowFormat {
    /// COPY's text format; `true` marks the `bytea` columns, sent in hex.
    Text { bytes_columns: Vec<bool> },
    /// COPY's binary format, every value already in PostgreSQL's binary form
    /// of its column's type.
    Native { columns: usize },
}

/// An open `COPY … FROM STDIN` on a connection.
pub struct CopyIn<'c> {
    connection: &'c mut Connection,
    format: RowFormat,
    rows_sent: u64,
}

impl Connection {
    /// Starts `statement` (a `COPY … FROM STDIN` in text format) and waits for the
    /// server to accept data. `kinds` are the kinds of the copied columns, in order.
    pub async fn copy_in(&mut self, statement: &str, kinds: &[Kind]) -> Result<CopyIn<'_>, Error> {
        self.start_copy(statement).await?;
        Ok(CopyIn {
            connection: self,
            format: RowFormat::Text {
                bytes_columns: kinds.iter().map(|kind| *kind == Kind::Bytes).collect(),
            },
            rows_sent: 0,
        })
    }

    /// Starts `statement` (a `COPY … FROM STDIN` without options) in binary
    /// format for rows of `columns` values in PostgreSQL's own binary form
    /// ([`sluice_core::Encoding::Native`]), and waits for the server to accept data.
    pub async fn copy_in_native(
        &mut self,
        statement: &str,
        columns: usize,
    ) -> Result<CopyIn<'_>, Error> {
        self.start_copy(&format!("{statement} (format binary)"))
            .await?;
        self.encode_copy_data(|buffer| buffer.put_slice(BINARY_HEADER))?;
        Ok(CopyIn {
            connection: self,
            format: RowFormat::Native { columns },
            rows_sent: 0,
        })
    }

    /// Sends `statement` and waits for the server's `CopyInResponse`.
    async fn start_copy(&mut self, statement: &str) -> Result<(), Error> {
        self.encode_query(statement)?;
        self.send().await?;
        loop {
            match self.read_message().await? {
                Message::CopyInResponse(_) => break,
                Message::ErrorResponse(body) => {
                    let error = db_error(&body);
                    self.drain_until_ready().await.ok();
                    return Err(error);
                }
                Message::NoticeResponse(_) | Message::ParameterStatus(_) => {}
                _ => return Err(Error::protocol("expected CopyInResponse")),
            }
        }
        Ok(())
    }
}

/// Appends `text` escaped for COPY's text format.
fn escape(text: &[u8], output: &mut bytes::BytesMut) {
    let mut run_start = 0;
    for (index, &byte) in text.iter().enumerate() {
        let escaped: &[u8] = match byte {
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            _ => continue,
        };
        output.put_slice(&text[run_start..index]);
        output.put_slice(escaped);
        run_start = index + 1;
    }
    output.put_slice(&text[run_start..]);
}

/// Appends one row in COPY's text format: values separated by tabs, NULL as
/// `\N`, `bytea` as escaped hex, a line break at the end.
fn encode_row(row: &sluice_core::Row<'_>, bytes_columns: &[bool], buffer: &mut bytes::BytesMut) {
    for (column, &is_bytes) in bytes_columns.iter().enumerate() {
        if column > 0 {
            buffer.put_u8(b'\t');
        }
        match row.get(column) {
            None => buffer.put_slice(b"\\N"),
            Some(bytes) if is_bytes => {
                // `\x` hex, its backslash escaped for COPY.
                buffer.put_slice(b"\\\\x");
                const HEX: &[u8; 16] = b"0123456789abcdef";
                buffer.reserve(bytes.len() * 2);
                for &byte in bytes {
                    buffer.put_u8(HEX[(byte >> 4) as usize]);
                    buffer.put_u8(HEX[(byte & 0xf) as usize]);
                }
            }
            Some(text) => escape(text, buffer),
        }
    }
    buffer.put_u8(b'\n');
}

/// Appends one row in COPY's binary format: the field count, then each value
/// as its length (-1 for NULL) and its bytes, which are already the column
/// type's binary form.
fn encode_native_row(row: &sluice_core::Row<'_>, columns: usize, buffer: &mut bytes::BytesMut) {
    // PostgreSQL caps a table at 1600 columns and a value at 1 GiB, so both
    // counts fit the format's 16 and 32 bits.
    buffer.put_i16(columns as i16);
    for column in 0..columns {
        match row.get(column) {
            None => buffer.put_i32(-1),
            Some(value) => {
                buffer.put_i32(value.len() as i32);
                buffer.put_slice(value);
            }
        }
    }
}

impl CopyIn<'_> {
    /// Rows sent so far.
    pub fn rows_sent(&self) -> u64 {
        self.rows_sent
    }

    /// Sends the rows of `batch` whose indexes `rows` yields. Returns the server's
    /// error early when it has already refused a row.
    pub async fn write_rows(
        &mut self,
        batch: &Batch,
        rows: impl IntoIterator<Item = usize>,
    ) -> Result<(), Error> {
        for index in rows {
            let row = batch.row(index);
            match &self.format {
                RowFormat::Text { bytes_columns } => self
                    .connection
                    .encode_copy_data(|buffer| encode_row(&row, bytes_columns, buffer))?,
                RowFormat::Native { columns } => self
                    .connection
                    .encode_copy_data(|buffer| encode_native_row(&row, *columns, buffer))?,
            }
            self.rows_sent += 1;
            if self.connection.queued_bytes() >= SEND_BYTES {
                self.connection.send().await?;
                self.check_for_error().await?;
            }
        }
        Ok(())
    }

    /// Reads whatever the server has already sent, without waiting: during COPY it
    /// only speaks to refuse a row, and stopping then saves sending the rest.
    async fn check_for_error(&mut self) -> Result<(), Error> {
        let connection = &mut *self.connection;
        let mut message = connection.buffered_message()?;
        if message.is_none() {
            if tokio::time::timeout(Duration::ZERO, connection.fill())
                .await
                .is_err()
            {
                return Ok(());
            }
            message = connection.buffered_message()?;
        }
        while let Some(received) = message.take() {
            match received {
                Message::ErrorResponse(body) => {
                    let error = db_error(&body);
                    // A COPY begun by a simple query ends at the error; the
                    // server drops any data still in flight.
                    connection.drain_until_ready().await.ok();
                    return Err(error);
                }
                Message::NoticeResponse(_) | Message::ParameterStatus(_) => {}
                _ => return Err(Error::protocol("unexpected message during COPY")),
            }
            message = connection.buffered_message()?;
        }
        Ok(())
    }

    /// Ends the data and returns how many rows the server stored.
    pub async fn finish(self) -> Result<u64, Error> {
        if let RowFormat::Native { .. } = self.format {
            self.connection
                .encode_copy_data(|buffer| buffer.put_slice(BINARY_TRAILER))?;
        }
        self.connection.encode_copy_done();
        self.connection.send().await?;
        self.connection.command_result().await
    }

    /// Abandons the COPY: the server discards everything sent.
    pub async fn fail(self, reason: &str) -> Result<(), Error> {
        self.connection.encode_copy_fail(reason)?;
        self.connection.send().await?;
        // The server answers with the error it made of our CopyFail.
        let _ = self.connection.drain_until_ready().await;
        Ok(())
    }
}

/// The 1-based row of a COPY and the column an error points at, from its
/// context (`COPY t, line 3, column amount: "12,5"`).
pub fn error_position(error: &Error) -> Option<(u64, Option<String>)> {
    let context = error.as_db_error()?.where_.as_deref()?;
    let after = context.split(", line ").nth(1)?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    let row = digits.parse().ok()?;
    let column = after[digits.len()..]
        .strip_prefix(", column ")
        .map(|rest| rest.split(": ").next().unwrap_or(rest).to_owned());
    Some((row, column))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_copy_text_rules() {
        let mut output = bytes::BytesMut::new();
        escape(b"a\\b\tc\nd\re", &mut output);
        assert_eq!(&output[..], b"a\\\\b\\tc\\nd\\re");
    }

    #[test]
    fn native_rows_are_framed_as_binary_copy_tuples() {
        // Signature (11 bytes), flags and extension length (4 each).
        assert_eq!(BINARY_HEADER.len(), 19);
        assert!(BINARY_HEADER.starts_with(b"PGCOPY\n\xff\r\n\0"));
        let mut batch = Batch::new(2);
        batch.push_value(&7i32.to_be_bytes());
        batch.push_null();
        let mut output = bytes::BytesMut::new();
        encode_native_row(&batch.row(0), 2, &mut output);
        assert_eq!(&output[..], b"\0\x02\0\0\0\x04\0\0\0\x07\xff\xff\xff\xff");
    }
}
