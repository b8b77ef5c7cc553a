//! Turning the server's `ErrorResponse` fields into a [`DbError`].

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::ErrorResponseBody;
use sluice_core::{DbCause, DbError, Error};

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
    error.cause = cause(&error.code);
    Error::db(error)
}

/// What PostgreSQL's code means: its own codes, then the standard's classes.
pub(crate) fn cause(code: &str) -> DbCause {
    match code {
        // query_canceled, as statement_timeout raises it (a cancel sluice sent
        // itself is reported as a cancel before this is read).
        "57014" => DbCause::StatementTimeout,
        // lock_not_available: NOWAIT, lock_timeout.
        "55P03" => DbCause::LostRace,
        code => DbCause::of_sqlstate(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgresql_s_own_codes_come_before_the_standard_s_classes() {
        assert_eq!(cause("57014"), DbCause::StatementTimeout);
        assert_eq!(cause("57P01"), DbCause::Unavailable);
        assert_eq!(cause("55P03"), DbCause::LostRace);
        assert_eq!(cause("40P01"), DbCause::LostRace);
        assert_eq!(cause("22012"), DbCause::Data);
    }
}
