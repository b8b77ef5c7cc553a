//! Column converters: each appends one column's values, given in canonical
//! text, to an Arrow builder, and hands over the built array when a record
//! batch is due.
//!
//! A converter is chosen once per column ([`super::mapping`]); the encoder's
//! row loop then calls [`TextConverter::append_rows`], whose default body is
//! compiled for each converter type, so the per-value call is static. A later
//! converter for PostgreSQL's binary row format would implement the same
//! trait beside these (its `append` reading binary values instead of text).
//!
//! This module holds the scalar converters; lists and structs, which parse
//! PostgreSQL's literals, are in [`super::nested`].

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::ops::Range;
use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, FixedSizeBinaryBuilder, PrimitiveBuilder, StringBuilder,
};
use arrow_array::types::IntervalMonthDayNanoType;
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, Int32Array, Int64Array, IntervalMonthDayNanoArray,
    StructArray,
};
use arrow_buffer::IntervalMonthDayNano;
use arrow_schema::{DataType, Field, Fields};
use sluice_core::Batch;

use super::text::{self, Reason, Shown};

/// Extension metadata of a field (`ARROW:extension:name`, …).
pub(crate) type Metadata = HashMap<String, String>;

/// Field metadata naming a canonical Arrow extension type.
pub(crate) fn extension(name: &str) -> Metadata {
    HashMap::from([
        ("ARROW:extension:name".to_owned(), name.to_owned()),
        ("ARROW:extension:metadata".to_owned(), String::new()),
    ])
}

/// Field metadata of a `Utf8` column holding the text of a value Arrow has
/// no type for, so that readers can convert it exactly: `sluice.text` is
/// `numeric` (decimal digits, `NaN`, `Infinity`, `-Infinity`) or `array`
/// (PostgreSQL array literals, for a column whose arrays differ in depth).
pub(crate) fn text_of(what: &str) -> Metadata {
    HashMap::from([("sluice.text".to_owned(), what.to_owned())])
}

/// Why a value at `row` (an index into the rows given) did not convert.
pub(crate) type RowFailure = (usize, Reason);

/// Appends one column's values and builds its arrays.
pub(crate) trait TextConverter: Send {
    /// Appends one value in its canonical text form; `None` is NULL.
    fn append(&mut self, value: Option<&[u8]>) -> Result<(), Reason>;

    /// Builds the array of every value appended since the last call.
    fn finish(&mut self) -> ArrayRef;

    /// Metadata for the column's field (extension names).
    fn metadata(&self) -> Metadata {
        Metadata::new()
    }

    /// Appends column `column` of `rows` of `batch` and returns the bytes of
    /// the values, or the failing row (counted from `rows.start`) and why.
    fn append_rows(
        &mut self,
        batch: &Batch,
        column: usize,
        rows: Range<usize>,
    ) -> Result<usize, RowFailure> {
        let mut bytes = 0;
        for (offset, row) in rows.enumerate() {
            let value = batch.row(row).get(column);
            bytes += value.map_or(0, <[u8]>::len);
            self.append(value).map_err(|reason| (offset, reason))?;
        }
        Ok(bytes)
    }

    /// Starts a value that arrives in pieces, when this converter can take
    /// them straight into its buffer (text, bytes); `false`: the caller
    /// gathers the value and [`TextConverter::append`]s it whole.
    fn begin_pieces(&mut self) -> bool {
        false
    }

    /// The next piece of the value begun with [`TextConverter::begin_pieces`].
    fn piece(&mut self, _piece: &[u8]) -> Result<(), Reason> {
        Ok(())
    }

    /// Ends the value begun with [`TextConverter::begin_pieces`].
    fn end_pieces(&mut self) -> Result<(), Reason> {
        Ok(())
    }
}

/// Any primitive Arrow type, parsed by `parse`: integers, floats, decimals,
/// dates, times, timestamps.
pub(crate) struct Primitive<T: ArrowPrimitiveType, P> {
    builder: PrimitiveBuilder<T>,
    parse: P,
}

impl<T, P> Primitive<T, P>
where
    T: ArrowPrimitiveType,
    P: Fn(&[u8]) -> Result<T::Native, Reason> + Send,
{
    /// A converter to `data_type` (which must be `T`'s, with its parameters:
    /// a decimal's precision and scale, a timestamp's zone).
    pub(crate) fn new(data_type: DataType, parse: P) -> Primitive<T, P> {
        Primitive {
            builder: PrimitiveBuilder::<T>::new().with_data_type(data_type),
            parse,
        }
    }
}

impl<T, P> TextConverter for Primitive<T, P>
where
    T: ArrowPrimitiveType,
    P: Fn(&[u8]) -> Result<T::Native, Reason> + Send,
{
    fn append(&mut self, value: Option<&[u8]>) -> Result<(), Reason> {
        match value {
            Some(text) => self.builder.append_value((self.parse)(text)?),
            None => self.builder.append_null(),
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(self.builder.finish())
    }
}

/// Booleans.
#[derive(Default)]
pub(crate) struct Bool {
    builder: BooleanBuilder,
    /// Values are one byte, 0 or 1 ([`sluice_core::Encoding::Binary`]).
    binary: bool,
}

impl Bool {
    /// Booleans in their binary form.
    pub(crate) fn binary() -> Bool {
        Bool {
            binary: true,
            ..Bool::default()
        }
    }
}

impl TextConverter for Bool {
    fn append(&mut self, value: Option<&[u8]>) -> Result<(), Reason> {
        match value {
            Some([byte]) if self.binary => self.builder.append_value(*byte != 0),
            Some(value) if self.binary => {
                return Err(format!("{} bytes are not a binary boolean", value.len()))
            }
            Some(text) => self.builder.append_value(text::parse_bool(text)?),
            None => self.builder.append_null(),
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(self.builder.finish())
    }
}

/// UTF-8 text, checked as it is appended. Pieces may split a character: its
/// first bytes wait in `partial` for the rest.
pub(crate) struct Utf8 {
    builder: StringBuilder,
    metadata: Metadata,
    partial: Vec<u8>,
}

impl Utf8 {
    /// Text, with `metadata` on its field (the JSON extension name, or none).
    pub(crate) fn new(metadata: Metadata) -> Utf8 {
        Utf8 {
            builder: StringBuilder::new(),
            metadata,
            partial: Vec::new(),
        }
    }
}

fn not_utf8(text: &[u8]) -> Reason {
    format!("{} is not valid UTF-8", Shown(text))
}

impl TextConverter for Utf8 {
    fn append(&mut self, value: Option<&[u8]>) -> Result<(), Reason> {
        match value {
            Some(text) => {
                let text = std::str::from_utf8(text).map_err(|_| not_utf8(text))?;
                self.builder.append_value(text);
            }
            None => self.builder.append_null(),
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(self.builder.finish())
    }

    fn metadata(&self) -> Metadata {
        self.metadata.clone()
    }

    fn begin_pieces(&mut self) -> bool {
        self.partial.clear();
        true
    }

    fn piece(&mut self, piece: &[u8]) -> Result<(), Reason> {
        self.partial.extend_from_slice(piece);
        let valid = match std::str::from_utf8(&self.partial) {
            Ok(text) => text.len(),
            // Only an incomplete character at the end may wait for more.
            Err(error) if error.error_len().is_none() => error.valid_up_to(),
            Err(_) => return Err(not_utf8(&self.partial)),
        };
        let text = std::str::from_utf8(&self.partial[..valid]).expect("checked above");
        // Writing to a StringBuilder extends the value under way; it cannot fail.
        let _ = self.builder.write_str(text);
        self.partial.drain(..valid);
        Ok(())
    }

    fn end_pieces(&mut self) -> Result<(), Reason> {
        if !self.partial.is_empty() {
            return Err(not_utf8(&self.partial));
        }
        self.builder.append_value("");
        Ok(())
    }
}

/// Binary values: the raw bytes at top level, PostgreSQL's `\x…` hex inside
/// array and record literals.
pub(crate) struct Binary {
    builder: BinaryBuilder,
    hex: bool,
}

impl Binary {
    /// Raw bytes (`hex` false) or hex text (`hex` true).
    pub(crate) fn new(hex: bool) -> Binary {
        Binary {
            builder: BinaryBuilder::new(),
            hex,
        }
    }
}

impl TextConverter for Binary {
    fn append(&mut self, value: Option<&[u8]>) -> Result<(), Reason> {
        match value {
            Some(text) if self.hex => self.builder.append_value(text::parse_hex_bytea(text)?),
            Some(bytes) => self.builder.append_value(bytes),
            None => self.builder.append_null(),
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(self.builder.finish())
    }

    fn begin_pieces(&mut self) -> bool {
        !self.hex
    }

    fn piece(&mut self, piece: &[u8]) -> Result<(), Reason> {
        // Extends the value under way in memory; it cannot fail.
        let _ = self.builder.write_all(piece);
        Ok(())
    }

    fn end_pieces(&mut self) -> Result<(), Reason> {
        self.builder.append_value(b"");
        Ok(())
    }
}

/// UUIDs as 16 bytes, with the `arrow.uuid` extension name.
pub(crate) struct Uuid {
    builder: FixedSizeBinaryBuilder,
    /// Values are the 16 bytes themselves ([`sluice_core::Encoding::Binary`]).
    binary: bool,
}

impl Uuid {
    pub(crate) fn new() -> Uuid {
        Uuid {
            builder: FixedSizeBinaryBuilder::new(16),
            binary: false,
        }
    }

    /// UUIDs in their binary form.
    pub(crate) fn binary() -> Uuid {
        Uuid {
            binary: true,
            ..Uuid::new()
        }
    }
}

impl TextConverter for Uuid {
    fn append(&mut self, value: Option<&[u8]>) -> Result<(), Reason> {
        match value {
            Some(bytes) if self.binary => self
                .builder
                .append_value(bytes)
                .map_err(|_| format!("{} bytes are not a binary UUID", bytes.len()))?,
            Some(text) => {
                let bytes = text::parse_uuid(text)?;
                self.builder
                    .append_value(bytes)
                    .map_err(|error| error.to_string())?;
            }
            None => self.builder.append_null(),
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(self.builder.finish())
    }

    fn metadata(&self) -> Metadata {
        extension("arrow.uuid")
    }
}

/// Intervals: Arrow's `Interval(MonthDayNano)`, or for Parquet, which cannot
/// store that type, a struct of the same three parts.
pub(crate) struct Interval {
    builder: PrimitiveBuilder<IntervalMonthDayNanoType>,
    as_struct: bool,
}

impl Interval {
    /// `as_struct`: build the `{months, days, nanoseconds}` struct instead.
    pub(crate) fn new(as_struct: bool) -> Interval {
        Interval {
            builder: PrimitiveBuilder::new(),
            as_struct,
        }
    }

    /// The struct type Parquet output stores intervals as.
    pub(crate) fn struct_fields() -> Fields {
        Fields::from(vec![
            Field::new("months", DataType::Int32, false),
            Field::new("days", DataType::Int32, false),
            Field::new("nanoseconds", DataType::Int64, false),
        ])
    }

    fn into_struct(intervals: &IntervalMonthDayNanoArray) -> ArrayRef {
        let parts = intervals.values();
        let months: Int32Array = parts
            .iter()
            .map(|part| part.months)
            .collect::<Vec<_>>()
            .into();
        let days: Int32Array = parts
            .iter()
            .map(|part| part.days)
            .collect::<Vec<_>>()
            .into();
        let nanos: Int64Array = parts
            .iter()
            .map(|part| part.nanoseconds)
            .collect::<Vec<_>>()
            .into();
        let columns: Vec<ArrayRef> = vec![Arc::new(months), Arc::new(days), Arc::new(nanos)];
        Arc::new(StructArray::new(
            Interval::struct_fields(),
            columns,
            intervals.nulls().cloned(),
        ))
    }
}

impl TextConverter for Interval {
    fn append(&mut self, value: Option<&[u8]>) -> Result<(), Reason> {
        match value {
            Some(text) => {
                let parts = text::parse_interval(text)?;
                self.builder.append_value(IntervalMonthDayNano::new(
                    parts.months,
                    parts.days,
                    parts.nanoseconds,
                ));
            }
            None => self.builder.append_null(),
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        let intervals = self.builder.finish();
        match self.as_struct {
            true => Interval::into_struct(&intervals),
            false => Arc::new(intervals),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{BinaryArray, StringArray};

    #[test]
    fn text_in_pieces_may_split_characters_but_must_end_whole() {
        let mut converter = Utf8::new(Metadata::new());
        let text = "caf\u{e9}!".as_bytes();
        assert!(converter.begin_pieces());
        converter.piece(&text[..4]).unwrap();
        converter.piece(&text[4..]).unwrap();
        converter.end_pieces().unwrap();
        converter.append(None).unwrap();
        let array = converter.finish();
        let strings = array.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(strings.value(0), "caf\u{e9}!");
        assert!(strings.is_null(1));

        assert!(converter.begin_pieces());
        converter.piece(&text[..4]).unwrap();
        assert!(converter.end_pieces().is_err());
        assert!(converter.begin_pieces());
        assert!(converter.piece(b"\xff\xfe").is_err());
        assert!(converter.append(Some(b"\xc3")).is_err());
    }

    #[test]
    fn bytes_are_raw_at_top_level_and_hex_in_literals() {
        let mut raw = Binary::new(false);
        raw.append(Some(b"\\x00")).unwrap();
        assert!(raw.begin_pieces());
        raw.piece(b"\x01").unwrap();
        raw.piece(b"\x02").unwrap();
        raw.end_pieces().unwrap();
        let array = raw.finish();
        let bytes = array.as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!(bytes.value(0), b"\\x00");
        assert_eq!(bytes.value(1), b"\x01\x02");

        let mut hex = Binary::new(true);
        hex.append(Some(b"\\x00ff")).unwrap();
        assert!(hex.append(Some(b"00ff")).is_err());
        assert!(!hex.begin_pieces());
        let array = hex.finish();
        let bytes = array.as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!(bytes.value(0), b"\x00\xff");
    }

    #[test]
    fn intervals_become_a_struct_for_parquet() {
        let mut converter = Interval::new(true);
        converter.append(Some(b"1 mon 2 days 00:00:01")).unwrap();
        converter.append(None).unwrap();
        let array = converter.finish();
        assert_eq!(
            array.data_type(),
            &DataType::Struct(Interval::struct_fields())
        );
        assert!(array.is_null(1));
        let mut converter = Interval::new(false);
        converter.append(Some(b"P1M")).unwrap();
        assert_eq!(
            converter.finish().data_type(),
            &DataType::Interval(arrow_schema::IntervalUnit::MonthDayNano)
        );
    }
}
