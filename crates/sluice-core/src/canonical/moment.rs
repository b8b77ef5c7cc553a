//! Dates, times of day and timestamps: `2024-02-29`, `0044-03-15 BC`,
//! `13:14:15.5`, `2024-02-29 13:14:15.5+05:30`, `infinity`.

use super::reading::{
    number, take_byte, take_digits, trim_blanks, FormError, Strictness, MICROS_PER_DAY,
    MICROS_PER_SECOND,
};
use crate::calendar;

/// A date or timestamp: a finite value, or one of PostgreSQL's infinities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment<T> {
    /// A real date or instant.
    Finite(T),
    /// `infinity`: later than every finite value.
    Infinity,
    /// `-infinity`: earlier than every finite value.
    MinusInfinity,
}

impl<T> Moment<T> {
    /// The same moment with its finite value converted.
    pub fn map<U>(self, convert: impl FnOnce(T) -> U) -> Moment<U> {
        match self {
            Moment::Finite(value) => Moment::Finite(convert(value)),
            Moment::Infinity => Moment::Infinity,
            Moment::MinusInfinity => Moment::MinusInfinity,
        }
    }
}

/// Whether a timestamp or time carries a UTC offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// `timestamp`: no offset (lenient: one is read and ignored, as the
    /// server's `timestamp_in` does).
    Without,
    /// `timestamptz`: the offset says which instant (lenient: a text without
    /// one is UTC).
    With,
}

/// The largest UTC offset PostgreSQL takes, 15:59:59, in seconds.
pub const MAX_OFFSET: i64 = 15 * 3600 + 59 * 60 + 59;

/// A date as days since 1970-01-01 (`1970-01-01` is 0; ` BC` years count
/// back from 1 BC, which is year 0 of the proleptic Gregorian calendar).
///
/// ```
/// use sluice_core::canonical::{read_date, Moment, Strictness};
/// assert_eq!(read_date(b"1970-01-02", Strictness::Canonical), Ok(Moment::Finite(1)));
/// assert_eq!(read_date(b"infinity", Strictness::Canonical), Ok(Moment::Infinity));
/// assert_eq!(read_date(b" Epoch ", Strictness::Lenient), Ok(Moment::Finite(0)));
/// ```
pub fn read_date(text: &[u8], strictness: Strictness) -> Result<Moment<i64>, FormError> {
    let body = strictness.trim(text);
    if let Some(word) = special_word(body, strictness) {
        return Ok(word.map(|()| 0));
    }
    let (mut body, before_christ) = strip_era(body, strictness);
    let date = take_date(&mut body, strictness).ok_or(FormError::Syntax)?;
    if !body.is_empty() {
        return Err(FormError::Syntax);
    }
    date.days(before_christ).map(Moment::Finite)
}

/// A time of day as microseconds since midnight, up to `24:00:00` (a full
/// day, as PostgreSQL allows).
///
/// ```
/// use sluice_core::canonical::{read_time, Strictness};
/// assert_eq!(read_time(b"00:00:01.5", Strictness::Canonical), Ok(1_500_000));
/// assert!(read_time(b"00:01", Strictness::Canonical).is_err());
/// assert_eq!(read_time(b"00:01", Strictness::Lenient), Ok(60_000_000));
/// ```
pub fn read_time(text: &[u8], strictness: Strictness) -> Result<i64, FormError> {
    let micros = match strictness {
        Strictness::Canonical => {
            let mut rest = text;
            take_clock(&mut rest, 24).filter(|micros| rest.is_empty() && *micros <= MICROS_PER_DAY)
        }
        Strictness::Lenient => lenient_clock(trim_blanks(text)),
    };
    micros.ok_or(FormError::Syntax)
}

/// A time of day with its UTC offset: microseconds since midnight and
/// seconds east of UTC (lenient: a time without an offset is UTC).
///
/// ```
/// use sluice_core::canonical::{read_time_tz, Strictness};
/// assert_eq!(read_time_tz(b"01:00:00+05:30", Strictness::Canonical), Ok((3_600_000_000, 19_800)));
/// assert_eq!(read_time_tz(b"01:00Z", Strictness::Lenient), Ok((3_600_000_000, 0)));
/// ```
pub fn read_time_tz(text: &[u8], strictness: Strictness) -> Result<(i64, i32), FormError> {
    let (micros, offset) = match strictness {
        Strictness::Canonical => {
            let mut rest = text;
            let micros = take_clock(&mut rest, 24).filter(|micros| *micros <= MICROS_PER_DAY);
            let offset = take_offset(&mut rest).filter(|_| rest.is_empty());
            (micros, offset)
        }
        Strictness::Lenient => {
            let (clock, offset) = split_offset(trim_blanks(text)).ok_or(FormError::Syntax)?;
            (lenient_clock(trim_blanks(clock)), Some(offset.unwrap_or(0)))
        }
    };
    let (Some(micros), Some(offset)) = (micros, offset) else {
        return Err(FormError::Syntax);
    };
    if offset.abs() > MAX_OFFSET {
        return Err(FormError::OffsetRange);
    }
    // Both fit: a day's microseconds and 15:59:59.
    Ok((micros, offset as i32))
}

/// A timestamp as microseconds since 1970-01-01 00:00 (UTC for
/// [`Zone::With`]: the offset is subtracted). `i128`, because PostgreSQL's
/// last timestamp (294276 AD) is past `i64` microseconds from 1970.
///
/// ```
/// use sluice_core::canonical::{read_timestamp, Moment, Strictness, Zone};
/// let canonical = read_timestamp(b"1970-01-01 02:00:00+02", Zone::With, Strictness::Canonical);
/// assert_eq!(canonical, Ok(Moment::Finite(0)));
/// let lenient = read_timestamp(b"1970-01-01T02:00:00+0200", Zone::With, Strictness::Lenient);
/// assert_eq!(lenient, Ok(Moment::Finite(0)));
/// ```
pub fn read_timestamp(
    text: &[u8],
    zone: Zone,
    strictness: Strictness,
) -> Result<Moment<i128>, FormError> {
    let body = strictness.trim(text);
    if let Some(word) = special_word(body, strictness) {
        return Ok(word.map(|()| 0));
    }
    let (mut body, before_christ) = strip_era(body, strictness);
    let date = take_date(&mut body, strictness).ok_or(FormError::Syntax)?;
    let (since_midnight, offset) = match strictness {
        Strictness::Canonical => canonical_time_of_timestamp(body, zone),
        Strictness::Lenient => lenient_time_of_timestamp(body).map(|(clock, offset)| {
            let offset = match zone {
                Zone::Without => 0,
                Zone::With => offset.unwrap_or(0),
            };
            (clock, offset)
        }),
    }
    .ok_or(FormError::Syntax)?;
    finite_timestamp(date.days(before_christ)?, since_midnight, offset)
}

/// A lenient timestamp's local time (microseconds since 1970-01-01 00:00 as
/// written) and its UTC offset in seconds east, `None` when the text has
/// none: for a target that takes wall times and no offsets, which must know
/// whether there was one to take off.
///
/// ```
/// use sluice_core::canonical::{read_timestamp_and_offset, Moment};
/// let read = read_timestamp_and_offset(b"1970-01-01T01:00:00+01");
/// assert_eq!(read, Ok((Moment::Finite(3_600_000_000), Some(3600))));
/// assert_eq!(read_timestamp_and_offset(b"1970-01-01"), Ok((Moment::Finite(0), None)));
/// ```
pub fn read_timestamp_and_offset(text: &[u8]) -> Result<(Moment<i128>, Option<i32>), FormError> {
    let body = trim_blanks(text);
    if let Some(word) = special_word(body, Strictness::Lenient) {
        return Ok((word.map(|()| 0), None));
    }
    let (mut body, before_christ) = strip_era(body, Strictness::Lenient);
    let date = take_date(&mut body, Strictness::Lenient).ok_or(FormError::Syntax)?;
    let (since_midnight, offset) = lenient_time_of_timestamp(body).ok_or(FormError::Syntax)?;
    let local = finite_timestamp(date.days(before_christ)?, since_midnight, 0)?;
    if offset.is_some_and(|offset| offset.abs() > MAX_OFFSET) {
        return Err(FormError::OffsetRange);
    }
    // Within ±15:59:59, so it fits.
    Ok((local, offset.map(|offset| offset as i32)))
}

/// Microseconds since 1970-01-01 00:00 UTC of a day, a time on it and the
/// offset it was written in.
fn finite_timestamp(
    days: i64,
    since_midnight: i64,
    offset: i64,
) -> Result<Moment<i128>, FormError> {
    if offset.abs() > MAX_OFFSET {
        return Err(FormError::OffsetRange);
    }
    let seconds = i128::from(days) * 86_400 - i128::from(offset);
    Ok(Moment::Finite(
        seconds * i128::from(MICROS_PER_SECOND) + i128::from(since_midnight),
    ))
}

/// ` HH:MM:SS[.f]` and, with a zone, its offset: the whole rest of a
/// canonical timestamp after its date.
fn canonical_time_of_timestamp(mut rest: &[u8], zone: Zone) -> Option<(i64, i64)> {
    take_byte(&mut rest, b' ')?;
    let clock = take_clock(&mut rest, 23)?;
    let offset = match zone {
        Zone::With => take_offset(&mut rest)?,
        Zone::Without => 0,
    };
    rest.is_empty().then_some((clock, offset))
}

/// Nothing, or `( |T)HH:MM[:SS[.f]][offset]`, blanks allowed around the
/// time, after a lenient timestamp's date: the time of day and the offset.
fn lenient_time_of_timestamp(rest: &[u8]) -> Option<(i64, Option<i64>)> {
    let (clock, offset) = match rest {
        [] => (rest, None),
        [b' ' | b'T' | b't', time @ ..] => split_offset(trim_blanks(time))?,
        _ => return None,
    };
    let since_midnight = match clock {
        [] => 0,
        _ => lenient_clock(clock)?,
    };
    Some((since_midnight, offset))
}

/// The special words: `infinity` and `-infinity`; lenient, in any case,
/// `+infinity` and `epoch` too.
fn special_word(body: &[u8], strictness: Strictness) -> Option<Moment<()>> {
    match strictness {
        Strictness::Canonical => match body {
            b"infinity" => Some(Moment::Infinity),
            b"-infinity" => Some(Moment::MinusInfinity),
            _ => None,
        },
        Strictness::Lenient => {
            if body.first().is_some_and(u8::is_ascii_digit) {
                return None;
            }
            let is = |word: &[u8]| body.eq_ignore_ascii_case(word);
            if is(b"infinity") || is(b"+infinity") {
                Some(Moment::Infinity)
            } else if is(b"-infinity") {
                Some(Moment::MinusInfinity)
            } else if is(b"epoch") {
                Some(Moment::Finite(()))
            } else {
                None
            }
        }
    }
}

/// A trailing ` BC` removed (lenient: ` BC` or ` AD` in any case, blanks
/// before it dropped), and whether it was there.
fn strip_era(text: &[u8], strictness: Strictness) -> (&[u8], bool) {
    if strictness == Strictness::Canonical {
        return match text.strip_suffix(b" BC") {
            Some(rest) => (rest, true),
            None => (text, false),
        };
    }
    let Some(split) = text.len().checked_sub(3) else {
        return (text, false);
    };
    let (rest, era) = text.split_at(split);
    if era.eq_ignore_ascii_case(b" bc") {
        (trim_blanks(rest), true)
    } else if era.eq_ignore_ascii_case(b" ad") {
        (trim_blanks(rest), false)
    } else {
        (text, false)
    }
}

/// A date's fields as written (the year before any ` BC`).
struct CalendarDate {
    year: i64,
    month: i64,
    day: i64,
}

impl CalendarDate {
    /// Days since 1970-01-01; `FieldRange` when the day does not exist
    /// (`2024-02-30`, year 0).
    fn days(&self, before_christ: bool) -> Result<i64, FormError> {
        if self.year < 1 {
            return Err(FormError::FieldRange);
        }
        let year = if before_christ {
            1 - self.year
        } else {
            self.year
        };
        calendar::checked_days_from_civil(year, self.month, self.day).ok_or(FormError::FieldRange)
    }
}

/// `YYYY-MM-DD` at the front of `text` (four to twelve year digits; lenient,
/// a month of any width and a day of one or two digits), consumed.
fn take_date(text: &mut &[u8], strictness: Strictness) -> Option<CalendarDate> {
    // A shorter year means another one to the server (`24-01-05` is 2024).
    let (year, year_digits) = take_digits(text, 12)?;
    if year_digits < 4 {
        return None;
    }
    take_byte(text, b'-')?;
    let (month, day) = match strictness {
        Strictness::Canonical => {
            let month = take_two_digits(text)?;
            take_byte(text, b'-')?;
            (month, take_two_digits(text)?)
        }
        Strictness::Lenient => {
            let (month, _) = take_digits(text, 12)?;
            take_byte(text, b'-')?;
            (month, take_digits(text, 2)?.0)
        }
    };
    Some(CalendarDate { year, month, day })
}

/// Exactly two digits at the front, consumed.
fn take_two_digits(text: &mut &[u8]) -> Option<i64> {
    match text {
        [high @ b'0'..=b'9', low @ b'0'..=b'9', rest @ ..] => {
            let value = i64::from(*high - b'0') * 10 + i64::from(*low - b'0');
            *text = rest;
            Some(value)
        }
        _ => None,
    }
}

/// The canonical clock `HH:MM:SS[.ffffff]` at the front as microseconds,
/// consumed; hours (two digits or more) up to `max_hours` (an interval's
/// clock passes 24).
pub(super) fn take_clock(text: &mut &[u8], max_hours: i64) -> Option<i64> {
    let (hours, hour_digits) = take_digits(text, 18)?;
    if hour_digits < 2 || hours > max_hours {
        return None;
    }
    take_byte(text, b':')?;
    let minutes = take_two_digits(text).filter(|minutes| *minutes < 60)?;
    take_byte(text, b':')?;
    let seconds = take_two_digits(text).filter(|seconds| *seconds < 60)?;
    let mut micros = 0;
    if take_byte(text, b'.').is_some() {
        let (fraction, digits) = take_digits(text, 6)?;
        micros = fraction * 10i64.pow(6 - digits as u32);
    }
    let whole = (hours.checked_mul(60)? + minutes) * 60 + seconds;
    whole.checked_mul(MICROS_PER_SECOND)?.checked_add(micros)
}

/// `±HH[:MM[:SS]]` at the front, as seconds east of UTC, consumed.
fn take_offset(text: &mut &[u8]) -> Option<i64> {
    let sign = match text.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    *text = &text[1..];
    let mut seconds = take_two_digits(text)? * 3600;
    if take_byte(text, b':').is_some() {
        seconds += take_two_digits(text).filter(|minutes| *minutes < 60)? * 60;
        if take_byte(text, b':').is_some() {
            seconds += take_two_digits(text).filter(|seconds| *seconds < 60)?;
        }
    }
    Some(sign * seconds)
}

/// A lenient clock, the whole text: `H:M[:S[.fraction]]` as microseconds
/// since midnight (`24:00:00` and a 60th second allowed, as PostgreSQL
/// allows them); a fraction past six digits is rounded to microseconds half
/// to even, as the server's `rint` does.
fn lenient_clock(clock: &[u8]) -> Option<i64> {
    let (whole, fraction) = match clock.iter().position(|&byte| byte == b'.') {
        Some(at) => (&clock[..at], Some(&clock[at..])),
        None => (clock, None),
    };
    let mut fields = whole.split(|&byte| byte == b':');
    let hour = number(fields.next()?)?;
    let minute = number(fields.next()?)?;
    let second = fields.next().map_or(Some(0), number)?;
    if fields.next().is_some() || (fraction.is_some() && whole.len() < 7) {
        return None;
    }
    let micros = match fraction {
        None => 0,
        Some(fraction) => fraction_micros(&fraction[1..])?,
    };
    let past_midnight = hour == 24 && (minute > 0 || second > 0 || micros > 0);
    if hour > 24 || minute > 59 || second > 60 || past_midnight {
        return None;
    }
    Some((hour * 3600 + minute * 60 + second) * MICROS_PER_SECOND + micros)
}

/// A second's fraction digits (after the point) as microseconds: six or
/// fewer exactly, more rounded half to even.
fn fraction_micros(digits: &[u8]) -> Option<i64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() <= 6 {
        return Some(number(digits)? * 10i64.pow(6 - digits.len() as u32));
    }
    // As the server does it: the fraction as a double, times a million, rint.
    let mut text = String::with_capacity(digits.len() + 2);
    text.push_str("0.");
    text.push_str(std::str::from_utf8(digits).ok()?);
    let value: f64 = text.parse().ok()?;
    Some((value * 1_000_000.0).round_ties_even() as i64)
}

/// A UTC offset at the end of a lenient time (`+05:45`, `-03`, `+0530`,
/// `Z`), in seconds east of UTC, and the time before it.
fn split_offset(time: &[u8]) -> Option<(&[u8], Option<i64>)> {
    if let Some(clock) = time.strip_suffix(b"Z").or_else(|| time.strip_suffix(b"z")) {
        return Some((clock, Some(0)));
    }
    let Some(at) = time.iter().rposition(|&byte| byte == b'+' || byte == b'-') else {
        return Some((time, None));
    };
    let (clock, offset) = (trim_blanks(&time[..at]), &time[at + 1..]);
    let seconds = offset_seconds(offset)?;
    let sign = if time[at] == b'-' { -1 } else { 1 };
    Some((clock, Some(sign * seconds)))
}

/// `hh[:mm[:ss]]` or `hh[mm[ss]]` as seconds.
fn offset_seconds(offset: &[u8]) -> Option<i64> {
    let separated = offset.contains(&b':');
    let mut rest = offset;
    let mut seconds = 0;
    for (index, unit) in [3600, 60, 1].into_iter().enumerate() {
        if rest.is_empty() {
            break;
        }
        let field_end = if separated {
            rest.iter()
                .position(|&byte| byte == b':')
                .unwrap_or(rest.len())
        } else {
            rest.len().min(2)
        };
        let value = number(&rest[..field_end]).filter(|_| field_end <= 2)?;
        if index > 0 && value > 59 {
            return None;
        }
        seconds += value * unit;
        rest = &rest[field_end..];
        if separated && !rest.is_empty() {
            rest = rest.strip_prefix(b":").filter(|after| !after.is_empty())?;
        }
    }
    (rest.is_empty() && !offset.is_empty()).then_some(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Strictness::{Canonical, Lenient};

    fn days(text: &str, strictness: Strictness) -> Result<Moment<i64>, FormError> {
        read_date(text.as_bytes(), strictness)
    }

    #[test]
    fn dates_count_days_across_eras_and_infinities() {
        for (text, expected) in [
            ("1970-01-01", 0),
            ("2000-03-01", 11_017),
            ("1969-12-31", -1),
            // 1 BC is year 0, a leap year; 4713 BC is PostgreSQL's first.
            ("0001-01-01 BC", -719_528),
            ("0001-02-29 BC", -719_469),
            ("4713-01-01 BC", -2_440_550),
            ("5874897-12-31", 2_145_042_905),
        ] {
            for strictness in [Canonical, Lenient] {
                assert_eq!(
                    days(text, strictness),
                    Ok(Moment::Finite(expected)),
                    "{text}"
                );
            }
        }
        assert_eq!(days("infinity", Canonical), Ok(Moment::Infinity));
        assert_eq!(days("-infinity", Canonical), Ok(Moment::MinusInfinity));
        for (text, error) in [
            ("2023-02-29", FormError::FieldRange),
            ("2024-13-01", FormError::FieldRange),
            ("0000-01-01", FormError::FieldRange),
            ("0000-01-01 BC", FormError::FieldRange),
            ("2024-1-01", FormError::Syntax),
            ("24-01-01", FormError::Syntax),
            ("2024-01-01 AD", FormError::Syntax),
            ("2024-01-01x", FormError::Syntax),
            ("2024-02-30x", FormError::Syntax),
            ("", FormError::Syntax),
            (" BC", FormError::Syntax),
            ("Infinity", FormError::Syntax),
            ("epoch", FormError::Syntax),
            (" 2024-01-01", FormError::Syntax),
            ("1234567890123-01-01", FormError::Syntax),
        ] {
            assert_eq!(days(text, Canonical), Err(error), "{text}");
        }
        for (text, expected) in [
            (" 2024-1-5 ", Moment::Finite(19_727)),
            ("1970-01-01 ad", Moment::Finite(0)),
            ("0001-01-01 bc", Moment::Finite(-719_528)),
            ("EPOCH", Moment::Finite(0)),
            ("+Infinity", Moment::Infinity),
            ("-INFINITY", Moment::MinusInfinity),
        ] {
            assert_eq!(days(text, Lenient), Ok(expected), "{text}");
        }
        assert_eq!(days("2024-001-5", Lenient), Ok(Moment::Finite(19_727)));
        assert_eq!(days("2024-01-005", Lenient), Err(FormError::Syntax));
    }

    #[test]
    fn times_are_microseconds_since_midnight() {
        assert_eq!(read_time(b"13:14:15.5", Canonical), Ok(47_655_500_000));
        assert_eq!(read_time(b"24:00:00", Canonical), Ok(MICROS_PER_DAY));
        for bad in [
            &b"24:00:01"[..],
            b"12:60:00",
            b"1:00:00",
            b"12:00:00.1234567",
            b"12:00",
            b"12:00:00.",
            b" 12:00:00",
        ] {
            assert!(read_time(bad, Canonical).is_err(), "{bad:?}");
        }
        assert_eq!(read_time(b" 1:2 ", Lenient), Ok(3_720_000_000));
        assert_eq!(read_time(b"00:00:60", Lenient), Ok(60_000_000));
        // Seven digits round half to even: .0000005 is a tie below a half
        // in binary, .0000015 one above.
        assert_eq!(read_time(b"00:00:00.0000015", Lenient), Ok(2));
        assert_eq!(read_time(b"00:00:00.1234567", Lenient), Ok(123_457));
        for bad in [&b"24:00:00.1"[..], b"1:2.5", b"25:00", b"00:60"] {
            assert!(read_time(bad, Lenient).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn times_with_zones() {
        assert_eq!(read_time_tz(b"00:00:00-00:30", Canonical), Ok((0, -1800)));
        assert_eq!(
            read_time_tz(b"00:00:00+15:59:59", Canonical),
            Ok((0, 57_599))
        );
        assert_eq!(
            read_time_tz(b"00:00:00+16", Canonical),
            Err(FormError::OffsetRange)
        );
        for bad in [
            &b"00:00:00"[..],
            b"00:00:00+5",
            b"00:00:00+05:60",
            b"00:00:00Z",
        ] {
            assert_eq!(
                read_time_tz(bad, Canonical),
                Err(FormError::Syntax),
                "{bad:?}"
            );
        }
        assert_eq!(read_time_tz(b"10:00", Lenient), Ok((36_000_000_000, 0)));
        assert_eq!(
            read_time_tz(b"10:00 -0330", Lenient),
            Ok((36_000_000_000, -12_600))
        );
    }

    #[test]
    fn timestamps_subtract_their_offsets() {
        let micros =
            |text: &str, zone, strictness| read_timestamp(text.as_bytes(), zone, strictness);
        let finite = |value: i128| Ok(Moment::Finite(value));
        for strictness in [Canonical, Lenient] {
            assert_eq!(
                micros("1970-01-01 00:00:01.000001", Zone::Without, strictness),
                finite(1_000_001)
            );
            assert_eq!(
                micros("1970-01-01 02:00:00+02", Zone::With, strictness),
                finite(0)
            );
            assert_eq!(
                micros("1970-01-01 00:00:00-00:30", Zone::With, strictness),
                finite(1_800_000_000)
            );
            assert_eq!(
                micros("1970-01-01 00:00:00+00:00:30", Zone::With, strictness),
                finite(-30_000_000)
            );
            assert_eq!(
                micros("0044-03-15 12:00:00+00 BC", Zone::With, strictness),
                {
                    let Ok(Moment::Finite(day)) = read_date(b"0044-03-15 BC", Canonical) else {
                        unreachable!()
                    };
                    finite((i128::from(day) * 86_400 + 43_200) * 1_000_000)
                }
            );
            // PostgreSQL's last timestamp is past i64 microseconds from 1970.
            assert!(micros("294276-12-31 23:59:59+00", Zone::With, strictness).is_ok());
        }
        assert_eq!(
            micros("infinity", Zone::With, Canonical),
            Ok(Moment::Infinity)
        );
        for bad in [
            "2024-01-01",
            "2024-01-01 10:00:00",
            "2024-01-01 10:00:00+2",
            "2024-01-01T10:00:00+02",
            "2024-01-01 24:00:00+00",
            "2024-01-01 10:00+00",
        ] {
            assert!(micros(bad, Zone::With, Canonical).is_err(), "{bad}");
        }
        assert!(micros("2024-01-01 10:00:00+02", Zone::Without, Canonical).is_err());
        assert_eq!(
            micros("2024-01-01 10:00:00+16", Zone::With, Canonical),
            Err(FormError::OffsetRange)
        );
        // Lenient: the usual ISO variants.
        assert_eq!(micros("1970-01-01", Zone::With, Lenient), finite(0));
        assert_eq!(
            micros(" 1970-01-01T01:00Z ", Zone::With, Lenient),
            finite(3_600_000_000)
        );
        assert_eq!(
            micros("1970-01-01 01:00:00+05", Zone::Without, Lenient),
            finite(3_600_000_000)
        );
        assert_eq!(
            micros("1970-01-01 24:00:00", Zone::Without, Lenient),
            finite(86_400_000_000)
        );
        assert_eq!(micros("epoch", Zone::Without, Lenient), finite(0));
    }
}
