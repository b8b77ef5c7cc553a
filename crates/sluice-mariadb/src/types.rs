//! Column types to [`Kind`]s, and each binary-protocol value into its
//! canonical bytes (see `sluice_core::value`).
//!
//! Results are read with the binary protocol (prepared statements) because
//! the text protocol loses data: MariaDB prints a `FLOAT` with six digits
//! (123456792 arrives as `123457000`). Binary values are exact, and one
//! [`Decode`] is chosen per column before the first row, so the row loop is
//! a `match` on a small enum per value.
//!
//! | MariaDB type | kind | canonical bytes |
//! |---|---|---|
//! | `TINYINT`…`BIGINT` (signed or `UNSIGNED`), `YEAR` | `Integer` | digits; `TINYINT(1)` stays a number |
//! | `FLOAT`, `DOUBLE` | `Float` | shortest text that reads back to the same value |
//! | `DECIMAL(p,s)` | `Decimal`, with precision and scale | the server's exact digits |
//! | `DATE` | `Date` | `YYYY-MM-DD` |
//! | `DATETIME` | `Timestamp` | `YYYY-MM-DD HH:MM:SS[.ffffff]` |
//! | `TIMESTAMP` | `TimestampTz` | the same in UTC, with `+00` |
//! | `TIME` | `Interval` | `[-]HH:MM:SS[.ffffff]`, hours beyond 24 as they are |
//! | `BIT(n)` | `Other` | n characters `0`/`1` |
//! | `JSON` (MySQL's type, MariaDB's `json` format) | `Json` | the document |
//! | `CHAR`, `VARCHAR`, `TEXT`, `ENUM`, `SET` | `Text` | UTF-8 |
//! | `BINARY`, `VARBINARY`, `BLOB` | `Bytes` | the bytes |
//! | spatial types | `Other` | WKT, as `ST_AsText` |
//! | anything else | `Other` | the server's bytes |
//!
//! Zero dates (`0000-00-00`, `2024-00-00`) fit no calendar: they are NULL or
//! an error, as [`ZeroDates`] says.

use sluice_core::{Batch, Column, DecimalShape, Error, ErrorKind, Kind};

use crate::config::ZeroDates;
use crate::geometry::append_wkt;
use crate::protocol::{read_lenenc_bytes, ColumnDefinition};

// MYSQL_TYPE_* codes.
const DECIMAL: u8 = 0;
const TINY: u8 = 1;
const SHORT: u8 = 2;
const LONG: u8 = 3;
const FLOAT: u8 = 4;
const DOUBLE: u8 = 5;
const NULL: u8 = 6;
const TIMESTAMP: u8 = 7;
const LONGLONG: u8 = 8;
const INT24: u8 = 9;
const DATE: u8 = 10;
const TIME: u8 = 11;
const DATETIME: u8 = 12;
const YEAR: u8 = 13;
const NEWDATE: u8 = 14;
const BIT: u8 = 16;
const JSON: u8 = 245;
const NEWDECIMAL: u8 = 246;
const GEOMETRY: u8 = 255;

// Column flags.
const UNSIGNED_FLAG: u16 = 32;
#[cfg(test)]
const ZEROFILL_FLAG: u16 = 64;
/// Set on a result column the server knows never holds NULL (it clears it for
/// the inner side of an outer join, whatever the table says).
const NOT_NULL_FLAG: u16 = 1;
const ENUM_FLAG: u16 = 256;
const SET_FLAG: u16 = 2048;

/// The binary character set: the column holds bytes, not text.
const BINARY_CHARSET: u16 = 63;

/// How one column's values are read off the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decode {
    /// 1, 2, 4 or 8 bytes, little-endian.
    Integer {
        width: u8,
        unsigned: bool,
    },
    Float32,
    Float64,
    /// A length-encoded value passed on as it is.
    Verbatim,
    /// A length-encoded bit field, written as `0`/`1` characters.
    Bits {
        width: u32,
    },
    Date,
    DateTime {
        utc: bool,
    },
    Time,
    /// SRID + WKB, written as WKT.
    Geometry,
    /// The wire values of `Integer`, `Float32`, `Float64`, `Date` and
    /// `DateTime`, handed over in the binary forms of [`sluice_core::value`]
    /// (big-endian numbers, days and microseconds from 2000-01-01) for a
    /// format that stores numbers as numbers: rendering them as text only
    /// for the format to parse the text again costs both sides CPU per value.
    BinaryInteger {
        width: u8,
        unsigned: bool,
    },
    BinaryFloat32,
    BinaryFloat64,
    BinaryDate,
    BinaryDateTime,
}

impl Decode {
    /// The decoder that reads the same wire values into their binary form,
    /// if the kind has one that holds every value: `BIGINT UNSIGNED` has
    /// none (the binary form's integers are signed), `TIME` (an interval of
    /// up to 838 hours), decimals and strings stay text.
    pub(crate) fn in_binary(self) -> Option<Decode> {
        Some(match self {
            Decode::Integer {
                width: 8,
                unsigned: true,
            } => return None,
            Decode::Integer { width, unsigned } => Decode::BinaryInteger { width, unsigned },
            Decode::Float32 => Decode::BinaryFloat32,
            Decode::Float64 => Decode::BinaryFloat64,
            Decode::Date => Decode::BinaryDate,
            Decode::DateTime { .. } => Decode::BinaryDateTime,
            _ => return None,
        })
    }
}

/// A prepared statement's result column as its metadata describes it, with
/// whether it may hold NULL.
pub(crate) fn described_column(definition: &ColumnDefinition) -> Column {
    let nullable = definition.flags & NOT_NULL_FLAG == 0;
    column(definition).0.with_nullable(Some(nullable))
}

/// A result column: its schema entry and its decoder.
pub(crate) fn column(definition: &ColumnDefinition) -> (Column, Decode) {
    let unsigned = definition.flags & UNSIGNED_FLAG != 0;
    let integer = |width| Decode::Integer { width, unsigned };
    let (kind, decode, type_name): (Kind, Decode, &str) = match definition.column_type {
        TINY => (Kind::Integer, integer(1), "tinyint"),
        SHORT => (Kind::Integer, integer(2), "smallint"),
        YEAR => (Kind::Integer, integer(2), "year"),
        INT24 => (Kind::Integer, integer(4), "mediumint"),
        LONG => (Kind::Integer, integer(4), "int"),
        LONGLONG => (Kind::Integer, integer(8), "bigint"),
        FLOAT => (Kind::Float, Decode::Float32, "float"),
        DOUBLE => (Kind::Float, Decode::Float64, "double"),
        DECIMAL | NEWDECIMAL => (Kind::Decimal, Decode::Verbatim, "decimal"),
        DATE | NEWDATE => (Kind::Date, Decode::Date, "date"),
        DATETIME => (Kind::Timestamp, Decode::DateTime { utc: false }, "datetime"),
        TIMESTAMP => (
            Kind::TimestampTz,
            Decode::DateTime { utc: true },
            "timestamp",
        ),
        TIME => (Kind::Interval, Decode::Time, "time"),
        BIT => (
            Kind::Other,
            Decode::Bits {
                width: definition.length,
            },
            "bit",
        ),
        JSON => (Kind::Json, Decode::Verbatim, "json"),
        GEOMETRY => (Kind::Other, Decode::Geometry, "geometry"),
        NULL => (Kind::Text, Decode::Verbatim, "null"),
        _ => string_column(definition),
    };
    let type_name = match (&definition.extended_type, unsigned) {
        (Some(extended), _) if !extended.is_empty() => extended.clone(),
        // The server flags every YEAR unsigned (and zero-filled); `year
        // unsigned` is no type a user declared, and formats narrow `year`.
        (_, true) if definition.column_type != YEAR => format!("{type_name} unsigned"),
        _ => type_name.to_owned(),
    };
    let shape = match kind {
        Kind::Decimal => decimal_shape(definition, unsigned),
        _ => None,
    };
    let column = Column::new(definition.name.clone(), kind, type_name).with_decimal(shape);
    (column, decode)
}

/// `DECIMAL(p,s)`'s precision and scale from the column definition, which
/// carries the display length instead: p digits, plus one for the point when
/// s > 0 and one for the sign unless unsigned (the server's
/// `my_decimal_length_to_precision`). `None` when the result makes no sense.
fn decimal_shape(definition: &ColumnDefinition, unsigned: bool) -> Option<DecimalShape> {
    let scale = definition.decimals;
    let point = u32::from(scale > 0);
    let sign = u32::from(!unsigned);
    let precision = definition.length.checked_sub(point + sign)?;
    (1..=65)
        .contains(&precision)
        .then_some(precision)
        .filter(|precision| u32::from(scale) <= *precision)
        .map(|precision| DecimalShape {
            precision: precision as u16,
            scale: i16::from(scale),
        })
}

/// Strings, blobs, enums and sets: text, bytes or JSON by their metadata.
fn string_column(definition: &ColumnDefinition) -> (Kind, Decode, &'static str) {
    if definition.extended_format.as_deref() == Some("json") {
        return (Kind::Json, Decode::Verbatim, "json");
    }
    if definition.flags & ENUM_FLAG != 0 {
        return (Kind::Text, Decode::Verbatim, "enum");
    }
    if definition.flags & SET_FLAG != 0 {
        return (Kind::Text, Decode::Verbatim, "set");
    }
    match (
        definition.column_type,
        definition.character_set == BINARY_CHARSET,
    ) {
        (249..=252, true) => (Kind::Bytes, Decode::Verbatim, "blob"),
        (249..=252, false) => (Kind::Text, Decode::Verbatim, "text"),
        (_, true) => (Kind::Bytes, Decode::Verbatim, "varbinary"),
        (15 | 253 | 254, false) => (Kind::Text, Decode::Verbatim, "varchar"),
        (_, false) => (Kind::Other, Decode::Verbatim, "unknown"),
    }
}

/// Reads one value of `decode` from the front of `input` into `batch`.
pub(crate) fn read_value(
    decode: Decode,
    input: &mut &[u8],
    batch: &mut Batch,
    column: &Column,
    zero_dates: ZeroDates,
) -> Result<(), Error> {
    match decode {
        Decode::Integer { width, unsigned } => {
            let bytes = take(input, usize::from(width))?;
            push_integer(bytes, unsigned, batch);
        }
        Decode::BinaryInteger { width, unsigned } => {
            let bytes = take(input, usize::from(width))?;
            push_binary_integer(bytes, unsigned, batch);
        }
        Decode::BinaryFloat32 => batch.push_value(&reversed::<4>(take(input, 4)?)),
        Decode::BinaryFloat64 => batch.push_value(&reversed::<8>(take(input, 8)?)),
        Decode::Float32 => {
            let bytes = take(input, 4)?;
            let value = f32::from_le_bytes(bytes.try_into().expect("4 bytes"));
            push_float(value.is_finite(), ryu::Buffer::new().format(value), batch);
        }
        Decode::Float64 => {
            let bytes = take(input, 8)?;
            let value = f64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            push_float(value.is_finite(), ryu::Buffer::new().format(value), batch);
        }
        Decode::Verbatim => batch.push_value(read_lenenc_bytes(input)?),
        Decode::Bits { width } => push_bits(read_lenenc_bytes(input)?, width, batch),
        Decode::Date | Decode::DateTime { .. } | Decode::BinaryDate | Decode::BinaryDateTime => {
            let length = usize::from(*take(input, 1)?.first().expect("1 byte"));
            let fields = take(input, length)?;
            push_moment(decode, fields, batch, column, zero_dates)?;
        }
        Decode::Time => {
            let length = usize::from(*take(input, 1)?.first().expect("1 byte"));
            push_time(take(input, length)?, batch)?;
        }
        Decode::Geometry => {
            let value = read_lenenc_bytes(input)?;
            let start = batch.begin_value();
            append_wkt(value, batch.value_buffer()).map_err(|error| {
                Error::new(ErrorKind::Data, format!("column {}: {error}", column.name))
            })?;
            batch.end_value(start);
        }
    }
    Ok(())
}

fn take<'a>(input: &mut &'a [u8], length: usize) -> Result<&'a [u8], Error> {
    if input.len() < length {
        return Err(Error::protocol("a row ended inside a value"));
    }
    let (value, rest) = input.split_at(length);
    *input = rest;
    Ok(value)
}

fn push_integer(bytes: &[u8], unsigned: bool, batch: &mut Batch) {
    let raw = le_bits(bytes);
    let mut digits = itoa::Buffer::new();
    let text = if unsigned {
        digits.format(raw)
    } else {
        digits.format(sign_extended(raw, bytes.len()))
    };
    batch.push_value(text.as_bytes());
}

/// A little-endian integer of 1, 2, 4 or 8 bytes, zero-extended.
fn le_bits(bytes: &[u8]) -> u64 {
    let mut wide = [0u8; 8];
    wide[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(wide)
}

/// `raw`'s low `width` bytes as a signed integer of that width.
fn sign_extended(raw: u64, width: usize) -> i64 {
    let shift = 64 - 8 * width as u32;
    ((raw << shift) as i64) >> shift
}

/// A little-endian integer of 1, 2, 4 or 8 bytes as a big-endian one of the
/// binary form's widths (2, 4 or 8 bytes), wide enough for every value of its
/// type: an unsigned value takes the next width up.
fn push_binary_integer(bytes: &[u8], unsigned: bool, batch: &mut Batch) {
    let raw = le_bits(bytes);
    // `BIGINT UNSIGNED` never comes here (`Decode::in_binary`): every
    // unsigned value fits i64.
    let value = if unsigned {
        raw as i64
    } else {
        sign_extended(raw, bytes.len())
    };
    match (bytes.len(), unsigned) {
        (1, _) | (2, false) => batch.push_value(&(value as i16).to_be_bytes()),
        (2, true) | (4, false) => batch.push_value(&(value as i32).to_be_bytes()),
        _ => batch.push_value(&value.to_be_bytes()),
    }
}

/// `N` little-endian bytes in big-endian order.
fn reversed<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out: [u8; N] = bytes.try_into().expect("N bytes");
    out.reverse();
    out
}

/// A float's canonical text: ryu's shortest form without a `.0` that the
/// database itself would not print (`1`, not `1.0`).
fn push_float(finite: bool, text: &str, batch: &mut Batch) {
    if !finite {
        // MariaDB stores no NaN or infinity; should one come, keep the
        // canonical spellings.
        let spelled: &[u8] = if text.starts_with('-') {
            b"-Infinity"
        } else if text.contains('N') {
            b"NaN"
        } else {
            b"Infinity"
        };
        batch.push_value(spelled);
        return;
    }
    batch.push_value(text.strip_suffix(".0").unwrap_or(text).as_bytes());
}

fn push_bits(value: &[u8], width: u32, batch: &mut Batch) {
    let start = batch.begin_value();
    let buffer = batch.value_buffer();
    let total = value.len() as u32 * 8;
    let width = width.clamp(1, total.max(1));
    for bit in (0..width).rev() {
        let byte = value[value.len() - 1 - (bit / 8) as usize];
        buffer.push(if byte >> (bit % 8) & 1 == 1 {
            b'1'
        } else {
            b'0'
        });
    }
    batch.end_value(start);
}

/// The fields of a `DATE`, `DATETIME` or `TIMESTAMP` value: 0, 4, 7 or 11
/// bytes on the wire, the fields left out being zero.
struct Moment {
    year: u16,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
    micros: u32,
}

impl Moment {
    /// The moment `fields` hold, or `None` after a zero date (`0000-00-00`,
    /// `2024-00-00`) was made NULL, or an error, as `zero_dates` says.
    fn read(
        fields: &[u8],
        batch: &mut Batch,
        column: &Column,
        zero_dates: ZeroDates,
    ) -> Result<Option<Moment>, Error> {
        let mut all = [0u8; 11];
        all[..fields.len().min(11)].copy_from_slice(&fields[..fields.len().min(11)]);
        let moment = Moment {
            year: u16::from_le_bytes([all[0], all[1]]),
            month: all[2],
            day: all[3],
            hour: all[4],
            minute: all[5],
            second: all[6],
            micros: micros(&all[7..11]),
        };
        if moment.month == 0 || moment.day == 0 {
            zero_date(&moment, batch, column, zero_dates)?;
            return Ok(None);
        }
        Ok(Some(moment))
    }

    fn date_text(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// `DATE`, `DATETIME`, `TIMESTAMP` as canonical text, or with the binary
/// decoders as days or microseconds from 2000-01-01.
fn push_moment(
    decode: Decode,
    fields: &[u8],
    batch: &mut Batch,
    column: &Column,
    zero_dates: ZeroDates,
) -> Result<(), Error> {
    let Some(moment) = Moment::read(fields, batch, column, zero_dates)? else {
        return Ok(());
    };
    match decode {
        Decode::BinaryDate | Decode::BinaryDateTime => {
            push_binary_moment(&moment, decode == Decode::BinaryDateTime, batch, column)
        }
        Decode::DateTime { utc } => {
            push_moment_text(&moment, Some(utc), batch);
            Ok(())
        }
        _ => {
            push_moment_text(&moment, None, batch);
            Ok(())
        }
    }
}

/// `YYYY-MM-DD`, with the time of day when `clock` says whether it is UTC
/// (`TIMESTAMP` values arrive in the session's UTC and say so: `+00`).
fn push_moment_text(moment: &Moment, clock: Option<bool>, batch: &mut Batch) {
    let start = batch.begin_value();
    let buffer = batch.value_buffer();
    push_padded(buffer, u32::from(moment.year), 4);
    buffer.push(b'-');
    push_padded(buffer, u32::from(moment.month), 2);
    buffer.push(b'-');
    push_padded(buffer, u32::from(moment.day), 2);
    if let Some(utc) = clock {
        buffer.push(b' ');
        let hours = u32::from(moment.hour);
        push_clock(buffer, hours, moment.minute, moment.second, moment.micros);
        if utc {
            buffer.extend_from_slice(b"+00");
        }
    }
    batch.end_value(start);
}

/// Days (a date) or microseconds (with the time of day) from 2000-01-01. A
/// day the month does not have (stored under `ALLOW_INVALID_DATES`) is
/// refused: no count of days means it.
fn push_binary_moment(
    moment: &Moment,
    with_time: bool,
    batch: &mut Batch,
    column: &Column,
) -> Result<(), Error> {
    let days = days_from_2000(moment.year, moment.month, moment.day).ok_or_else(|| {
        Error::new(
            ErrorKind::Data,
            format!(
                "column {} holds {}, a day its month does not have",
                column.name,
                moment.date_text()
            ),
        )
    })?;
    if !with_time {
        batch.push_value(&(days as i32).to_be_bytes());
        return Ok(());
    }
    let seconds =
        i64::from(moment.hour) * 3600 + i64::from(moment.minute) * 60 + i64::from(moment.second);
    let micros = (days * 86_400 + seconds) * 1_000_000 + i64::from(moment.micros);
    batch.push_value(&micros.to_be_bytes());
    Ok(())
}

/// Days from 2000-01-01 to a day of the proleptic Gregorian calendar, or
/// `None` if the month has no such day (Howard Hinnant's `days_from_civil`).
fn days_from_2000(year: u16, month: u8, day: u8) -> Option<i64> {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if day > month_days {
        return None;
    }
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (i64::from(month) + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    // 730_425 days lie between 0000-03-01 (day 0 of this count) and 2000-01-01.
    Some(era * 146_097 + day_of_era - 730_425)
}

fn zero_date(
    moment: &Moment,
    batch: &mut Batch,
    column: &Column,
    zero_dates: ZeroDates,
) -> Result<(), Error> {
    match zero_dates {
        ZeroDates::Null => {
            batch.push_null();
            Ok(())
        }
        ZeroDates::Error => Err(Error::new(
            ErrorKind::Data,
            format!(
                "column {} holds the zero date {}, which no calendar has \
                 (zero_dates=null in the database URL writes NULL instead)",
                column.name,
                moment.date_text()
            ),
        )),
    }
}

/// `TIME`: 0, 8 or 12 bytes: sign, days, hours, minutes, seconds, microseconds.
fn push_time(fields: &[u8], batch: &mut Batch) -> Result<(), Error> {
    let mut all = [0u8; 12];
    if fields.len() > 12 {
        return Err(Error::protocol("a TIME value longer than 12 bytes"));
    }
    all[..fields.len()].copy_from_slice(fields);
    let negative = all[0] == 1;
    let days = u32::from_le_bytes([all[1], all[2], all[3], all[4]]);
    let hours = days * 24 + u32::from(all[5]);
    let start = batch.begin_value();
    let buffer = batch.value_buffer();
    if negative {
        buffer.push(b'-');
    }
    push_clock(buffer, hours, all[6], all[7], micros(&all[8..12]));
    batch.end_value(start);
    Ok(())
}

fn micros(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// `HH:MM:SS` and, when there are any, the microseconds without trailing zeros.
fn push_clock(buffer: &mut Vec<u8>, hours: u32, minutes: u8, seconds: u8, micros: u32) {
    push_padded(buffer, hours, 2);
    buffer.push(b':');
    push_padded(buffer, u32::from(minutes), 2);
    buffer.push(b':');
    push_padded(buffer, u32::from(seconds), 2);
    if micros > 0 {
        buffer.push(b'.');
        let mut fraction = [b'0'; 6];
        let mut rest = micros;
        for digit in fraction.iter_mut().rev() {
            *digit = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        let used = 6 - fraction
            .iter()
            .rev()
            .take_while(|&&digit| digit == b'0')
            .count();
        buffer.extend_from_slice(&fraction[..used]);
    }
}

fn push_padded(buffer: &mut Vec<u8>, value: u32, width: usize) {
    let mut digits = itoa::Buffer::new();
    let text = digits.format(value);
    buffer.extend(std::iter::repeat_n(b'0', width.saturating_sub(text.len())));
    buffer.extend_from_slice(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column_named(name: &str) -> Column {
        Column::new(name, Kind::Date, "date")
    }

    fn decoded(
        decode: Decode,
        wire: &[u8],
        zero_dates: ZeroDates,
    ) -> Result<Option<Vec<u8>>, Error> {
        let mut batch = Batch::new(1);
        let mut input = wire;
        read_value(
            decode,
            &mut input,
            &mut batch,
            &column_named("d"),
            zero_dates,
        )?;
        assert!(input.is_empty(), "{input:?} left over");
        Ok(batch.row(0).get(0).map(<[u8]>::to_vec))
    }

    fn text(decode: Decode, wire: &[u8]) -> String {
        String::from_utf8(decoded(decode, wire, ZeroDates::Error).unwrap().unwrap()).unwrap()
    }

    fn binary(decode: Decode, wire: &[u8]) -> Vec<u8> {
        decoded(decode, wire, ZeroDates::Error).unwrap().unwrap()
    }

    #[test]
    fn binary_integers_are_big_endian_and_wide_enough_for_their_type() {
        let form = |width, unsigned| {
            Decode::Integer { width, unsigned }
                .in_binary()
                .expect("a binary form")
        };
        assert_eq!(binary(form(1, false), &[0xFF]), (-1i16).to_be_bytes());
        assert_eq!(binary(form(1, true), &[0xFF]), 255i16.to_be_bytes());
        assert_eq!(
            binary(form(2, false), &0x8000u16.to_le_bytes()),
            i16::MIN.to_be_bytes()
        );
        assert_eq!(
            binary(form(2, true), &0xFFFFu16.to_le_bytes()),
            65_535i32.to_be_bytes()
        );
        assert_eq!(
            binary(form(4, false), &i32::MIN.to_le_bytes()),
            i32::MIN.to_be_bytes()
        );
        assert_eq!(
            binary(form(4, true), &u32::MAX.to_le_bytes()),
            i64::from(u32::MAX).to_be_bytes()
        );
        assert_eq!(
            binary(form(8, false), &i64::MIN.to_le_bytes()),
            i64::MIN.to_be_bytes()
        );
        assert_eq!(
            Decode::Integer {
                width: 8,
                unsigned: true
            }
            .in_binary(),
            None,
            "BIGINT UNSIGNED does not fit the binary form's i64"
        );
        assert_eq!(Decode::Time.in_binary(), None);
        assert_eq!(Decode::Verbatim.in_binary(), None);
    }

    #[test]
    fn binary_floats_are_their_bits_big_endian() {
        assert_eq!(
            binary(Decode::BinaryFloat32, &0.1f32.to_le_bytes()),
            0.1f32.to_be_bytes()
        );
        assert_eq!(
            binary(Decode::BinaryFloat64, &(-1e308f64).to_le_bytes()),
            (-1e308f64).to_be_bytes()
        );
    }

    #[test]
    fn binary_moments_count_from_2000() {
        let date = |year: u16, month, day| {
            let mut wire = vec![4];
            wire.extend(year.to_le_bytes());
            wire.extend([month, day]);
            i32::from_be_bytes(binary(Decode::BinaryDate, &wire).try_into().unwrap())
        };
        assert_eq!(date(2000, 1, 1), 0);
        assert_eq!(date(1999, 12, 31), -1);
        assert_eq!(date(2000, 3, 1), 60);
        assert_eq!(date(1970, 1, 1), -10_957);
        assert_eq!(
            date(2100, 3, 1) - date(2100, 2, 28),
            1,
            "2100 is no leap year"
        );
        assert_eq!(date(1, 1, 1), -730_119);
        assert_eq!(date(9999, 12, 31), 2_921_939);

        let mut moment = vec![11];
        moment.extend(1999u16.to_le_bytes());
        moment.extend([12, 31, 23, 59, 58]);
        moment.extend(500_000u32.to_le_bytes());
        assert_eq!(
            binary(Decode::BinaryDateTime, &moment),
            (-1_500_000i64).to_be_bytes()
        );
        let mut midnight = vec![4];
        midnight.extend(2000u16.to_le_bytes());
        midnight.extend([1, 2]);
        assert_eq!(
            binary(Decode::BinaryDateTime, &midnight),
            86_400_000_000i64.to_be_bytes()
        );
    }

    #[test]
    fn binary_moments_refuse_days_their_month_lacks_and_keep_zero_dates_rules() {
        let mut wire = vec![4];
        wire.extend(2023u16.to_le_bytes());
        wire.extend([2, 29]);
        let error = decoded(Decode::BinaryDate, &wire, ZeroDates::Null).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("column d holds 2023-02-29, a day its month does not have"),
            "{error}"
        );
        assert_eq!(
            decoded(Decode::BinaryDateTime, &[0], ZeroDates::Null).unwrap(),
            None
        );
        assert!(decoded(Decode::BinaryDate, &[0], ZeroDates::Error).is_err());
    }

    #[test]
    fn integers_of_every_width_and_sign() {
        let signed = |width| Decode::Integer {
            width,
            unsigned: false,
        };
        let unsigned = |width| Decode::Integer {
            width,
            unsigned: true,
        };
        assert_eq!(text(signed(1), &[0xFF]), "-1");
        assert_eq!(text(unsigned(1), &[0xFF]), "255");
        assert_eq!(text(signed(2), &0x8000u16.to_le_bytes()), "-32768");
        assert_eq!(
            text(signed(4), &(-2_147_483_648i32).to_le_bytes()),
            "-2147483648"
        );
        assert_eq!(
            text(unsigned(8), &u64::MAX.to_le_bytes()),
            "18446744073709551615"
        );
        assert_eq!(
            text(signed(8), &i64::MIN.to_le_bytes()),
            "-9223372036854775808"
        );
    }

    #[test]
    fn floats_are_exact_and_short() {
        assert_eq!(
            text(Decode::Float32, &123_456_792f32.to_le_bytes()),
            "123456790"
        );
        assert_eq!(text(Decode::Float32, &0.1f32.to_le_bytes()), "0.1");
        assert_eq!(
            text(Decode::Float64, &(0.1f64 + 0.2).to_le_bytes()),
            "0.30000000000000004"
        );
        assert_eq!(text(Decode::Float64, &1e308f64.to_le_bytes()), "1e308");
        assert_eq!(text(Decode::Float64, &2f64.to_le_bytes()), "2");
    }

    #[test]
    fn dates_times_and_zero_dates() {
        let date = [4, 0xE8, 0x07, 2, 29];
        assert_eq!(text(Decode::Date, &date), "2024-02-29");
        let moment = [11, 0xE8, 0x07, 12, 31, 23, 59, 58, 0x20, 0xA1, 0x07, 0x00];
        assert_eq!(
            text(Decode::DateTime { utc: false }, &moment),
            "2024-12-31 23:59:58.5"
        );
        let whole_seconds = [7, 0xE8, 0x07, 12, 31, 23, 59, 58];
        assert_eq!(
            text(Decode::DateTime { utc: true }, &whole_seconds),
            "2024-12-31 23:59:58+00"
        );
        assert_eq!(decoded(Decode::Date, &[0], ZeroDates::Null).unwrap(), None);
        let error = decoded(Decode::Date, &[0], ZeroDates::Error).unwrap_err();
        assert!(
            error.to_string().contains("zero date 0000-00-00"),
            "{error}"
        );
        assert!(error.to_string().contains("zero_dates=null"), "{error}");
        // TIME beyond a day, negative, with a fraction.
        let time = [12, 1, 34, 0, 0, 0, 22, 59, 59, 0xA0, 0x86, 0x01, 0x00];
        assert_eq!(text(Decode::Time, &time), "-838:59:59.1");
        assert_eq!(text(Decode::Time, &[0]), "00:00:00");
    }

    #[test]
    fn bits_are_written_as_digits_of_their_width() {
        assert_eq!(text(Decode::Bits { width: 1 }, &[1, 1]), "1");
        assert_eq!(
            text(Decode::Bits { width: 10 }, &[2, 0b10, 0b0000_0101]),
            "1000000101"
        );
    }

    #[test]
    fn decimal_shapes_come_from_length_and_decimals() {
        let definition = |length, decimals, flags| ColumnDefinition {
            name: "d".into(),
            character_set: BINARY_CHARSET,
            length,
            column_type: NEWDECIMAL,
            flags,
            decimals,
            extended_type: None,
            extended_format: None,
        };
        let shape = |precision, scale| Some(DecimalShape { precision, scale });
        // DECIMAL(10,2): 10 digits, the point and the sign.
        assert_eq!(column(&definition(12, 2, 0)).0.decimal, shape(10, 2));
        // DECIMAL(10,2) UNSIGNED: no sign.
        assert_eq!(
            column(&definition(11, 2, UNSIGNED_FLAG)).0.decimal,
            shape(10, 2)
        );
        // DECIMAL(65,0): no point.
        assert_eq!(column(&definition(66, 0, 0)).0.decimal, shape(65, 0));
        assert_eq!(column(&definition(1, 0, 0)).0.decimal, None);
        let mut double = definition(22, 31, 0);
        double.column_type = DOUBLE;
        assert_eq!(column(&double).0.decimal, None);
    }

    #[test]
    fn names_say_unsigned_except_for_year_which_always_is() {
        let definition = |column_type, flags| ColumnDefinition {
            name: "n".into(),
            character_set: BINARY_CHARSET,
            length: 4,
            column_type,
            flags,
            decimals: 0,
            extended_type: None,
            extended_format: None,
        };
        let name = |column_type, flags| column(&definition(column_type, flags)).0.type_name;
        assert_eq!(name(YEAR, UNSIGNED_FLAG | ZEROFILL_FLAG), "year");
        assert_eq!(name(SHORT, UNSIGNED_FLAG), "smallint unsigned");
        assert_eq!(name(SHORT, 0), "smallint");
        let described = described_column(&definition(LONG, NOT_NULL_FLAG));
        assert_eq!(described.nullable, Some(false));
        assert_eq!(described_column(&definition(LONG, 0)).nullable, Some(true));
    }
}
