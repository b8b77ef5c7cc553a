//! Writers of the canonical forms a source builds itself from numbers
//! (dates, clocks, timestamps, UUIDs), so that what one crate writes the
//! readers beside them read back (the property tests hold them to it).

use std::io::Write as _;

use super::reading::FormError;
use crate::calendar::civil_from_days;

const NANOS_PER_SECOND: i64 = 1_000_000_000;
const NANOS_PER_DAY: i128 = 86_400 * NANOS_PER_SECOND as i128;

/// Appends `YYYY-MM-DD` (at least four year digits) and ` BC` for years
/// before 1 AD, for the date `days` after 1970-01-01.
///
/// ```
/// let mut text = Vec::new();
/// sluice_core::canonical::write_date(-719_528, &mut text);
/// assert_eq!(text, b"0001-01-01 BC");
/// ```
pub fn write_date(days: i64, out: &mut Vec<u8>) {
    write_date_then(days, out, |_| {});
}

/// Appends the date, then what `middle` writes, then the era: a timestamp's
/// ` BC` comes after its clock and offset.
fn write_date_then(days: i64, out: &mut Vec<u8>, middle: impl FnOnce(&mut Vec<u8>)) {
    let (year, month, day) = civil_from_days(days);
    let era_year = if year <= 0 { 1 - year } else { year };
    let _ = write!(out, "{era_year:04}-{month:02}-{day:02}");
    middle(out);
    if year <= 0 {
        out.extend_from_slice(b" BC");
    }
}

/// Appends `HH:MM:SS` and the fraction's digits without trailing zeros (up
/// to nine: a value with more than microseconds is an input form, which the
/// server rounds; microseconds give the canonical six at most).
///
/// ```
/// let mut text = Vec::new();
/// sluice_core::canonical::write_clock(45_296_000_001_000, &mut text);
/// assert_eq!(text, b"12:34:56.000001");
/// ```
pub fn write_clock(nanoseconds: i64, out: &mut Vec<u8>) {
    let seconds = nanoseconds / NANOS_PER_SECOND;
    let fraction = nanoseconds % NANOS_PER_SECOND;
    let _ = write!(
        out,
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if fraction != 0 {
        let mut digits = *b"000000000";
        let mut rest = fraction;
        for digit in digits.iter_mut().rev() {
            *digit = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        let kept = digits
            .iter()
            .rposition(|&digit| digit != b'0')
            .map_or(0, |at| at + 1);
        out.push(b'.');
        out.extend_from_slice(&digits[..kept]);
    }
}

/// Appends a UTC offset as PostgreSQL prints it: `+05:30`, `-03`, `+00`,
/// `-00:00:15`.
///
/// ```
/// let mut text = Vec::new();
/// sluice_core::canonical::write_offset(19_800, &mut text);
/// assert_eq!(text, b"+05:30");
/// ```
pub fn write_offset(seconds_east: i32, out: &mut Vec<u8>) {
    let sign = if seconds_east < 0 { '-' } else { '+' };
    let magnitude = seconds_east.unsigned_abs();
    let (hours, minutes, seconds) = (magnitude / 3600, magnitude / 60 % 60, magnitude % 60);
    let _ = write!(out, "{sign}{hours:02}");
    if minutes != 0 || seconds != 0 {
        let _ = write!(out, ":{minutes:02}");
    }
    if seconds != 0 {
        let _ = write!(out, ":{seconds:02}");
    }
}

/// Appends a timestamp `nanoseconds` after 1970-01-01 00:00 (UTC when an
/// offset is given; the text shows the local time at that offset and the
/// offset itself). `Overflow` when the date is past `i64` days.
///
/// ```
/// let mut text = Vec::new();
/// sluice_core::canonical::write_timestamp(3_600_000_000_000, Some(7_200), &mut text).unwrap();
/// assert_eq!(text, b"1970-01-01 03:00:00+02");
/// ```
pub fn write_timestamp(
    nanoseconds: i128,
    offset: Option<i32>,
    out: &mut Vec<u8>,
) -> Result<(), FormError> {
    let local = nanoseconds + i128::from(offset.unwrap_or(0)) * i128::from(NANOS_PER_SECOND);
    let days = i64::try_from(local.div_euclid(NANOS_PER_DAY)).map_err(|_| FormError::Overflow)?;
    let of_day = local.rem_euclid(NANOS_PER_DAY) as i64;
    write_date_then(days, out, |out| {
        out.push(b' ');
        write_clock(of_day, out);
        if let Some(offset) = offset {
            write_offset(offset, out);
        }
    });
    Ok(())
}

/// Appends a UUID's canonical text: 32 lowercase hex digits as 8-4-4-4-12.
///
/// ```
/// let mut text = Vec::new();
/// sluice_core::canonical::write_uuid(&[0xab; 16], &mut text);
/// assert_eq!(text, b"abababab-abab-abab-abab-abababababab");
/// ```
pub fn write_uuid(bytes: &[u8; 16], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            out.push(b'-');
        }
        out.push(HEX[usize::from(byte >> 4)]);
        out.push(HEX[usize::from(byte & 0xf)]);
    }
}
