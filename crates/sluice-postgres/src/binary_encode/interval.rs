//! `interval` text read as PostgreSQL's `interval_in` reads it, into the
//! 16 bytes `interval_recv` takes: microseconds (`i64`), days (`i32`),
//! months (`i32`).
//!
//! Two grammars, as in the server (`datetime.c`): a text starting with `P`
//! is ISO 8601 (`DecodeISO8601Interval`: `P1Y2M3DT4H5M6.7S`, with negative
//! and fractional fields and `W`, or the "alternative format"
//! `P0001-02-03T04:05:06` / `P00010203T040506`); any other text is a list of
//! fields (`DecodeInterval`): numbers with unit words, `hh:mm[:ss[.f]]`,
//! `mm:ss.f`, SQL's `years-months`, a bare number of seconds, signs on each
//! field, `@` and other punctuation as separators, and a final `ago`. The
//! fields are read right to left, as the server reads them, so that a number
//! takes the unit after it, a number before a time is days, a number before
//! hours is days. Fractions cascade exactly as the server's `double`
//! arithmetic does (`AdjustFract*`): a fraction of a year becomes whole
//! months (rounded), of a month 30 days, of a day 24 hours.
//!
//! Refused (an error naming the value, never a guess), although some
//! server versions read them: `infinity` (PostgreSQL 17 only), a unit word
//! not directly after its number or `ago` not at the end (read by
//! PostgreSQL 15, refused since 16), an empty field in a time or after a
//! year's hyphen (`1:`, `1::2`, `1-`), hexadecimal ISO numbers, and any byte
//! outside ASCII.

use bytes::{BufMut, BytesMut};

use super::error::{quoted, EncodeError, DATETIME_FIELD_OVERFLOW, INVALID_DATETIME_FORMAT};

/// `interval field value out of range` (`ERRCODE_INTERVAL_FIELD_OVERFLOW`).
const INTERVAL_FIELD_OVERFLOW: &str = "22015";

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_MINUTE: i64 = 60 * MICROS_PER_SECOND;
const MICROS_PER_HOUR: i64 = 60 * MICROS_PER_MINUTE;
const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;
/// The server's fixed month length for fractions of months.
const DAYS_PER_MONTH: i32 = 30;

/// An interval in PostgreSQL's binary form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Interval {
    pub micros: i64,
    pub days: i32,
    pub months: i32,
}

impl Interval {
    pub(super) fn write(self, out: &mut BytesMut) {
        out.put_i64(self.micros);
        out.put_i32(self.days);
        out.put_i32(self.months);
    }
}

/// How the session reads a leading minus (its `IntervalStyle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signs {
    /// `postgres`, `postgres_verbose`, `iso_8601`: each field has its own sign.
    PerField,
    /// `sql_standard`: a minus on the first field, with no other field
    /// signed, makes every field negative (`-1 2:03:04` is all negative).
    Leading,
}

impl Signs {
    /// The rule of a session whose `IntervalStyle` is `style`; `None` for a
    /// style this module does not know.
    pub(crate) fn of_style(style: &str) -> Option<Signs> {
        let is = |name: &str| style.eq_ignore_ascii_case(name);
        if is("postgres") || is("postgres_verbose") || is("iso_8601") {
            Some(Signs::PerField)
        } else if is("sql_standard") {
            Some(Signs::Leading)
        } else {
            None
        }
    }
}

/// Why a text is not an interval: the server's two `DTERR` codes that
/// `interval_in` reports differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `DTERR_BAD_FORMAT`: invalid input syntax.
    Syntax,
    /// `DTERR_FIELD_OVERFLOW`: interval field value out of range.
    Overflow,
}

type Parsed<T> = Result<T, Fault>;

/// Reads `text` as the server would in a session reading signs by `signs`.
pub(super) fn parse_interval(text: &[u8], signs: Signs) -> Result<Interval, EncodeError> {
    // As `interval_in`: the ISO grammar only when the other one finds bad
    // syntax (a text starting with `P` always does).
    let sum = match decode_fields(text, signs) {
        Err(Fault::Syntax) => decode_iso(text),
        other => other,
    };
    match sum {
        Ok(sum) => sum.finish(text),
        Err(Fault::Syntax) => Err(EncodeError::new(
            INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type interval: {}", quoted(text)),
        )),
        Err(Fault::Overflow) => Err(EncodeError::new(
            INTERVAL_FIELD_OVERFLOW,
            format!("interval field value out of range: {}", quoted(text)),
        )),
    }
}

// ------------------------------------------------------------- accumulation --

/// The fields as the server adds them up (`pg_itm_in`): years apart from
/// months until the end, each field checked for overflow as it grows.
#[derive(Debug, Default, Clone, Copy)]
struct Sum {
    micros: i64,
    days: i32,
    months: i32,
    years: i32,
}

/// `total + value × scale`, refused when any step leaves `i32` (the width of
/// the server's day, month and year fields).
fn scaled_add(total: i32, value: i64, scale: i32) -> Parsed<i32> {
    fits_i32(value)?
        .checked_mul(scale)
        .and_then(|scaled| total.checked_add(scaled))
        .ok_or(Fault::Overflow)
}

fn fits_i32(value: i64) -> Parsed<i32> {
    i32::try_from(value).map_err(|_| Fault::Overflow)
}

impl Sum {
    /// `frac * scale` microseconds, rounded to the nearest (an exact half
    /// toward zero, as the server's comparison with 0.5 does).
    fn add_fraction_micros(&mut self, frac: f64, scale: i64) -> Parsed<()> {
        if frac == 0.0 {
            return Ok(());
        }
        let scaled = frac * scale as f64;
        let mut micros = scaled as i64;
        let rest = scaled - micros as f64;
        if rest > 0.5 {
            micros += 1;
        } else if rest < -0.5 {
            micros -= 1;
        }
        self.micros = self.micros.checked_add(micros).ok_or(Fault::Overflow)?;
        Ok(())
    }

    /// `frac * scale` days: whole days, the rest as microseconds of a day.
    fn add_fraction_days(&mut self, frac: f64, scale: i32) -> Parsed<()> {
        if frac == 0.0 {
            return Ok(());
        }
        let scaled = frac * f64::from(scale);
        let days = scaled as i32;
        self.days = self.days.checked_add(days).ok_or(Fault::Overflow)?;
        self.add_fraction_micros(scaled - f64::from(days), MICROS_PER_DAY)
    }

    /// `frac * scale` years as whole months, rounded half to even (`rint`);
    /// the rest of a month is dropped, as the server drops it.
    fn add_fraction_years(&mut self, frac: f64, scale: i32) -> Parsed<()> {
        let months = (frac * f64::from(scale) * 12.0).round_ties_even() as i32;
        self.months = self.months.checked_add(months).ok_or(Fault::Overflow)?;
        Ok(())
    }

    fn add_micros(&mut self, value: i64, frac: f64, scale: i64) -> Parsed<()> {
        self.micros = value
            .checked_mul(scale)
            .and_then(|micros| self.micros.checked_add(micros))
            .ok_or(Fault::Overflow)?;
        self.add_fraction_micros(frac, scale)
    }

    fn add_days(&mut self, value: i64, scale: i32) -> Parsed<()> {
        self.days = scaled_add(self.days, value, scale)?;
        Ok(())
    }

    fn add_months(&mut self, value: i64) -> Parsed<()> {
        self.months = scaled_add(self.months, value, 1)?;
        Ok(())
    }

    fn add_years(&mut self, value: i64, scale: i32) -> Parsed<()> {
        self.years = scaled_add(self.years, value, scale)?;
        Ok(())
    }

    /// `ago`: every field negated.
    fn negate(&mut self) -> Parsed<()> {
        let overflow = || Fault::Overflow;
        self.micros = self.micros.checked_neg().ok_or_else(overflow)?;
        self.days = self.days.checked_neg().ok_or_else(overflow)?;
        self.months = self.months.checked_neg().ok_or_else(overflow)?;
        self.years = self.years.checked_neg().ok_or_else(overflow)?;
        Ok(())
    }

    /// The binary form (`itmin2interval`): years and months together must
    /// fit an `i32` of months. The two values PostgreSQL 17 takes for
    /// `±infinity` are refused: an older server would store them as finite.
    fn finish(self, text: &[u8]) -> Result<Interval, EncodeError> {
        let out_of_range = || {
            EncodeError::new(
                DATETIME_FIELD_OVERFLOW,
                format!("interval out of range: {}", quoted(text)),
            )
        };
        let months = i64::from(self.years) * 12 + i64::from(self.months);
        let months = i32::try_from(months).map_err(|_| out_of_range())?;
        let interval = Interval {
            micros: self.micros,
            days: self.days,
            months,
        };
        let infinite = [(i64::MAX, i32::MAX), (i64::MIN, i32::MIN)]
            .contains(&(interval.micros, interval.days))
            && interval.days == interval.months;
        if infinite {
            return Err(out_of_range());
        }
        Ok(interval)
    }
}

// -------------------------------------------------------------------- units --

/// The units a number can be in (`deltatktbl`'s `UNITS` the server adds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Microsecond,
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
    Decade,
    Century,
    Millennium,
}

/// Which fields a text has set, to refuse one set twice (the server's
/// `fmask`): a time sets hours, minutes and all the seconds' units.
type Mask = u16;

impl Unit {
    fn mask(self) -> Mask {
        1 << self as u16
    }

    /// Adds `value` and its fraction `frac` (of the same sign) in this unit.
    fn add(self, value: i64, frac: f64, sum: &mut Sum) -> Parsed<Mask> {
        match self {
            Unit::Microsecond => sum.add_micros(value, frac, 1)?,
            Unit::Millisecond => sum.add_micros(value, frac, 1000)?,
            Unit::Second => {
                sum.add_micros(value, frac, MICROS_PER_SECOND)?;
                // Fractional seconds are milli- and microseconds too.
                if frac != 0.0 {
                    return Ok(ALL_SECONDS);
                }
            }
            Unit::Minute => sum.add_micros(value, frac, MICROS_PER_MINUTE)?,
            Unit::Hour => sum.add_micros(value, frac, MICROS_PER_HOUR)?,
            Unit::Day => {
                sum.add_days(value, 1)?;
                sum.add_fraction_micros(frac, MICROS_PER_DAY)?;
            }
            Unit::Week => {
                sum.add_days(value, 7)?;
                sum.add_fraction_days(frac, 7)?;
            }
            Unit::Month => {
                sum.add_months(value)?;
                sum.add_fraction_days(frac, DAYS_PER_MONTH)?;
            }
            Unit::Year | Unit::Decade | Unit::Century | Unit::Millennium => {
                let scale = self.years();
                sum.add_years(value, scale)?;
                sum.add_fraction_years(frac, scale)?;
            }
        }
        Ok(self.mask())
    }

    fn years(self) -> i32 {
        match self {
            Unit::Decade => 10,
            Unit::Century => 100,
            Unit::Millennium => 1000,
            _ => 1,
        }
    }
}

const ALL_SECONDS: Mask =
    (1 << Unit::Second as u16) | (1 << Unit::Millisecond as u16) | (1 << Unit::Microsecond as u16);
const TIME_FIELDS: Mask = ALL_SECONDS | (1 << Unit::Minute as u16) | (1 << Unit::Hour as u16);

/// What a word means in an interval.
enum Word {
    Unit(Unit),
    Ago,
}

/// The server's unit words (`deltatktbl`), lower case. It compares only
/// the first ten letters (`TOKMAXLEN`), so `microseconds` is `microsecon`.
const WORDS: &[(&str, Unit)] = &[
    ("c", Unit::Century),
    ("cent", Unit::Century),
    ("centuries", Unit::Century),
    ("century", Unit::Century),
    ("d", Unit::Day),
    ("day", Unit::Day),
    ("days", Unit::Day),
    ("dec", Unit::Decade),
    ("decade", Unit::Decade),
    ("decades", Unit::Decade),
    ("decs", Unit::Decade),
    ("h", Unit::Hour),
    ("hour", Unit::Hour),
    ("hours", Unit::Hour),
    ("hr", Unit::Hour),
    ("hrs", Unit::Hour),
    ("m", Unit::Minute),
    ("microsecon", Unit::Microsecond),
    ("mil", Unit::Millennium),
    ("millennia", Unit::Millennium),
    ("millennium", Unit::Millennium),
    ("millisecon", Unit::Millisecond),
    ("mils", Unit::Millennium),
    ("min", Unit::Minute),
    ("mins", Unit::Minute),
    ("minute", Unit::Minute),
    ("minutes", Unit::Minute),
    ("mon", Unit::Month),
    ("mons", Unit::Month),
    ("month", Unit::Month),
    ("months", Unit::Month),
    ("ms", Unit::Millisecond),
    ("msec", Unit::Millisecond),
    ("msecond", Unit::Millisecond),
    ("mseconds", Unit::Millisecond),
    ("msecs", Unit::Millisecond),
    ("s", Unit::Second),
    ("sec", Unit::Second),
    ("second", Unit::Second),
    ("seconds", Unit::Second),
    ("secs", Unit::Second),
    ("us", Unit::Microsecond),
    ("usec", Unit::Microsecond),
    ("usecond", Unit::Microsecond),
    ("useconds", Unit::Microsecond),
    ("usecs", Unit::Microsecond),
    ("w", Unit::Week),
    ("week", Unit::Week),
    ("weeks", Unit::Week),
    ("y", Unit::Year),
    ("year", Unit::Year),
    ("years", Unit::Year),
    ("yr", Unit::Year),
    ("yrs", Unit::Year),
];

/// The longest word the server compares (`TOKMAXLEN`).
const WORD_LETTERS: usize = 10;

fn word(letters: &[u8]) -> Option<Word> {
    if letters.eq_ignore_ascii_case(b"ago") {
        return Some(Word::Ago);
    }
    // A longer word matches a ten-letter entry on its first ten letters.
    let key = &letters[..letters.len().min(WORD_LETTERS)];
    WORDS
        .iter()
        .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(key))
        .filter(|(name, _)| letters.len() <= WORD_LETTERS || name.len() == WORD_LETTERS)
        .map(|&(_, unit)| Word::Unit(unit))
}

// ------------------------------------------------------------------- fields --

/// One field of the text, as the server's `ParseDateTime` splits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'t> {
    /// Digits, then `:` and more digits, colons and points (`12:30:00.5`).
    Time(&'t [u8]),
    /// A sign, then a digit and more digits, colons, points and hyphens
    /// (`-1`, `+02:03`, `-1-2`); `body` is without the sign.
    Signed { negative: bool, body: &'t [u8] },
    /// A number, perhaps with a fraction or a `-months` (`1.5`, `.5`, `1-2`).
    Number(&'t [u8]),
    /// Letters (`days`, `ago`).
    Word(&'t [u8]),
}

impl Token<'_> {
    /// The bytes the server keeps of it (its sign included).
    fn stored_len(&self) -> usize {
        match self {
            Token::Time(body) | Token::Number(body) | Token::Word(body) => body.len(),
            Token::Signed { body, .. } => body.len() + 1,
        }
    }
}

/// At most this many fields (`MAXDATEFIELDS`).
const MAX_FIELDS: usize = 25;
/// The server copies the fields, each with a terminating NUL, into a buffer
/// of 256 bytes; a text whose fields do not fit is bad syntax.
const FIELD_BUFFER: usize = 256;

fn is_blank(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The length of the run at the start of `text` whose bytes pass `keep`.
fn run(text: &[u8], keep: impl Fn(u8) -> bool) -> usize {
    text.iter()
        .position(|&byte| !keep(byte))
        .unwrap_or(text.len())
}

/// Splits `text` into fields. What the server would split into a field its
/// interval reader then refuses (`day-2`, `+x`, control bytes) is refused
/// here already.
fn tokenize(text: &[u8]) -> Parsed<Vec<Token<'_>>> {
    let mut tokens = Vec::new();
    let mut stored = 0;
    let mut at = 0;
    while at < text.len() {
        let byte = text[at];
        if is_blank(byte) {
            at += 1;
            continue;
        }
        if byte.is_ascii_punctuation() && !matches!(byte, b'+' | b'-' | b'.') {
            // `@`, commas and the like only separate fields.
            at += 1;
            continue;
        }
        if tokens.len() == MAX_FIELDS {
            return Err(Fault::Syntax);
        }
        let (token, length) = token_at(&text[at..])?;
        stored += token.stored_len() + 1;
        if stored > FIELD_BUFFER {
            return Err(Fault::Syntax);
        }
        tokens.push(token);
        at += length;
    }
    Ok(tokens)
}

/// The field at the start of `text` and how many bytes it took.
fn token_at(text: &[u8]) -> Parsed<(Token<'_>, usize)> {
    match text[0] {
        b'0'..=b'9' => Ok(number_token(text)),
        b'.' => {
            let end = 1 + run(&text[1..], |byte| byte.is_ascii_digit());
            Ok((Token::Number(&text[..end]), end))
        }
        b'a'..=b'z' | b'A'..=b'Z' => word_token(text),
        b'+' | b'-' => signed_token(text),
        _ => Err(Fault::Syntax),
    }
}

/// Digits, then a time (`:`), a date-like run (`-`, `/`, `.`) or nothing.
fn number_token(text: &[u8]) -> (Token<'_>, usize) {
    let digits = run(text, |byte| byte.is_ascii_digit());
    match text.get(digits) {
        Some(b':') => {
            let clock = run(&text[digits + 1..], |byte| {
                byte.is_ascii_digit() || byte == b':' || byte == b'.'
            });
            let end = digits + 1 + clock;
            (Token::Time(&text[..end]), end)
        }
        Some(&delimiter @ (b'-' | b'/' | b'.')) => {
            let rest = &text[digits + 1..];
            // `1.5`, `1-2`, `1-2-3`: digits and the same delimiter; after a
            // delimiter without digits, letters too (`1-jan`). Either way the
            // interval reader checks what it holds.
            let length = if rest.first().is_some_and(u8::is_ascii_digit) {
                let second = run(rest, |byte| byte.is_ascii_digit());
                if rest.get(second) == Some(&delimiter) {
                    second
                        + run(&rest[second..], |byte| {
                            byte.is_ascii_digit() || byte == delimiter
                        })
                } else {
                    second
                }
            } else {
                run(rest, |byte| {
                    byte.is_ascii_alphanumeric() || byte == delimiter
                })
            };
            let end = digits + 1 + length;
            (Token::Number(&text[..end]), end)
        }
        _ => (Token::Number(&text[..digits]), digits),
    }
}

/// The words the server keeps apart from a digit or `+` right after them
/// (its date keywords that are also units: `1d2h`, `1mon2d`); after any
/// other word a digit makes a date-like field, which no interval holds.
const WORDS_BEFORE_DIGITS: &[&[u8]] = &[b"d", b"h", b"m", b"s", b"y", b"mon", b"dec"];

fn word_token(text: &[u8]) -> Parsed<(Token<'_>, usize)> {
    let letters = run(text, |byte| byte.is_ascii_alphabetic());
    let word = &text[..letters];
    match text.get(letters) {
        Some(b'-' | b'/' | b'.') => Err(Fault::Syntax),
        Some(&next) if next == b'+' || next.is_ascii_digit() => {
            let kept = WORDS_BEFORE_DIGITS
                .iter()
                .any(|known| known.eq_ignore_ascii_case(word));
            if kept {
                Ok((Token::Word(word), letters))
            } else {
                Err(Fault::Syntax)
            }
        }
        _ => Ok((Token::Word(word), letters)),
    }
}

/// A sign, blanks, then a digit and digits, colons, points, hyphens. A sign
/// before letters (`-infinity`) is refused, as PostgreSQL before 17 does.
fn signed_token(text: &[u8]) -> Parsed<(Token<'_>, usize)> {
    let negative = text[0] == b'-';
    let start = 1 + run(&text[1..], is_blank);
    if !text.get(start).is_some_and(u8::is_ascii_digit) {
        return Err(Fault::Syntax);
    }
    let length = run(&text[start..], |byte| {
        byte.is_ascii_digit() || matches!(byte, b':' | b'.' | b'-')
    });
    let end = start + length;
    Ok((
        Token::Signed {
            negative,
            body: &text[start..end],
        },
        end,
    ))
}

// --------------------------------------------------------------- the fields --

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
fn decode_fields(text: &[u8], signs: Signs) -> Parsed<Sum> {
    let tokens = tokenize(text)?;
    let mut reader = FieldReader {
        all_negative: signs == Signs::Leading && leading_minus_only(&tokens),
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
                reader.time(body, negative).map_err(|_| Fault::Syntax)?
            }
            Token::Signed { negative, body } => reader.number(body, negative)?,
            Token::Number(body) => reader.number(body, false)?,
        };
        if mask & seen != 0 {
            return Err(Fault::Syntax);
        }
        seen |= mask;
    }
    if seen == 0 || reader.unit_word {
        return Err(Fault::Syntax);
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
    /// A unit word or `ago` (only last: PostgreSQL 16 refuses it elsewhere,
    /// as it refuses a word after a word).
    fn word(&mut self, letters: &[u8], last: bool) -> Parsed<Mask> {
        if self.unit_word {
            return Err(Fault::Syntax);
        }
        match word(letters).ok_or(Fault::Syntax)? {
            Word::Unit(unit) => {
                self.pending = Pending::Unit(unit);
                self.unit_word = true;
            }
            Word::Ago if last => {
                self.pending = Pending::Ago;
                self.ago = true;
            }
            Word::Ago => return Err(Fault::Syntax),
        }
        Ok(0)
    }

    /// A time: it replaces the microseconds summed so far (as the server's
    /// does; what it replaces is mostly a field it conflicts with), and a
    /// number before it is days.
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
            Pending::Ago => return Err(Fault::Syntax),
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
            _ => return Err(Fault::Syntax),
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
        _ => return Err(Fault::Syntax),
    };
    if minutes > 59 || seconds > 60 || fraction_micros > MICROS_PER_SECOND {
        return Err(Fault::Overflow);
    }
    hours
        .checked_mul(MICROS_PER_HOUR)
        .and_then(|micros| micros.checked_add(minutes * MICROS_PER_MINUTE))
        .and_then(|micros| micros.checked_add(seconds * MICROS_PER_SECOND + fraction_micros))
        .ok_or(Fault::Overflow)
}

/// Decimal digits, at least one, as an `i64` (too many: overflow).
fn digits_i64(digits: &[u8]) -> Parsed<i64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Fault::Syntax);
    }
    digits.iter().try_fold(0i64, |value, digit| {
        value
            .checked_mul(10)
            .and_then(|value| value.checked_add(i64::from(digit - b'0')))
            .ok_or(Fault::Overflow)
    })
}

/// Digits with a sign as an `i64`, down to `i64::MIN` as `strtoll` reads it.
fn signed_i64(digits: &[u8], negative: bool) -> Parsed<i64> {
    let magnitude = digits.iter().try_fold(0i128, |value, digit| {
        let value = value * 10 + i128::from(digit - b'0');
        (value <= 1 << 63).then_some(value).ok_or(Fault::Overflow)
    })?;
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).map_err(|_| Fault::Overflow)
}

/// `.` and digits as the `double` `strtod` gives (`.` alone is zero).
fn fraction_value(fraction: &[u8]) -> Parsed<f64> {
    if fraction.len() == 1 {
        return Ok(0.0);
    }
    if !fraction[1..].iter().all(u8::is_ascii_digit) {
        return Err(Fault::Syntax);
    }
    std::str::from_utf8(fraction)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or(Fault::Syntax)
}

/// SQL's `years-months` (`1-2`) as months; the months below 12.
fn years_months(years: i64, months: &[u8], negative: bool) -> Parsed<i64> {
    let months = digits_i64(months)?;
    if months >= 12 {
        return Err(Fault::Overflow);
    }
    let months = if negative { -months } else { months };
    years
        .checked_mul(12)
        .and_then(|total| total.checked_add(months))
        .ok_or(Fault::Overflow)
}

// ---------------------------------------------------------------- ISO 8601 --

/// `DecodeISO8601Interval`: `P`, then numbers each followed by its unit
/// (`Y`, `M`, `W`, `D`; after `T`: `H`, `M`, `S`), or the alternative
/// format `PYYYY-MM-DDThh:mm:ss` / `PYYYYMMDDThhmmss`. Case matters, and no
/// blank is allowed anywhere.
fn decode_iso(text: &[u8]) -> Parsed<Sum> {
    if text.len() < 2 || text[0] != b'P' {
        return Err(Fault::Syntax);
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
            Some(_) => return Err(Fault::Syntax),
        }
        self.have_field = true;
        Ok(false)
    }

    /// `YYYYMMDD` (the month and day unchecked, as the server leaves them).
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
            return Err(Fault::Syntax);
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
                Some(_) => return Err(Fault::Syntax),
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
                // The server scales this fraction by one microsecond, not a
                // second (`hhmmss.5` is half a microsecond): kept as it is.
                sum.add_fraction_micros(frac, 1)?;
                return Ok(true);
            }
            unit @ (None | Some(b':')) => return self.extended_time(value, frac, unit.is_none()),
            Some(_) => return Err(Fault::Syntax),
        }
        self.have_field = true;
        Ok(false)
    }

    /// `hh[:mm[:ss]]`, each part a number of its unit.
    fn extended_time(&mut self, hours: i64, frac: f64, at_end: bool) -> Parsed<Done> {
        if self.have_field {
            return Err(Fault::Syntax);
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
                Some(_) => return Err(Fault::Syntax),
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
        return Err(Fault::Syntax);
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
        .ok_or(Fault::Syntax)?;
    let nonzero = text[..mantissa_end]
        .iter()
        .any(|byte| matches!(byte, b'1'..=b'9'));
    // `strtod` reports these as out of range, which the server calls bad syntax.
    if value.is_infinite() || (nonzero && !value.is_normal()) {
        return Err(Fault::Syntax);
    }
    if value.abs() > 1e15 {
        return Err(Fault::Overflow);
    }
    let whole = value.trunc() as i64;
    Ok(((whole, value - whole as f64), end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> (i32, i32, i64) {
        let interval = parse_interval(text.as_bytes(), Signs::PerField)
            .unwrap_or_else(|error| panic!("{text}: {error}"));
        (interval.months, interval.days, interval.micros)
    }

    const HOUR: i64 = MICROS_PER_HOUR;

    #[test]
    fn every_output_style_reads_back() {
        let postgres = (14, 3, 4 * HOUR + 5 * 60_000_000 + 6_789_000);
        assert_eq!(read("1 year 2 mons 3 days 04:05:06.789"), postgres);
        assert_eq!(read("1-2 3 4:05:06.789"), postgres);
        assert_eq!(read("P1Y2M3DT4H5M6.789S"), postgres);
        assert_eq!(
            read("@ 1 year 2 mons -3 days 4 hours 5 mins 6.789 secs ago"),
            (-14, 3, -(4 * HOUR + 5 * 60_000_000 + 6_789_000))
        );
        assert_eq!(read("-1 days +02:03:00"), (0, -1, 2 * HOUR + 180_000_000));
        assert_eq!(
            read("P0001-02-03T04:05:06"),
            (14, 3, 4 * HOUR + 306_000_000)
        );
    }

    #[test]
    fn fractions_cascade_as_the_server_computes_them() {
        assert_eq!(read("1.5 years"), (18, 0, 0));
        assert_eq!(read("1.5 days"), (0, 1, 12 * HOUR));
        assert_eq!(read("1.5 months"), (1, 15, 0));
        assert_eq!(read("1.5 weeks"), (0, 10, 12 * HOUR));
        // A time replaces the microseconds a fraction of a day left.
        assert_eq!(read("00:30 1.5 days"), (0, 1, HOUR / 2));
    }

    #[test]
    fn sql_standard_sessions_spread_a_leading_minus() {
        let read = |text: &str, signs| parse_interval(text.as_bytes(), signs).unwrap();
        let all = read("-1 2:03:04", Signs::Leading);
        assert_eq!((all.days, all.micros), (-1, -(2 * HOUR + 184_000_000)));
        let own = read("-1 2:03:04", Signs::PerField);
        assert_eq!((own.days, own.micros), (-1, 2 * HOUR + 184_000_000));
    }

    #[test]
    fn refusals_say_what_the_server_would() {
        let error = |text: &str| parse_interval(text.as_bytes(), Signs::PerField).unwrap_err();
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
    fn unit_words_compare_ten_letters() {
        assert_eq!(read("1 microsecondsxx"), (0, 0, 1));
        assert_eq!(read("2 millenniums"), (24000, 0, 0));
        assert!(parse_interval(b"1 dayz", Signs::PerField).is_err());
    }
}
