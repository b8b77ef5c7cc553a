//! [`ArrowDecoder`]: an Arrow IPC stream into rows of a table, each value
//! written in the canonical text of [`sluice_core::value`] (what COPY reads),
//! so pyarrow, pandas and polars data loads through the same import as CSV.
//!
//! arrow-rs's [`StreamDecoder`] is pushed bytes as they arrive and hands back
//! whole record batches, which fits [`Decoder::decode`]: every byte is consumed
//! (the stream decoder keeps a partial message itself) and memory holds one
//! record batch. The stream's fields name the table's columns it fills, in the
//! stream's order. Records are numbered from 1 across the stream's batches (a
//! DataFrame's row index plus one), standing where other formats put the line.
//!
//! Types: booleans, integers, floats (`NaN`, `Infinity`), decimals, strings and
//! binaries of every offset width and view, dates, times, timestamps (with a
//! zone, in UTC with `+00`; the ends of `Date32` and of a timestamp's `i64`,
//! which sluice's Arrow output gives the infinities, are `±infinity`), durations and month-day-nano intervals, and
//! dictionaries of any of these (pandas categoricals). A 16-byte binary into a
//! `uuid` column is written as a UUID. Lists and structs are refused when the
//! stream's schema arrives, naming the column.
//!
//! Values go in as they are or not at all: a number its column would round,
//! cut or refuse without naming the row rejects its row ([`exact`]: whole
//! numbers and the integer type's range for integer columns, the float's own
//! values for float columns, the digits before the point for a
//! `numeric(p,s)`; the digits after it are refused for every input format,
//! in `sluice_core::load`), and a timestamp without a zone going into a
//! date column goes as its date when it is midnight and is refused when it
//! has a time of day. These are the rules `sluice.write` relies on: it
//! checks no value against the table's types itself.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type,
    DecimalType, DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType,
    DurationSecondType, Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, IntervalMonthDayNanoType, Time32MillisecondType, Time32SecondType,
    Time64MicrosecondType, Time64NanosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::reader::StreamDecoder;
use arrow_schema::{DataType, Schema, TimeUnit};
use sluice_core::calendar::civil_from_days;
use sluice_core::canonical;
use sluice_core::{Column, Decoded, Decoder, Error, ErrorKind, Kind, Rejected, RowError};

mod exact;

/// Decodes an Arrow IPC stream into rows of `table`.
pub struct ArrowDecoder {
    table: Vec<Column>,
    stream: StreamDecoder,
    /// The table's columns the stream's fields fill, once its schema arrived.
    target: Option<Vec<Column>>,
    records: u64,
}

impl ArrowDecoder {
    /// A decoder filling columns of `table`, chosen by the stream's field names.
    pub fn new(table: Vec<Column>) -> ArrowDecoder {
        ArrowDecoder {
            table,
            stream: StreamDecoder::new(),
            target: None,
            records: 0,
        }
    }

    /// The table's columns of the stream's fields; a field the table lacks, or
    /// of a type this decoder cannot write, fails the whole input.
    fn resolve(&self, schema: &Schema) -> Result<Vec<Column>, Error> {
        let mut columns = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let column = self
                .table
                .iter()
                .find(|column| column.name == *field.name())
                .ok_or_else(|| {
                    Error::config(format!(
                        "the data has a column {:?} that the table does not have",
                        field.name()
                    ))
                })?;
            if !writable(field.data_type()) {
                return Err(Error::new(
                    ErrorKind::Data,
                    format!(
                        "column {:?}: Arrow type {} cannot be loaded (lists and structs are not supported)",
                        field.name(),
                        field.data_type()
                    ),
                ));
            }
            columns.push(column.clone());
        }
        Ok(columns)
    }

    /// Appends the batch's rows; a value that cannot be written rejects its row.
    fn rows(&mut self, batch: &RecordBatch, output: &mut Decoded) -> Result<(), Error> {
        if self.target.is_none() {
            self.target = Some(self.resolve(&batch.schema())?);
        }
        let columns = self.target.as_ref().expect("resolved above");
        if output.batch.num_columns() != columns.len() {
            output.batch.reset(columns.len());
        }
        let arrays: Vec<Values> = batch.columns().iter().map(Values::new).collect();
        for row in 0..batch.num_rows() {
            self.records += 1;
            let mark = output.batch.mark();
            let failure = arrays.iter().zip(columns).find_map(|(values, column)| {
                push(values, row, column, output)
                    .err()
                    .map(|reason| (column, reason))
            });
            match failure {
                None => output.lines.push(self.records),
                Some((column, reason)) => {
                    output.batch.rollback(mark);
                    output.rejected.push(Rejected {
                        error: RowError::new(self.records, Some(column.name.clone()), reason),
                        record: Vec::new(),
                    });
                }
            }
        }
        Ok(())
    }
}

impl Decoder for ArrowDecoder {
    fn decode(
        &mut self,
        input: &[u8],
        end_of_input: bool,
        output: &mut Decoded,
    ) -> Result<usize, Error> {
        let mut buffer = Buffer::from(input);
        loop {
            match self.stream.decode(&mut buffer).map_err(invalid)? {
                Some(batch) => self.rows(&batch, output)?,
                None if buffer.is_empty() => break,
                None => continue,
            }
        }
        if end_of_input {
            self.stream.finish().map_err(invalid)?;
            if self.target.is_none() {
                // A stream of no batches still names its columns.
                if let Some(schema) = self.stream.schema() {
                    self.target = Some(self.resolve(&schema)?);
                }
            }
        }
        Ok(input.len())
    }

    fn target_columns(&self) -> Option<&[Column]> {
        self.target.as_deref()
    }

    fn records_seen(&self) -> u64 {
        self.records
    }
}

fn invalid(error: arrow_schema::ArrowError) -> Error {
    Error::new(
        ErrorKind::Data,
        format!("the input is not a valid Arrow IPC stream: {error}"),
    )
}

/// Whether [`push`] can write values of `data_type`.
fn writable(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, values) => writable(values),
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::ListView(_)
        | DataType::LargeListView(_)
        | DataType::FixedSizeList(..)
        | DataType::Struct(_)
        | DataType::Map(..)
        | DataType::Union(..)
        | DataType::RunEndEncoded(..) => false,
        _ => true,
    }
}

/// A column's array, with a dictionary's keys resolved once per batch.
struct Values {
    array: ArrayRef,
    /// For a dictionary: the values, and each row's index into them.
    dictionary: Option<(ArrayRef, Vec<usize>)>,
}

impl Values {
    fn new(array: &ArrayRef) -> Values {
        let dictionary = array
            .as_any_dictionary_opt()
            .map(|dictionary| (dictionary.values().clone(), dictionary.normalized_keys()));
        Values {
            array: Arc::clone(array),
            dictionary,
        }
    }
}

/// Appends row `row`'s value (or NULL) to the batch; `Err` says why it cannot be written.
fn push(values: &Values, row: usize, column: &Column, output: &mut Decoded) -> Result<(), String> {
    // A null-typed array (an all-None pandas column) has no validity bitmap.
    if values.array.data_type() == &DataType::Null || values.array.is_null(row) {
        output.batch.push_null();
        return Ok(());
    }
    let (array, index) = match &values.dictionary {
        Some((dictionary, keys)) => (dictionary, keys[row]),
        None => (&values.array, row),
    };
    if array.is_null(index) {
        output.batch.push_null();
        return Ok(());
    }
    let start = output.batch.begin_value();
    write_value(array.as_ref(), index, column, output.batch.value_buffer())?;
    exact::check(
        array.data_type(),
        &output.batch.value_buffer()[start..],
        column,
    )?;
    output.batch.end_value(start);
    Ok(())
}

/// Writes `array[index]` (not null) in the canonical text for `column`.
fn write_value(
    array: &dyn Array,
    index: usize,
    column: &Column,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    use std::io::Write as _;
    macro_rules! number {
        ($type:ty) => {{
            let _ = write!(out, "{}", array.as_primitive::<$type>().value(index));
        }};
    }
    match array.data_type() {
        DataType::Boolean => out.push(if array.as_boolean().value(index) {
            b't'
        } else {
            b'f'
        }),
        DataType::Int8 => number!(Int8Type),
        DataType::Int16 => number!(Int16Type),
        DataType::Int32 => number!(Int32Type),
        DataType::Int64 => number!(Int64Type),
        DataType::UInt8 => number!(UInt8Type),
        DataType::UInt16 => number!(UInt16Type),
        DataType::UInt32 => number!(UInt32Type),
        DataType::UInt64 => number!(UInt64Type),
        DataType::Float16 | DataType::Float32 | DataType::Float64
            if column.kind == Kind::Integer =>
        {
            exact::whole_number(float_value(array, index), out)?
        }
        DataType::Float16 => exact::float(
            f64::from(array.as_primitive::<Float16Type>().value(index)),
            out,
        ),
        DataType::Float32 => exact::float32(array.as_primitive::<Float32Type>().value(index), out),
        DataType::Float64 => exact::float(array.as_primitive::<Float64Type>().value(index), out),
        DataType::Decimal32(..) => decimal::<Decimal32Type>(array, index, column, out)?,
        DataType::Decimal64(..) => decimal::<Decimal64Type>(array, index, column, out)?,
        DataType::Decimal128(..) => decimal::<Decimal128Type>(array, index, column, out)?,
        DataType::Decimal256(..) => decimal::<Decimal256Type>(array, index, column, out)?,
        DataType::Utf8 => out.extend_from_slice(array.as_string::<i32>().value(index).as_bytes()),
        DataType::LargeUtf8 => {
            out.extend_from_slice(array.as_string::<i64>().value(index).as_bytes())
        }
        DataType::Utf8View => out.extend_from_slice(array.as_string_view().value(index).as_bytes()),
        DataType::Binary => out.extend_from_slice(array.as_binary::<i32>().value(index)),
        DataType::LargeBinary => out.extend_from_slice(array.as_binary::<i64>().value(index)),
        DataType::BinaryView => out.extend_from_slice(array.as_binary_view().value(index)),
        DataType::FixedSizeBinary(16) if column.type_name == "uuid" => {
            uuid(array.as_fixed_size_binary().value(index), out)
        }
        DataType::FixedSizeBinary(_) => {
            out.extend_from_slice(array.as_fixed_size_binary().value(index))
        }
        DataType::Date32 => date32(
            i64::from(array.as_primitive::<Date32Type>().value(index)),
            out,
        )?,
        DataType::Date64 => {
            let milliseconds = array.as_primitive::<Date64Type>().value(index);
            date(milliseconds.div_euclid(86_400_000), out)?
        }
        DataType::Time32(TimeUnit::Second) => time_of_day(
            i64::from(array.as_primitive::<Time32SecondType>().value(index)) * 1_000_000_000,
            out,
        ),
        DataType::Time32(_) => time_of_day(
            i64::from(array.as_primitive::<Time32MillisecondType>().value(index)) * 1_000_000,
            out,
        ),
        DataType::Time64(TimeUnit::Microsecond) => time_of_day(
            array.as_primitive::<Time64MicrosecondType>().value(index) * 1_000,
            out,
        ),
        DataType::Time64(_) => time_of_day(
            array.as_primitive::<Time64NanosecondType>().value(index),
            out,
        ),
        DataType::Timestamp(unit, zone) => {
            let raw = timestamp_raw(array, index, *unit);
            let nanoseconds = i128::from(raw) * nanoseconds_per(*unit);
            match infinity(raw, i64::MIN, i64::MAX) {
                Some(word) => out.extend_from_slice(word),
                None if zone.is_none() && column.kind == Kind::Date => {
                    date_of_timestamp(nanoseconds, out)?
                }
                None => timestamp(nanoseconds, zone.is_some(), out)?,
            }
        }
        DataType::Duration(unit) => interval(0, 0, duration_nanoseconds(array, index, *unit), out),
        DataType::Interval(arrow_schema::IntervalUnit::MonthDayNano) => {
            let value = array
                .as_primitive::<IntervalMonthDayNanoType>()
                .value(index);
            interval(value.months, value.days, i128::from(value.nanoseconds), out);
        }
        DataType::Null => unreachable!("a null array's values are all null"),
        other => return Err(format!("Arrow type {other} cannot be loaded")),
    }
    Ok(())
}

/// A float array's value as a double (every float width widens exactly).
fn float_value(array: &dyn Array, index: usize) -> f64 {
    match array.data_type() {
        DataType::Float16 => f64::from(array.as_primitive::<Float16Type>().value(index)),
        DataType::Float32 => f64::from(array.as_primitive::<Float32Type>().value(index)),
        _ => array.as_primitive::<Float64Type>().value(index),
    }
}

/// The exact digits, with the type's scale; into an integer column, the
/// integer the value is (a fraction is refused).
fn decimal<T: DecimalType>(
    array: &dyn Array,
    index: usize,
    column: &Column,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let start = out.len();
    out.extend_from_slice(array.as_primitive::<T>().value_as_string(index).as_bytes());
    match column.kind {
        Kind::Integer => exact::whole_decimal(out, start),
        _ => Ok(()),
    }
}

fn uuid(bytes: &[u8], out: &mut Vec<u8>) {
    match <&[u8; 16]>::try_from(bytes) {
        Ok(bytes) => canonical::write_uuid(bytes, out),
        // A FixedSizeBinary(16) value always has 16 bytes.
        Err(_) => out.extend_from_slice(bytes),
    }
}

/// Days from 1970 of PostgreSQL's last date, 5874897-12-31.
const LAST_DATE_DAYS: i64 = 2_145_042_905;

/// Refuses a date past the last one the database holds, naming its year.
fn check_last_date(days: i64) -> Result<(), String> {
    if days <= LAST_DATE_DAYS {
        return Ok(());
    }
    let (year, _, _) = civil_from_days(days);
    Err(format!(
        "year {year} is past the latest date the database holds"
    ))
}

/// The date's text; PostgreSQL's dates end in 5874897 AD.
fn date(days: i64, out: &mut Vec<u8>) -> Result<(), String> {
    check_last_date(days)?;
    canonical::write_date(days, out);
    Ok(())
}

/// `HH:MM:SS` and up to nine digits of fraction (the server rounds to microseconds).
fn time_of_day(nanoseconds: i64, out: &mut Vec<u8>) {
    canonical::write_clock(nanoseconds, out);
}

/// A timestamp's text; `zoned` (the value is in UTC) adds the offset `+00`.
fn timestamp(nanoseconds: i128, zoned: bool, out: &mut Vec<u8>) -> Result<(), String> {
    let out_of_range = || "the timestamp is out of range".to_owned();
    let days =
        i64::try_from(nanoseconds.div_euclid(NANOSECONDS_PER_DAY)).map_err(|_| out_of_range())?;
    check_last_date(days)?;
    canonical::write_timestamp(nanoseconds, zoned.then_some(0), out).map_err(|_| out_of_range())
}

/// A `Date32`'s days as a date, the ends of the type as the infinities.
fn date32(days: i64, out: &mut Vec<u8>) -> Result<(), String> {
    match infinity(days, i64::from(i32::MIN), i64::from(i32::MAX)) {
        Some(word) => out.extend_from_slice(word),
        None => date(days, out)?,
    }
    Ok(())
}

/// A timestamp without a zone going into a date column as its date, as a
/// `Date32` of its days (pandas holds dates as `datetime64`, the infinities
/// as `Date32`'s ends, as `sluice.read_pandas` gives them); one with a time
/// of day is refused rather than cut to its date, which the date type's
/// input would do without a word.
fn date_of_timestamp(nanoseconds: i128, out: &mut Vec<u8>) -> Result<(), String> {
    if nanoseconds.rem_euclid(NANOSECONDS_PER_DAY) == 0 {
        let days = i64::try_from(nanoseconds.div_euclid(NANOSECONDS_PER_DAY))
            .map_err(|_| "the timestamp is out of range".to_owned())?;
        return date32(days, out);
    }
    let mut shown = Vec::new();
    timestamp(nanoseconds, false, &mut shown)?;
    Err(format!(
        "a timestamp ({}) has a time of day, which a date column does not hold",
        String::from_utf8_lossy(&shown)
    ))
}

const NANOSECONDS_PER_DAY: i128 = 86_400_000_000_000;

/// A timestamp's value as stored, in its unit.
fn timestamp_raw(array: &dyn Array, index: usize, unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => array.as_primitive::<TimestampSecondType>().value(index),
        TimeUnit::Millisecond => array
            .as_primitive::<TimestampMillisecondType>()
            .value(index),
        TimeUnit::Microsecond => array
            .as_primitive::<TimestampMicrosecondType>()
            .value(index),
        TimeUnit::Nanosecond => array.as_primitive::<TimestampNanosecondType>().value(index),
    }
}

/// Nanoseconds in one `unit`.
fn nanoseconds_per(unit: TimeUnit) -> i128 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// `infinity` / `-infinity` for the values that stand for them in Arrow:
/// the ends of the type, which sluice's own Arrow output (and its pandas
/// reader, whose earliest value is one past `i64::MIN`, `NaT`) gives the
/// infinities, and which no real date or timestamp reaches.
fn infinity(value: i64, lowest: i64, highest: i64) -> Option<&'static [u8]> {
    if value == highest {
        Some(b"infinity")
    } else if value == lowest || (lowest == i64::MIN && value == i64::MIN + 1) {
        Some(b"-infinity")
    } else {
        None
    }
}

fn duration_nanoseconds(array: &dyn Array, index: usize, unit: TimeUnit) -> i128 {
    match unit {
        TimeUnit::Second => {
            i128::from(array.as_primitive::<DurationSecondType>().value(index)) * 1_000_000_000
        }
        TimeUnit::Millisecond => {
            i128::from(array.as_primitive::<DurationMillisecondType>().value(index)) * 1_000_000
        }
        TimeUnit::Microsecond => {
            i128::from(array.as_primitive::<DurationMicrosecondType>().value(index)) * 1_000
        }
        TimeUnit::Nanosecond => {
            i128::from(array.as_primitive::<DurationNanosecondType>().value(index))
        }
    }
}

/// PostgreSQL interval input: `N mons N days N.NNNNNNNNN secs`.
fn interval(months: i32, days: i32, nanoseconds: i128, out: &mut Vec<u8>) {
    use std::io::Write as _;
    let sign = if nanoseconds < 0 { "-" } else { "" };
    let magnitude = nanoseconds.unsigned_abs();
    let _ = write!(
        out,
        "{months} mons {days} days {sign}{}.{:09} secs",
        magnitude / 1_000_000_000,
        magnitude % 1_000_000_000
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{
        BooleanArray, Date32Array, Decimal128Array, DictionaryArray, FixedSizeBinaryArray,
        Float64Array, Int64Array, StringArray, TimestampMicrosecondArray,
    };
    use arrow_ipc::writer::StreamWriter;
    use sluice_core::Kind;

    use crate::test_support::assert_split_reads_agree;

    fn table() -> Vec<Column> {
        vec![
            Column::new("id", Kind::Integer, "int8"),
            Column::new("name", Kind::Text, "text"),
            Column::new("amount", Kind::Decimal, "numeric"),
            Column::new("ok", Kind::Bool, "bool"),
            Column::new("at", Kind::TimestampTz, "timestamptz"),
            Column::new("day", Kind::Date, "date"),
            Column::new("ratio", Kind::Float, "float8"),
            Column::new("ref", Kind::Other, "uuid"),
            Column::new("kind", Kind::Text, "text"),
        ]
    }

    fn stream(batches: &[RecordBatch]) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut writer = StreamWriter::try_new(&mut bytes, &batches[0].schema()).unwrap();
        for batch in batches {
            writer.write(batch).unwrap();
        }
        writer.finish().unwrap();
        drop(writer);
        bytes
    }

    fn sample() -> RecordBatch {
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("id", Arc::new(Int64Array::from(vec![Some(1), None]))),
            ("name", Arc::new(StringArray::from(vec!["a \"b\"", "é"]))),
            (
                "amount",
                Arc::new(
                    Decimal128Array::from(vec![12345, -5])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ),
            ("ok", Arc::new(BooleanArray::from(vec![true, false]))),
            (
                "at",
                Arc::new(
                    TimestampMicrosecondArray::from(vec![1_500_000, -62_135_596_800_000_001])
                        .with_timezone("UTC"),
                ),
            ),
            ("day", Arc::new(Date32Array::from(vec![19782, -719_162]))),
            (
                "ratio",
                Arc::new(Float64Array::from(vec![f64::NAN, f64::NEG_INFINITY])),
            ),
            (
                "ref",
                Arc::new(
                    FixedSizeBinaryArray::try_from_iter([[0xa0u8; 16], [1; 16]].into_iter())
                        .unwrap(),
                ),
            ),
            (
                "kind",
                Arc::new(DictionaryArray::<Int32Type>::from_iter([Some("x"), None])),
            ),
        ];
        RecordBatch::try_from_iter(columns).unwrap()
    }

    fn decode(input: &[u8]) -> Result<Decoded, Error> {
        let mut decoder = ArrowDecoder::new(table());
        let mut output = Decoded::default();
        decoder.decode(input, true, &mut output)?;
        Ok(output)
    }

    fn text(value: Option<&[u8]>) -> Option<String> {
        value.map(|value| String::from_utf8(value.to_vec()).unwrap())
    }

    #[test]
    fn every_type_becomes_its_canonical_text() {
        let output = decode(&stream(&[sample()])).unwrap();
        let rows: Vec<Vec<Option<String>>> = output
            .batch
            .rows()
            .map(|row| (0..row.len()).map(|index| text(row.get(index))).collect())
            .collect();
        let expected =
            |values: [Option<&str>; 9]| values.map(|value| value.map(str::to_owned)).to_vec();
        assert_eq!(
            rows,
            [
                expected([
                    Some("1"),
                    Some("a \"b\""),
                    Some("123.45"),
                    Some("t"),
                    Some("1970-01-01 00:00:01.5+00"),
                    Some("2024-02-29"),
                    Some("NaN"),
                    Some("a0a0a0a0-a0a0-a0a0-a0a0-a0a0a0a0a0a0"),
                    Some("x"),
                ]),
                expected([
                    None,
                    Some("é"),
                    Some("-0.05"),
                    Some("f"),
                    Some("0001-12-31 23:59:59.999999+00 BC"),
                    Some("0001-01-01"),
                    Some("-Infinity"),
                    Some("01010101-0101-0101-0101-010101010101"),
                    None,
                ]),
            ]
        );
        assert_eq!(output.lines, [1, 2]);
        assert!(output.rejected.is_empty());
    }

    #[test]
    fn records_are_numbered_across_batches_and_reads() {
        let input = stream(&[sample(), sample(), sample()]);
        let mut decoder = ArrowDecoder::new(table());
        let mut output = Decoded::default();
        let (first, second) = input.split_at(input.len() / 2);
        assert_eq!(
            decoder.decode(first, false, &mut output).unwrap(),
            first.len()
        );
        assert_eq!(
            decoder.decode(second, true, &mut output).unwrap(),
            second.len()
        );
        assert_eq!(output.lines, [1, 2, 3, 4, 5, 6]);
        assert_eq!(decoder.records_seen(), 6);
        assert_eq!(decoder.target_columns().unwrap().len(), 9);
    }

    #[test]
    fn split_reads_agree() {
        let batch = sample();
        let small = batch.project(&[0, 1]).unwrap();
        assert_split_reads_agree(|| Box::new(ArrowDecoder::new(table())), &stream(&[small]));
    }

    #[test]
    fn a_stream_of_no_batches_names_its_columns() {
        let empty = sample().slice(0, 0);
        let mut bytes = Vec::new();
        let mut writer = StreamWriter::try_new(&mut bytes, &empty.schema()).unwrap();
        writer.finish().unwrap();
        drop(writer);
        let mut decoder = ArrowDecoder::new(table());
        let mut output = Decoded::default();
        decoder.decode(&bytes, true, &mut output).unwrap();
        assert_eq!(output.batch.num_rows(), 0);
        assert_eq!(decoder.target_columns().unwrap()[0].name, "id");
    }

    #[test]
    fn unknown_columns_and_broken_streams_fail_the_input() {
        let batch = RecordBatch::try_from_iter([(
            "colour",
            Arc::new(StringArray::from(vec!["red"])) as ArrayRef,
        )])
        .unwrap();
        let error = decode(&stream(&[batch])).err().unwrap();
        assert!(error.to_string().contains("\"colour\""), "{error}");
        let input = stream(&[sample()]);
        let error = decode(&input[..input.len() - 20]).err().unwrap();
        assert_eq!(error.kind(), ErrorKind::Data);
        assert!(
            error.to_string().contains("not a valid Arrow IPC stream"),
            "{error}"
        );
    }

    #[test]
    fn a_date_past_the_database_s_range_rejects_its_row() {
        let batch = RecordBatch::try_from_iter([(
            "day",
            // Past PostgreSQL's last date; i32::MAX itself is `infinity`.
            Arc::new(Date32Array::from(vec![0, i32::MAX - 1])) as ArrayRef,
        )])
        .unwrap();
        let output = decode(&stream(&[batch])).unwrap();
        assert_eq!(output.batch.num_rows(), 1);
        let rejected = &output.rejected[0].error;
        assert_eq!(
            (rejected.line, rejected.column.as_deref()),
            (2, Some("day"))
        );
    }

    #[test]
    fn a_number_a_float_column_would_round_rejects_its_row() {
        let columns = vec![
            Column::new("single", Kind::Float, "float4"),
            Column::new("double", Kind::Float, "float8"),
            Column::new("mariadb", Kind::Float, "float"),
        ];
        let decimals = |values: &[i128], scale: i8| -> ArrayRef {
            Arc::new(
                Decimal128Array::from(values.to_vec())
                    .with_precision_and_scale(38, scale)
                    .unwrap(),
            )
        };
        let cases: [(&str, ArrayRef, &[u64], &str); 6] = [
            (
                "single",
                Arc::new(Float64Array::from(vec![0.1, 0.5, 0.123456789, f64::NAN, 1e-7])),
                &[3],
                "0.123456789 has more digits than a 32-bit float holds: the column would hold 0.12345679",
            ),
            (
                "mariadb",
                Arc::new(Int64Array::from(vec![16_777_216, 16_777_217])),
                &[2],
                "16777217 is not exactly a 32-bit float: the column would hold 16777216.0",
            ),
            (
                "double",
                Arc::new(Int64Array::from(vec![1 << 60, (1 << 53) + 1, -3])),
                &[2],
                "9007199254740993 is not exactly a 64-bit float",
            ),
            (
                "double",
                decimals(&[1, 25, 100_000_000_000_000_001], 1),
                &[3],
                "10000000000000000.1 has more digits than a 64-bit float holds",
            ),
            (
                // 0.1 is the double whose shortest text it is; the double's
                // first 34 digits are neither it nor that text. (Its every
                // digit is: 2**60 above goes so.)
                "double",
                decimals(&[10_i128.pow(33), 1_000_000_000_000_000_055_511_151_231_257_827], 34),
                &[2],
                "0.1000000000000000055511151231257827 has more digits than a 64-bit float holds: \
                 the column would hold 0.1",
            ),
            (
                "double",
                Arc::new(Float64Array::from(vec![0.123456789, f64::MAX])),
                &[],
                "",
            ),
        ];
        for (name, array, refused, words) in cases {
            // The column of each rejection is checked by decode_column.
            let (_, rejected) = decode_column(&columns, name, array);
            let lines: Vec<u64> = rejected.iter().map(|(line, _)| *line).collect();
            assert_eq!(lines, refused, "{name}: {rejected:?}");
            if let Some((_, reason)) = rejected.first() {
                assert!(reason.contains(words), "{rejected:?}");
            }
        }
    }

    #[test]
    fn whole_floats_go_into_integer_columns_as_integers() {
        // pandas' int64 column with a missing value arrives as float64.
        let batch = RecordBatch::try_from_iter([(
            "id",
            Arc::new(Float64Array::from(vec![
                Some(1.0),
                None,
                Some(-9_007_199_254_740_992.0),
                Some(1e20),
                Some(1.5),
                Some(f64::NAN),
            ])) as ArrayRef,
        )])
        .unwrap();
        let output = decode(&stream(&[batch])).unwrap();
        let values: Vec<Option<String>> = output.batch.rows().map(|row| text(row.get(0))).collect();
        assert_eq!(
            values,
            [
                Some("1".to_owned()),
                None,
                Some("-9007199254740992".to_owned()),
            ]
        );
        let refused: Vec<(u64, String)> = output
            .rejected
            .iter()
            .map(|rejected| (rejected.error.line, rejected.error.reason.clone()))
            .collect();
        assert_eq!(refused.len(), 3);
        // Every digit of a whole double (no exponent), past an int8's range.
        assert_eq!(
            refused[0],
            (
                4,
                "100000000000000000000 is out of range for the column's type (64-bit integer)"
                    .to_owned()
            )
        );
        assert_eq!(refused[1].0, 5);
        assert!(
            refused[1].1.contains("1.5 is not a whole number"),
            "{refused:?}"
        );
        assert_eq!(refused[2].0, 6);
        assert!(refused[2].1.contains("NaN"), "{refused:?}");
    }

    /// Decodes one column `name` of `array` into `columns`: the values
    /// written, and the rejected records' numbers and reasons.
    fn decode_column(
        columns: &[Column],
        name: &str,
        array: ArrayRef,
    ) -> (Vec<Option<String>>, Vec<(u64, String)>) {
        let batch = RecordBatch::try_from_iter([(name, array)]).unwrap();
        let mut decoder = ArrowDecoder::new(columns.to_vec());
        let mut output = Decoded::default();
        decoder
            .decode(&stream(&[batch]), true, &mut output)
            .unwrap();
        let values = output.batch.rows().map(|row| text(row.get(0))).collect();
        let refused = output
            .rejected
            .iter()
            .inspect(|rejected| assert_eq!(rejected.error.column.as_deref(), Some(name)))
            .map(|rejected| (rejected.error.line, rejected.error.reason.clone()))
            .collect();
        (values, refused)
    }

    #[test]
    fn a_number_past_an_integer_column_s_type_rejects_its_row() {
        let columns = vec![
            Column::new("small", Kind::Integer, "int2"),
            Column::new("big", Kind::Integer, "int8"),
            Column::new("unsigned", Kind::Integer, "bigint unsigned"),
        ];
        let (values, refused) = decode_column(
            &columns,
            "small",
            Arc::new(Int64Array::from(vec![7, 40_000, -32_768])),
        );
        assert_eq!(values, [Some("7".to_owned()), Some("-32768".to_owned())]);
        assert_eq!(
            refused,
            [(
                2,
                "40000 is out of range for the column's type (16-bit integer)".to_owned()
            )]
        );
        let (_, refused) = decode_column(
            &columns,
            "big",
            Arc::new(Float64Array::from(vec![
                -9_223_372_036_854_775_808.0,
                2f64.powi(63),
            ])),
        );
        assert_eq!(
            refused,
            [(
                2,
                "9223372036854775808 is out of range for the column's type (64-bit integer)"
                    .to_owned()
            )]
        );
        let (values, refused) = decode_column(
            &columns,
            "unsigned",
            Arc::new(
                Decimal128Array::from(vec![18_446_744_073_709_551_615, -1])
                    .with_precision_and_scale(38, 0)
                    .unwrap(),
            ),
        );
        assert_eq!(values, [Some("18446744073709551615".to_owned())]);
        assert_eq!(
            refused,
            [(
                2,
                "-1 is out of range for the column's type (unsigned 64-bit integer)".to_owned()
            )]
        );
    }

    #[test]
    fn whole_decimals_go_into_integer_columns_as_integers() {
        let (values, refused) = decode_column(
            &table(),
            "id",
            Arc::new(
                Decimal128Array::from(vec![400, -300, 270, 0])
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
        );
        assert_eq!(
            values,
            [
                Some("4".to_owned()),
                Some("-3".to_owned()),
                Some("0".to_owned())
            ]
        );
        assert_eq!(
            refused,
            [(
                3,
                "2.70 is not a whole number, which an integer column needs".to_owned()
            )]
        );
    }

    #[test]
    fn more_digits_before_the_point_than_a_numeric_holds_rejects_the_row() {
        let columns = vec![
            Column::new("amount", Kind::Decimal, "numeric").with_decimal(Some(
                sluice_core::DecimalShape {
                    precision: 10,
                    scale: 2,
                },
            )),
        ];
        let cases: [(ArrayRef, &str); 4] = [
            (
                Arc::new(
                    Decimal128Array::from(vec![150, 12_345_678_900])
                        .with_precision_and_scale(38, 2)
                        .unwrap(),
                ),
                "123456789 has more than 8 digits before the point, \
                 more than the column's type (numeric(10,2)) holds",
            ),
            (
                Arc::new(Float64Array::from(vec![0.1, 1e8])),
                "100000000.0 has more than 8 digits before the point",
            ),
            (
                Arc::new(Int64Array::from(vec![99_999_999, 100_000_000])),
                "100000000 has more than 8 digits before the point",
            ),
            (
                Arc::new(StringArray::from(vec!["NaN", "-123456789.5"])),
                "-123456789.5 has more than 8 digits before the point",
            ),
        ];
        for (array, words) in cases {
            let (values, refused) = decode_column(&columns, "amount", array);
            assert_eq!(values.len(), 1, "{refused:?}");
            assert_eq!(refused.len(), 1, "{values:?}");
            assert_eq!(refused[0].0, 2);
            assert!(refused[0].1.contains(words), "{refused:?}");
        }
    }

    #[test]
    fn a_timestamp_without_a_zone_goes_into_a_date_column_as_its_date() {
        const DAY: i64 = 86_400_000;
        let (values, refused) = decode_column(
            &table(),
            "day",
            Arc::new(arrow_array::TimestampMillisecondArray::from(vec![
                19_782 * DAY,
                -DAY,
                19_782 * DAY + 36_000_000,
                i64::MAX,
                // Date32's ends, as read_pandas gives the infinities.
                i64::from(i32::MAX) * DAY,
                i64::from(i32::MIN) * DAY,
            ])),
        );
        assert_eq!(
            values,
            [
                Some("2024-02-29".to_owned()),
                Some("1969-12-31".to_owned()),
                Some("infinity".to_owned()),
                Some("infinity".to_owned()),
                Some("-infinity".to_owned()),
            ]
        );
        assert_eq!(
            refused,
            [(
                3,
                "a timestamp (2024-02-29 10:00:00) has a time of day, which a date column does not hold"
                    .to_owned()
            )]
        );
    }

    #[test]
    fn the_ends_of_dates_and_timestamps_are_the_infinities() {
        // As sluice's Arrow output writes them, and its pandas reader (whose
        // earliest timestamp is one past i64::MIN, which pandas calls NaT).
        let columns: Vec<(&str, ArrayRef)> = vec![
            (
                "at",
                Arc::new(
                    TimestampMicrosecondArray::from(vec![i64::MAX, i64::MIN + 1, i64::MIN, 0])
                        .with_timezone("UTC"),
                ),
            ),
            (
                "day",
                Arc::new(Date32Array::from(vec![i32::MAX, i32::MIN, i32::MIN, 0])),
            ),
        ];
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let output = decode(&stream(&[batch])).unwrap();
        let rows: Vec<(Option<String>, Option<String>)> = output
            .batch
            .rows()
            .map(|row| (text(row.get(0)), text(row.get(1))))
            .collect();
        let pair = |at: &str, day: &str| (Some(at.to_owned()), Some(day.to_owned()));
        assert_eq!(
            rows,
            [
                pair("infinity", "infinity"),
                pair("-infinity", "-infinity"),
                pair("-infinity", "-infinity"),
                pair("1970-01-01 00:00:00+00", "1970-01-01"),
            ]
        );
    }

    #[test]
    fn intervals_and_times_of_day_keep_their_digits() {
        let mut out = Vec::new();
        interval(1, -2, -3_500_000_000, &mut out);
        assert_eq!(out, b"1 mons -2 days -3.500000000 secs");
        out.clear();
        time_of_day(45_296_000_001_000, &mut out);
        assert_eq!(out, b"12:34:56.000001");
    }
}
