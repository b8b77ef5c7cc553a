//! `interval` text read as the server's `interval_in` reads it (core's
//! [`read_interval_lenient`], the whole interval input grammar), into the
//! 16 bytes `interval_recv` takes: microseconds (`i64`), days (`i32`),
//! months (`i32`). What is here is PostgreSQL's own: which sign rule each
//! `IntervalStyle` reads with, and the SQLSTATE and message of each refusal.

use bytes::{BufMut, BytesMut};
use sluice_core::canonical::{read_interval_lenient, FormError, Interval, IntervalSigns};

use super::error::{quoted, EncodeError, DATETIME_FIELD_OVERFLOW, INVALID_DATETIME_FORMAT};

/// `interval field value out of range` (`ERRCODE_INTERVAL_FIELD_OVERFLOW`).
const INTERVAL_FIELD_OVERFLOW: &str = "22015";

/// The sign rule of a session whose `IntervalStyle` is `style` (in
/// `sql_standard` a leading minus can make every field negative); `None`
/// for a style this module does not know.
pub(super) fn signs_of_style(style: &str) -> Option<IntervalSigns> {
    let is = |name: &str| style.eq_ignore_ascii_case(name);
    if is("postgres") || is("postgres_verbose") || is("iso_8601") {
        Some(IntervalSigns::PerField)
    } else if is("sql_standard") {
        Some(IntervalSigns::Leading)
    } else {
        None
    }
}

/// Reads `text` as the server would in a session reading signs by `signs`,
/// failing as `interval_in` fails.
pub(super) fn parse_interval(text: &[u8], signs: IntervalSigns) -> Result<Interval, EncodeError> {
    read_interval_lenient(text, signs).map_err(|error| match error {
        FormError::FieldRange => EncodeError::new(
            INTERVAL_FIELD_OVERFLOW,
            format!("interval field value out of range: {}", quoted(text)),
        ),
        FormError::Overflow => EncodeError::new(
            DATETIME_FIELD_OVERFLOW,
            format!("interval out of range: {}", quoted(text)),
        ),
        FormError::Syntax | FormError::OffsetRange => EncodeError::new(
            INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type interval: {}", quoted(text)),
        ),
    })
}

/// The binary form `interval_recv` takes.
pub(super) fn write_interval(interval: Interval, out: &mut BytesMut) {
    out.put_i64(interval.microseconds);
    out.put_i32(interval.days);
    out.put_i32(interval.months);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_what_the_server_would() {
        let error =
            |text: &str| parse_interval(text.as_bytes(), IntervalSigns::PerField).unwrap_err();
        assert_eq!(error("1 fortnight").code(), "22007");
        assert_eq!(error("1:60").code(), "22015");
        assert_eq!(error("2147483648 days").code(), "22015");
        assert_eq!(error("178956971 years").code(), "22008");
        assert_eq!(error("infinity").code(), "22007");
        assert_eq!(error("1 day ago 2 hours").code(), "22007");
        assert_eq!(
            error(" P1D").reason(),
            "invalid input syntax for type interval: \" P1D\""
        );
    }

    #[test]
    fn each_interval_style_reads_signs_its_way() {
        assert_eq!(signs_of_style("postgres"), Some(IntervalSigns::PerField));
        assert_eq!(signs_of_style("ISO_8601"), Some(IntervalSigns::PerField));
        assert_eq!(signs_of_style("sql_standard"), Some(IntervalSigns::Leading));
        assert_eq!(signs_of_style(""), None);
    }
}
