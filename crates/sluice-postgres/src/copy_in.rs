//! `COPY … FROM STDIN`: rows of [`Batch`]es streamed into a table in COPY's text
//! format, with the server's errors noticed as soon as they arrive.
//!
//! Text rather than binary COPY: every canonical value is already the server's
//! text input form, so encoding is escaping (`\\`, `\t`, `\n`, `\r`) plus hex for
//! `bytea`, and the server's parsers do the typing, reporting bad values with the
//! row and column (which sluice maps back to the input line).

use std::time::Duration;

use bytes::BufMut;
use postgres_protocol::message::backend::Message;
use sluice_core::{Batch, Error, Kind};

use crate::connection::Connection;
use crate::error::db_error;

/// Data is sent once this much is queued: large writes, bounded memory.
const SEND_BYTES: usize = 256 * 1024;

/// An open `COPY … FROM STDIN` on a connection.
pub struct CopyIn<'c> {
    connection: &'c mut Connection,
    bytes_columns: Vec<bool>,
    rows_sent: u64,
}

impl Connection {
    /// Starts `statement` (a `COPY … FROM STDIN` in text format) and waits for the
    /// server to accept data. `kinds` are the kinds of the copied columns, in order.
    pub async fn copy_in(&mut self, statement: &str, kinds: &[Kind]) -> Result<CopyIn<'_>, Error> {
        start_copy(self, statement).await?;
        Ok(CopyIn {
            connection: self,
            bytes_columns: kinds.iter().map(|kind| *kind == Kind::Bytes).collect(),
            rows_sent: 0,
        })
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
            let bytes_columns = &self.bytes_columns;
            self.connection
                .encode_copy_data(|buffer| encode_row(&row, bytes_columns, buffer))?;
            self.rows_sent += 1;
            send_when_full(self.connection).await?;
        }
        Ok(())
    }

    /// Ends the data and returns how many rows the server stored.
    pub async fn finish(self) -> Result<u64, Error> {
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

/// Sends `statement` (a `COPY … FROM STDIN`) and waits for the server to
/// accept data.
pub(crate) async fn start_copy(connection: &mut Connection, statement: &str) -> Result<(), Error> {
    connection.encode_query(statement)?;
    connection.send().await?;
    loop {
        match connection.read_message().await? {
            Message::CopyInResponse(_) => return Ok(()),
            Message::ErrorResponse(body) => {
                let error = db_error(&body);
                connection.drain_until_ready().await.ok();
                return Err(error);
            }
            Message::NoticeResponse(_) | Message::ParameterStatus(_) => {}
            _ => return Err(Error::protocol("expected CopyInResponse")),
        }
    }
}

/// Sends the queued rows once [`SEND_BYTES`] are queued (large writes,
/// bounded memory), then reads whatever the server has said meanwhile.
pub(crate) async fn send_when_full(connection: &mut Connection) -> Result<(), Error> {
    if connection.queued_bytes() < SEND_BYTES {
        return Ok(());
    }
    connection.send().await?;
    check_for_error(connection).await
}

/// Reads whatever the server has already sent, without waiting: during COPY it
/// only speaks to refuse a row, and stopping then saves sending the rest.
async fn check_for_error(connection: &mut Connection) -> Result<(), Error> {
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
}
