//! [`InputFormat`]: the formats sluice reads and the choice of their decoder, the
//! way in beside [`Format::encoder`](crate::Format::encoder) on the way out, so
//! `sluice import` and `POST /tables` pick and set up decoders the same way.
//!
//! [`InputOptions`] holds the settings of both decoders; a setting that belongs to
//! the other format is an [`InputFault`], for the caller to word in its own terms
//! (a flag, a query parameter).

use std::path::Path;
use std::str::FromStr;

use sluice_core::{Column, Decoder, Error};

use crate::{
    ArrowDecoder, CsvDecoder, CsvHeader, CsvOptions, InputFault, NdjsonDecoder, NdjsonOptions,
};

/// An input format sluice can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// One JSON object per line.
    Ndjson,
    /// CSV by PostgreSQL's rules, with a header line unless told otherwise.
    Csv,
    /// An Arrow IPC stream, its fields naming the columns (the settings of
    /// the text formats do not apply).
    Arrow,
}

/// Settings of the decoder [`InputFormat::decoder`] makes; each states its default.
#[derive(Debug, Clone)]
pub struct InputOptions {
    /// The columns to fill: see [`NdjsonOptions::columns`] and [`CsvOptions::columns`].
    /// Default: `None`.
    pub columns: Option<Vec<String>>,
    /// NDJSON: columns that keep their defaults unless the first record sets them
    /// ([`NdjsonOptions::defaulted`]). Default: empty.
    pub defaulted: Vec<String>,
    /// CSV only: whether line 1 is a header. Default: `None`, which is
    /// [`CsvHeader::Present`].
    pub header: Option<CsvHeader>,
    /// NDJSON only: skip keys that name no column. Default: false.
    pub ignore_unknown: bool,
    /// Longest line (NDJSON) or record (CSV) accepted, in bytes. Default: 64 MiB.
    pub max_record_bytes: usize,
    /// Keep each good record's bytes beside its row. Default: false.
    pub keep_records: bool,
}

impl Default for InputOptions {
    fn default() -> InputOptions {
        InputOptions {
            columns: None,
            defaulted: Vec::new(),
            header: None,
            ignore_unknown: false,
            max_record_bytes: 64 * 1024 * 1024,
            keep_records: false,
        }
    }
}

impl InputFormat {
    /// The format a file's name suggests: CSV for `.csv` (any case), an Arrow
    /// stream for `.arrows`, NDJSON otherwise.
    pub fn for_path(path: &Path) -> InputFormat {
        match path.extension() {
            Some(extension) if extension.eq_ignore_ascii_case("csv") => InputFormat::Csv,
            Some(extension) if extension.eq_ignore_ascii_case("arrows") => InputFormat::Arrow,
            _ => InputFormat::Ndjson,
        }
    }

    /// The format of an HTTP media type (parameters such as `charset` ignored), if
    /// it is one sluice reads.
    pub fn for_media_type(content_type: &str) -> Option<InputFormat> {
        let media = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            "application/x-ndjson"
            | "application/ndjson"
            | "application/jsonl"
            | "application/x-jsonlines"
            | "application/json" => Some(InputFormat::Ndjson),
            "text/csv" => Some(InputFormat::Csv),
            _ => None,
        }
    }

    /// Checks that every setting in `options` applies to this format.
    pub fn check(self, options: &InputOptions) -> Result<(), Error> {
        let fault = match self {
            InputFormat::Ndjson if options.header.is_some() => InputFault::HeaderForNdjson,
            InputFormat::Csv if options.ignore_unknown => InputFault::IgnoreUnknownForCsv,
            _ => return Ok(()),
        };
        Err(Error::config(fault.to_string()).with_source(fault))
    }

    /// A decoder of this format filling `table`'s columns.
    pub fn decoder(
        self,
        table: Vec<Column>,
        options: &InputOptions,
    ) -> Result<Box<dyn Decoder>, Error> {
        self.check(options)?;
        Ok(match self {
            InputFormat::Ndjson => Box::new(NdjsonDecoder::new(
                table,
                NdjsonOptions {
                    columns: options.columns.clone(),
                    defaulted: options.defaulted.clone(),
                    ignore_unknown: options.ignore_unknown,
                    max_line_bytes: options.max_record_bytes,
                    keep_records: options.keep_records,
                },
            )?),
            InputFormat::Csv => Box::new(CsvDecoder::new(
                table,
                CsvOptions {
                    header: options.header.unwrap_or_default(),
                    columns: options.columns.clone(),
                    max_record_bytes: options.max_record_bytes,
                    keep_records: options.keep_records,
                },
            )),
            InputFormat::Arrow => Box::new(ArrowDecoder::new(table)),
        })
    }
}

impl FromStr for InputFormat {
    type Err = String;

    fn from_str(name: &str) -> Result<InputFormat, String> {
        match name.to_ascii_lowercase().as_str() {
            "ndjson" | "jsonl" | "jsonlines" => Ok(InputFormat::Ndjson),
            "csv" => Ok(InputFormat::Csv),
            "arrow" | "arrows" => Ok(InputFormat::Arrow),
            other => Err(format!(
                "unknown input format {other:?}: expected ndjson, csv or arrow"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{Decoded, Kind};

    fn table() -> Vec<Column> {
        ["id", "name"]
            .into_iter()
            .map(|name| Column::new(name, Kind::Text, "text"))
            .collect()
    }

    fn rows(format: InputFormat, input: &[u8]) -> usize {
        let mut decoder = format.decoder(table(), &InputOptions::default()).unwrap();
        let mut output = Decoded::default();
        decoder.decode(input, true, &mut output).unwrap();
        output.batch.num_rows()
    }

    #[test]
    fn each_format_gets_its_own_decoder() {
        assert_eq!(
            rows(InputFormat::Ndjson, b"{\"id\":\"1\"}\n{\"id\":\"2\"}\n"),
            2
        );
        assert_eq!(rows(InputFormat::Csv, b"id,name\n1,a\n2,b\n3,c\n"), 3);
    }

    #[test]
    fn names_paths_and_media_types_choose_the_format() {
        assert_eq!("JSONL".parse(), Ok(InputFormat::Ndjson));
        assert_eq!("csv".parse(), Ok(InputFormat::Csv));
        assert!("xml"
            .parse::<InputFormat>()
            .unwrap_err()
            .contains("ndjson, csv or arrow"));
        assert_eq!(
            InputFormat::for_path(Path::new("a/b.CSV")),
            InputFormat::Csv
        );
        assert_eq!(
            InputFormat::for_path(Path::new("b.ndjson")),
            InputFormat::Ndjson
        );
        assert_eq!(
            InputFormat::for_media_type("text/csv; charset=utf-8"),
            Some(InputFormat::Csv)
        );
        assert_eq!(
            InputFormat::for_media_type("Application/X-NDJSON"),
            Some(InputFormat::Ndjson)
        );
        assert_eq!(InputFormat::for_media_type("text/plain"), None);
    }

    #[test]
    fn a_setting_of_the_other_format_is_a_typed_fault() {
        let header = InputOptions {
            header: Some(CsvHeader::Absent),
            ..InputOptions::default()
        };
        let error = InputFormat::Ndjson.decoder(table(), &header).err().unwrap();
        assert_eq!(InputFault::of(&error), Some(&InputFault::HeaderForNdjson));
        assert!(InputFormat::Csv.check(&header).is_ok());

        let ignore = InputOptions {
            ignore_unknown: true,
            ..InputOptions::default()
        };
        let error = InputFormat::Csv.check(&ignore).unwrap_err();
        assert_eq!(
            InputFault::of(&error),
            Some(&InputFault::IgnoreUnknownForCsv)
        );
        assert!(!error.to_string().contains("--"), "{error}");
        assert!(InputFormat::Ndjson.check(&ignore).is_ok());
    }
}
