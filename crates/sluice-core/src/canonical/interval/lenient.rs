//! The lenient interval reader: the whole interval input grammar, for input
//! that may spell an interval any way it allows — every output style (the
//! `postgres` and `postgres_verbose` styles, SQL standard's, ISO 8601's) and
//! the usual hand-written forms (`1.5 days`, `90 minutes`, `@ 2 hours ago`).
//!
//! Two grammars, tried as the reference reader (PostgreSQL's `interval_in`,
//! `datetime.c`) tries them: the field list ([`super::fields`]), then, when it
//! finds bad syntax (as a text starting with `P` always does), ISO 8601
//! ([`super::iso`]). Fractions cascade exactly as the reference reader's
//! `double` arithmetic does: a fraction of a year becomes whole months
//! (rounded), of a month 30 days, of a day 24 hours ([`super::sum`]).
//!
//! Refused (an error, never a guess), although some versions of the
//! reference reader take them: `infinity` (taken since PostgreSQL 17), a
//! unit word not directly after its number or `ago` not at the end (taken
//! until 15), an empty field in a time or after a year's hyphen (`1:`,
//! `1::2`, `1-`), hexadecimal ISO numbers, and any byte outside ASCII.

use super::fields::{decode_fields, IntervalSigns};
use super::iso::decode_iso;
use super::parts::Interval;
use crate::canonical::reading::FormError;

/// Reads `text` as the interval input grammar reads it, a leading minus
/// by `signs`: [`FormError::Syntax`] for a text outside the grammar,
/// [`FormError::FieldRange`] for a field beyond its range (`1:60`,
/// `2147483648 days`), [`FormError::Overflow`] for fields whose sum is
/// beyond an [`Interval`]'s (`178956971 years`).
///
/// Whatever [`crate::canonical::read_interval`] reads, this reads as the
/// same value, except a field given twice (`1 day 1 day`, `01:00 02:00`),
/// which the grammar refuses, and the two sums newer readers keep for
/// `±infinity`.
///
/// ```
/// use sluice_core::canonical::{read_interval_lenient, Interval, IntervalSigns};
/// let expected = Interval { months: 0, days: -1, microseconds: -7_384_000_000 };
/// let read = |text: &[u8], signs| read_interval_lenient(text, signs);
/// assert_eq!(read(b"@ 1 day 2 hours 3 mins 4 secs ago", IntervalSigns::PerField), Ok(expected));
/// assert_eq!(read(b"-1 2:03:04", IntervalSigns::Leading), Ok(expected));
/// assert_eq!(read(b"P-1DT-2H-3M-4S", IntervalSigns::PerField), Ok(expected));
/// ```
pub fn read_interval_lenient(text: &[u8], signs: IntervalSigns) -> Result<Interval, FormError> {
    let sum = match decode_fields(text, signs) {
        Err(FormError::Syntax) => decode_iso(text),
        other => other,
    };
    sum?.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::reading::{MICROS_PER_HOUR, MICROS_PER_MINUTE};

    fn read(text: &str) -> (i32, i32, i64) {
        let interval = read_interval_lenient(text.as_bytes(), IntervalSigns::PerField)
            .unwrap_or_else(|error| panic!("{text}: {error}"));
        (interval.months, interval.days, interval.microseconds)
    }

    const HOUR: i64 = MICROS_PER_HOUR;

    #[test]
    fn every_output_style_reads_back() {
        let expected = (14, 3, 4 * HOUR + 5 * MICROS_PER_MINUTE + 6_789_000);
        assert_eq!(read("1 year 2 mons 3 days 04:05:06.789"), expected);
        assert_eq!(read("1-2 3 4:05:06.789"), expected);
        assert_eq!(read("P1Y2M3DT4H5M6.789S"), expected);
        assert_eq!(
            read("@ 1 year 2 mons -3 days 4 hours 5 mins 6.789 secs ago"),
            (-14, 3, -(4 * HOUR + 5 * MICROS_PER_MINUTE + 6_789_000))
        );
        assert_eq!(read("-1 days +02:03:00"), (0, -1, 2 * HOUR + 180_000_000));
        assert_eq!(
            read("P0001-02-03T04:05:06"),
            (14, 3, 4 * HOUR + 306_000_000)
        );
    }

    #[test]
    fn fractions_cascade_as_the_reference_reader_computes_them() {
        assert_eq!(read("1.5 years"), (18, 0, 0));
        assert_eq!(read("1.5 days"), (0, 1, 12 * HOUR));
        assert_eq!(read("1.5 months"), (1, 15, 0));
        assert_eq!(read("1.5 weeks"), (0, 10, 12 * HOUR));
        // A time replaces the microseconds a fraction of a day left.
        assert_eq!(read("00:30 1.5 days"), (0, 1, HOUR / 2));
    }

    #[test]
    fn sql_standard_signs_spread_a_leading_minus() {
        let read = |text: &str, signs| read_interval_lenient(text.as_bytes(), signs).unwrap();
        let all = read("-1 2:03:04", IntervalSigns::Leading);
        assert_eq!(
            (all.days, all.microseconds),
            (-1, -(2 * HOUR + 184_000_000))
        );
        let own = read("-1 2:03:04", IntervalSigns::PerField);
        assert_eq!((own.days, own.microseconds), (-1, 2 * HOUR + 184_000_000));
    }

    #[test]
    fn refusals_say_which_fault() {
        let error = |text: &str| {
            read_interval_lenient(text.as_bytes(), IntervalSigns::PerField).unwrap_err()
        };
        assert_eq!(error("1 fortnight"), FormError::Syntax);
        assert_eq!(error("1:60"), FormError::FieldRange);
        assert_eq!(error("2147483648 days"), FormError::FieldRange);
        assert_eq!(error("178956971 years"), FormError::Overflow);
        assert_eq!(error("infinity"), FormError::Syntax);
        assert_eq!(error("1 day ago 2 hours"), FormError::Syntax);
        assert_eq!(error(" P1D"), FormError::Syntax);
    }

    #[test]
    fn unit_words_compare_ten_letters() {
        assert_eq!(read("1 microsecondsxx"), (0, 0, 1));
        assert_eq!(read("2 millenniums"), (24000, 0, 0));
        assert!(read_interval_lenient(b"1 dayz", IntervalSigns::PerField).is_err());
    }
}
