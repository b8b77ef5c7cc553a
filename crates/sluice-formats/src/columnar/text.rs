//! Parsers from the canonical text forms of [`sluice_core::value`] to the
//! numbers Arrow stores: integers, floats, scaled decimals, days, microseconds,
//! intervals, UUID bytes. Dates, times, intervals, UUIDs and booleans are
//! read by [`sluice_core::canonical`] (strictly: a batch holds canonical
//! text); this module adds Arrow's ranges and the words of its errors.
//!
//! Each parser takes bytes (no UTF-8 check first: every accepted form is ASCII)
//! and returns the number, or why the text is not one, in words the encoder puts
//! after the cell's row and column. None of them panics on any input: the
//! unit tests feed malformed text to each.

use std::fmt;

use sluice_core::canonical::{self, FormError, Moment, Strictness, Zone};
use sluice_core::DecimalText;

/// Why a value does not convert, for the encoder to tie to its cell.
pub(crate) type Reason = String;

/// Days from 1970-01-01 that stand for `infinity` / `-infinity` dates: the ends
/// of Arrow's `Date32` range, which no real date reaches (PostgreSQL's last date
/// is 5874897-12-31, 2,145,042,905 days).
pub(crate) const DATE_INFINITY: i32 = i32::MAX;
/// See [`DATE_INFINITY`].
pub(crate) const DATE_MINUS_INFINITY: i32 = i32::MIN;
/// Microseconds from 1970 that stand for `infinity` / `-infinity` timestamps:
/// the ends of `i64`, which real timestamps are refused from reaching.
pub(crate) const TIMESTAMP_INFINITY: i64 = i64::MAX;
/// See [`TIMESTAMP_INFINITY`].
pub(crate) const TIMESTAMP_MINUS_INFINITY: i64 = i64::MIN;

/// Shows a value in a message: as text when it is UTF-8, cut after 60 bytes.
pub(crate) struct Shown<'a>(pub &'a [u8]);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cut = &self.0[..self.0.len().min(60)];
        let text = String::from_utf8_lossy(cut);
        let more = if cut.len() < self.0.len() { "…" } else { "" };
        write!(f, "{text:?}{more}")
    }
}

fn not_a(what: &str, text: &[u8]) -> Reason {
    format!("{} is not {what}", Shown(text))
}

/// A whole number that fits `i64`.
pub(crate) fn parse_i64(text: &[u8]) -> Result<i64, Reason> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    let magnitude = parse_u64_digits(digits).ok_or_else(|| not_a("an integer", text))?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
    .ok_or_else(|| format!("{} does not fit a 64-bit integer", Shown(text)))
}

/// A whole number that fits `u64`.
pub(crate) fn parse_u64(text: &[u8]) -> Result<u64, Reason> {
    let digits = text.strip_prefix(b"+").unwrap_or(text);
    parse_u64_digits(digits).ok_or_else(|| {
        if digits.iter().all(u8::is_ascii_digit) && !digits.is_empty() {
            format!("{} does not fit an unsigned 64-bit integer", Shown(text))
        } else {
            not_a("an unsigned integer", text)
        }
    })
}

fn parse_u64_digits(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &byte| {
        let digit = byte.checked_sub(b'0').filter(|digit| *digit < 10)?;
        value.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// A whole number that fits `T` (`i16`, `i32`).
pub(crate) fn parse_narrow<T: TryFrom<i64>>(text: &[u8], bits: u32) -> Result<T, Reason> {
    let wide = parse_i64(text)?;
    T::try_from(wide).map_err(|_| format!("{} does not fit a {bits}-bit integer", Shown(text)))
}

/// `t`/`f`.
pub(crate) fn parse_bool(text: &[u8]) -> Result<bool, Reason> {
    canonical::read_bool(text, Strictness::Canonical)
        .map_err(|error| worded(error, "a boolean", text))
}

/// A double: decimal text, `NaN`, `Infinity`, `-Infinity`.
pub(crate) fn parse_f64(text: &[u8]) -> Result<f64, Reason> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|text| text.parse::<f64>().ok())
        .ok_or_else(|| not_a("a number", text))
}

/// A single-precision float, refused when the text has more precision than
/// `f32` holds (a double stored in a column whose type name says `float`):
/// converting it would round silently.
pub(crate) fn parse_f32(text: &[u8]) -> Result<f32, Reason> {
    let wide = parse_f64(text)?;
    let narrow = wide as f32;
    if !narrow.is_finite() || wide.is_nan() {
        return match wide.is_finite() {
            true => Err(format!("{} does not fit a 32-bit float", Shown(text))),
            false => Ok(narrow),
        };
    }
    // The f32's shortest text, read back as a double, is the double written
    // only if the value had no more digits than an f32 keeps.
    let mut buffer = ryu::Buffer::new();
    let shortest: f64 = buffer.format_finite(narrow).parse().unwrap_or(f64::NAN);
    if shortest == wide {
        Ok(narrow)
    } else {
        Err(format!(
            "{} has more digits than a 32-bit float keeps",
            Shown(text)
        ))
    }
}

/// The integers a decimal's digits accumulate in: `i128` for Decimal128,
/// `i256` for Decimal256.
pub(crate) trait Mantissa: Copy {
    const ZERO: Self;
    /// `self * 10 + digit`, `None` on overflow.
    fn push_digit(self, digit: u8) -> Option<Self>;
    fn negate(self) -> Self;
}

impl Mantissa for i128 {
    const ZERO: i128 = 0;

    fn push_digit(self, digit: u8) -> Option<i128> {
        self.checked_mul(10)?.checked_add(i128::from(digit))
    }

    fn negate(self) -> i128 {
        -self
    }
}

impl Mantissa for arrow_buffer::i256 {
    const ZERO: arrow_buffer::i256 = arrow_buffer::i256::ZERO;

    fn push_digit(self, digit: u8) -> Option<arrow_buffer::i256> {
        self.checked_mul(arrow_buffer::i256::from_i128(10))?
            .checked_add(arrow_buffer::i256::from_i128(i128::from(digit)))
    }

    fn negate(self) -> arrow_buffer::i256 {
        self.wrapping_neg()
    }
}

/// An exact decimal (`-12.340`, `1e5`) as the integer `value × 10^scale`,
/// refused when that needs rounding or more than `precision` digits. `NaN` and
/// the infinities have no such integer.
pub(crate) fn parse_decimal<M: Mantissa>(
    text: &[u8],
    precision: u8,
    scale: i8,
) -> Result<M, Reason> {
    let number = DecimalText::split(text).ok_or_else(|| match text {
        b"NaN" | b"Infinity" | b"-Infinity" => {
            format!("{} has no place in a Decimal column", Shown(text))
        }
        _ => not_a("a decimal number", text),
    })?;
    let digits = number.digits();
    // value × 10^scale = digits × 10^shift.
    let shift = number.point + i64::from(scale) - digits.len() as i64;
    let (kept, dropped) = if shift >= 0 {
        (&digits[..], &[][..])
    } else {
        let keep = (digits.len() as i64 + shift).max(0) as usize;
        (&digits[..keep], &digits[keep..])
    };
    if dropped.iter().any(|&digit| digit != 0) {
        return Err(format!(
            "{} has more than {scale} digits after the point and would need rounding",
            Shown(text)
        ));
    }
    let significant = kept.iter().skip_while(|&&digit| digit == 0).count() as i64;
    if significant + shift.max(0) > i64::from(precision) {
        return Err(format!(
            "{} needs more than {precision} digits at scale {scale}",
            Shown(text)
        ));
    }
    let zeros = std::iter::repeat_n(0u8, shift.max(0) as usize);
    let mut value = M::ZERO;
    for digit in kept.iter().copied().chain(zeros) {
        value = value
            .push_digit(digit)
            .ok_or_else(|| format!("{} does not fit", Shown(text)))?;
    }
    Ok(if number.negative {
        value.negate()
    } else {
        value
    })
}

/// A date as days from 1970-01-01; `infinity` and `-infinity` are
/// [`DATE_INFINITY`] and [`DATE_MINUS_INFINITY`].
pub(crate) fn parse_date(text: &[u8]) -> Result<i32, Reason> {
    match canonical::read_date(text, Strictness::Canonical) {
        Ok(Moment::Infinity) => Ok(DATE_INFINITY),
        Ok(Moment::MinusInfinity) => Ok(DATE_MINUS_INFINITY),
        Ok(Moment::Finite(days)) => i32::try_from(days)
            .ok()
            .filter(|days| *days != DATE_INFINITY && *days != DATE_MINUS_INFINITY)
            .ok_or_else(|| format!("{} is outside Arrow's date range", Shown(text))),
        Err(error) => Err(worded(error, "a date", text)),
    }
}

/// A time of day as microseconds since midnight (`24:00:00` is a full day, as
/// PostgreSQL allows).
pub(crate) fn parse_time(text: &[u8]) -> Result<i64, Reason> {
    canonical::read_time(text, Strictness::Canonical)
        .map_err(|error| worded(error, "a time of day", text))
}

/// A timestamp as microseconds since 1970-01-01 00:00 UTC: its zone offset
/// (required when `zoned`, refused otherwise) is subtracted. `infinity` and
/// `-infinity` are [`TIMESTAMP_INFINITY`] and [`TIMESTAMP_MINUS_INFINITY`];
/// a real timestamp that would land on either is refused.
pub(crate) fn parse_timestamp(text: &[u8], zoned: bool) -> Result<i64, Reason> {
    let zone = if zoned { Zone::With } else { Zone::Without };
    match canonical::read_timestamp(text, zone, Strictness::Canonical) {
        Ok(Moment::Infinity) => Ok(TIMESTAMP_INFINITY),
        Ok(Moment::MinusInfinity) => Ok(TIMESTAMP_MINUS_INFINITY),
        Ok(Moment::Finite(micros)) => i64::try_from(micros)
            .ok()
            .filter(|micros| *micros != TIMESTAMP_INFINITY && *micros != TIMESTAMP_MINUS_INFINITY)
            .ok_or_else(|| format!("{} is outside Arrow's microsecond range", Shown(text))),
        Err(error) => Err(worded(error, "a timestamp", text)),
    }
}

/// An interval in Arrow's month-day-nanosecond parts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Interval {
    pub months: i32,
    pub days: i32,
    pub nanoseconds: i64,
}

/// An interval in PostgreSQL's default `postgres` style (`1 year 2 mons -3 days
/// +04:05:06.789`; MariaDB's `TIME` is the bare `-838:59:59` clock) or ISO 8601
/// with designators (`P1Y2M-3DT4H5M6.789S`).
pub(crate) fn parse_interval(text: &[u8]) -> Result<Interval, Reason> {
    let read = canonical::read_interval(text).ok();
    let nanoseconds = read.and_then(|interval| interval.microseconds.checked_mul(1000));
    match (read, nanoseconds) {
        (Some(interval), Some(nanoseconds)) => Ok(Interval {
            months: interval.months,
            days: interval.days,
            nanoseconds,
        }),
        _ => Err(format!(
            "{} is not an interval (or does not fit 32-bit months and days and 64-bit nanoseconds)",
            Shown(text)
        )),
    }
}

/// A UUID's 16 bytes from its 32 hex digits.
pub(crate) fn parse_uuid(text: &[u8]) -> Result<[u8; 16], Reason> {
    canonical::read_uuid(text, Strictness::Canonical).map_err(|error| worded(error, "a UUID", text))
}

/// Words a canonical reader's error for the cell's message.
fn worded(error: FormError, what: &str, text: &[u8]) -> Reason {
    match error {
        FormError::Syntax => not_a(what, text),
        FormError::FieldRange => format!("{} is not {what}: a field is out of range", Shown(text)),
        FormError::Overflow | FormError::OffsetRange => {
            format!("{} is not {what}: {error}", Shown(text))
        }
    }
}

/// PostgreSQL's hex `bytea` text (`\x0a0b…`), as binary values appear inside
/// array and record literals.
pub(crate) fn parse_hex_bytea(text: &[u8]) -> Result<Vec<u8>, Reason> {
    text.strip_prefix(b"\\x")
        .and_then(sluice_core::canonical::read_hex_pairs)
        .ok_or_else(|| not_a("hex bytea text (\\x…)", text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_buffer::i256;

    const MICROS_PER_DAY: i64 = 86_400_000_000;

    #[test]
    fn integers_check_their_width() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Ok(i64::MAX));
        assert!(parse_i64(b"9223372036854775808").is_err());
        assert_eq!(parse_u64(b"18446744073709551615"), Ok(u64::MAX));
        assert!(parse_u64(b"18446744073709551616")
            .unwrap_err()
            .contains("does not fit"));
        assert_eq!(parse_narrow::<i16>(b"-32768", 16), Ok(i16::MIN));
        assert!(parse_narrow::<i16>(b"32768", 16).is_err());
        for bad in [&b""[..], b"-", b"1.0", b" 1", b"1e3", b"\xff"] {
            assert!(parse_i64(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn floats_keep_specials_and_f32_refuses_extra_digits() {
        assert!(parse_f64(b"NaN").unwrap().is_nan());
        assert_eq!(parse_f64(b"-Infinity"), Ok(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"1e+100"), Ok(1e100));
        assert_eq!(parse_f32(b"0.1"), Ok(0.1f32));
        assert_eq!(parse_f32(b"1.1754944e-38"), Ok(1.1754944e-38f32));
        assert_eq!(parse_f32(b"Infinity"), Ok(f32::INFINITY));
        assert!(parse_f32(b"0.30000000000000004").is_err());
        assert!(parse_f32(b"1e300").is_err());
        assert!(parse_f64(b"one").is_err());
    }

    #[test]
    fn decimals_scale_exactly_or_refuse() {
        assert_eq!(parse_decimal::<i128>(b"-12.34", 10, 2), Ok(-1234));
        assert_eq!(parse_decimal::<i128>(b"12.3", 10, 2), Ok(1230));
        assert_eq!(parse_decimal::<i128>(b"12.300", 10, 2), Ok(1230));
        assert_eq!(parse_decimal::<i128>(b"1e3", 10, 2), Ok(100_000));
        assert_eq!(parse_decimal::<i128>(b"0.00", 3, 2), Ok(0));
        assert_eq!(parse_decimal::<i128>(b"12300", 5, -2), Ok(123));
        assert_eq!(parse_decimal::<i128>(b".5", 2, 1), Ok(5));
        assert!(parse_decimal::<i128>(b"12.345", 10, 2)
            .unwrap_err()
            .contains("rounding"));
        assert!(parse_decimal::<i128>(b"123456789.1", 10, 2)
            .unwrap_err()
            .contains("digits"));
        assert!(parse_decimal::<i128>(b"1e1000000000", 38, 0).is_err());
        assert!(parse_decimal::<i128>(b"NaN", 10, 2)
            .unwrap_err()
            .contains("no place"));
        for bad in [&b""[..], b"-", b".", b"1.2.3", b"1e", b"e5", b"1,5", b"--1"] {
            assert!(parse_decimal::<i128>(bad, 38, 2).is_err(), "{bad:?}");
        }
        let max = "9".repeat(38);
        assert_eq!(
            parse_decimal::<i128>(max.as_bytes(), 38, 0),
            Ok(10i128.pow(38) - 1)
        );
        let wide = format!("-{}.5", "9".repeat(70));
        let parsed = parse_decimal::<i256>(wide.as_bytes(), 76, 1).unwrap();
        assert_eq!(parsed.to_string(), format!("-{}5", "9".repeat(70)));
    }

    /// The grammars are `sluice_core::canonical`'s (tested there): these
    /// check Arrow's ranges, the infinities' sentinels and the words.
    #[test]
    fn dates_and_timestamps_fit_arrow_or_say_why() {
        assert_eq!(parse_date(b"1970-01-02"), Ok(1));
        assert_eq!(parse_date(b"5874897-12-31"), Ok(2_145_042_905));
        assert_eq!(parse_date(b"infinity"), Ok(DATE_INFINITY));
        assert_eq!(parse_date(b"-infinity"), Ok(DATE_MINUS_INFINITY));
        assert!(parse_date(b"2023-02-29")
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_date(b"2024-1-01")
            .unwrap_err()
            .contains("is not a date"));
        assert_eq!(parse_time(b"24:00:00"), Ok(MICROS_PER_DAY));
        assert!(parse_time(b"1:00:00").is_err());
        assert_eq!(parse_timestamp(b"1970-01-01 02:00:00+02", true), Ok(0));
        assert_eq!(parse_timestamp(b"infinity", true), Ok(TIMESTAMP_INFINITY));
        assert_eq!(
            parse_timestamp(b"-infinity", false),
            Ok(TIMESTAMP_MINUS_INFINITY)
        );
        // Past Arrow's microseconds from 1970 (PostgreSQL goes to 294276 AD).
        assert!(parse_timestamp(b"294276-12-31 23:59:59+00", true)
            .unwrap_err()
            .contains("range"));
        assert!(parse_timestamp(b"2024-01-01 10:00:00+02", false).is_err());
        assert!(parse_timestamp(b"2024-01-01 10:00:00+16", true)
            .unwrap_err()
            .contains("offset"));
    }

    #[test]
    fn intervals_become_nanoseconds_that_fit() {
        assert_eq!(
            parse_interval(b"1 year 2 mons 3 days 04:05:06.789"),
            Ok(Interval {
                months: 14,
                days: 3,
                nanoseconds: 14_706_789_000_000
            })
        );
        // More clock time than 64-bit nanoseconds hold.
        assert!(parse_interval(b"2562048:00:00").is_err());
        assert!(parse_interval(b"1 fortnight").is_err());
    }

    #[test]
    fn uuids_and_hex() {
        let bytes = parse_uuid(b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11").unwrap();
        assert_eq!(bytes[0], 0xa0);
        assert_eq!(bytes[15], 0x11);
        assert_eq!(parse_uuid(b"A0EEBC999C0B4EF8BB6D6BB9BD380A11"), Ok(bytes));
        for bad in [
            &b""[..],
            b"a0eebc99",
            b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g",
            b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1100",
        ] {
            assert!(parse_uuid(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_hex_bytea(b"\\x00ff"), Ok(vec![0, 255]));
        assert!(parse_hex_bytea(b"00ff").is_err());
        assert!(parse_hex_bytea(b"\\x0").is_err());
        assert_eq!(parse_bool(b"t"), Ok(true));
        assert!(parse_bool(b"yes").is_err());
    }

    proptest::proptest! {
        /// Text built from the characters these forms use never panics a parser.
        #[test]
        fn no_text_panics_a_parser(text in "[-+0-9:. PTYMWDHSBCinfty{}eE\\\\x]{0,32}") {
            let text = text.as_bytes();
            let _ = parse_i64(text);
            let _ = parse_u64(text);
            let _ = parse_f32(text);
            let _ = parse_decimal::<i128>(text, 38, 4);
            let _ = parse_decimal::<i256>(text, 76, -3);
            let _ = parse_date(text);
            let _ = parse_time(text);
            let _ = parse_timestamp(text, true);
            let _ = parse_timestamp(text, false);
            let _ = parse_interval(text);
            let _ = parse_uuid(text);
            let _ = parse_hex_bytea(text);
        }
    }
}
