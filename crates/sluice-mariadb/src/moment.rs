//! Moments with a UTC offset, as imports read them (`2024-06-01 12:00:00+02`,
//! `2024-06-01T10:00:00Z`), turned into the UTC wall time a `TIMESTAMP` column
//! takes in sluice's sessions (whose `time_zone` is `+00:00`): MariaDB reads no
//! offset in a value. And ISO 8601 durations (`PT-838H-59M-59S`, what sluice's
//! JSON writes for a `TIME`), turned into the `-838:59:59` a `TIME` column reads.

use sluice_core::calendar::{civil_from_days, days_from_civil};

/// `value` in UTC without an offset, or `None` when it has no offset (it is
/// then passed on as it is) or is not a moment sluice can read (the server
/// judges it).
pub(crate) fn to_utc(value: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (local, offset_seconds) = split_offset(text)?;
    let (date, time) = local.split_once([' ', 'T'])?;
    let mut date_parts = date.splitn(3, '-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: i64 = date_parts.next()?.parse().ok()?;
    let day: i64 = date_parts.next()?.parse().ok()?;
    let (clock, fraction) = match time.split_once('.') {
        Some((clock, fraction)) => (clock, Some(fraction)),
        None => (time, None),
    };
    let mut clock_parts = clock.splitn(3, ':');
    let hour: i64 = clock_parts.next()?.parse().ok()?;
    let minute: i64 = clock_parts.next()?.parse().ok()?;
    let second: i64 = clock_parts.next().unwrap_or("0").parse().ok()?;
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 24
        || minute > 59
        || second > 60
    {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_seconds;
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let mut utc = format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    );
    if let Some(fraction) =
        fraction.filter(|fraction| fraction.bytes().all(|byte| byte.is_ascii_digit()))
    {
        utc.push('.');
        utc.push_str(fraction);
    }
    Some(utc.into_bytes())
}

/// An ISO 8601 duration of days, hours, minutes and seconds (each part may
/// carry its own sign, as PostgreSQL writes them) as `[-]H:MM:SS[.ffffff]`;
/// `None` for anything else (passed on as it is; years and months have no
/// fixed length).
pub(crate) fn duration_to_time(value: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (negated, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let text = text.strip_prefix('P')?;
    let (date, time) = text.split_once('T').unwrap_or((text, ""));
    let mut micros: i128 = 0;
    for (part, units) in [
        (date, &[('D', 86_400_000_000i128)][..]),
        (
            time,
            &[('H', 3_600_000_000), ('M', 60_000_000), ('S', 1_000_000)][..],
        ),
    ] {
        let mut rest = part;
        while !rest.is_empty() {
            let end = rest.find(|character: char| character.is_ascii_alphabetic())?;
            let (number, unit) = (&rest[..end], rest[end..].chars().next()?);
            let scale = units.iter().find(|(name, _)| *name == unit)?.1;
            micros += parse_scaled(number, scale)?;
            rest = &rest[end + 1..];
        }
    }
    if negated {
        micros = -micros;
    }
    let sign = if micros < 0 { "-" } else { "" };
    let micros = micros.unsigned_abs();
    let (seconds, fraction) = (micros / 1_000_000, micros % 1_000_000);
    let mut time = format!(
        "{sign}{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds % 3600 / 60,
        seconds % 60
    );
    if fraction > 0 {
        let digits = format!("{fraction:06}");
        time.push('.');
        time.push_str(digits.trim_end_matches('0'));
    }
    Some(time.into_bytes())
}

/// A decimal number (`-59.5`) times `scale`, exactly.
fn parse_scaled(number: &str, scale: i128) -> Option<i128> {
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let mut value = whole.parse::<i128>().unwrap_or(0).checked_mul(scale)?;
    let mut unit = scale;
    for digit in fraction.chars().take(12) {
        unit /= 10;
        value += i128::from(digit.to_digit(10)? as u8) * unit;
    }
    Some(if negative { -value } else { value })
}

/// The text before the offset and the offset in seconds east of UTC.
fn split_offset(text: &str) -> Option<(&str, i64)> {
    if let Some(local) = text.strip_suffix(['Z', 'z']) {
        return Some((local, 0));
    }
    // The offset's sign comes after the time (position past the date's dashes).
    let position = text.rfind(['+', '-']).filter(|&position| position > 10)?;
    let (local, offset) = text.split_at(position);
    let sign = if offset.starts_with('-') { -1 } else { 1 };
    let digits: Vec<&str> = offset[1..].split(':').collect();
    let (hours, minutes, seconds) = match digits.as_slice() {
        [compact] if compact.len() == 4 => (&compact[..2], &compact[2..], "0"),
        [hours] => (*hours, "0", "0"),
        [hours, minutes] => (*hours, *minutes, "0"),
        [hours, minutes, seconds] => (*hours, *minutes, *seconds),
        _ => return None,
    };
    let total = hours.parse::<i64>().ok()? * 3600
        + minutes.parse::<i64>().ok()? * 60
        + seconds.parse::<i64>().ok()?;
    Some((local.trim_end(), sign * total))
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
        assert_eq!(time("12:00:00"), None);
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
