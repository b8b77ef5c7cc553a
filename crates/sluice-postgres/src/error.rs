//! Turning the server's `ErrorResponse` fields into a [`DbError`].

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::ErrorResponseBody;
use sluice_core::{DbError, Error};

/// Reads an `ErrorResponse` (or `NoticeResponse`) body.
pub fn db_error(body: &ErrorResponseBody) -> Error {
    let mut error = DbError::default();
    let mut fields = body.fields();
    loop {
        match fields.next() {
            Ok(Some(field)) => {
                let value = String::from_utf8_lossy(field.value_bytes()).into_owned();
                match field.type_() {
                    b'V' => error.severity = value,
                    b'S' if error.severity.is_empty() => error.severity = value,
                    b'C' => error.code = value,
                    b'M' => error.message = value,
                    b'D' => error.detail = Some(value),
                    b'H' => error.hint = Some(value),
                    b'P' => error.position = value.parse().ok(),
                    b'W' => error.where_ = Some(value),
                    b'n' => error.constraint = Some(value),
                    b'c' => error.column = Some(value),
                    _ => {}
                }
            }
            Ok(None) => break,
            Err(io) => {
                return Error::protocol(format!("malformed error message from the server: {io}"))
            }
        }
    }
    Error::db(error)
}
