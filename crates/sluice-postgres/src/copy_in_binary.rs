//! `COPY … FROM STDIN (FORMAT binary)`: rows of [`Batch`]es encoded by one
//! [`ValueEncoder`] per column ([`crate::binary_encode`]), for loads where every
//! column has one. The server then skips its text parsers, the larger part of
//! a load's server time for numbers and timestamps.
//!
//! The stream is PostgreSQL's binary COPY file: the `PGCOPY\n\377\r\n\0`
//! signature, flags and header extension (both 0), per row the field count
//! and the fields (an `i32` length, -1 for NULL, then the value), and the
//! `-1` trailer. A value no encoder can read abandons the COPY before the row
//! is sent, with the error the server would have given it over text COPY
//! (same SQLSTATE and message, its row and column in the context), so
//! callers tie it to an input line exactly as they tie the server's own.

use bytes::{BufMut, BytesMut};
use sluice_core::{Batch, Column, DbError, Error};

use crate::binary_encode::{encode_null, EncodeError, ValueEncoder};
use crate::connection::Connection;
use crate::copy_in::{send_when_full, start_copy};

/// The binary COPY signature, then flags (no OIDs) and an empty header extension.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// The field count that ends the data.
const TRAILER: i16 = -1;

/// The SQLSTATE of the server's answer to `CopyFail`.
const QUERY_CANCELED: &str = "57014";

/// An open binary `COPY … FROM STDIN` on a connection.
pub struct CopyInBinary<'c> {
    connection: &'c mut Connection,
    encoders: Vec<ValueEncoder>,
    column_names: Vec<String>,
    /// One row's fields, built whole before it is queued: a value that fails
    /// leaves nothing half-sent.
    row: BytesMut,
    rows_sent: u64,
}

impl Connection {
    /// Starts `statement` (a `COPY … FROM STDIN (FORMAT binary)`) and sends the
    /// header. `columns` are the copied columns in order, each encoded by the
    /// encoder at its place in `encoders`.
    pub async fn copy_in_binary(
        &mut self,
        statement: &str,
        columns: &[Column],
        encoders: Vec<ValueEncoder>,
    ) -> Result<CopyInBinary<'_>, Error> {
        if encoders.len() != columns.len() {
            return Err(Error::config(format!(
                "{} value encoders for {} columns",
                encoders.len(),
                columns.len()
            )));
        }
        start_copy(self, statement).await?;
        self.encode_copy_data(|buffer| buffer.put_slice(HEADER))?;
        Ok(CopyInBinary {
            connection: self,
            encoders,
            column_names: columns.iter().map(|column| column.name.clone()).collect(),
            row: BytesMut::new(),
            rows_sent: 0,
        })
    }
}

impl CopyInBinary<'_> {
    /// Sends the rows of `batch` whose indexes `rows` yields. A value that has
    /// no binary form ends the COPY (as the server's refusal of a row does)
    /// with a database error like the server's; the server's own error comes
    /// back early when it has already refused a row.
    pub async fn write_rows(
        &mut self,
        batch: &Batch,
        rows: impl IntoIterator<Item = usize>,
    ) -> Result<(), Error> {
        for index in rows {
            if let Err((error, column)) = self.encode_row(batch, index) {
                let refusal = self.refusal(error, column);
                // A row sent before may have been refused already: that
                // error comes first, as over text COPY.
                let earlier = self.abandon(&refusal.message).await;
                return Err(earlier.unwrap_or_else(|| Error::db(refusal)));
            }
            let row = &self.row;
            self.connection
                .encode_copy_data(|buffer| buffer.put_slice(row))?;
            self.rows_sent += 1;
            send_when_full(self.connection).await?;
        }
        Ok(())
    }

    /// Builds row `index` of `batch` in `self.row`; a value that fails is
    /// returned with its column.
    fn encode_row(&mut self, batch: &Batch, index: usize) -> Result<(), (EncodeError, usize)> {
        let row = batch.row(index);
        self.row.clear();
        self.row.put_i16(self.encoders.len() as i16);
        for (column, encoder) in self.encoders.iter().enumerate() {
            let Some(value) = row.get(column) else {
                encode_null(&mut self.row);
                continue;
            };
            encoder
                .encode(value, &mut self.row)
                .map_err(|error| (error, column))?;
        }
        Ok(())
    }

    /// The error the server gives a value it cannot read, with the context
    /// naming the COPY's 1-based row (the server's "line") and the column.
    fn refusal(&self, error: EncodeError, column: usize) -> DbError {
        DbError {
            severity: "ERROR".to_owned(),
            code: error.code().to_owned(),
            message: error.reason().to_owned(),
            where_: Some(format!(
                "COPY, line {}, column {}",
                self.rows_sent + 1,
                self.column_names[column]
            )),
            ..DbError::default()
        }
    }

    /// Ends the COPY: the server discards everything sent, and the
    /// connection is ready for the next statement, as after a refusal.
    /// Returns the server's refusal of a row sent before, if there was one.
    async fn abandon(&mut self, reason: &str) -> Option<Error> {
        let abandoned = async {
            self.connection.encode_copy_fail(reason)?;
            self.connection.send().await?;
            self.connection.drain_until_ready().await
        };
        // Our CopyFail comes back as `query_canceled`; any other error is
        // the server's own, about a row it had received before it.
        abandoned
            .await
            .err()
            .filter(|error| error.code() != Some(QUERY_CANCELED))
    }

    /// Ends the data and returns how many rows the server stored.
    pub async fn finish(self) -> Result<u64, Error> {
        self.connection
            .encode_copy_data(|buffer| buffer.put_i16(TRAILER))?;
        self.connection.encode_copy_done();
        self.connection.send().await?;
        self.connection.command_result().await
    }

    /// Abandons the COPY: the server discards everything sent.
    pub async fn fail(mut self, reason: &str) -> Result<(), Error> {
        let _ = self.abandon(reason).await;
        Ok(())
    }
}
