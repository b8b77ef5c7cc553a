//! Rendering one canonical value as JSON, for every [`Kind`].
//!
//! The rules match PostgreSQL's own `row_to_json`, so a sluice NDJSON line and the
//! server's JSON for the same row are semantically equal: numbers stay numbers with
//! their exact digits (never through `f64`), `NaN` and infinities become strings,
//! `json`/`jsonb` is embedded, arrays nest, composites become objects and timestamps
//! take the ISO-8601 `T` and a `±HH:MM` offset. The one deliberate difference is
//! `bytea`: base64 by default (compact), or PostgreSQL's `\x…` hex text on request.
//! Arrays and composites arrive as PostgreSQL's literals and are written as
//! JSON arrays and objects.

use base64::Engine as _;
use sluice_core::canonical::{self, ArrayVisitor, Strictness};
use sluice_core::{Field, Kind};

/// How binary values are written in JSON strings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BytesEncoding {
    /// Standard base64 with padding (RFC 4648). The default: a third of hex's overhead.
    #[default]
    Base64,
    /// PostgreSQL's hex text, `\x` followed by two lowercase hex digits per byte.
    Hex,
}

/// Options of the JSON renderers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonOptions {
    /// How `bytea` values are written. Default: [`BytesEncoding::Base64`].
    pub bytes: BytesEncoding,
}

/// Which bytes must be escaped inside a JSON string: control characters, `"` and `\`.
static NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// Appends `text` as a JSON string literal, escaping as PostgreSQL's `escape_json`
/// does (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other controls as `\u00XX`).
/// Runs of plain bytes are copied in one go.
#[inline]
pub fn write_string(text: &[u8], output: &mut Vec<u8>) {
    output.reserve(text.len() + 2);
    output.push(b'"');
    write_escaped(text, output);
    output.push(b'"');
}

/// Appends `text` escaped for the inside of a JSON string (no quotes around it).
#[inline]
pub fn write_escaped(text: &[u8], output: &mut Vec<u8>) {
    let mut run_start = 0;
    for (index, &byte) in text.iter().enumerate() {
        if !NEEDS_ESCAPE[byte as usize] {
            continue;
        }
        output.extend_from_slice(&text[run_start..index]);
        run_start = index + 1;
        match byte {
            b'"' => output.extend_from_slice(b"\\\""),
            b'\\' => output.extend_from_slice(b"\\\\"),
            b'\n' => output.extend_from_slice(b"\\n"),
            b'\r' => output.extend_from_slice(b"\\r"),
            b'\t' => output.extend_from_slice(b"\\t"),
            0x08 => output.extend_from_slice(b"\\b"),
            0x0c => output.extend_from_slice(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                output.extend_from_slice(b"\\u00");
                output.push(HEX[(byte >> 4) as usize]);
                output.push(HEX[(byte & 0xf) as usize]);
            }
        }
    }
    output.extend_from_slice(&text[run_start..]);
}

/// True when a float or numeric's text is not a JSON number (`NaN`, `Infinity`, `-Infinity`).
#[inline]
fn is_special_number(text: &[u8]) -> bool {
    matches!(text.first(), Some(b'N' | b'I' | b'i' | b'n'))
        || (text.first() == Some(&b'-') && matches!(text.get(1), Some(b'I' | b'i')))
}

/// Writes a number's text as a JSON number, or as a string when JSON has no such number.
#[inline]
pub fn write_number(text: &[u8], output: &mut Vec<u8>) {
    if text.is_empty() || is_special_number(text) {
        write_string(text, output);
    } else {
        output.extend_from_slice(text);
    }
}

/// Embeds JSON text. Line breaks can only be insignificant white space in valid
/// JSON (inside strings they must be escaped), so they become spaces: one NDJSON
/// row must stay on one line even when a stored `json` value was pretty-printed.
#[inline]
pub fn write_embedded_json(text: &[u8], output: &mut Vec<u8>) {
    if memchr::memchr2(b'\n', b'\r', text).is_none() {
        output.extend_from_slice(text);
    } else {
        output.extend(text.iter().map(|&byte| match byte {
            b'\n' | b'\r' => b' ',
            other => other,
        }));
    }
}

/// Writes raw bytes as a JSON string in the chosen encoding.
pub fn write_bytes(bytes: &[u8], options: &JsonOptions, output: &mut Vec<u8>) {
    output.push(b'"');
    match options.bytes {
        BytesEncoding::Base64 => write_base64(bytes, output),
        BytesEncoding::Hex => {
            output.extend_from_slice(b"\\\\x");
            write_hex(bytes, output);
        }
    }
    output.push(b'"');
}

/// Appends standard padded base64 of `bytes`.
pub fn write_base64(bytes: &[u8], output: &mut Vec<u8>) {
    let start = output.len();
    let encoded_len = bytes.len().div_ceil(3) * 4;
    output.resize(start + encoded_len, 0);
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(bytes, &mut output[start..])
        .expect("base64 output sized exactly");
    output.truncate(start + written);
}

/// Appends two lowercase hex digits per byte.
pub fn write_hex(bytes: &[u8], output: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    output.reserve(bytes.len() * 2);
    for &byte in bytes {
        output.push(HEX[(byte >> 4) as usize]);
        output.push(HEX[(byte & 0xf) as usize]);
    }
}

/// Writes a timestamp's text in ISO-8601 form: the space between date and time
/// becomes `T` and a zone offset gets its minutes (`+02` → `+02:00`), which is what
/// PostgreSQL's JSON functions print. `infinity` and a trailing ` BC` are kept.
pub fn write_iso_timestamp(text: &[u8], output: &mut Vec<u8>) {
    output.push(b'"');
    let (main, era) = match text.strip_suffix(b" BC") {
        Some(main) => (main, &b" BC"[..]),
        None => (text, &b""[..]),
    };
    let Some(space) = memchr::memchr(b' ', main) else {
        // `infinity`, `-infinity`: nothing to convert.
        output.extend_from_slice(text);
        output.push(b'"');
        return;
    };
    output.extend_from_slice(&main[..space]);
    output.push(b'T');
    let time = &main[space + 1..];
    match time.iter().position(|&byte| byte == b'+' || byte == b'-') {
        Some(offset_start) => {
            output.extend_from_slice(time);
            if !time[offset_start..].contains(&b':') {
                output.extend_from_slice(b":00");
            }
        }
        None => output.extend_from_slice(time),
    }
    output.extend_from_slice(era);
    output.push(b'"');
}

/// Writes an interval in PostgreSQL's default `postgres` style (`1 year 2 mons
/// -3 days +04:05:06.5`) as the ISO-8601 duration PostgreSQL itself prints with
/// `IntervalStyle = iso_8601` (`P1Y2M-3DT4H5M6.5S`, `PT0S` for zero). Converting
/// here rather than asking the server for ISO keeps sessions format-independent
/// and CSV identical to `COPY`. The text is read by
/// [`sluice_core::canonical::read_interval`] (ISO text is written in the same
/// normal form); text in any other style is written unchanged.
pub fn write_iso_interval(text: &[u8], output: &mut Vec<u8>) {
    match iso_interval(text) {
        Some(iso) => write_string(iso.as_bytes(), output),
        None => write_string(text, output),
    }
}

fn iso_interval(text: &[u8]) -> Option<String> {
    use std::fmt::Write as _;
    let interval = canonical::read_interval(text).ok()?;
    let years = interval.months / 12;
    let months = interval.months % 12;
    let micros = interval.microseconds;
    if interval.months == 0 && interval.days == 0 && micros == 0 {
        return Some("PT0S".into());
    }
    let mut iso = String::from("P");
    for (value, unit) in [(years, 'Y'), (months, 'M'), (interval.days, 'D')] {
        if value != 0 {
            let _ = write!(iso, "{value}{unit}");
        }
    }
    if micros != 0 {
        // PostgreSQL's ISO output signs each clock field alike.
        let sign = if micros < 0 { "-" } else { "" };
        let magnitude = micros.unsigned_abs();
        let (seconds, fraction) = (magnitude / 1_000_000, magnitude % 1_000_000);
        iso.push('T');
        for (value, unit) in [(seconds / 3600, 'H'), (seconds / 60 % 60, 'M')] {
            if value != 0 {
                let _ = write!(iso, "{sign}{value}{unit}");
            }
        }
        if seconds % 60 != 0 || fraction != 0 {
            let _ = write!(iso, "{sign}{}", seconds % 60);
            if fraction != 0 {
                let digits = format!("{fraction:06}");
                let _ = write!(iso, ".{}", digits.trim_end_matches('0'));
            }
            iso.push('S');
        }
    }
    Some(iso)
}

/// Writes one top-level value of `kind` (the canonical form of [`sluice_core::value`]).
pub fn write_value(kind: &Kind, value: &[u8], options: &JsonOptions, output: &mut Vec<u8>) {
    match kind {
        Kind::Bytes => write_bytes(value, options, output),
        _ => write_text_value(kind, value, options, output),
    }
}

/// Writes a value given in text form, as found at top level or inside an array or
/// composite literal (where `bytea` is PostgreSQL's `\x…` hex text).
pub fn write_text_value(kind: &Kind, text: &[u8], options: &JsonOptions, output: &mut Vec<u8>) {
    match kind {
        Kind::Bool => output.extend_from_slice(match text {
            b"t" | b"true" | b"1" => b"true",
            _ => b"false",
        }),
        Kind::Integer => {
            if text.is_empty() {
                write_string(text, output)
            } else {
                output.extend_from_slice(text)
            }
        }
        Kind::Float | Kind::Decimal => write_number(text, output),
        Kind::Json => write_embedded_json(text, output),
        Kind::Bytes => match decode_hex_bytea(text) {
            Some(bytes) => write_bytes(&bytes, options, output),
            None => write_string(text, output),
        },
        Kind::Timestamp | Kind::TimestampTz => write_iso_timestamp(text, output),
        Kind::Interval => write_iso_interval(text, output),
        Kind::Array(element) => write_array(element, text, options, output),
        Kind::Composite(fields) => write_composite(fields, text, options, output),
        Kind::Text | Kind::Date | Kind::Time | Kind::TimeTz | Kind::Other => {
            write_string(text, output)
        }
    }
}

/// Decodes PostgreSQL's hex `bytea` text (`\x0a0b…`).
fn decode_hex_bytea(text: &[u8]) -> Option<Vec<u8>> {
    sluice_core::canonical::read_hex_pairs(text.strip_prefix(b"\\x")?)
}

// PostgreSQL array (`{1,NULL,"a b"}`) and record (`(1,"a b",)`) literals,
// rendered as JSON arrays and objects in one pass without building a tree:
// `sluice_core::canonical` reads the literals and hands each element over,
// written here as it comes. Their elements are values of any kind (arrays of
// composites of arrays), so these and `write_text_value` call each other,
// which is why they share a file. A literal that does not parse (which the
// server never sends) is written as a JSON string rather than lost.

/// Writes an array literal's pieces as nested JSON arrays.
struct JsonArray<'a> {
    element: &'a Kind,
    options: &'a JsonOptions,
    output: &'a mut Vec<u8>,
}

impl ArrayVisitor for JsonArray<'_> {
    type Error = std::convert::Infallible;

    fn open(&mut self, _depth: usize, index: usize) -> Result<(), Self::Error> {
        if index > 0 {
            self.output.push(b',');
        }
        self.output.push(b'[');
        Ok(())
    }

    fn element(
        &mut self,
        _depth: usize,
        index: usize,
        value: Option<&[u8]>,
    ) -> Result<(), Self::Error> {
        if index > 0 {
            self.output.push(b',');
        }
        match value {
            Some(value) => write_text_value(self.element, value, self.options, self.output),
            None => self.output.extend_from_slice(b"null"),
        }
        Ok(())
    }

    fn close(&mut self, _depth: usize, _items: usize) -> Result<(), Self::Error> {
        self.output.push(b']');
        Ok(())
    }
}

/// Writes an array literal of `element` values as a (nested) JSON array. Explicit
/// bounds (`[0:1]={…}`) are dropped, as PostgreSQL's JSON functions drop them.
fn write_array(element: &Kind, text: &[u8], options: &JsonOptions, output: &mut Vec<u8>) {
    let start = output.len();
    let mut visitor = JsonArray {
        element,
        options,
        output,
    };
    if canonical::read_array(text, Strictness::Canonical, &mut visitor).is_err() {
        output.truncate(start);
        write_string(text, output);
    }
}

/// Writes a record literal as a JSON object keyed by the composite's field names.
fn write_composite(fields: &[Field], text: &[u8], options: &JsonOptions, output: &mut Vec<u8>) {
    let start = output.len();
    output.push(b'{');
    let read = canonical::read_record::<()>(text, |index, value| {
        let field = fields.get(index).ok_or(())?;
        if index > 0 {
            output.push(b',');
        }
        write_string(field.name.as_bytes(), output);
        output.push(b':');
        match value {
            Some(value) => write_text_value(&field.kind, value, options, output),
            None => output.extend_from_slice(b"null"),
        }
        Ok(())
    });
    match read {
        Ok(count) if count == fields.len() => output.push(b'}'),
        _ => {
            output.truncate(start);
            write_string(text, output);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(kind: &Kind, text: &[u8]) -> String {
        let mut output = Vec::new();
        write_value(kind, text, &JsonOptions::default(), &mut output);
        String::from_utf8(output).unwrap()
    }

    #[test]
    fn strings_are_escaped_like_postgres() {
        let text = "a\"b\\c\nd\re\tf\u{8}\u{c}\u{1}\u{1f}é😀";
        let rendered = render(&Kind::Text, text.as_bytes());
        assert_eq!(
            rendered,
            "\"a\\\"b\\\\c\\nd\\re\\tf\\b\\f\\u0001\\u001fé😀\""
        );
        let parsed: String = serde_json::from_str(&rendered).unwrap();
        assert_eq!(parsed, text);
    }

    #[test]
    fn numbers_keep_their_digits_and_specials_become_strings() {
        assert_eq!(
            render(&Kind::Decimal, b"123456789012345678901234567890.000000001"),
            "123456789012345678901234567890.000000001"
        );
        assert_eq!(render(&Kind::Decimal, b"NaN"), "\"NaN\"");
        assert_eq!(render(&Kind::Float, b"-Infinity"), "\"-Infinity\"");
        assert_eq!(render(&Kind::Float, b"1e+100"), "1e+100");
        assert_eq!(
            render(&Kind::Integer, b"-9223372036854775808"),
            "-9223372036854775808"
        );
    }

    #[test]
    fn datetimes_become_iso_8601() {
        assert_eq!(
            render(&Kind::TimestampTz, b"2024-02-29 13:14:15.5+05:30"),
            "\"2024-02-29T13:14:15.5+05:30\""
        );
        assert_eq!(
            render(&Kind::TimestampTz, b"2024-02-29 13:14:15-08"),
            "\"2024-02-29T13:14:15-08:00\""
        );
        assert_eq!(
            render(&Kind::Timestamp, b"0044-03-15 12:00:00 BC"),
            "\"0044-03-15T12:00:00 BC\""
        );
        assert_eq!(render(&Kind::TimestampTz, b"-infinity"), "\"-infinity\"");
        // Times of day keep the server's offset spelling, as row_to_json does.
        assert_eq!(render(&Kind::TimeTz, b"10:00:00+02"), "\"10:00:00+02\"");
    }

    #[test]
    fn intervals_become_iso_8601_durations() {
        for (postgres, iso) in [
            ("1 year 2 mons 3 days 04:05:06.789", "P1Y2M3DT4H5M6.789S"),
            ("-1 years -2 mons +3 days -04:05:06", "P-1Y-2M3DT-4H-5M-6S"),
            ("00:00:00", "PT0S"),
            ("1 day", "P1D"),
            ("-00:00:01.5", "PT-1.5S"),
            ("100:00:00", "PT100H"),
            ("00:00:00.000001", "PT0.000001S"),
            ("3 days 00:00:10", "P3DT10S"),
        ] {
            assert_eq!(
                render(&Kind::Interval, postgres.as_bytes()),
                format!("\"{iso}\"")
            );
        }
        assert_eq!(render(&Kind::Interval, b"P1D"), "\"P1D\"");
    }

    #[test]
    fn bytes_are_base64_or_hex() {
        assert_eq!(render(&Kind::Bytes, b"\x00\xffab"), "\"AP9hYg==\"");
        let mut output = Vec::new();
        let hex = JsonOptions {
            bytes: BytesEncoding::Hex,
        };
        write_value(&Kind::Bytes, b"\x00\xff", &hex, &mut output);
        assert_eq!(output, b"\"\\\\x00ff\"");
    }

    #[test]
    fn embedded_json_stays_on_one_line() {
        assert_eq!(
            render(&Kind::Json, b"{\n  \"a\": 1\r\n}"),
            "{   \"a\": 1  }"
        );
    }

    // PostgreSQL array and record literals.

    fn array(element: Kind, text: &str) -> String {
        let mut output = Vec::new();
        write_array(
            &element,
            text.as_bytes(),
            &JsonOptions::default(),
            &mut output,
        );
        String::from_utf8(output).unwrap()
    }

    #[test]
    fn arrays_nest_with_nulls_and_quoting() {
        assert_eq!(array(Kind::Integer, "{{1,2},{NULL,4}}"), "[[1,2],[null,4]]");
        assert_eq!(
            array(Kind::Text, r#"{"a b","c\"d","NULL",NULL,"","e\\"}"#),
            r#"["a b","c\"d","NULL",null,"","e\\"]"#
        );
        assert_eq!(array(Kind::Integer, "[0:1]={5,6}"), "[5,6]");
        assert_eq!(array(Kind::Integer, "{}"), "[]");
        assert_eq!(array(Kind::Bool, "{t,f}"), "[true,false]");
        assert_eq!(array(Kind::Bytes, r#"{"\\x0001"}"#), r#"["AAE="]"#);
        assert_eq!(array(Kind::Integer, "{1,2"), r#""{1,2""#);
    }

    #[test]
    fn composites_become_objects() {
        let fields = vec![
            Field {
                name: "id".into(),
                kind: Kind::Integer,
            },
            Field {
                name: "label".into(),
                kind: Kind::Text,
            },
            Field {
                name: "tags".into(),
                kind: Kind::Array(Box::new(Kind::Text)),
            },
            Field {
                name: "missing".into(),
                kind: Kind::Text,
            },
        ];
        let mut output = Vec::new();
        write_composite(
            &fields,
            br#"(1,"say ""hi"", \\ ok","{a,""b c""}",)"#,
            &JsonOptions::default(),
            &mut output,
        );
        assert_eq!(
            String::from_utf8(output).unwrap(),
            r#"{"id":1,"label":"say \"hi\", \\ ok","tags":["a","b c"],"missing":null}"#
        );
    }
}
