//! SQLite values to sluice's canonical bytes (the table in [`sluice_core::value`]).
//!
//! | storage class | canonical form |
//! |---|---|
//! | NULL | NULL |
//! | INTEGER | decimal digits (`t`/`f` in a boolean column) |
//! | REAL | shortest round-trip decimal (ryu); `NaN`, `Infinity`, `-Infinity` spelled as PostgreSQL does |
//! | TEXT | the text (checked to be a number in numeric columns; in a boolean column read as PostgreSQL's `boolin` reads it, [`sluice_core::canonical::read_bool`], and written `t`/`f`) |
//! | BLOB | the raw bytes (in a text-like column: the bytes when they are UTF-8) |
//!
//! SQLite lets any column hold any class. A value whose class cannot be written in
//! its column's kind (text `abc` in an `INTEGER` column) is a [`Mismatch`], never a
//! silently broken JSON number.

use rusqlite::types::ValueRef;
use sluice_core::canonical::{self, Strictness};
use sluice_core::{Batch, Kind};

/// A value that cannot be spelled in its column's kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The value's storage class (`text`, `real`, …).
    pub class: &'static str,
    /// The start of the value, for the message.
    pub excerpt: String,
}

fn mismatch(class: &'static str, bytes: &[u8]) -> Mismatch {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned();
    Mismatch {
        class,
        excerpt: text,
    }
}

/// Appends `value` to `batch` in the canonical form of `kind`.
pub fn push_value(batch: &mut Batch, kind: &Kind, value: ValueRef<'_>) -> Result<(), Mismatch> {
    match value {
        ValueRef::Null => batch.push_null(),
        ValueRef::Integer(integer) => match kind {
            Kind::Bool => batch.push_value(if integer != 0 { b"t" } else { b"f" }),
            _ => batch.push_value(itoa::Buffer::new().format(integer).as_bytes()),
        },
        ValueRef::Real(real) => match kind {
            Kind::Integer => {
                // 2^63 as f64: the first value outside i64.
                if real.fract() == 0.0 && real.abs() < 2f64.powi(63) {
                    batch.push_value(itoa::Buffer::new().format(real as i64).as_bytes());
                } else {
                    return Err(mismatch("real", write_float(real).as_bytes()));
                }
            }
            Kind::Bool => batch.push_value(if real != 0.0 { b"t" } else { b"f" }),
            _ => batch.push_value(write_float(real).as_bytes()),
        },
        ValueRef::Text(text) => match kind {
            Kind::Integer if !is_integer(text) => return Err(mismatch("text", text)),
            Kind::Float | Kind::Decimal if !is_number(text) => return Err(mismatch("text", text)),
            Kind::Bool => match canonical::read_bool(text, Strictness::Lenient) {
                Ok(true) => batch.push_value(b"t"),
                Ok(false) => batch.push_value(b"f"),
                Err(_) => return Err(mismatch("text", text)),
            },
            _ => batch.push_value(text),
        },
        ValueRef::Blob(bytes) => match kind {
            Kind::Bytes => batch.push_value(bytes),
            Kind::Text | Kind::Other | Kind::Json if std::str::from_utf8(bytes).is_ok() => {
                batch.push_value(bytes)
            }
            _ => return Err(mismatch("blob", bytes)),
        },
    }
    Ok(())
}

/// A float in shortest round-trip form, with PostgreSQL's spellings of the
/// values JSON has no number for.
pub fn write_float(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        ryu::Buffer::new().format_finite(value).to_owned()
    }
}

fn is_integer(text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// True for a JSON number (so the JSON encoder can write it verbatim) or one of
/// PostgreSQL's special spellings (which it writes as strings).
fn is_number(text: &[u8]) -> bool {
    if matches!(text, b"NaN" | b"Infinity" | b"-Infinity") {
        return true;
    }
    let mut rest = text.strip_prefix(b"-").unwrap_or(text);
    let digits = |rest: &mut &[u8]| {
        let count = rest.iter().take_while(|byte| byte.is_ascii_digit()).count();
        *rest = &rest[count..];
        count
    };
    let integer_start = rest;
    let integer_digits = digits(&mut rest);
    if integer_digits == 0 || (integer_digits > 1 && integer_start[0] == b'0') {
        return false;
    }
    if let Some(after) = rest.strip_prefix(b".") {
        rest = after;
        if digits(&mut rest) == 0 {
            return false;
        }
    }
    if let Some(after) = rest.strip_prefix(b"e").or_else(|| rest.strip_prefix(b"E")) {
        rest = after;
        rest = rest
            .strip_prefix(b"+")
            .or_else(|| rest.strip_prefix(b"-"))
            .unwrap_or(rest);
        if digits(&mut rest) == 0 {
            return false;
        }
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(kind: Kind, value: ValueRef<'_>) -> Result<Option<Vec<u8>>, Mismatch> {
        let mut batch = Batch::new(1);
        push_value(&mut batch, &kind, value)?;
        Ok(batch.row(0).get(0).map(<[u8]>::to_vec))
    }

    #[test]
    fn values_take_their_canonical_forms() {
        let ok = |kind, value| canonical(kind, value).unwrap();
        assert_eq!(
            ok(Kind::Integer, ValueRef::Integer(-42)),
            Some(b"-42".to_vec())
        );
        assert_eq!(ok(Kind::Float, ValueRef::Real(0.1)), Some(b"0.1".to_vec()));
        assert_eq!(
            ok(Kind::Float, ValueRef::Real(1e300)),
            Some(b"1e300".to_vec())
        );
        assert_eq!(
            ok(Kind::Float, ValueRef::Real(f64::NEG_INFINITY)),
            Some(b"-Infinity".to_vec())
        );
        assert_eq!(ok(Kind::Integer, ValueRef::Real(3.0)), Some(b"3".to_vec()));
        assert_eq!(
            ok(Kind::Decimal, ValueRef::Text(b"12.30")),
            Some(b"12.30".to_vec())
        );
        assert_eq!(ok(Kind::Bool, ValueRef::Integer(1)), Some(b"t".to_vec()));
        assert_eq!(
            ok(Kind::Bool, ValueRef::Text(b"false")),
            Some(b"f".to_vec())
        );
        assert_eq!(
            ok(Kind::Bytes, ValueRef::Blob(&[0, 255])),
            Some(vec![0, 255])
        );
        assert_eq!(ok(Kind::Text, ValueRef::Null), None);
    }

    #[test]
    fn values_that_would_break_their_kind_are_refused() {
        assert!(canonical(Kind::Integer, ValueRef::Text(b"abc")).is_err());
        assert!(canonical(Kind::Integer, ValueRef::Real(1.5)).is_err());
        assert!(canonical(Kind::Decimal, ValueRef::Text(b".5")).is_err());
        assert!(canonical(Kind::Decimal, ValueRef::Text(b"01")).is_err());
        assert!(canonical(Kind::Float, ValueRef::Text(b"1e")).is_err());
        assert!(canonical(Kind::Text, ValueRef::Blob(&[0xff])).is_err());
        assert!(canonical(Kind::Decimal, ValueRef::Text(b"-1.5e-3")).is_ok());
    }
}
