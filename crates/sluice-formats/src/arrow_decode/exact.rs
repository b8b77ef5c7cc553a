//! What a number from an Arrow stream must be to go into its column as it is,
//! and the float texts those rules compare with: the rules `sluice.write`
//! (Python) relies on, checked here once for every Arrow input.
//!
//! The database would store some numbers changed without a word (a double
//! rounded into a `float4`, a decimal's fraction cut from an integer), and
//! refuse others only as a database error without the row (a PostgreSQL
//! binary COPY encoder or the server on an integer past its column's
//! range). So a value is refused here, rejecting its row with the reason:
//! a float or a decimal going into an integer column must be whole, and
//! every number within the column's integer type (the Arrow type sluice
//! reads the column as: 16, 32 or 64 bits, unsigned 64); a number going into
//! a float column must be a value of that float or the float whose shortest
//! text it is; a number going into a `numeric(p,s)` must have at most `p -
//! s` digits before the point (the digits after it are
//! `sluice_core::load`'s rule, for every input format). Text goes to the
//! column's own input, as in CSV.

use arrow_schema::DataType;
use sluice_core::{Column, DecimalText, Kind};

use crate::columnar::widths::integer_type;

/// Refuses `text`, the canonical text written for a value of an array of
/// `data_type`, when `column` would not hold it as it is.
pub(super) fn check(data_type: &DataType, text: &[u8], column: &Column) -> Result<(), String> {
    match column.kind {
        Kind::Float => check_float(data_type, text, column),
        Kind::Integer if data_type.is_numeric() => check_integer_range(data_type, text, column),
        Kind::Decimal => check_integer_digits(data_type, text, column),
        _ => Ok(()),
    }
}

/// Refuses a number (`text`, written from an array of `data_type`) that the
/// float column would not hold as it is: an integer or a decimal that is not
/// a value of the column's float nor that float's shortest text, a double
/// with more digits than a single-precision column keeps. Floats widen
/// exactly; text is read by the column's own input, as in CSV.
fn check_float(data_type: &DataType, text: &[u8], column: &Column) -> Result<(), String> {
    let single = single_precision(column);
    let checked = match data_type {
        DataType::Float64 => single,
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => true,
        other => other.is_integer(),
    };
    let Some(number) = DecimalText::split(text).filter(|_| checked) else {
        return Ok(());
    };
    let digits = std::str::from_utf8(text).unwrap_or_default();
    let (held, shortest) = if single {
        let held = digits.parse::<f32>().unwrap_or(f32::NAN);
        (f64::from(held), written(|out| float32(held, out)))
    } else {
        let held = digits.parse::<f64>().unwrap_or(f64::NAN);
        (held, written(|out| float(held, out)))
    };
    // The float itself, every digit of it (a double has at most 1074 after the point).
    let exact = format!("{held:.1100}");
    let same = |candidate: &[u8]| {
        DecimalText::split(candidate).is_some_and(|held| held.same_value(&number))
    };
    if same(shortest.as_bytes()) || same(exact.as_bytes()) {
        return Ok(());
    }
    let bits = if single { 32 } else { 64 };
    Err(match data_type.is_integer() {
        true => format!("{digits} is not exactly a {bits}-bit float: the column would hold {shortest}"),
        false => format!(
            "{digits} has more digits than a {bits}-bit float holds: the column would hold {shortest}"
        ),
    })
}

/// Whether a float column holds single-precision values: PostgreSQL's
/// `float4`, MariaDB's `FLOAT` (a table's description names it so).
fn single_precision(column: &Column) -> bool {
    column.type_name.starts_with("float") && column.type_name != "float8"
}

/// Refuses a whole number (`text`, written from an array of `data_type`)
/// outside the range of the column's integer type. An integer array whose
/// type's range lies within it is not looked at.
fn check_integer_range(data_type: &DataType, text: &[u8], column: &Column) -> Result<(), String> {
    let target = integer_type(&column.type_name);
    let (lowest, highest) = bounds(&target);
    if data_type.is_integer() {
        let (source_lowest, source_highest) = bounds(data_type);
        if lowest <= source_lowest && source_highest <= highest {
            return Ok(());
        }
    }
    let digits = std::str::from_utf8(text).unwrap_or_default();
    // A whole number past i128 (a float's 300 digits) is past every column's range.
    if digits
        .parse::<i128>()
        .is_ok_and(|number| (lowest..=highest).contains(&number))
    {
        return Ok(());
    }
    let unsigned = if lowest == 0 { "unsigned " } else { "" };
    let bits = target.primitive_width().unwrap_or(8) * 8;
    Err(format!(
        "{digits} is out of range for the column's type ({unsigned}{bits}-bit integer)"
    ))
}

/// The least and the greatest value of an integer type (of `Int64`'s for
/// any other type).
fn bounds(data_type: &DataType) -> (i128, i128) {
    match data_type {
        DataType::Int8 => (i8::MIN.into(), i8::MAX.into()),
        DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DataType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        DataType::UInt8 => (0, u8::MAX.into()),
        DataType::UInt16 => (0, u16::MAX.into()),
        DataType::UInt32 => (0, u32::MAX.into()),
        DataType::UInt64 => (0, u64::MAX.into()),
        _ => (i64::MIN.into(), i64::MAX.into()),
    }
}

/// Refuses a number (`text`, written from an array of `data_type`) with more
/// digits before the point than the column's `numeric(p,s)` holds, which the
/// database would refuse without naming the row. Text that is no plain
/// number (`NaN`) is left to the database. A decimal array's value is named
/// without the zeros its scale pads the fraction with (`123456789`, not
/// `123456789.00`).
fn check_integer_digits(data_type: &DataType, text: &[u8], column: &Column) -> Result<(), String> {
    let Some(shape) = column.decimal else {
        return Ok(());
    };
    let allowed = (i64::from(shape.precision) - i64::from(shape.scale)).max(0);
    let Some(number) = DecimalText::split(text) else {
        return Ok(());
    };
    if number.integer_digits() <= allowed {
        return Ok(());
    }
    let mut shown = std::str::from_utf8(text).unwrap_or_default();
    if is_decimal(data_type) && shown.contains('.') {
        shown = shown.trim_end_matches('0').trim_end_matches('.');
    }
    let declared = column.type_with_limit(&format!("{},{}", shape.precision, shape.scale));
    Err(format!(
        "{shown} has more than {allowed} digits before the point, \
         more than the column's type ({declared}) holds"
    ))
}

fn is_decimal(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..)
    )
}

/// Cuts a decimal's text, written to `out` from `start`, to the integer it
/// is, as an integer column's input reads it (`4.00` to `4`); a fraction
/// (`2.70`) is refused rather than cut.
pub(super) fn whole_decimal(out: &mut Vec<u8>, start: usize) -> Result<(), String> {
    let Some(point) = out[start..].iter().position(|&byte| byte == b'.') else {
        return Ok(());
    };
    if out[start + point + 1..].iter().all(|&digit| digit == b'0') {
        out.truncate(start + point);
        return Ok(());
    }
    Err(not_whole(&String::from_utf8_lossy(&out[start..])))
}

/// A float going into an integer column, written as the integer it is. pandas
/// holds an integer column with a missing value as float64 (`1.0`, `NaN`),
/// and the integer types' input refuses `1.0`; a value with a fraction, NaN
/// or an infinity is refused here rather than rounded.
pub(super) fn whole_number(value: f64, out: &mut Vec<u8>) -> Result<(), String> {
    use std::io::Write as _;
    if !value.is_finite() || value.fract() != 0.0 {
        return Err(not_whole(&written(|out| float(value, out))));
    }
    // `{:.0}` prints every digit of a whole double (no exponent); its range
    // is checked once written (`check_integer_range`).
    let _ = write!(out, "{value:.0}");
    Ok(())
}

fn not_whole(shown: &str) -> String {
    format!("{shown} is not a whole number, which an integer column needs")
}

/// What `write` appends to an empty buffer, as a string.
fn written(write: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut text = Vec::new();
    write(&mut text);
    String::from_utf8(text).unwrap_or_default()
}

/// The shortest text that reads back as the same double, with PostgreSQL's
/// spelling of the infinities.
pub(super) fn float(value: f64, out: &mut Vec<u8>) {
    use std::io::Write as _;
    match value {
        f64::INFINITY => out.extend_from_slice(b"Infinity"),
        f64::NEG_INFINITY => out.extend_from_slice(b"-Infinity"),
        _ => {
            let _ = write!(out, "{value:?}");
        }
    }
}

/// As [`float`], with the shortest text of the single-precision value (its
/// widening to double would print digits the value never had).
pub(super) fn float32(value: f32, out: &mut Vec<u8>) {
    use std::io::Write as _;
    if value.is_infinite() {
        return float(f64::from(value), out);
    }
    let _ = write!(out, "{value:?}");
}
