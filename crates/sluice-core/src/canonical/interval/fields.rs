//! The lenient reader's field list (`DecodeInterval`): every text that is
//! not ISO 8601. Numbers with unit words, `hh:mm[:ss[.f]]`, `mm:ss.f`, SQL
//! standard's `years-months`, a bare number of seconds, signs on each field
//! and a final `ago`, read from the last field to the first as the reference
//! reader reads them, so that a number takes the unit after it and a number
//! before a time or hours is days.

use super::sum::{Parsed, Sum};
use super::tokens::{tokenize, Token};
use super::units::{word, Mask, Unit, Word, TIME_FIELDS};
use crate::canonical::reading::{
    run, FormError, MICROS_PER_HOUR, MICROS_PER_MINUTE, MICROS_PER_SECOND,
};

/// How a leading minus reads: the one rule in which the interval grammars
/// differ in meaning rather than spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalSigns {
    /// Each field has its own sign (the `postgres`, `postgres_verbose` and
    /// ISO 8601 styles).
    PerField,
    /// SQL standard's rule: a minus on the first field, with no other field
    /// signed, makes every field negative (`-1 2:03:04` is all negative).
    Leading,
}

/// The unit a number without its own takes: the last one read (fields are
/// read right to left), days after a time or hours, seconds at first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Nothing,
    Unit(Unit),
    /// Right after `ago`: a number there has no unit.
    Ago,
}

/// `DecodeInterval`: the fields, read from the last to the first.
pub(super) fn decode_fields(text: &[u8], signs: IntervalSigns) -> Parsed<Sum> {
    let tokens = tokenize(text)?;
    let mut reader = FieldReader {
        all_negative: signs == IntervalSigns::Leading && leading_minus_only(&tokens),
        sum: Sum::default(),
        pending: Pending::Nothing,
        unit_word: false,
        ago: false,
    };
    let mut seen: Mask = 0;
    for (index, token) in tokens.iter().enumerate().rev() {
        let mask = match *token {
            Token::Word(letters) => reader.word(letters, index + 1 == tokens.len())?,
            Token::Time(body) => reader.time(body, false)?,
            // A signed time that is not one is no number either.
            Token::Signed { negative, body } if body.contains(&b':') => {
                reader.time(body, negative).map_err(|_| FormError::Syntax)?
            }
            Token::Signed { negative, body } => reader.number(body, negative)?,
            Token::Number(body) => reader.number(body, false)?,
        };
        if mask & seen != 0 {
            return Err(FormError::Syntax);
        }
        seen |= mask;
    }
    if seen == 0 || reader.unit_word {
        return Err(FormError::Syntax);
    }
    if reader.ago {
        reader.sum.negate()?;
    }
    Ok(reader.sum)
}

/// The state of `decode_fields` between fields.
struct FieldReader {
    /// `sql_standard`'s leading minus applies to every field.
    all_negative: bool,
    sum: Sum,
    pending: Pending,
    /// A unit word waits for its number (none may follow it unused).
    unit_word: bool,
    /// The text ends with `ago`.
    ago: bool,
}

impl FieldReader {
    /// A unit word or `ago` (only last: the reference reader refuses it
    /// elsewhere since version 16, as it refuses a word after a word).
    fn word(&mut self, letters: &[u8], last: bool) -> Parsed<Mask> {
        if self.unit_word {
            return Err(FormError::Syntax);
        }
        match word(letters).ok_or(FormError::Syntax)? {
            Word::Unit(unit) => {
                self.pending = Pending::Unit(unit);
                self.unit_word = true;
            }
            Word::Ago if last => {
                self.pending = Pending::Ago;
                self.ago = true;
            }
            Word::Ago => return Err(FormError::Syntax),
        }
        Ok(0)
    }

    /// A time: it replaces the microseconds summed so far (as the reference
    /// reader's does; what it replaces is mostly a field it conflicts with),
    /// and a number before it is days.
    fn time(&mut self, body: &[u8], negative: bool) -> Parsed<Mask> {
        let mut micros = time_micros(body)?;
        if negative {
            micros = -micros;
        }
        if self.all_negative && micros > 0 {
            micros = -micros;
        }
        self.sum.micros = micros;
        self.pending = Pending::Unit(Unit::Day);
        self.unit_word = false;
        Ok(TIME_FIELDS)
    }

    /// A number: `n`, `n.f`, `.f` or `years-months`, in the pending unit.
    fn number(&mut self, body: &[u8], negative: bool) -> Parsed<Mask> {
        self.unit_word = false;
        let mut unit = match self.pending {
            Pending::Nothing => Unit::Second,
            Pending::Unit(unit) => unit,
            Pending::Ago => return Err(FormError::Syntax),
        };
        let digits = run(body, |byte| byte.is_ascii_digit());
        let mut value = match digits {
            0 => 0,
            _ => signed_i64(&body[..digits], negative)?,
        };
        let mut frac = 0.0;
        match &body[digits..] {
            [] if digits > 0 => {}
            [b'.', ..] => {
                frac = fraction_value(&body[digits..])?;
                if negative {
                    frac = -frac;
                }
            }
            [b'-', months @ ..] if digits > 0 => {
                value = years_months(value, months, negative)?;
                unit = Unit::Month;
            }
            _ => return Err(FormError::Syntax),
        }
        if self.all_negative {
            // Both have the field's sign: only a positive field turns.
            if value > 0 {
                value = -value;
            }
            if frac > 0.0 {
                frac = -frac;
            }
        }
        let mask = unit.add(value, frac, &mut self.sum)?;
        // A number before hours is days (`1 2 hours`); other units stay.
        self.pending = Pending::Unit(if unit == Unit::Hour { Unit::Day } else { unit });
        Ok(mask)
    }
}

/// SQL's rule (`sql_standard` only): the first field has a minus and no
/// other field has a sign.
fn leading_minus_only(tokens: &[Token<'_>]) -> bool {
    matches!(tokens.first(), Some(Token::Signed { negative: true, .. }))
        && !tokens[1..]
            .iter()
            .any(|token| matches!(token, Token::Signed { .. }))
}

/// `hh:mm`, `hh:mm:ss[.f]` or `mm:ss.f` (`DecodeTimeCommon`): any number of
/// hours, minutes below 60, seconds up to 60, the fraction rounded to
/// microseconds half to even.
fn time_micros(body: &[u8]) -> Parsed<i64> {
    let (clock, fraction) = match body.iter().position(|&byte| byte == b'.') {
        Some(at) => (&body[..at], Some(&body[at..])),
        None => (body, None),
    };
    let parts: Vec<&[u8]> = clock.split(|&byte| byte == b':').collect();
    let fraction_micros = match fraction {
        Some(fraction) => (fraction_value(fraction)? * 1e6).round_ties_even() as i64,
        None => 0,
    };
    let (hours, minutes, seconds) = match (parts.as_slice(), fraction) {
        ([hours, minutes], None) => (digits_i64(hours)?, digits_i64(minutes)?, 0),
        // A fraction after two fields: minutes and seconds.
        ([minutes, seconds], Some(_)) => (0, digits_i64(minutes)?, digits_i64(seconds)?),
        ([hours, minutes, seconds], _) => (
            digits_i64(hours)?,
            digits_i64(minutes)?,
            digits_i64(seconds)?,
        ),
        _ => return Err(FormError::Syntax),
    };
    if minutes > 59 || seconds > 60 || fraction_micros > MICROS_PER_SECOND {
        return Err(FormError::FieldRange);
    }
    hours
        .checked_mul(MICROS_PER_HOUR)
        .and_then(|micros| micros.checked_add(minutes * MICROS_PER_MINUTE))
        .and_then(|micros| micros.checked_add(seconds * MICROS_PER_SECOND + fraction_micros))
        .ok_or(FormError::FieldRange)
}

/// Decimal digits, at least one, as an `i64` (too many: overflow).
fn digits_i64(digits: &[u8]) -> Parsed<i64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(FormError::Syntax);
    }
    digits.iter().try_fold(0i64, |value, digit| {
        value
            .checked_mul(10)
            .and_then(|value| value.checked_add(i64::from(digit - b'0')))
            .ok_or(FormError::FieldRange)
    })
}

/// Digits with a sign as an `i64`, down to `i64::MIN` as `strtoll` reads it.
fn signed_i64(digits: &[u8], negative: bool) -> Parsed<i64> {
    let magnitude = digits.iter().try_fold(0i128, |value, digit| {
        let value = value * 10 + i128::from(digit - b'0');
        (value <= 1 << 63)
            .then_some(value)
            .ok_or(FormError::FieldRange)
    })?;
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).map_err(|_| FormError::FieldRange)
}

/// `.` and digits as the `double` `strtod` gives (`.` alone is zero).
fn fraction_value(fraction: &[u8]) -> Parsed<f64> {
    if fraction.len() == 1 {
        return Ok(0.0);
    }
    if !fraction[1..].iter().all(u8::is_ascii_digit) {
        return Err(FormError::Syntax);
    }
    std::str::from_utf8(fraction)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or(FormError::Syntax)
}

/// SQL's `years-months` (`1-2`) as months; the months below 12.
fn years_months(years: i64, months: &[u8], negative: bool) -> Parsed<i64> {
    let months = digits_i64(months)?;
    if months >= 12 {
        return Err(FormError::FieldRange);
    }
    let months = if negative { -months } else { months };
    years
        .checked_mul(12)
        .and_then(|total| total.checked_add(months))
        .ok_or(FormError::FieldRange)
}
