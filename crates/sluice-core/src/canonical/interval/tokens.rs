//! The lenient reader's fields: a text that is not ISO 8601 split as the
//! reference reader splits it (`ParseDateTime`): numbers, times, signed
//! fields and words, with blanks, `@` and other punctuation between them.

use super::sum::Parsed;
use crate::canonical::reading::{is_blank, run, FormError};

/// One field of the text, as the reference reader's `ParseDateTime` splits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Token<'t> {
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
    /// The bytes the reference reader keeps of it (its sign included).
    fn stored_len(&self) -> usize {
        match self {
            Token::Time(body) | Token::Number(body) | Token::Word(body) => body.len(),
            Token::Signed { body, .. } => body.len() + 1,
        }
    }
}

/// At most this many fields (`MAXDATEFIELDS`).
const MAX_FIELDS: usize = 25;
/// The reference reader copies the fields, each with a terminating NUL, into a
/// buffer of 256 bytes; a text whose fields do not fit is bad syntax.
const FIELD_BUFFER: usize = 256;

/// Splits `text` into fields. What the reference reader would split into a
/// field its interval reader then refuses (`day-2`, `+x`, control bytes) is
/// refused here already.
pub(super) fn tokenize(text: &[u8]) -> Parsed<Vec<Token<'_>>> {
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
            return Err(FormError::Syntax);
        }
        let (token, length) = token_at(&text[at..])?;
        stored += token.stored_len() + 1;
        if stored > FIELD_BUFFER {
            return Err(FormError::Syntax);
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
        _ => Err(FormError::Syntax),
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

/// The words the reference reader keeps apart from a digit or `+` right after
/// them (its date keywords that are also units: `1d2h`, `1mon2d`); after any
/// other word a digit makes a date-like field, which no interval holds.
const WORDS_BEFORE_DIGITS: &[&[u8]] = &[b"d", b"h", b"m", b"s", b"y", b"mon", b"dec"];

fn word_token(text: &[u8]) -> Parsed<(Token<'_>, usize)> {
    let letters = run(text, |byte| byte.is_ascii_alphabetic());
    let word = &text[..letters];
    match text.get(letters) {
        Some(b'-' | b'/' | b'.') => Err(FormError::Syntax),
        Some(&next) if next == b'+' || next.is_ascii_digit() => {
            let kept = WORDS_BEFORE_DIGITS
                .iter()
                .any(|known| known.eq_ignore_ascii_case(word));
            if kept {
                Ok((Token::Word(word), letters))
            } else {
                Err(FormError::Syntax)
            }
        }
        _ => Ok((Token::Word(word), letters)),
    }
}

/// A sign, blanks, then a digit and digits, colons, points, hyphens. A sign
/// before letters (`-infinity`) is refused, as the reference reader before
/// version 17 does.
fn signed_token(text: &[u8]) -> Parsed<(Token<'_>, usize)> {
    let negative = text[0] == b'-';
    let start = 1 + run(&text[1..], is_blank);
    if !text.get(start).is_some_and(u8::is_ascii_digit) {
        return Err(FormError::Syntax);
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
