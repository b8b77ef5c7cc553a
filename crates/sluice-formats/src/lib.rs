//! # sluice-formats
//!
//! Encoders from [`sluice_core::Batch`] to output formats. Each reads only the
//! canonical value forms documented in [`sluice_core::value`], so every database
//! source works with every format.
//!
//! - [`JsonEncoder`]: NDJSON (one object per line) or one JSON array;
//! - [`CsvEncoder`]: CSV byte-identical to PostgreSQL's
//!   `COPY … TO STDOUT WITH (FORMAT csv, HEADER)`;
//! - [`ColumnarEncoder`]: Arrow record batches in an IPC stream, an IPC file or
//!   Parquet, typed by [`columnar`]'s table, in bounded memory;
//! - [`NdjsonDecoder`] and [`CsvDecoder`]: the way in, with each bad record's
//!   line, column and reason; [`InputFormat::decoder`] chooses between them as
//!   [`Format::encoder`] does on the way out;
//! - [`ParamType`], [`Signature`] and [`ParamLines`]: statement parameters,
//!   checked by their declared types, from query-string pairs or NDJSON lines
//!   (one parser for `sluice call` and the gateway); [`CallLines`]: the result
//!   lines of pipelined calls.
//!
//! Following arrow-json's writers, each column's rendering is chosen once per
//! schema, the row loop is tight, and output goes to a caller-owned buffer that the
//! caller flushes in chunks.
#![warn(missing_docs)]

mod arrow_decode;
mod call_lines;
pub mod columnar;
mod csv;
mod csv_decode;
mod forms;
mod input;
mod input_fault;
mod json;
pub mod json_value;
mod ndjson_decode;
pub mod param_sets;
pub mod param_type;
mod pg_input;
#[cfg(test)]
mod test_support;

use std::str::FromStr;

pub use crate::arrow_decode::ArrowDecoder;
pub use crate::call_lines::CallLines;
pub use crate::columnar::{ColumnarEncoder, ColumnarOptions, ParquetCompression};
pub use crate::csv::CsvEncoder;
pub use crate::csv_decode::{CsvDecoder, CsvHeader, CsvOptions, ExpectedNames, HeaderMismatch};
pub use crate::input::{InputFormat, InputOptions};
pub use crate::input_fault::InputFault;
pub use crate::json::JsonEncoder;
pub use crate::json_value::{BytesEncoding, JsonOptions};
pub use crate::ndjson_decode::{NdjsonDecoder, NdjsonOptions};
pub use crate::param_sets::{untyped_param, Declared, ParamFault, ParamLines, Signature};
pub use crate::param_type::ParamType;
use sluice_core::Encoder;

/// An output format sluice can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Newline-delimited JSON: one object per row, one row per line.
    Ndjson,
    /// One JSON array of row objects; valid JSON even when there are no rows.
    Json,
    /// CSV with a header line, as PostgreSQL's `COPY … (FORMAT csv, HEADER)` writes it.
    Csv,
    /// The Arrow IPC streaming format: a schema, then record batches.
    Arrow,
    /// The Arrow IPC file format (Feather 2): the stream with a footer for
    /// random access, written last.
    ArrowFile,
    /// Parquet, its footer written last.
    Parquet,
}

/// Settings of every encoder [`Format::encoder`] makes; each format reads its
/// own part. Default: the defaults of each part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputOptions {
    /// NDJSON and JSON. Default: [`JsonOptions::default`].
    pub json: JsonOptions,
    /// Arrow and Parquet. Default: [`ColumnarOptions::default`].
    pub columnar: ColumnarOptions,
}

/// JSON settings alone are output options with every other setting at its default.
impl From<JsonOptions> for OutputOptions {
    fn from(json: JsonOptions) -> OutputOptions {
        OutputOptions {
            json,
            ..OutputOptions::default()
        }
    }
}

impl Format {
    /// Every output format, in the order messages list them.
    pub const ALL: [Format; 6] = [
        Format::Ndjson,
        Format::Json,
        Format::Csv,
        Format::Arrow,
        Format::ArrowFile,
        Format::Parquet,
    ];

    /// The format's name, as `--format` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Ndjson => "ndjson",
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Arrow => "arrow",
            Format::ArrowFile => "arrow-file",
            Format::Parquet => "parquet",
        }
    }

    /// The extension a file of this format takes (`part-00000.parquet`): the
    /// format's name, but `arrows` for the Arrow stream and `arrow` for
    /// Arrow's file format, as Arrow's own documentation names them.
    pub fn file_extension(self) -> &'static str {
        match self {
            Format::Arrow => "arrows",
            Format::ArrowFile => "arrow",
            other => other.name(),
        }
    }

    /// The encoder for this format.
    pub fn encoder(self, options: impl Into<OutputOptions>) -> Box<dyn Encoder> {
        let options = options.into();
        match self {
            Format::Ndjson => Box::new(JsonEncoder::ndjson(options.json)),
            Format::Json => Box::new(JsonEncoder::array(options.json)),
            Format::Csv => Box::new(CsvEncoder::new()),
            Format::Arrow => Box::new(ColumnarEncoder::arrow_stream(options.columnar)),
            Format::ArrowFile => Box::new(ColumnarEncoder::arrow_file(options.columnar)),
            Format::Parquet => Box::new(ColumnarEncoder::parquet(options.columnar)),
        }
    }

    /// The HTTP media type of this format.
    pub fn media_type(self) -> &'static str {
        match self {
            Format::Ndjson => "application/x-ndjson",
            Format::Json => "application/json",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Arrow => "application/vnd.apache.arrow.stream",
            Format::ArrowFile => "application/vnd.apache.arrow.file",
            Format::Parquet => "application/vnd.apache.parquet",
        }
    }

    /// True for binary formats, which a terminal cannot show.
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Arrow | Format::ArrowFile | Format::Parquet)
    }

    /// True when the format's encoder reads columns in their binary form
    /// ([`sluice_core::Encoding::Binary`]) as well as in text, so a source may
    /// be asked for binary values; the text formats read text only.
    pub fn reads_binary_values(self) -> bool {
        matches!(self, Format::Arrow | Format::ArrowFile | Format::Parquet)
    }

    /// True when a reader can use the output as it arrives; false for formats
    /// read from their footer, written last (Arrow's file format, Parquet).
    pub fn is_streamable(self) -> bool {
        !matches!(self, Format::ArrowFile | Format::Parquet)
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(name: &str) -> Result<Format, String> {
        match name.to_ascii_lowercase().as_str() {
            "ndjson" | "jsonl" | "jsonlines" => Ok(Format::Ndjson),
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            "arrow" | "arrow-stream" => Ok(Format::Arrow),
            "arrow-file" | "feather" => Ok(Format::ArrowFile),
            "parquet" => Ok(Format::Parquet),
            other => Err(format!(
                "unknown format {other:?}: expected ndjson, json, csv, arrow, arrow-file or parquet"
            )),
        }
    }
}
