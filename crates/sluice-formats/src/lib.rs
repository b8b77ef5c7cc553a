//! # sluice-formats
//!
//! Encoders from [`sluice_core::Batch`] to output formats. Each reads only the
//! canonical value forms documented in [`sluice_core::value`], so every database
//! source works with every format.
//!
//! - [`JsonEncoder`]: NDJSON (one object per line) or one JSON array;
//! - [`CsvEncoder`]: CSV byte-identical to PostgreSQL's
//!   `COPY … TO STDOUT WITH (FORMAT csv, HEADER)`;
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

mod call_lines;
mod csv;
mod csv_decode;
mod input;
mod json;
pub mod json_value;
mod ndjson_decode;
pub mod param_sets;
pub mod param_type;
mod pg_input;
mod pg_literal;
#[cfg(test)]
mod test_support;

use std::str::FromStr;

pub use crate::call_lines::CallLines;
pub use crate::csv::CsvEncoder;
pub use crate::csv_decode::{CsvDecoder, CsvHeader, CsvOptions, ExpectedNames, HeaderMismatch};
pub use crate::input::{InputFault, InputFormat, InputOptions};
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
}

impl Format {
    /// The encoder for this format.
    pub fn encoder(self, options: JsonOptions) -> Box<dyn Encoder> {
        match self {
            Format::Ndjson => Box::new(JsonEncoder::ndjson(options)),
            Format::Json => Box::new(JsonEncoder::array(options)),
            Format::Csv => Box::new(CsvEncoder::new()),
        }
    }

    /// The HTTP media type of this format.
    pub fn media_type(self) -> &'static str {
        match self {
            Format::Ndjson => "application/x-ndjson",
            Format::Json => "application/json",
            Format::Csv => "text/csv; charset=utf-8",
        }
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(name: &str) -> Result<Format, String> {
        match name.to_ascii_lowercase().as_str() {
            "ndjson" | "jsonl" | "jsonlines" => Ok(Format::Ndjson),
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            other => Err(format!(
                "unknown format {other:?}: expected ndjson, json or csv"
            )),
        }
    }
}
