//! The lenient reader's ISO 8601 durations (`DecodeISO8601Interval`): `P`,
//! then numbers each followed by its designator (`P1Y2M3DT4H5M6.7S`, with
//! negative and fractional fields and `W`), or the alternative format
//! (`P0001-02-03T04:05:06`, `P00010203T040506`). Hexadecimal numbers are
//! refused.

use super::sum::{Parsed, Sum};
use super::units::Unit;
use crate::canonical::reading::{
    run, FormError, MICROS_PER_DAY, MICROS_PER_HOUR, MICROS_PER_MINUTE, MICROS_PER_SECOND,
};

/// `DecodeISO8601Interval`: `P`, then numbers each followed by its unit
/// (`Y`, `M`, `W`, `D`; after `T`: `H`, `M`, `S`), or the alternative
/// format `PYYYY-MM-DDThh:mm:ss` / `PYYYYMMDDThhmmss`. Case matters, and no
/// blank is allowed anywhere.
pub(super) fn decode_iso(text: &[u8]) -> Parsed<Sum> {
    if text.len() < 2 || text[0] != b'P' {
        return Err(FormError::Syntax);
    }
    let mut reader = IsoReader {
        text,
        at: 1,
        sum: Sum::default(),
        date_part: true,
        have_field: false,
    };
    while reader.at < text.len() {
        if text[reader.at] == b'T' {
            reader.start_time();
            reader.at += 1;
            continue;
        }
        let done = if reader.date_part {
            reader.date_field()?
        } else {
            reader.time_field()?
        };
        if done {
            break;
        }
    }
    Ok(reader.sum)
}

struct IsoReader<'t> {
    text: &'t [u8],
    at: usize,
    sum: Sum,
    /// Before the `T`.
    date_part: bool,
    /// A field with its unit letter has been read in this part.
    have_field: bool,
}

/// What one ISO field read says about the rest.
type Done = bool;

impl IsoReader<'_> {
    fn start_time(&mut self) {
        self.date_part = false;
        self.have_field = false;
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    /// A number, as its whole part (toward zero) and fraction.
    fn number(&mut self) -> Parsed<(i64, f64)> {
        let (value, length) = iso_number(&self.text[self.at..])?;
        self.at += length;
        Ok(value)
    }

    /// The letter after a number (`None` at the end), consumed.
    fn unit(&mut self) -> Option<u8> {
        let unit = self.peek();
        self.at += 1;
        unit
    }

    fn date_field(&mut self) -> Parsed<Done> {
        let start = self.at;
        let (value, frac) = self.number()?;
        let designated = |unit: Unit, sum: &mut Sum| unit.add(value, frac, sum).map(drop);
        match self.unit() {
            Some(b'Y') => designated(Unit::Year, &mut self.sum)?,
            Some(b'M') => designated(Unit::Month, &mut self.sum)?,
            Some(b'W') => designated(Unit::Week, &mut self.sum)?,
            Some(b'D') => designated(Unit::Day, &mut self.sum)?,
            unit @ (Some(b'T') | None)
                if integer_width(&self.text[start..]) == 8 && !self.have_field =>
            {
                return self.basic_date(value, frac, unit.is_none());
            }
            unit @ (Some(b'T' | b'-') | None) => return self.extended_date(value, frac, unit),
            Some(_) => return Err(FormError::Syntax),
        }
        self.have_field = true;
        Ok(false)
    }

    /// `YYYYMMDD` (the month and day unchecked, as the reference reader leaves
    /// them).
    fn basic_date(&mut self, value: i64, frac: f64, at_end: bool) -> Parsed<Done> {
        self.sum.add_years(value / 10000, 1)?;
        self.sum.add_months(value / 100 % 100)?;
        self.sum.add_days(value % 100, 1)?;
        self.sum.add_fraction_micros(frac, MICROS_PER_DAY)?;
        self.start_time();
        Ok(at_end)
    }

    /// `YYYY[-MM[-DD]]`, each part a number of its unit.
    fn extended_date(&mut self, years: i64, frac: f64, unit: Option<u8>) -> Parsed<Done> {
        if self.have_field {
            return Err(FormError::Syntax);
        }
        Unit::Year.add(years, frac, &mut self.sum)?;
        match unit {
            None => return Ok(true),
            Some(b'T') => {
                self.start_time();
                return Ok(false);
            }
            _ => {}
        }
        for (index, unit) in [Unit::Month, Unit::Day].into_iter().enumerate() {
            let (value, frac) = self.number()?;
            unit.add(value, frac, &mut self.sum)?;
            match self.peek() {
                None => return Ok(true),
                // Left for the loop, which starts the time part.
                Some(b'T') => return Ok(false),
                Some(b'-') if index == 0 => self.at += 1,
                Some(_) => return Err(FormError::Syntax),
            }
        }
        unreachable!("the day field ends the date")
    }

    fn time_field(&mut self) -> Parsed<Done> {
        let start = self.at;
        let (value, frac) = self.number()?;
        let unit = self.unit();
        let sum = &mut self.sum;
        match unit {
            Some(b'H') => sum.add_micros(value, frac, MICROS_PER_HOUR)?,
            Some(b'M') => sum.add_micros(value, frac, MICROS_PER_MINUTE)?,
            Some(b'S') => sum.add_micros(value, frac, MICROS_PER_SECOND)?,
            None if integer_width(&self.text[start..]) == 6 && !self.have_field => {
                sum.add_micros(value / 10000, 0.0, MICROS_PER_HOUR)?;
                sum.add_micros(value / 100 % 100, 0.0, MICROS_PER_MINUTE)?;
                sum.add_micros(value % 100, 0.0, MICROS_PER_SECOND)?;
                // The reference reader scales this fraction by one microsecond,
                // not a second (`hhmmss.5` is half a microsecond): kept as it
                // is.
                sum.add_fraction_micros(frac, 1)?;
                return Ok(true);
            }
            unit @ (None | Some(b':')) => return self.extended_time(value, frac, unit.is_none()),
            Some(_) => return Err(FormError::Syntax),
        }
        self.have_field = true;
        Ok(false)
    }

    /// `hh[:mm[:ss]]`, each part a number of its unit.
    fn extended_time(&mut self, hours: i64, frac: f64, at_end: bool) -> Parsed<Done> {
        if self.have_field {
            return Err(FormError::Syntax);
        }
        self.sum.add_micros(hours, frac, MICROS_PER_HOUR)?;
        if at_end {
            return Ok(true);
        }
        for (index, scale) in [MICROS_PER_MINUTE, MICROS_PER_SECOND]
            .into_iter()
            .enumerate()
        {
            let (value, frac) = self.number()?;
            self.sum.add_micros(value, frac, scale)?;
            match self.peek() {
                None => return Ok(true),
                Some(b':') if index == 0 => self.at += 1,
                Some(_) => return Err(FormError::Syntax),
            }
        }
        unreachable!("the seconds field ends the time")
    }
}

/// The digits of an ISO number's whole part (after a minus).
fn integer_width(field: &[u8]) -> usize {
    let digits = field.strip_prefix(b"-").unwrap_or(field);
    run(digits, |byte| byte.is_ascii_digit())
}

/// `ParseISO8601Number`: a decimal number as `strtod` reads it (a minus,
/// digits with a point, an exponent), at most 10^15 in size; its whole part
/// toward zero, its fraction, and its length. `strtod`'s other forms
/// (hexadecimal, `inf`, `nan`) are refused.
fn iso_number(text: &[u8]) -> Parsed<((i64, f64), usize)> {
    let sign = usize::from(text.first() == Some(&b'-'));
    let whole = run(&text[sign..], |byte| byte.is_ascii_digit());
    let mut end = sign + whole;
    let mut fraction = 0;
    if text.get(end) == Some(&b'.') {
        fraction = run(&text[end + 1..], |byte| byte.is_ascii_digit());
        end += 1 + fraction;
    }
    if whole + fraction == 0 {
        return Err(FormError::Syntax);
    }
    let mantissa_end = end;
    if matches!(text.get(end), Some(b'e' | b'E')) {
        let signed = usize::from(matches!(text.get(end + 1), Some(b'+' | b'-')));
        let digits = run(&text[end + 1 + signed..], |byte| byte.is_ascii_digit());
        if digits > 0 {
            end += 1 + signed + digits;
        }
    }
    let value: f64 = std::str::from_utf8(&text[..end])
        .ok()
        .and_then(|number| number.parse().ok())
        .ok_or(FormError::Syntax)?;
    let nonzero = text[..mantissa_end]
        .iter()
        .any(|byte| matches!(byte, b'1'..=b'9'));
    // `strtod` reports these as out of range, which the reference reader calls
    // bad syntax.
    if value.is_infinite() || (nonzero && !value.is_normal()) {
        return Err(FormError::Syntax);
    }
    if value.abs() > 1e15 {
        return Err(FormError::FieldRange);
    }
    let whole = value.trunc() as i64;
    Ok(((whole, value - whole as f64), end))
}
