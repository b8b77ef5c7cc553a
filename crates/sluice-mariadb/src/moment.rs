//! Moments with a UTC offset, as imports read them (`2024-06-01 12:00:00+02`,
//! `2024-06-01T10:00:00Z`), turned into the UTC wall time a `TIMESTAMP` column
//! takes in sluice's sessions (whose `time_zone` is `+00:00`): MariaDB reads no
//! offset in a value. And intervals (`PT-838H-59M-59S`, what sluice's JSON
//! writes for a `TIME`, or PostgreSQL's `1 day 02:00:00`), turned into the
//! `-838:59:59` a `TIME` column reads. The texts are read by
//! [`sluice_core::canonical`]; what it cannot read is passed on as it is, for
//! the server to judge.

use sluice_core::canonical::{self, Moment};

/// `value` in UTC without an offset, or `None` when it has no offset (it is
/// then passed on as it is) or is not a moment sluice can read (the server
/// judges it).
pub(crate) fn to_utc(value: &[u8]) -> Option<Vec<u8>> {
    let (Moment::Finite(local), Some(offset)) = canonical::read_timestamp_and_offset(value).ok()?
    else {
        return None;
    };
    let utc = local - i128::from(offset) * 1_000_000;
    let mut text = Vec::new();
    canonical::write_timestamp(utc * 1000, None, &mut text).ok()?;
    Some(text)
}

/// An interval of days, hours, minutes and seconds (ISO 8601 as PostgreSQL
/// writes it, each part with its own sign, or a leading `-` for the whole;
/// or PostgreSQL's own style) as `[-]HH:MM:SS[.ffffff]`; `None` for anything
/// else (passed on as it is: years and months have no fixed length).
pub(crate) fn duration_to_time(value: &[u8]) -> Option<Vec<u8>> {
    let text = value.trim_ascii();
    let (negated, text) = match text.strip_prefix(b"-") {
        Some(rest) if rest.starts_with(b"P") => (true, rest),
        _ => (false, text),
    };
    let interval = canonical::read_interval(text)
        .ok()
        .filter(|interval| interval.months == 0)?;
    let micros = i128::from(interval.days) * 86_400_000_000 + i128::from(interval.microseconds);
    let micros = if negated { -micros } else { micros };
    let nanoseconds = i64::try_from(micros.unsigned_abs() * 1000).ok()?;
    let mut time = Vec::new();
    if micros < 0 {
        time.push(b'-');
    }
    canonical::write_clock(nanoseconds, &mut time);
    Some(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> Option<String> {
        to_utc(text.as_bytes()).map(|bytes| String::from_utf8(bytes).unwrap())
    }

    #[test]
    fn durations_become_times() {
        let time = |text: &str| {
            duration_to_time(text.as_bytes()).map(|bytes| String::from_utf8(bytes).unwrap())
        };
        assert_eq!(time("PT-838H-59M-59S").as_deref(), Some("-838:59:59"));
        assert_eq!(
            time("PT838H59M59.999999S").as_deref(),
            Some("838:59:59.999999")
        );
        assert_eq!(time("P1DT2H").as_deref(), Some("26:00:00"));
        assert_eq!(time("-PT1M30.5S").as_deref(), Some("-00:01:30.5"));
        assert_eq!(time("PT0S").as_deref(), Some("00:00:00"));
        assert_eq!(time("P1Y"), None);
        assert_eq!(time("1 day -02:00:00.5").as_deref(), Some("21:59:59.5"));
        assert_eq!(time("12:00:00").as_deref(), Some("12:00:00"));
        assert_eq!(time("1 mon"), None);
    }

    #[test]
    fn offsets_are_taken_off() {
        assert_eq!(
            utc("2024-06-01 12:00:00+02").as_deref(),
            Some("2024-06-01 10:00:00")
        );
        assert_eq!(
            utc("2024-06-01T10:00:00.25Z").as_deref(),
            Some("2024-06-01 10:00:00.25")
        );
        assert_eq!(
            utc("2024-01-01 01:30:00+05:45").as_deref(),
            Some("2023-12-31 19:45:00")
        );
        assert_eq!(
            utc("2024-02-28 22:00:00-0300").as_deref(),
            Some("2024-02-29 01:00:00")
        );
        assert_eq!(
            utc("1999-12-31 23:59:59-00:00:01").as_deref(),
            Some("2000-01-01 00:00:00")
        );
        assert_eq!(utc("2024-06-01 12:00:00"), None);
        assert_eq!(utc("2024-06-01"), None);
        assert_eq!(utc("not a date+02"), None);
    }
}
