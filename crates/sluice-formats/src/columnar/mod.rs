//! [`ColumnarEncoder`]: rows as Arrow record batches, written as an Arrow IPC
//! stream, an Arrow IPC file or Parquet.
//!
//! Values arrive in the canonical text of [`sluice_core::value`], or for the
//! columns a source sent so, in its binary forms; a converter chosen once per
//! column (`mapping`) parses them into an Arrow builder (`convert`,
//! `nested`, with the parsers in `text`; `binary` for binary columns). Rows accumulate in
//! the builders until a record batch is due, which goes to the container's
//! writer (`sink`); its bytes are handed to the caller.
//!
//! # Types
//!
//! | sluice kind (database type) | Arrow type |
//! |---|---|
//! | `Bool` | `Boolean` |
//! | `Integer`: `int2`, `smallint`, `tinyint` (signed or not), `year` | `Int16` |
//! | `Integer`: `int4`, `int`, `mediumint`, `smallint unsigned`, `mediumint unsigned` | `Int32` |
//! | `Integer`: `bigint unsigned` | `UInt64` |
//! | `Integer`: anything else (`int8`, `bigint`, `int unsigned`, SQLite's `integer`) | `Int64` |
//! | `Float`: `float4`, MariaDB's `float` | `Float32` (a value with more digits than an f32 keeps is an error) |
//! | `Float`: anything else (`float8`, `double`, SQLite's `real`) | `Float64`; NaN and ±Infinity as such |
//! | `Decimal` with a declared precision p ≤ 38 and scale s | `Decimal128(p, s)` |
//! | `Decimal` with 38 < p ≤ 76 | `Decimal256(p, s)` |
//! | `Decimal` with a negative scale (`numeric(5,-2)`) / a scale above the precision (`numeric(3,5)`) | `Decimal(p − s, 0)` / `Decimal(s, s)` |
//! | `Decimal` without a declared shape (or p > 76) | `Utf8`, the exact digits (and `NaN`, `Infinity`), field metadata `sluice.text: numeric`; or, with a numeric scale S set, `Decimal128(38, S)` |
//! | `Text` (and enums, `char`, `name`, `varchar`), `Other` | `Utf8` |
//! | `Other` or `Text` named `uuid` | `FixedSizeBinary(16)`, extension `arrow.uuid` |
//! | `Bytes` | `Binary` |
//! | `Json` | `Utf8`, extension `arrow.json` |
//! | `Date` | `Date32`; `infinity` / `-infinity` are `i32::MAX` / `i32::MIN` days |
//! | `Time` | `Time64(µs)`; `24:00:00` is 86,400,000,000 µs |
//! | `TimeTz` | `Utf8` (Arrow has no time of day with a zone) |
//! | `Timestamp` | `Timestamp(µs)`; `±infinity` are `i64::MAX` / `i64::MIN` |
//! | `TimestampTz` | `Timestamp(µs, "UTC")`, the offset applied; `±infinity` likewise |
//! | `Interval` | `Interval(MonthDayNano)`; Parquet: `Struct{months: Int32, days: Int32, nanoseconds: Int64}` |
//! | `Array(kind)` | `List` of the element's type, one `List` per dimension; `Utf8` of the array literals, metadata `sluice.text: array`, when the first record batch mixes depths |
//! | `Composite(fields)` | `Struct` of the fields' types (empty composites: `Utf8`) |
//!
//! A value a type cannot hold exactly — a decimal that needs rounding or more
//! digits, NaN or infinity in a decimal, an integer out of the type's range, a
//! timestamp past Arrow's microseconds from 1970 (about 294,247 AD), an
//! interval whose time part passes 64-bit nanoseconds, text that is not
//! UTF-8 — is an error naming its row and column, never a rounded or wrapped
//! value. Inside composites, fields have no type names or declared shapes:
//! integers are `Int64`, floats `Float64`, decimals as without a shape, and
//! arrays one-dimensional. A top-level array column takes its depth from its
//! first array with elements, or is text when its first record batch holds
//! arrays of different depths (see `nested`).
//!
//! # Memory
//!
//! A record batch is emitted once it holds [`ColumnarOptions::batch_rows`]
//! rows (32,768) or [`ColumnarOptions::batch_bytes`] of values (8 MiB,
//! checked after each block of rows from the source), and at the end; memory
//! is one record batch under way, whatever the row count. The batch is held
//! about twice while it is written (the builders' arrays, then the encoded
//! message), so these defaults keep an Arrow stream export of the 1M-row
//! benchmark table at 43 MB peak RSS (65,536 rows took 71 MB). Arrow and Parquet
//! need each value whole: a value arriving in pieces (a row too large to
//! hold) is gathered, up to [`ColumnarOptions::max_value_bytes`] (1 GiB, so
//! that a batch never passes the 2 GiB of 32-bit offsets and `Binary`/`Utf8`
//! always do), and costs about twice its size while its batch is written.
//! Parquet also keeps the row group under way, encoded and compressed, until
//! it has [`ColumnarOptions::row_group_rows`] rows or
//! [`ColumnarOptions::row_group_bytes`]: peak memory is about one row group
//! plus one record batch.

mod binary;
mod convert;
mod mapping;
mod nested;
mod options;
mod sink;
mod text;
pub(crate) mod widths;

pub use options::{ColumnarOptions, ParquetCompression};

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{Field, Schema as ArrowSchema};
use sluice_core::{Batch, Encoder, Error, ErrorKind, Schema};

use crate::columnar::convert::TextConverter;
use crate::columnar::mapping::Mapping;
use crate::columnar::sink::{Container, Sink};

/// One output column: its name in the Arrow schema, its database type for
/// messages, and its converter.
struct Slot {
    name: String,
    type_name: String,
    converter: Box<dyn TextConverter>,
}

/// A value arriving in pieces.
#[derive(Default)]
struct Gathering {
    /// The converter takes the pieces itself (text, bytes).
    direct: bool,
    /// Otherwise the pieces so far.
    carry: Vec<u8>,
    /// Bytes so far, against the limit.
    bytes: usize,
    /// Bytes of the large row's values so far.
    row_bytes: usize,
}

/// Writes rows as Arrow record batches in an IPC stream, an IPC file or
/// Parquet; see the module docs for types and memory.
pub struct ColumnarEncoder {
    container: Container,
    options: ColumnarOptions,
    slots: Vec<Slot>,
    /// Known once the first record batch (or the end) is written.
    schema: Option<Arc<ArrowSchema>>,
    sink: Option<Sink>,
    /// Rows in the builders, not yet written.
    pending_rows: usize,
    /// Bytes of those rows' values.
    pending_bytes: usize,
    /// Rows written in record batches.
    rows_written: u64,
    gathering: Gathering,
}

impl ColumnarEncoder {
    fn new(container: Container, options: ColumnarOptions) -> ColumnarEncoder {
        ColumnarEncoder {
            container,
            options,
            slots: Vec::new(),
            schema: None,
            sink: None,
            pending_rows: 0,
            pending_bytes: 0,
            rows_written: 0,
            gathering: Gathering::default(),
        }
    }

    /// The Arrow IPC streaming format (`application/vnd.apache.arrow.stream`).
    pub fn arrow_stream(options: ColumnarOptions) -> ColumnarEncoder {
        ColumnarEncoder::new(Container::Stream, options)
    }

    /// The Arrow IPC file format (`application/vnd.apache.arrow.file`).
    pub fn arrow_file(options: ColumnarOptions) -> ColumnarEncoder {
        ColumnarEncoder::new(Container::File, options)
    }

    /// Parquet.
    pub fn parquet(options: ColumnarOptions) -> ColumnarEncoder {
        ColumnarEncoder::new(Container::Parquet, options)
    }

    /// The 1-based number of the row being appended, `offset` rows after the
    /// first pending one.
    fn row_number(&self, offset: usize) -> u64 {
        self.rows_written + (self.pending_rows + offset) as u64 + 1
    }

    /// An error tied to a cell.
    fn cell_error(&self, column: usize, offset: usize, reason: &str) -> Error {
        let slot = &self.slots[column];
        Error::new(
            ErrorKind::Data,
            format!(
                "{} output, row {}, column {} ({}): {reason}",
                self.container.name(),
                self.row_number(offset),
                slot.name,
                slot.type_name
            ),
        )
    }

    /// Appends rows `rows` of `batch` to the builders.
    fn append_rows(&mut self, batch: &Batch, rows: std::ops::Range<usize>) -> Result<(), Error> {
        for column in 0..self.slots.len() {
            let appended = self.slots[column]
                .converter
                .append_rows(batch, column, rows.clone());
            match appended {
                Ok(bytes) => self.pending_bytes += bytes,
                Err((offset, reason)) => return Err(self.cell_error(column, offset, &reason)),
            }
        }
        self.pending_rows += rows.len();
        Ok(())
    }

    fn batch_is_due(&self) -> bool {
        self.pending_rows >= self.options.batch_rows
            || self.pending_bytes >= self.options.batch_bytes
    }

    /// The Arrow schema, from the first arrays built: their types (a list's
    /// depth is only known then) and the converters' metadata.
    fn arrow_schema(&self, arrays: &[ArrayRef]) -> Arc<ArrowSchema> {
        let fields: Vec<Field> = self
            .slots
            .iter()
            .zip(arrays)
            .map(|(slot, array)| {
                Field::new(&slot.name, array.data_type().clone(), true)
                    .with_metadata(slot.converter.metadata())
            })
            .collect();
        Arc::new(ArrowSchema::new(fields))
    }

    /// Writes the pending rows as a record batch (none when there are none),
    /// starting the container first if need be.
    fn write_batch(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
        if self.pending_rows == 0 && self.sink.is_some() {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self
            .slots
            .iter_mut()
            .map(|slot| slot.converter.finish())
            .collect();
        let schema = match &self.schema {
            Some(schema) => schema.clone(),
            None => {
                let schema = self.arrow_schema(&arrays);
                self.sink = Some(Sink::start(self.container, schema.clone(), &self.options)?);
                self.schema.insert(schema).clone()
            }
        };
        let rows = std::mem::take(&mut self.pending_rows);
        self.pending_bytes = 0;
        if rows == 0 {
            return Ok(());
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let batch =
            RecordBatch::try_new_with_options(schema, arrays, &options).map_err(|error| {
                Error::new(
                    ErrorKind::Data,
                    format!("building a record batch failed: {error}"),
                )
            })?;
        self.rows_written += rows as u64;
        self.sink
            .as_mut()
            .expect("started above")
            .write(&batch, output)
    }

    /// Counts `bytes` more of the value arriving in pieces against the limit.
    fn count_piece(&mut self, column: usize, bytes: usize) -> Result<(), Error> {
        self.gathering.bytes += bytes;
        if self.gathering.bytes <= self.options.max_value_bytes {
            return Ok(());
        }
        let reason = format!(
            "the value is larger than {} bytes, the most sluice holds for this format: \
             Arrow and Parquet need each value whole in memory",
            self.options.max_value_bytes
        );
        Err(self.cell_error(column, 0, &reason))
    }
}

impl Encoder for ColumnarEncoder {
    fn begin(&mut self, schema: &Schema, _output: &mut Vec<u8>) -> Result<(), Error> {
        self.options.check()?;
        crate::forms::refuse_native(schema)?;
        if self.container == Container::Parquet && schema.is_empty() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the statement returns no columns, and a Parquet file needs at least one",
            ));
        }
        let mapping = Mapping {
            numeric_scale: self.options.numeric_scale,
            intervals_as_structs: self.container == Container::Parquet,
        };
        self.slots = schema
            .unique_names()
            .into_iter()
            .zip(&schema.columns)
            .map(|(name, column)| Slot {
                name: name.into_owned(),
                type_name: column.type_name.clone(),
                converter: mapping::column_converter(column, mapping),
            })
            .collect();
        // Nothing is written yet: an array column's list depth is known only
        // from its values.
        Ok(())
    }

    fn encode(&mut self, batch: &Batch, output: &mut Vec<u8>) -> Result<(), Error> {
        let rows = batch.num_rows();
        let mut start = 0;
        while start < rows {
            let room = self.options.batch_rows - self.pending_rows;
            let end = rows.min(start + room);
            self.append_rows(batch, start..end)?;
            start = end;
            if self.batch_is_due() {
                self.write_batch(output)?;
            }
        }
        Ok(())
    }

    fn finish(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
        self.write_batch(output)?;
        self.sink
            .as_mut()
            .expect("write_batch starts the container")
            .finish(output)
    }

    fn begin_row(&mut self, _output: &mut Vec<u8>) -> Result<(), Error> {
        self.gathering.row_bytes = 0;
        Ok(())
    }

    fn row_value(
        &mut self,
        column: usize,
        value: Option<&[u8]>,
        _output: &mut Vec<u8>,
    ) -> Result<(), Error> {
        let length = value.map_or(0, <[u8]>::len);
        self.gathering.bytes = 0;
        self.count_piece(column, length)?;
        self.gathering.row_bytes += length;
        let converter = &mut self.slots[column].converter;
        converter
            .append(value)
            .map_err(|reason| self.cell_error(column, 0, &reason))
    }

    fn begin_value(&mut self, column: usize, _output: &mut Vec<u8>) -> Result<(), Error> {
        self.gathering.bytes = 0;
        self.gathering.carry.clear();
        self.gathering.direct = self.slots[column].converter.begin_pieces();
        Ok(())
    }

    fn value_piece(
        &mut self,
        column: usize,
        piece: &[u8],
        _output: &mut Vec<u8>,
    ) -> Result<(), Error> {
        self.count_piece(column, piece.len())?;
        if !self.gathering.direct {
            self.gathering.carry.extend_from_slice(piece);
            return Ok(());
        }
        let converter = &mut self.slots[column].converter;
        converter
            .piece(piece)
            .map_err(|reason| self.cell_error(column, 0, &reason))
    }

    fn end_value(&mut self, column: usize, _output: &mut Vec<u8>) -> Result<(), Error> {
        self.gathering.row_bytes += self.gathering.bytes;
        let ended = match self.gathering.direct {
            true => self.slots[column].converter.end_pieces(),
            false => {
                // Released at once: the carry may have been as large as the limit.
                let whole = std::mem::take(&mut self.gathering.carry);
                self.slots[column].converter.append(Some(&whole))
            }
        };
        ended.map_err(|reason| self.cell_error(column, 0, &reason))
    }

    fn end_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
        self.pending_rows += 1;
        self.pending_bytes += self.gathering.row_bytes;
        if self.batch_is_due() {
            self.write_batch(output)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
