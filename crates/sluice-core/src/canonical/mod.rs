//! The canonical text forms of [`crate::value`] as code: one reader (and, for
//! the forms a source builds itself, one writer) per form, so every format,
//! encoder and database that meets a value reads it the same way.
//!
//! The canonical text is PostgreSQL's text output with `DateStyle = ISO` and
//! `IntervalStyle = postgres` (see [`crate::value`]), so these readers read
//! PostgreSQL's literal grammars: dates with ` BC`, array literals such as
//! `{1,NULL,"a b"}`, record literals such as `(1,"a b",)`.
//!
//! Each reader takes a [`Strictness`]:
//! - [`Strictness::Canonical`] reads exactly what a [`crate::Batch`] holds
//!   (what PostgreSQL prints, and what the other databases' conversions write):
//!   an output format uses it, so text in any other form is an error there
//!   rather than a guess;
//! - [`Strictness::Lenient`] also reads the other spellings PostgreSQL's input
//!   functions take for the same value, which an import's input may hold
//!   (blanks around a value, words in any case, `T` between date and time,
//!   `Z`, `epoch`, a time without seconds, more than six fraction digits
//!   rounded half to even, `yes`/`on`, braces around a UUID, blanks and
//!   backslash escapes in array literals). It is not every spelling the
//!   server reads: month names, `DateStyle` orders, two-digit years and zone
//!   names are refused, so an importer that must take them sends text.
//!
//! Whatever the canonical reader takes, the lenient one takes too and reads as
//! the same value (the property tests and the `canonical_forms` fuzz target
//! hold both to that). Readers never panic and never allocate except where a
//! literal's escaped element needs a buffer.
//!
//! Errors are [`FormError`] values without text: each caller words them for
//! its own users (an Arrow column, a COPY line, a SQLite cell).

mod interval;
mod literal;
mod moment;
mod scalar;
mod write;

#[cfg(test)]
mod tests;

pub use interval::{read_interval, Interval};
pub use literal::{
    read_array, read_record, ArrayShape, ArrayVisitor, LiteralError, MAX_DIMENSIONS,
};
pub use moment::{
    read_date, read_time, read_time_tz, read_timestamp, read_timestamp_and_offset, Moment, Zone,
    MAX_OFFSET,
};
pub use scalar::{hex_digit, read_bool, read_hex_pairs, read_uuid};
pub use write::{write_clock, write_date, write_offset, write_timestamp, write_uuid};

/// How much a reader accepts beyond the canonical text: see the module docs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strictness {
    /// Exactly the canonical text.
    #[default]
    Canonical,
    /// The canonical text and the other spellings PostgreSQL's input functions
    /// read for the same value (see the module docs for which).
    Lenient,
}

/// Why a text is not a value of its form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormError {
    /// The text is not in the form at all.
    Syntax,
    /// The form is right but a field is outside its range: month 13,
    /// `2023-02-29`, year 0, minute 60.
    FieldRange,
    /// A real value too large for what the reader returns.
    Overflow,
    /// A UTC offset beyond ±15:59:59, the most PostgreSQL takes.
    OffsetRange,
}

impl std::fmt::Display for FormError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FormError::Syntax => "not in the value's form",
            FormError::FieldRange => "a field is out of range",
            FormError::Overflow => "the value is out of range",
            FormError::OffsetRange => "the time zone offset is out of range",
        })
    }
}

impl std::error::Error for FormError {}

impl Strictness {
    /// The text with PostgreSQL's `isspace` blanks trimmed from both ends
    /// when lenient; as it is when canonical.
    fn trim(self, text: &[u8]) -> &[u8] {
        match self {
            Strictness::Canonical => text,
            Strictness::Lenient => trim_blanks(text),
        }
    }
}

/// True for the bytes PostgreSQL's `isspace` calls blank.
fn is_blank(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// `text` without PostgreSQL's `isspace` blanks at either end (what its input
/// functions skip around a value).
pub fn trim_blanks(text: &[u8]) -> &[u8] {
    let start = text
        .iter()
        .position(|&byte| !is_blank(byte))
        .unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|&byte| !is_blank(byte))
        .map_or(start, |end| end + 1);
    &text[start..end]
}

/// Unsigned decimal digits, one to eighteen of them (so the value fits
/// `i64` without a check).
fn number(digits: &[u8]) -> Option<i64> {
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0, |number, digit| number * 10 + i64::from(digit - b'0')),
    )
}

/// Reads the digits at the front of `text` (at most `most`, at least one)
/// and consumes them.
fn take_digits(text: &mut &[u8], most: usize) -> Option<(i64, usize)> {
    let count = text.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if count == 0 || count > most {
        return None;
    }
    let (digits, rest) = text.split_at(count);
    *text = rest;
    Some((number(digits)?, count))
}

/// Consumes `byte` at the front of `text`, or fails.
fn take_byte(text: &mut &[u8], byte: u8) -> Option<()> {
    let (&first, rest) = text.split_first()?;
    (first == byte).then(|| *text = rest)
}
