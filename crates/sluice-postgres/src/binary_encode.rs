//! Values in PostgreSQL's binary COPY form: one [`ValueEncoder`] per column,
//! chosen once from the target column's type and the source column's encoding,
//! then applied to every value of that column in a tight loop.
//!
//! Binary COPY spares the server its text parsers (numeric, timestamps and
//! integers are most of a load's server time), so the work moves here: each
//! canonical text form of `sluice_core::value` is parsed into the type's
//! binary form. The server's receive functions still check what they always
//! check (typmods such as `char(3)` or `numeric(12,2)`, date ranges, JSON
//! syntax, UTF-8), so an encoder only has to be exact, not complete.
//!
//! A column whose type has no encoder here (enums, domains, composites, an
//! `interval` with fields such as `interval year`, …) makes the whole COPY
//! text: [`encoder_for`] answers `None`. A value an encoder cannot read is an
//! [`EncodeError`] naming the value; the caller ties it to its input line and
//! column.
//!
//! The encoders read what the canonical forms allow and the usual ISO
//! variants PostgreSQL also reads (a `T` between date and time, `Z` for UTC,
//! surrounding blanks, `yes`/`no` booleans, braces around a UUID), but not
//! every form of the server's date/time parser: month names, `DateStyle`
//! orders, two-digit years and zone names are refused. A `timestamptz` or
//! `timetz` without an offset is in the session's time zone, so such columns
//! have an encoder only in a session whose zone is UTC ([`SessionSettings`]).
//!
//! `interval` is the exception: its text is read as the server's
//! `interval_in` reads it, every `IntervalStyle`'s output and the usual
//! input alike (core's `read_interval_lenient`, which says what is read and
//! the few forms refused on purpose), in the target session's `IntervalStyle`, since in
//! `sql_standard` a leading minus can apply to every field. A column whose
//! interval type declares fields (`interval year`, `interval minute to
//! second`) reads a bare number or `hh:mm` in those fields before the server
//! truncates, so it has no encoder ([`encoder_for_column`]); a precision alone
//! (`interval(3)`) is applied by `interval_recv` as by `interval_in`. A
//! source's interval values are always text: value.rs defines no binary form.

use bytes::{BufMut, BytesMut};
use postgres_protocol::types as wire;
use postgres_protocol::Oid;
use sluice_core::canonical::{
    hex_digit, read_array, read_bool, read_date, read_time, read_time_tz, read_timestamp,
    read_uuid, trim_blanks, ArrayVisitor, FormError, IntervalSigns, LiteralError, Moment,
    Strictness, Zone,
};
use sluice_core::{Column, DecimalText, Encoding, Kind};

use crate::types;

mod error;
mod interval;

pub use error::EncodeError;
use error::{
    quoted, DATETIME_FIELD_OVERFLOW, INVALID_BINARY_REPRESENTATION, INVALID_PARAMETER_VALUE,
    INVALID_TEXT_REPRESENTATION, INVALID_TIME_ZONE_DISPLACEMENT, NUMERIC_VALUE_OUT_OF_RANGE,
    PROGRAM_LIMIT_EXCEEDED,
};
use interval::{parse_interval, signs_of_style, write_interval};

/// Integer widths, by the target type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntWidth {
    Two,
    Four,
    Eight,
}

impl IntWidth {
    fn label(self) -> &'static str {
        match self {
            IntWidth::Two => "smallint",
            IntWidth::Four => "integer",
            IntWidth::Eight => "bigint",
        }
    }
}

/// The binary form one value of a scalar type takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scalar {
    Int(IntWidth),
    Float4,
    Float8,
    Numeric,
    Bool,
    Text,
    /// `name`: text, clipped to 63 bytes as `namein` clips it (`namerecv`
    /// would refuse a longer one).
    Name,
    Json,
    Jsonb,
    Bytea,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Uuid,
    /// `interval`, read with the session's rule for a leading minus.
    Interval(IntervalSigns),
    /// `timetz`: a time and its UTC offset.
    TimeTz,
}

/// Scalars and the array type over each, by OID: the one table of which
/// types have an encoder.
const SCALAR_TYPES: &[(Oid, Oid, Scalar)] = &[
    (16, 1000, Scalar::Bool),
    (17, 1001, Scalar::Bytea),
    (19, 1003, Scalar::Name),
    (20, 1016, Scalar::Int(IntWidth::Eight)),
    (21, 1005, Scalar::Int(IntWidth::Two)),
    (23, 1007, Scalar::Int(IntWidth::Four)),
    (25, 1009, Scalar::Text),
    (114, 199, Scalar::Json),
    (700, 1021, Scalar::Float4),
    (701, 1022, Scalar::Float8),
    (1042, 1014, Scalar::Text),
    (1043, 1015, Scalar::Text),
    (1082, 1182, Scalar::Date),
    (1083, 1183, Scalar::Time),
    (1114, 1115, Scalar::Timestamp),
    (1184, 1185, Scalar::TimestampTz),
    // The sign rule is the session's, set by `encoder_for`.
    (1186, 1187, Scalar::Interval(IntervalSigns::PerField)),
    (1266, 1270, Scalar::TimeTz),
    (1700, 1231, Scalar::Numeric),
    (2950, 2951, Scalar::Uuid),
    (3802, 3807, Scalar::Jsonb),
];

/// Extension types that are text on the wire (their receive function is
/// `textrecv`'s), known by name because their OIDs differ per database.
const TEXT_EXTENSION_TYPES: &[&str] = &["citext"];

/// How one column's values become binary COPY fields; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueEncoder {
    shape: Shape,
    /// The source sends values in its binary form (`Encoding::Binary`).
    binary_source: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    /// The value is already PostgreSQL's binary form of the column's type
    /// ([`Encoding::Native`], from another PostgreSQL): copied as it is.
    Native,
    Scalar(Scalar),
    /// An array literal's elements, each as `element`, of type `element_type`.
    Array {
        element: Scalar,
        element_type: Oid,
    },
}

/// The settings of the target's session that decide what some texts mean
/// to the server, so that an encoder reads them the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionSettings<'a> {
    /// `TimeZone` (`Connection::time_zone`): the zone of a time without offset.
    pub time_zone: &'a str,
    /// `IntervalStyle` (`Connection::interval_style`): in `sql_standard` a
    /// leading minus can make every field of an interval negative.
    pub interval_style: &'a str,
}

/// The encoder for values of `source` going into a column of type
/// `target_type` without a type modifier, or `None` when this module has
/// none (then the COPY stays text). The source's kind must be the one the
/// target type's values have, so that its canonical form is the one parsed
/// here. `session` is the target's.
pub fn encoder_for(
    target_type: Oid,
    source: &Column,
    session: &SessionSettings<'_>,
) -> Option<ValueEncoder> {
    let expected_kind = types::builtin(target_type).map(|(kind, _)| kind)?;
    if source.kind != expected_kind {
        return None;
    }
    // A time without an offset is in the session's zone: read only in UTC.
    let element = match &expected_kind {
        Kind::Array(element) => element,
        kind => kind,
    };
    if matches!(element, Kind::TimestampTz | Kind::TimeTz) && !is_utc(session.time_zone) {
        return None;
    }
    let in_session = |scalar: Scalar| match scalar {
        Scalar::Interval(_) => signs_of_style(session.interval_style).map(Scalar::Interval),
        scalar => Some(scalar),
    };
    let shape = SCALAR_TYPES
        .iter()
        .find_map(|&(scalar_type, array_type, scalar)| {
            if target_type == scalar_type {
                Some(in_session(scalar).map(Shape::Scalar))
            } else if target_type == array_type {
                Some(in_session(scalar).map(|element| Shape::Array {
                    element,
                    element_type: scalar_type,
                }))
            } else {
                None
            }
        })??;
    let binary_source = source.encoding == Encoding::Binary;
    if binary_source && !reads_binary(&shape) {
        return None;
    }
    Some(ValueEncoder {
        shape,
        binary_source,
    })
}

/// The encoder for a table column as [`crate::describe_table`] describes it:
/// its type is known by the name the built-in table gives its OID
/// (`types::name_of`), so no further catalog query is needed; an extension's
/// text type is known by its name. `declared_type` is the column's type with
/// its modifier, as the catalog spells it (`TableInfo::declared_type`).
pub fn encoder_for_column(
    column: &Column,
    declared_type: Option<&str>,
    session: &SessionSettings<'_>,
) -> Option<ValueEncoder> {
    if column.kind == Kind::Text && TEXT_EXTENSION_TYPES.contains(&column.type_name.as_str()) {
        return Some(ValueEncoder {
            shape: Shape::Scalar(Scalar::Text),
            binary_source: false,
        });
    }
    let oid = SCALAR_TYPES
        .iter()
        .flat_map(|&(scalar_type, array_type, _)| [scalar_type, array_type])
        .find(|&oid| types::builtin(oid).is_some_and(|(_, name)| name == column.type_name))?;
    if matches!(oid, 1186 | 1187) && !interval_fields_unrestricted(declared_type?) {
        return None;
    }
    encoder_for(oid, column, session)
}

/// Whether an `interval` column's declared type reads its text as a plain
/// `interval` does: `interval` or `interval(p)`, or arrays of them. Fields
/// (`interval year`, `interval minute to second`) change what a text means
/// (a bare `1` is a year; `1:30` minutes and seconds) before the server
/// truncates, so such a column has no encoder. A precision only rounds the
/// seconds, which `interval_recv` does to a binary value as well.
fn interval_fields_unrestricted(declared_type: &str) -> bool {
    let scalar = declared_type
        .strip_suffix("[]")
        .unwrap_or(declared_type)
        .trim_end();
    let Some(rest) = scalar.strip_prefix("interval") else {
        return false;
    };
    let precision = rest
        .strip_prefix('(')
        .and_then(|rest| rest.strip_suffix(')'));
    rest.is_empty()
        || precision.is_some_and(|digits| {
            !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit())
        })
}

/// Whether a session in `time_zone` reads a timestamp without an offset as
/// UTC: the zone names PostgreSQL gives UTC itself.
fn is_utc(time_zone: &str) -> bool {
    const UTC_NAMES: &[&str] = &[
        "UTC",
        "Etc/UTC",
        "UCT",
        "Etc/UCT",
        "GMT",
        "Etc/GMT",
        "Universal",
        "Etc/Universal",
        "Zulu",
        "Etc/Zulu",
    ];
    UTC_NAMES
        .iter()
        .any(|name| time_zone.eq_ignore_ascii_case(name))
}

/// Whether a source's binary values (value.rs's binary table) can feed `shape`.
fn reads_binary(shape: &Shape) -> bool {
    matches!(
        shape,
        Shape::Scalar(
            Scalar::Int(_)
                | Scalar::Float4
                | Scalar::Float8
                | Scalar::Bool
                | Scalar::Date
                | Scalar::Time
                | Scalar::Timestamp
                | Scalar::TimestampTz
                | Scalar::Uuid
        )
    )
}

/// The encoder for values already in PostgreSQL's binary form of the target
/// column's type ([`Encoding::Native`]): they are framed, never read.
pub fn native_encoder() -> ValueEncoder {
    ValueEncoder {
        shape: Shape::Native,
        binary_source: true,
    }
}

/// Appends a NULL field: length -1 and no bytes.
pub fn encode_null(out: &mut BytesMut) {
    out.put_i32(-1);
}

impl ValueEncoder {
    /// Appends one field: the value's length as an `i32`, then its binary
    /// form. On an error `out` is left as it was.
    pub fn encode(&self, value: &[u8], out: &mut BytesMut) -> Result<(), EncodeError> {
        let start = out.len();
        let written = with_length(out, |out| self.write(value, out));
        if written.is_err() {
            out.truncate(start);
        }
        written
    }

    fn write(&self, value: &[u8], out: &mut BytesMut) -> Result<(), EncodeError> {
        match &self.shape {
            Shape::Native => {
                out.put_slice(value);
                Ok(())
            }
            Shape::Scalar(scalar) if self.binary_source => write_from_binary(*scalar, value, out),
            Shape::Scalar(scalar) => write_text(*scalar, value, out, Context::Column),
            Shape::Array {
                element,
                element_type,
            } => write_array(*element, *element_type, value, out),
        }
    }
}

/// Writes an `i32` length and then what `write` appends.
fn with_length(
    out: &mut BytesMut,
    write: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let length_at = out.len();
    out.put_i32(0);
    write(out)?;
    let length = i32::try_from(out.len() - length_at - 4).map_err(|_| {
        EncodeError::new(
            PROGRAM_LIMIT_EXCEEDED,
            "a value too large for one COPY field (1 GiB or more)",
        )
    })?;
    out[length_at..length_at + 4].copy_from_slice(&length.to_be_bytes());
    Ok(())
}

/// Where a text value stands: a column's own value, or an array element
/// (where `bytea` is spelled in hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    Column,
    Element,
}

fn write_text(
    scalar: Scalar,
    text: &[u8],
    out: &mut BytesMut,
    context: Context,
) -> Result<(), EncodeError> {
    match scalar {
        Scalar::Int(width) => write_int(width, parse_integer(text, width.label())?, text, out)?,
        Scalar::Float4 => wire::float4_to_sql(parse_float4(text)?, out),
        Scalar::Float8 => wire::float8_to_sql(parse_float8(text)?, out),
        Scalar::Numeric => write_numeric(text, out)?,
        Scalar::Bool => wire::bool_to_sql(parse_bool(text)?, out),
        Scalar::Text | Scalar::Json => out.put_slice(text),
        Scalar::Name => out.put_slice(clip_name(text)),
        Scalar::Jsonb => {
            // jsonb's binary form: a version byte, then the JSON text.
            out.put_u8(1);
            out.put_slice(text);
        }
        Scalar::Bytea if context == Context::Column => wire::bytea_to_sql(text, out),
        Scalar::Bytea => write_hex_bytea(text, out)?,
        Scalar::Date => wire::date_to_sql(parse_date(text)?, out),
        Scalar::Time => wire::time_to_sql(parse_time_only(text)?, out),
        Scalar::Timestamp => wire::timestamp_to_sql(parse_timestamp(text, Zone::Without)?, out),
        Scalar::TimestampTz => wire::timestamp_to_sql(parse_timestamp(text, Zone::With)?, out),
        Scalar::Uuid => wire::uuid_to_sql(parse_uuid(text)?, out),
        Scalar::Interval(signs) => write_interval(parse_interval(text, signs)?, out),
        Scalar::TimeTz => {
            let (micros, offset_east) = parse_timetz(text)?;
            out.put_i64(micros);
            // The binary form counts the offset in seconds west of UTC.
            out.put_i32(-offset_east);
        }
    }
    Ok(())
}

/// The longest `name` is 63 bytes; `namein` cuts a longer one at the last
/// whole UTF-8 character that fits.
fn clip_name(text: &[u8]) -> &[u8] {
    const NAME_BYTES: usize = 63;
    if text.len() <= NAME_BYTES {
        return text;
    }
    let mut end = NAME_BYTES;
    while end > 0 && text[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    &text[..end]
}

// ------------------------------------------------------------ binary sources --

/// A source's binary value (value.rs's binary table) into the target's form:
/// integers and floats change width (narrowing checks the range), the rest
/// is already PostgreSQL's form once its length is right.
fn write_from_binary(scalar: Scalar, value: &[u8], out: &mut BytesMut) -> Result<(), EncodeError> {
    let wrong_length = || {
        EncodeError::new(
            INVALID_BINARY_REPRESENTATION,
            format!(
                "a binary value of {} bytes cannot be a {scalar:?} value",
                value.len()
            ),
        )
    };
    match scalar {
        Scalar::Int(width) => {
            let number = match *value {
                [a, b] => i64::from(i16::from_be_bytes([a, b])),
                [a, b, c, d] => i64::from(i32::from_be_bytes([a, b, c, d])),
                _ => i64::from_be_bytes(value.try_into().map_err(|_| wrong_length())?),
            };
            write_int(
                width,
                i128::from(number),
                number.to_string().as_bytes(),
                out,
            )?;
        }
        Scalar::Float4 | Scalar::Float8 => {
            let number = match *value {
                [a, b, c, d] => f64::from(f32::from_be_bytes([a, b, c, d])),
                _ => f64::from_be_bytes(value.try_into().map_err(|_| wrong_length())?),
            };
            write_float_binary(scalar, number, out)?;
        }
        Scalar::Bool => match value {
            [flag] => wire::bool_to_sql(*flag != 0, out),
            _ => return Err(wrong_length()),
        },
        Scalar::Date if value.len() == 4 => out.put_slice(value),
        Scalar::Time | Scalar::Timestamp | Scalar::TimestampTz if value.len() == 8 => {
            out.put_slice(value)
        }
        Scalar::Uuid if value.len() == 16 => out.put_slice(value),
        _ => return Err(wrong_length()),
    }
    Ok(())
}

fn write_float_binary(scalar: Scalar, number: f64, out: &mut BytesMut) -> Result<(), EncodeError> {
    if scalar == Scalar::Float8 {
        wire::float8_to_sql(number, out);
        return Ok(());
    }
    let narrow = number as f32;
    if narrow.is_infinite() && number.is_finite() {
        return Err(EncodeError::range("real", number.to_string().as_bytes()));
    }
    wire::float4_to_sql(narrow, out);
    Ok(())
}

// ------------------------------------------------------------------- numbers --

/// An optional sign, then digits: as `int2in`/`int4in`/`int8in` read them.
fn parse_integer(text: &[u8], type_label: &str) -> Result<i128, EncodeError> {
    let body = trim_blanks(text);
    let (negative, digits) = match body {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, body),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(EncodeError::syntax(type_label, text));
    }
    let mut number: i128 = 0;
    for digit in digits {
        number = number
            .checked_mul(10)
            .and_then(|number| number.checked_add(i128::from(digit - b'0')))
            .ok_or_else(|| EncodeError::range(type_label, text))?;
    }
    Ok(if negative { -number } else { number })
}

fn write_int(
    width: IntWidth,
    number: i128,
    text: &[u8],
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let range = || EncodeError::range(width.label(), text);
    match width {
        IntWidth::Two => wire::int2_to_sql(i16::try_from(number).map_err(|_| range())?, out),
        IntWidth::Four => wire::int4_to_sql(i32::try_from(number).map_err(|_| range())?, out),
        IntWidth::Eight => wire::int8_to_sql(i64::try_from(number).map_err(|_| range())?, out),
    }
    Ok(())
}

/// A float's text as `float8in` reads it: decimal or exponent notation, or
/// `NaN`, `Infinity`, `inf` in any case, with a sign. A finite text too
/// large (or a nonzero one too small) is out of range, not rounded to
/// infinity or zero.
fn parse_float8(text: &[u8]) -> Result<f64, EncodeError> {
    let body = float_body(text, "double precision")?;
    let number: f64 = body
        .parse()
        .map_err(|_| EncodeError::syntax("double precision", text))?;
    check_float_range(
        number.is_infinite(),
        number == 0.0,
        body,
        text,
        "double precision",
    )?;
    Ok(number)
}

fn parse_float4(text: &[u8]) -> Result<f32, EncodeError> {
    let body = float_body(text, "real")?;
    let number: f32 = body
        .parse()
        .map_err(|_| EncodeError::syntax("real", text))?;
    check_float_range(number.is_infinite(), number == 0.0, body, text, "real")?;
    Ok(number)
}

/// The trimmed text of a float, refusing what Rust would read but PostgreSQL
/// would not (`infinity` spelled otherwise is fine for both).
fn float_body<'t>(text: &'t [u8], type_label: &str) -> Result<&'t str, EncodeError> {
    std::str::from_utf8(trim_blanks(text))
        .ok()
        .filter(|body| !body.is_empty())
        .ok_or_else(|| EncodeError::syntax(type_label, text))
}

fn check_float_range(
    infinite: bool,
    zero: bool,
    body: &str,
    text: &[u8],
    type_label: &str,
) -> Result<(), EncodeError> {
    let mantissa = body.split(['e', 'E']).next().unwrap_or(body);
    let spelled_infinite = body.bytes().any(|byte| byte.eq_ignore_ascii_case(&b'i'));
    let nonzero_digits = mantissa.bytes().any(|byte| matches!(byte, b'1'..=b'9'));
    if (infinite && !spelled_infinite) || (zero && nonzero_digits) {
        return Err(EncodeError::new(
            NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{} is out of range for type {type_label}", quoted(text)),
        ));
    }
    Ok(())
}

/// numeric's sign words (`NUMERIC_POS`, `NUMERIC_NEG`, …).
const NUMERIC_POSITIVE: u16 = 0x0000;
const NUMERIC_NEGATIVE: u16 = 0x4000;
const NUMERIC_NAN: u16 = 0xC000;
const NUMERIC_PLUS_INFINITY: u16 = 0xD000;
const NUMERIC_MINUS_INFINITY: u16 = 0xF000;
/// The largest display scale numeric stores.
const NUMERIC_DSCALE_MAX: i64 = 0x3FFF;

/// A numeric's text in PostgreSQL's binary form: the number of base-10000
/// digits, the weight of the first, the sign, the display scale, the digits.
fn write_numeric(text: &[u8], out: &mut BytesMut) -> Result<(), EncodeError> {
    let body = trim_blanks(text);
    if let Some(sign) = numeric_special(body) {
        for word in [0, 0, sign, 0] {
            out.put_u16(word);
        }
        return Ok(());
    }
    let decimal = DecimalText::split(body).ok_or_else(|| EncodeError::syntax("numeric", text))?;
    let exponent = decimal.point - decimal.integer.len() as i64;
    let scale = (decimal.fraction.len() as i64 - exponent).max(0);
    let overflow = || {
        EncodeError::new(
            NUMERIC_VALUE_OUT_OF_RANGE,
            format!("value overflows numeric format: {}", quoted(text)),
        )
    };
    if scale > NUMERIC_DSCALE_MAX {
        return Err(overflow());
    }
    let header_at = out.len();
    out.put_bytes(0, 8);
    let (weight, count) = write_base_10000(&decimal, out);
    let weight = i16::try_from(weight).map_err(|_| overflow())?;
    let count = i16::try_from(count).map_err(|_| overflow())?;
    let sign = if decimal.negative && count > 0 {
        NUMERIC_NEGATIVE
    } else {
        NUMERIC_POSITIVE
    };
    let header = &mut out[header_at..header_at + 8];
    header[0..2].copy_from_slice(&count.to_be_bytes());
    header[2..4].copy_from_slice(&weight.to_be_bytes());
    header[4..6].copy_from_slice(&sign.to_be_bytes());
    header[6..8].copy_from_slice(&(scale as u16).to_be_bytes());
    Ok(())
}

/// numeric's words for NaN and the infinities, in any case.
fn numeric_special(body: &[u8]) -> Option<u16> {
    let is = |words: &[&[u8]]| words.iter().any(|word| body.eq_ignore_ascii_case(word));
    if body.first().is_some_and(u8::is_ascii_digit) {
        None
    } else if is(&[b"nan", b"+nan", b"-nan"]) {
        Some(NUMERIC_NAN)
    } else if is(&[b"infinity", b"+infinity", b"inf", b"+inf"]) {
        Some(NUMERIC_PLUS_INFINITY)
    } else if is(&[b"-infinity", b"-inf"]) {
        Some(NUMERIC_MINUS_INFINITY)
    } else {
        None
    }
}

/// Appends the base-10000 digits of `decimal` without leading or trailing
/// zero groups; returns the weight of the first (its power of 10000) and how
/// many there are (0 and 0 for zero).
fn write_base_10000(decimal: &DecimalText<'_>, out: &mut BytesMut) -> (i64, usize) {
    // Zeros before the first digit so the point falls on a group boundary.
    let lead = (4 - decimal.point.rem_euclid(4)) % 4;
    let mut weight = (decimal.point + lead) / 4 - 1;
    let digits = std::iter::repeat_n(&b'0', lead as usize)
        .chain(decimal.integer)
        .chain(decimal.fraction);
    let start = out.len();
    let (mut written, mut kept) = (0, 0);
    let mut emit = |group: u16, weight: &mut i64| {
        if written == 0 && group == 0 {
            *weight -= 1;
            return;
        }
        out.put_u16(group);
        written += 1;
        if group != 0 {
            kept = written;
        }
    };
    let (mut group, mut in_group) = (0u16, 0);
    for digit in digits {
        group = group * 10 + u16::from(digit - b'0');
        in_group += 1;
        if in_group == 4 {
            emit(group, &mut weight);
            (group, in_group) = (0, 0);
        }
    }
    if in_group > 0 {
        emit(group * 10u16.pow(4 - in_group), &mut weight);
    }
    out.truncate(start + 2 * kept);
    if kept == 0 {
        return (0, 0);
    }
    (weight, kept)
}

/// `boolin`'s words: `t`/`f`, `true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`,
/// any case, any unambiguous prefix.
fn parse_bool(text: &[u8]) -> Result<bool, EncodeError> {
    read_bool(text, Strictness::Lenient).map_err(|_| EncodeError::syntax("boolean", text))
}

// ------------------------------------------------------------ dates and times --

/// 1970-01-01 in days since 2000-01-01 (PostgreSQL's epoch): the canonical
/// readers count from 1970.
const UNIX_EPOCH_DAYS: i64 = -10_957;
const UNIX_EPOCH_MICROS: i128 = UNIX_EPOCH_DAYS as i128 * 86_400 * 1_000_000;

/// A canonical reader's error as the server words it for `type_label`.
fn form_error(error: FormError, type_label: &str, text: &[u8]) -> EncodeError {
    match error {
        FormError::Syntax => EncodeError::syntax(type_label, text),
        FormError::FieldRange => EncodeError::field_range(text),
        FormError::Overflow => EncodeError::new(
            DATETIME_FIELD_OVERFLOW,
            format!("{type_label} out of range: {}", quoted(text)),
        ),
        FormError::OffsetRange => EncodeError::new(
            INVALID_TIME_ZONE_DISPLACEMENT,
            format!("time zone displacement out of range: {}", quoted(text)),
        ),
    }
}

/// A date as days since 2000-01-01, `i32::MAX`/`MIN` for the infinities.
fn parse_date(text: &[u8]) -> Result<i32, EncodeError> {
    let read =
        read_date(text, Strictness::Lenient).map_err(|error| form_error(error, "date", text))?;
    let days = match read {
        Moment::Infinity => return Ok(i32::MAX),
        Moment::MinusInfinity => return Ok(i32::MIN),
        Moment::Finite(days) => days + UNIX_EPOCH_DAYS,
    };
    i32::try_from(days).map_err(|_| form_error(FormError::Overflow, "date", text))
}

fn parse_time_only(text: &[u8]) -> Result<i64, EncodeError> {
    read_time(text, Strictness::Lenient).map_err(|error| form_error(error, "time", text))
}

/// A timestamp as microseconds since 2000-01-01 (UTC for [`Zone::With`]:
/// such a column has an encoder only in a UTC session, see [`encoder_for`]),
/// `i64::MAX`/`MIN` for the infinities.
fn parse_timestamp(text: &[u8], zone: Zone) -> Result<i64, EncodeError> {
    let type_label = match zone {
        Zone::Without => "timestamp",
        Zone::With => "timestamp with time zone",
    };
    let read = read_timestamp(text, zone, Strictness::Lenient)
        .map_err(|error| form_error(error, type_label, text))?;
    let micros = match read {
        Moment::Infinity => return Ok(i64::MAX),
        Moment::MinusInfinity => return Ok(i64::MIN),
        Moment::Finite(micros) => micros + UNIX_EPOCH_MICROS,
    };
    i64::try_from(micros).map_err(|_| form_error(FormError::Overflow, "timestamp", text))
}

/// A `timetz` as microseconds since midnight and seconds east of UTC.
/// Without an offset the time is UTC: a `timetz` column has an encoder
/// only in a UTC session, see [`encoder_for`]. Zone names are refused.
fn parse_timetz(text: &[u8]) -> Result<(i64, i32), EncodeError> {
    read_time_tz(text, Strictness::Lenient)
        .map_err(|error| form_error(error, "time with time zone", text))
}

// ------------------------------------------------------------ uuid and bytea --

/// A UUID as `uuid_in` reads it.
fn parse_uuid(text: &[u8]) -> Result<[u8; 16], EncodeError> {
    read_uuid(text, Strictness::Lenient).map_err(|_| EncodeError::syntax("uuid", text))
}

/// A `bytea` array element, in the hex form `\x…` arrays spell it.
fn write_hex_bytea(text: &[u8], out: &mut BytesMut) -> Result<(), EncodeError> {
    let hex = text
        .strip_prefix(b"\\x")
        .filter(|hex| hex.len() % 2 == 0)
        .ok_or_else(|| {
            EncodeError::new(
                INVALID_PARAMETER_VALUE,
                format!("a bytea element not in hex form: {}", quoted(text)),
            )
        })?;
    out.reserve(hex.len() / 2);
    for pair in hex.chunks(2) {
        let (Some(high), Some(low)) = (hex_digit(pair[0]), hex_digit(pair[1])) else {
            return Err(EncodeError::new(
                INVALID_PARAMETER_VALUE,
                format!("invalid hexadecimal digit in {}", quoted(text)),
            ));
        };
        out.put_u8((high << 4) | low);
    }
    Ok(())
}

// -------------------------------------------------------------------- arrays --

/// Encodes an array literal's elements as they are read, for the header
/// (which needs the dimensions, known only at the end) to go before them.
struct BinaryElements {
    element: Scalar,
    values: BytesMut,
    has_nulls: bool,
}

impl ArrayVisitor for BinaryElements {
    type Error = EncodeError;

    fn open(&mut self, _depth: usize, _index: usize) -> Result<(), EncodeError> {
        Ok(())
    }

    fn element(
        &mut self,
        _depth: usize,
        _index: usize,
        value: Option<&[u8]>,
    ) -> Result<(), EncodeError> {
        let Some(value) = value else {
            self.has_nulls = true;
            encode_null(&mut self.values);
            return Ok(());
        };
        let element = self.element;
        with_length(&mut self.values, |out| {
            write_text(element, value, out, Context::Element)
        })
    }

    fn close(&mut self, _depth: usize, _items: usize) -> Result<(), EncodeError> {
        Ok(())
    }
}

/// An array literal as `array_in` reads it (blanks, escapes and declared
/// bounds included) in the binary array form: dimensions, a has-nulls flag,
/// the element type, each dimension's length and lower bound, the elements.
fn write_array(
    element: Scalar,
    element_type: Oid,
    text: &[u8],
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let mut elements = BinaryElements {
        element,
        values: BytesMut::new(),
        has_nulls: false,
    };
    let shape =
        read_array(text, Strictness::Lenient, &mut elements).map_err(|error| match error {
            LiteralError::Malformed(why) => EncodeError::new(
                INVALID_TEXT_REPRESENTATION,
                format!("malformed array literal: {} ({why})", quoted(text)),
            ),
            LiteralError::Visitor(error) => error,
        })?;
    out.put_i32(shape.lengths().len() as i32);
    out.put_i32(i32::from(elements.has_nulls));
    out.put_u32(element_type);
    for (length, lower_bound) in shape.lengths().iter().zip(shape.lower_bounds()) {
        out.put_i32(*length);
        out.put_i32(*lower_bound);
    }
    out.put_slice(&elements.values);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(time_zone: &str) -> SessionSettings<'_> {
        SessionSettings {
            time_zone,
            interval_style: "postgres",
        }
    }

    const UTC: SessionSettings<'static> = SessionSettings {
        time_zone: "UTC",
        interval_style: "postgres",
    };

    fn encoded(type_oid: Oid, kind: Kind, value: &str) -> Result<Vec<u8>, EncodeError> {
        let column = Column::new("c", kind, "");
        let encoder = encoder_for(type_oid, &column, &UTC).expect("an encoder");
        let mut out = BytesMut::new();
        encoder.encode(value.as_bytes(), &mut out)?;
        Ok(out[4..].to_vec())
    }

    fn numeric(value: &str) -> Vec<u16> {
        let bytes = encoded(1700, Kind::Decimal, value).unwrap();
        bytes
            .chunks(2)
            .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
            .collect()
    }

    #[test]
    fn numerics_are_base_10000_digits_around_the_point() {
        assert_eq!(numeric("123.45"), [2, 0, 0, 2, 123, 4500]);
        assert_eq!(numeric("-0.0005"), [1, (-1i16) as u16, 0x4000, 4, 5]);
        assert_eq!(numeric("5e10"), [1, 2, 0, 0, 500]);
        assert_eq!(numeric("0.000"), [0, 0, 0, 3]);
        assert_eq!(numeric("10000"), [1, 1, 0, 0, 1]);
        assert_eq!(numeric("NaN"), [0, 0, 0xC000, 0]);
    }

    #[test]
    fn integers_are_range_checked() {
        assert_eq!(encoded(21, Kind::Integer, "-32768").unwrap(), [0x80, 0]);
        let error = encoded(21, Kind::Integer, "40000").unwrap_err();
        assert_eq!(
            error.reason(),
            "value \"40000\" is out of range for type smallint"
        );
        let error = encoded(23, Kind::Integer, "12x").unwrap_err();
        assert_eq!(
            error.reason(),
            "invalid input syntax for type integer: \"12x\""
        );
    }

    #[test]
    fn dates_count_days_from_2000() {
        assert_eq!(parse_date(b"2000-01-01").unwrap(), 0);
        assert_eq!(parse_date(b"1970-01-01").unwrap(), -10957);
        assert!(parse_date(b"2024-02-30").is_err());
        assert!(parse_date(b"2023-02-29").is_err());
        assert!(parse_date(b"2024-02-29").is_ok());
    }

    #[test]
    fn short_years_and_long_names_read_as_the_server_reads_them() {
        assert!(parse_date(b"24-01-05").is_err());
        let long = "é".repeat(40);
        assert_eq!(clip_name(long.as_bytes()).len(), 62);
    }

    #[test]
    fn binary_sources_change_width_with_a_range_check() {
        let column = Column::new("c", Kind::Integer, "int8").with_encoding(Encoding::Binary);
        let encoder = encoder_for(23, &column, &UTC).expect("an encoder");
        let mut out = BytesMut::new();
        encoder.encode(&7i64.to_be_bytes(), &mut out).unwrap();
        assert_eq!(&out[..], [0, 0, 0, 4, 0, 0, 0, 7]);
        let error = encoder
            .encode(&(1i64 << 40).to_be_bytes(), &mut out)
            .unwrap_err();
        assert_eq!(error.code(), "22003");
        assert_eq!(out.len(), 8, "a failed value leaves nothing behind");
        let text = Column::new("c", Kind::Text, "text").with_encoding(Encoding::Binary);
        assert!(encoder_for(25, &text, &UTC).is_none());
    }

    #[test]
    fn timestamptz_has_an_encoder_only_in_a_utc_session() {
        let column = Column::new("c", Kind::TimestampTz, "timestamptz");
        assert!(encoder_for(1184, &column, &session("Etc/UTC")).is_some());
        assert!(encoder_for(1184, &column, &session("Asia/Kathmandu")).is_none());
        let array = Column::new(
            "c",
            Kind::Array(Box::new(Kind::TimestampTz)),
            "_timestamptz",
        );
        assert!(encoder_for(1185, &array, &session("Europe/Paris")).is_none());
        let timetz = Column::new("c", Kind::TimeTz, "timetz");
        assert!(encoder_for(1266, &timetz, &session("UTC")).is_some());
        assert!(encoder_for(1266, &timetz, &session("Europe/Paris")).is_none());
    }

    #[test]
    fn timetz_offsets_count_seconds_west() {
        let bytes = encoded(1266, Kind::TimeTz, "12:00:00+05:30").unwrap();
        assert_eq!(bytes[..8], (12 * 3_600_000_000i64).to_be_bytes());
        assert_eq!(bytes[8..], (-19_800i32).to_be_bytes());
        let bytes = encoded(1266, Kind::TimeTz, "24:00:00Z").unwrap();
        assert_eq!(bytes[8..], [0, 0, 0, 0]);
        let error = encoded(1266, Kind::TimeTz, "12:00+16").unwrap_err();
        assert_eq!(error.code(), "22009");
        assert!(encoded(1266, Kind::TimeTz, "12:00 EST").is_err());
    }

    #[test]
    fn intervals_are_microseconds_days_months() {
        let bytes = encoded(1186, Kind::Interval, "1 year 2 mons 3 days 00:00:01").unwrap();
        assert_eq!(bytes[..8], 1_000_000i64.to_be_bytes());
        assert_eq!(bytes[8..12], 3i32.to_be_bytes());
        assert_eq!(bytes[12..], 14i32.to_be_bytes());
    }

    #[test]
    fn interval_columns_with_fields_have_no_encoder() {
        let column = Column::new("c", Kind::Interval, "interval");
        let with = |declared| encoder_for_column(&column, declared, &UTC).is_some();
        assert!(with(Some("interval")));
        assert!(with(Some("interval(3)")));
        assert!(!with(Some("interval year")));
        assert!(!with(Some("interval minute to second(2)")));
        assert!(!with(None));
        let array = Column::new("c", Kind::Array(Box::new(Kind::Interval)), "_interval");
        let with = |declared| encoder_for_column(&array, declared, &UTC).is_some();
        assert!(with(Some("interval[]")));
        assert!(!with(Some("interval day[]")));
        // A session whose interval style this module does not know: none.
        let odd = SessionSettings {
            time_zone: "UTC",
            interval_style: "",
        };
        assert!(encoder_for(1186, &column, &odd).is_none());
    }

    #[test]
    fn array_literals_nest_and_quote() {
        let int4_array = |text: &str| encoded(1007, Kind::Array(Box::new(Kind::Integer)), text);
        let encoded = int4_array("{{1,NULL},{ 3 ,\\4}}").unwrap();
        // Two dimensions, with nulls, int4 elements, 2 × 2 from 1.
        let header: Vec<u8> = [2i32, 1, 23, 2, 1, 2, 1]
            .iter()
            .flat_map(|word| word.to_be_bytes())
            .collect();
        assert_eq!(&encoded[..28], header);
        assert_eq!(&encoded[28..36], [0, 0, 0, 4, 0, 0, 0, 1]);
        assert_eq!(&encoded[36..40], (-1i32).to_be_bytes());
        assert_eq!(&encoded[encoded.len() - 4..], 4i32.to_be_bytes());
        assert!(int4_array("{{1},{2,3}}").is_err());
        assert!(int4_array("{{1},2}").is_err());
        assert_eq!(int4_array("{}").unwrap()[..4], 0i32.to_be_bytes());
        assert_eq!(
            int4_array("[0:1]={5,6}").unwrap()[16..20],
            0i32.to_be_bytes()
        );
    }
}
