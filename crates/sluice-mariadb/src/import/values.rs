//! A canonical value as the server reads it ([`Convert`]): a line of `LOAD
//! DATA`'s text ([`encode_row`]: tab-separated, escaped) or an `INSERT`'s
//! parameter ([`parameter`]).

use sluice_core::canonical::{self, Strictness};
use sluice_core::{Batch, Error};

use crate::moment::{duration_to_time, to_utc};

/// How a canonical value is turned into what the server reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Convert {
    /// As it is.
    Verbatim,
    /// `t`/`f` (or `true`/`false`) as `1`/`0`.
    Bool,
    /// A moment with an offset, as UTC without one (the session's zone): for
    /// `TIMESTAMP` and `DATETIME` columns alike, as MySQL reads an offset in a
    /// literal (MariaDB refuses one). A moment without an offset goes as it is.
    Utc,
    /// Bytes, as hex for `UNHEX()` (text of the load is UTF-8; bytes are not).
    Hex,
    /// An ISO 8601 duration (as sluice writes a `TIME` in JSON) as `H:MM:SS`.
    Time,
}

/// Appends one row as a line of the load's text: tab-separated, `\N` for
/// NULL, backslash escapes for what would end a field or a line.
pub(super) fn encode_row(
    batch: &Batch,
    index: usize,
    converts: &[Convert],
    output: &mut Vec<u8>,
) -> Result<(), Error> {
    let row = batch.row(index);
    for (column, convert) in converts.iter().enumerate() {
        if column > 0 {
            output.push(b'\t');
        }
        match row.get(column) {
            None => output.extend_from_slice(b"\\N"),
            Some(value) => match convert {
                Convert::Verbatim => escape_into(value, output),
                Convert::Bool => output.push(bool_digit(value)),
                Convert::Utc => escape_into(to_utc(value).as_deref().unwrap_or(value), output),
                Convert::Hex => write_hex(value, output),
                Convert::Time => {
                    escape_into(duration_to_time(value).as_deref().unwrap_or(value), output)
                }
            },
        }
    }
    output.push(b'\n');
    Ok(())
}

fn escape_into(value: &[u8], output: &mut Vec<u8>) {
    // Most values hold nothing to escape: copy the runs between the bytes
    // that need it, not byte by byte.
    let mut rest = value;
    while let Some(position) = rest
        .iter()
        .position(|&byte| NEEDS_ESCAPE[usize::from(byte)])
    {
        output.extend_from_slice(&rest[..position]);
        output.extend_from_slice(match rest[position] {
            b'\\' => b"\\\\",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            _ => b"\\0",
        });
        rest = &rest[position + 1..];
    }
    output.extend_from_slice(rest);
}

/// The bytes a value's text cannot hold as they are in the load's format.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    table[b'\\' as usize] = true;
    table[b'\t' as usize] = true;
    table[b'\n' as usize] = true;
    table[b'\r' as usize] = true;
    table[0] = true;
    table
};

pub(super) fn write_hex(value: &[u8], output: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &byte in value {
        output.push(DIGITS[usize::from(byte >> 4)]);
        output.push(DIGITS[usize::from(byte & 15)]);
    }
}

/// A boolean as PostgreSQL's `boolin` reads it (`t`, `true`, `1`, `y`, `on`…)
/// as `1` or `0`; anything else the server then refuses as it would any bad
/// value.
fn bool_digit(value: &[u8]) -> u8 {
    match canonical::read_bool(value, Strictness::Lenient) {
        Ok(true) => b'1',
        Ok(false) => b'0',
        // Not a boolean: a character MariaDB refuses for the column, so the
        // server names the row.
        Err(_) => b'?',
    }
}

/// A value as an INSERT's parameter.
pub(super) fn parameter(convert: Convert, value: &[u8]) -> Vec<u8> {
    match convert {
        Convert::Verbatim => value.to_vec(),
        Convert::Bool => vec![bool_digit(value)],
        Convert::Utc => to_utc(value).unwrap_or_else(|| value.to_vec()),
        Convert::Hex => {
            let mut hex = Vec::with_capacity(value.len() * 2);
            write_hex(value, &mut hex);
            hex
        }
        Convert::Time => duration_to_time(value).unwrap_or_else(|| value.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_escaped_for_load_data() {
        let mut batch = Batch::new(4);
        batch.push_value(b"tab\there\\ and\nnewline\0");
        batch.push_null();
        batch.push_value(&[0xde, 0xad]);
        batch.push_value(b"t");
        let mut output = Vec::new();
        encode_row(
            &batch,
            0,
            &[
                Convert::Verbatim,
                Convert::Verbatim,
                Convert::Hex,
                Convert::Bool,
            ],
            &mut output,
        )
        .unwrap();
        assert_eq!(
            output,
            b"tab\\there\\\\ and\\nnewline\\0\t\\N\tdead\t1\n".to_vec()
        );
    }
}
