//! The canonical interval reader: exactly the text a [`crate::Batch`] holds,
//! the `postgres` output style (`1 year 2 mons -3 days +04:05:06.789`), a
//! bare clock (`-838:59:59`, a `TIME` beyond a day), and ISO 8601 with
//! designators (`P1Y2M-3DT4H5M6.789S`).

use super::parts::Interval;
use crate::canonical::moment::take_clock;
use crate::canonical::reading::{
    take_byte, take_digits, FormError, MICROS_PER_HOUR, MICROS_PER_MINUTE, MICROS_PER_SECOND,
};

/// Reads an interval in the `postgres` style or ISO 8601 with designators.
/// The canonical form is the `postgres` style, which is what PostgreSQL
/// prints by default; ISO is read too, as a source asked for it prints it.
/// Other styles (`sql_standard`, `postgres_verbose`) are errors: input in
/// any spelling of the grammar is [`crate::canonical::read_interval_lenient`]'s.
///
/// ```
/// use sluice_core::canonical::{read_interval, Interval};
/// let expected = Interval { months: 14, days: -3, microseconds: 14_706_500_000 };
/// assert_eq!(read_interval(b"1 year 2 mons -3 days +04:05:06.5"), Ok(expected));
/// assert_eq!(read_interval(b"P1Y2M-3DT4H5M6.5S"), Ok(expected));
/// ```
pub fn read_interval(text: &[u8]) -> Result<Interval, FormError> {
    let parsed = match text.first() {
        Some(b'P') => iso_interval(&text[1..]),
        _ => postgres_style(text),
    };
    parsed.ok_or(FormError::Syntax)
}

impl Interval {
    fn add_months(&mut self, months: i64) -> Option<()> {
        self.months = self.months.checked_add(i32::try_from(months).ok()?)?;
        Some(())
    }

    fn add_days(&mut self, days: i64) -> Option<()> {
        self.days = self.days.checked_add(i32::try_from(days).ok()?)?;
        Some(())
    }

    fn add_micros(&mut self, micros: i64) -> Option<()> {
        self.microseconds = self.microseconds.checked_add(micros)?;
        Some(())
    }
}

fn postgres_style(text: &[u8]) -> Option<Interval> {
    let mut interval = Interval::default();
    let mut words = text.split(|&byte| byte == b' ');
    while let Some(word) = words.next() {
        if word.contains(&b':') {
            let (negative, mut clock) = match word.split_first()? {
                (b'-', rest) => (true, rest),
                (b'+', rest) => (false, rest),
                _ => (false, word),
            };
            let micros = take_clock(&mut clock, i64::MAX).filter(|_| clock.is_empty())?;
            interval.add_micros(if negative { -micros } else { micros })?;
            continue;
        }
        let amount = i64::from(std::str::from_utf8(word).ok()?.parse::<i32>().ok()?);
        match words.next()? {
            b"year" | b"years" => interval.add_months(amount.checked_mul(12)?)?,
            b"mon" | b"mons" => interval.add_months(amount)?,
            b"day" | b"days" => interval.add_days(amount)?,
            _ => return None,
        }
    }
    Some(interval)
}

/// The part of an ISO 8601 duration after `P`: signed numbers each followed
/// by a designator; only seconds may have a fraction (up to six digits).
fn iso_interval(mut text: &[u8]) -> Option<Interval> {
    let mut interval = Interval::default();
    let mut in_time = false;
    let mut any = false;
    while !text.is_empty() {
        if take_byte(&mut text, b'T').is_some() {
            in_time = true;
            continue;
        }
        let negative = take_byte(&mut text, b'-').is_some();
        let (whole, _) = take_digits(&mut text, 18)?;
        let whole = if negative { -whole } else { whole };
        let fraction = match take_byte(&mut text, b'.') {
            Some(()) => {
                let (digits, count) = take_digits(&mut text, 6)?;
                Some(digits * 10i64.pow(6 - count as u32))
            }
            None => None,
        };
        let (&designator, rest) = text.split_first()?;
        text = rest;
        any = true;
        match (in_time, designator, fraction) {
            (false, b'Y', None) => interval.add_months(whole.checked_mul(12)?)?,
            (false, b'M', None) => interval.add_months(whole)?,
            (false, b'W', None) => interval.add_days(whole.checked_mul(7)?)?,
            (false, b'D', None) => interval.add_days(whole)?,
            (true, b'H', None) => interval.add_micros(whole.checked_mul(MICROS_PER_HOUR)?)?,
            (true, b'M', None) => interval.add_micros(whole.checked_mul(MICROS_PER_MINUTE)?)?,
            (true, b'S', fraction) => {
                let fraction = fraction.unwrap_or(0);
                let micros = whole.checked_mul(MICROS_PER_SECOND)?;
                let micros = if negative {
                    micros.checked_sub(fraction)?
                } else {
                    micros.checked_add(fraction)?
                };
                interval.add_micros(micros)?
            }
            _ => return None,
        }
    }
    any.then_some(interval)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_in_postgres_and_iso_styles() {
        let interval = |months, days, microseconds| Interval {
            months,
            days,
            microseconds,
        };
        let cases: [(&[u8], Interval); 8] = [
            (
                b"1 year 2 mons 3 days 04:05:06.789",
                interval(14, 3, 14_706_789_000),
            ),
            (
                b"-1 years -2 mons +3 days -04:05:06",
                interval(-14, 3, -14_706_000_000),
            ),
            (b"00:00:00", interval(0, 0, 0)),
            (b"-838:59:59.000001", interval(0, 0, -3_020_399_000_001)),
            (b"1 day", interval(0, 1, 0)),
            (b"P1Y2M3DT4H5M6.789S", interval(14, 3, 14_706_789_000)),
            (b"P-1Y-2M3DT-4H-5M-6.5S", interval(-14, 3, -14_706_500_000)),
            (b"PT0S", interval(0, 0, 0)),
        ];
        for (text, expected) in cases {
            assert_eq!(
                read_interval(text),
                Ok(expected),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
        for bad in [
            &b""[..],
            b"P",
            b"1 fortnight",
            b"1",
            b"P1.5Y",
            b"PT1X",
            b"@ 1 day",
            b"1-2",
            b"2147483648 days",
            b"178956971 years",
            b"PT1.1234567S",
        ] {
            assert!(
                read_interval(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
