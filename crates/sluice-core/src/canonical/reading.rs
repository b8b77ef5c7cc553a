//! What every reader of a form shares: how strict it is ([`Strictness`]),
//! how it fails ([`FormError`]), and the small steps of reading PostgreSQL's
//! grammars (blanks as its `isspace` has them, digits, a separator byte).

/// Microseconds in a second, a minute, an hour and a day: the units every
/// clock and interval reader counts in.
pub(super) const MICROS_PER_SECOND: i64 = 1_000_000;
pub(super) const MICROS_PER_MINUTE: i64 = 60 * MICROS_PER_SECOND;
pub(super) const MICROS_PER_HOUR: i64 = 60 * MICROS_PER_MINUTE;
pub(super) const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;

/// How much a reader accepts beyond the canonical text: see [`crate::canonical`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strictness {
    /// Exactly the canonical text.
    #[default]
    Canonical,
    /// The canonical text and the other spellings PostgreSQL's input functions
    /// read for the same value (see [`crate::canonical`] for which).
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
    pub(super) fn trim(self, text: &[u8]) -> &[u8] {
        match self {
            Strictness::Canonical => text,
            Strictness::Lenient => trim_blanks(text),
        }
    }
}

/// True for the bytes PostgreSQL's `isspace` calls blank.
pub(super) fn is_blank(byte: u8) -> bool {
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

/// The length of the run at the start of `text` whose bytes pass `keep`.
pub(super) fn run(text: &[u8], keep: impl Fn(u8) -> bool) -> usize {
    text.iter()
        .position(|&byte| !keep(byte))
        .unwrap_or(text.len())
}

/// Unsigned decimal digits, one to eighteen of them (so the value fits
/// `i64` without a check).
pub(super) fn number(digits: &[u8]) -> Option<i64> {
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
pub(super) fn take_digits(text: &mut &[u8], most: usize) -> Option<(i64, usize)> {
    let count = text.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if count == 0 || count > most {
        return None;
    }
    let (digits, rest) = text.split_at(count);
    *text = rest;
    Some((number(digits)?, count))
}

/// Consumes `byte` at the front of `text`, or fails.
pub(super) fn take_byte(text: &mut &[u8], byte: u8) -> Option<()> {
    let (&first, rest) = text.split_first()?;
    (first == byte).then(|| *text = rest)
}
