//! Converters for columns a source sent in the binary forms of
//! [`sluice_core::value`] ([`sluice_core::Encoding::Binary`]): big-endian
//! numbers read straight into the Arrow builders, with no text between the
//! database and the array.
//!
//! The Arrow types are the ones the text path gives the same column
//! ([`super::mapping`]), so a result maps the same whichever way it arrived;
//! only the epochs move (the binary form counts from 2000-01-01, Arrow from
//! 1970-01-01), with the same infinities and the same refusal of a timestamp
//! Arrow's microseconds cannot hold.

use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Time64MicrosecondType,
    TimestampMicrosecondType,
};
use arrow_schema::{DataType, TimeUnit};
use sluice_core::{Column, Kind};

use super::convert::{Primitive, TextConverter};
use super::text::{
    Reason, DATE_INFINITY, DATE_MINUS_INFINITY, TIMESTAMP_INFINITY, TIMESTAMP_MINUS_INFINITY,
};
use super::widths::{integer_type, is_single_precision};

/// Days from 1970-01-01 to 2000-01-01, the binary form's epoch.
const EPOCH_DAYS: i32 = 10_957;
/// Microseconds from 1970-01-01 to 2000-01-01.
const EPOCH_MICROS: i64 = EPOCH_DAYS as i64 * 86_400 * 1_000_000;

/// The converter for a binary column; `None` for a kind that has no binary
/// form (the source never sends one, but the text path then takes it).
pub(crate) fn binary_converter(column: &Column) -> Option<Box<dyn TextConverter>> {
    Some(match &column.kind {
        Kind::Bool => Box::new(super::convert::Bool::binary()),
        Kind::Integer => integer_converter(&column.type_name),
        Kind::Float if is_single_precision(&column.type_name) => {
            Box::new(Primitive::<Float32Type, _>::new(
                DataType::Float32,
                |value: &[u8]| fixed::<4>(value, "a binary32 float").map(f32::from_be_bytes),
            ))
        }
        Kind::Float => Box::new(Primitive::<Float64Type, _>::new(
            DataType::Float64,
            |value: &[u8]| fixed::<8>(value, "a binary64 float").map(f64::from_be_bytes),
        )),
        Kind::Date => Box::new(Primitive::<Date32Type, _>::new(DataType::Date32, date)),
        Kind::Time => Box::new(Primitive::<Time64MicrosecondType, _>::new(
            DataType::Time64(TimeUnit::Microsecond),
            |value: &[u8]| fixed::<8>(value, "a time").map(i64::from_be_bytes),
        )),
        Kind::Timestamp => Box::new(Primitive::<TimestampMicrosecondType, _>::new(
            DataType::Timestamp(TimeUnit::Microsecond, None),
            timestamp,
        )),
        Kind::TimestampTz => Box::new(Primitive::<TimestampMicrosecondType, _>::new(
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            timestamp,
        )),
        Kind::Other | Kind::Text if column.type_name.eq_ignore_ascii_case("uuid") => {
            Box::new(super::convert::Uuid::binary())
        }
        _ => return None,
    })
}

/// The integer's width in the Arrow type follows the type name, as on the
/// text path; the value's own width (2, 4 or 8 bytes) may be narrower.
fn integer_converter(type_name: &str) -> Box<dyn TextConverter> {
    match integer_type(type_name) {
        DataType::Int16 => Box::new(Primitive::<Int16Type, _>::new(
            DataType::Int16,
            |value: &[u8]| narrow(integer(value)?, "a 16-bit integer"),
        )),
        DataType::Int32 => Box::new(Primitive::<Int32Type, _>::new(
            DataType::Int32,
            |value: &[u8]| narrow(integer(value)?, "a 32-bit integer"),
        )),
        _ => Box::new(Primitive::<Int64Type, _>::new(DataType::Int64, integer)),
    }
}

/// A big-endian two's complement integer of 2, 4 or 8 bytes.
pub(crate) fn integer(value: &[u8]) -> Result<i64, Reason> {
    match *value {
        [a, b] => Ok(i64::from(i16::from_be_bytes([a, b]))),
        [a, b, c, d] => Ok(i64::from(i32::from_be_bytes([a, b, c, d]))),
        _ => fixed::<8>(value, "a binary integer").map(i64::from_be_bytes),
    }
}

fn narrow<T: TryFrom<i64>>(value: i64, what: &str) -> Result<T, Reason> {
    T::try_from(value).map_err(|_| format!("{value} does not fit {what}"))
}

/// Exactly `N` bytes, or why not.
fn fixed<const N: usize>(value: &[u8], what: &str) -> Result<[u8; N], Reason> {
    value
        .try_into()
        .map_err(|_| format!("{} bytes are not {what} ({N} bytes)", value.len()))
}

/// Days from 2000 to days from 1970; the infinities stay the ends of `i32`.
pub(crate) fn date(value: &[u8]) -> Result<i32, Reason> {
    let days = i32::from_be_bytes(fixed::<4>(value, "a date")?);
    match days {
        DATE_INFINITY | DATE_MINUS_INFINITY => Ok(days),
        days => days
            .checked_add(EPOCH_DAYS)
            .filter(|days| *days != DATE_INFINITY)
            .ok_or_else(|| "the date is past Arrow's Date32".to_owned()),
    }
}

/// Microseconds from 2000 to microseconds from 1970; the infinities stay the
/// ends of `i64`, and a timestamp that would reach them is refused.
pub(crate) fn timestamp(value: &[u8]) -> Result<i64, Reason> {
    let micros = i64::from_be_bytes(fixed::<8>(value, "a timestamp")?);
    match micros {
        TIMESTAMP_INFINITY | TIMESTAMP_MINUS_INFINITY => Ok(micros),
        micros => micros
            .checked_add(EPOCH_MICROS)
            .filter(|micros| *micros != TIMESTAMP_INFINITY)
            .ok_or_else(|| {
                "the timestamp is past Arrow's microseconds from 1970 (about 294,247 AD)".to_owned()
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_of_each_width_and_malformed_lengths() {
        assert_eq!(integer(&(-2i16).to_be_bytes()), Ok(-2));
        assert_eq!(integer(&i32::MIN.to_be_bytes()), Ok(i64::from(i32::MIN)));
        assert_eq!(integer(&i64::MAX.to_be_bytes()), Ok(i64::MAX));
        assert!(integer(&[1, 2, 3]).is_err());
        assert!(narrow::<i16>(40_000, "a 16-bit integer").is_err());
    }

    #[test]
    fn dates_and_timestamps_move_to_1970_keeping_infinities() {
        assert_eq!(date(&0i32.to_be_bytes()), Ok(EPOCH_DAYS));
        assert_eq!(date(&(-EPOCH_DAYS).to_be_bytes()), Ok(0));
        assert_eq!(date(&i32::MAX.to_be_bytes()), Ok(DATE_INFINITY));
        assert_eq!(date(&i32::MIN.to_be_bytes()), Ok(DATE_MINUS_INFINITY));
        assert!(date(&(i32::MAX - 5).to_be_bytes()).is_err());
        assert_eq!(timestamp(&0i64.to_be_bytes()), Ok(EPOCH_MICROS));
        assert_eq!(timestamp(&i64::MIN.to_be_bytes()), Ok(i64::MIN));
        assert_eq!(timestamp(&i64::MAX.to_be_bytes()), Ok(i64::MAX));
        assert!(timestamp(&(i64::MAX - 5).to_be_bytes()).is_err());
        assert!(timestamp(&[0; 7]).is_err());
    }
}
