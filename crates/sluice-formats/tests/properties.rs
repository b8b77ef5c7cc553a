//! Property tests of the encoders and decoders against reference readers, on
//! generated values (every Unicode plane, controls, quotes, NULLs, empty
//! strings): JSON string escaping read back by serde_json, base64 and hex by
//! their decoders, and CSV and NDJSON written by sluice and read back by
//! sluice's own decoders to the same rows, NULL and empty string apart.

use base64::Engine as _;
use proptest::prelude::*;
use sluice_core::{Batch, Column, Decoded, Decoder, Encoder, Kind, Schema};
use sluice_formats::json_value::{write_base64, write_hex, write_string};
use sluice_formats::{
    CsvDecoder, CsvEncoder, CsvOptions, JsonEncoder, JsonOptions, NdjsonDecoder, NdjsonOptions,
};

fn text_column(name: &str) -> Column {
    Column::new(name, Kind::Text, "text")
}

/// Rows of one to four text columns, NULL a value like any other.
fn rows() -> impl Strategy<Value = (usize, Vec<Vec<Option<String>>>)> {
    (1usize..=4).prop_flat_map(|columns| {
        let value = prop_oneof![
            1 => Just(None),
            1 => Just(Some(String::new())),
            // Quotes, separators and line breaks are what CSV has to get right.
            4 => "[a,\"\\\\\r\n. \t]{0,8}".prop_map(Some),
            4 => any::<String>().prop_map(Some),
        ];
        (
            Just(columns),
            proptest::collection::vec(proptest::collection::vec(value, columns), 0..8),
        )
    })
}

fn batch_of(columns: usize, rows: &[Vec<Option<String>>]) -> Batch {
    let mut batch = Batch::new(columns);
    for row in rows {
        for value in row {
            match value {
                Some(text) => batch.push_value(text.as_bytes()),
                None => batch.push_null(),
            }
        }
    }
    batch
}

fn encode(mut encoder: Box<dyn Encoder>, schema: &Schema, batch: &Batch) -> Vec<u8> {
    let mut output = Vec::new();
    encoder.begin(schema, &mut output).unwrap();
    encoder.encode(batch, &mut output).unwrap();
    encoder.finish(&mut output).unwrap();
    output
}

fn decode(mut decoder: impl Decoder, input: &[u8]) -> Vec<Vec<Option<String>>> {
    let mut decoded = Decoded::default();
    let consumed = decoder.decode(input, true, &mut decoded).unwrap();
    assert_eq!(consumed, input.len());
    assert!(decoded.rejected.is_empty(), "{:?}", decoded.rejected);
    decoded
        .batch
        .rows()
        .map(|row| {
            (0..row.len())
                .map(|index| {
                    row.get(index)
                        .map(|value| String::from_utf8(value.to_vec()).unwrap())
                })
                .collect()
        })
        .collect()
}

fn schema_of(columns: usize) -> Schema {
    Schema {
        columns: (0..columns)
            .map(|index| text_column(&format!("c{index}")))
            .collect(),
    }
}

/// The bytes of lowercase hex digits.
fn from_hex(digits: &str) -> Vec<u8> {
    assert!(digits
        .bytes()
        .all(|digit| matches!(digit, b'0'..=b'9' | b'a'..=b'f')));
    (0..digits.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&digits[at..at + 2], 16).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn json_strings_read_back_as_written(text in any::<String>()) {
        let mut output = Vec::new();
        write_string(text.as_bytes(), &mut output);
        let read: String = serde_json::from_slice(&output).unwrap();
        prop_assert_eq!(read, text);
    }

    #[test]
    fn base64_and_hex_read_back_as_written(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut output = Vec::new();
        write_base64(&bytes, &mut output);
        let base64 = String::from_utf8(output).unwrap();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(base64.trim_matches('"'))
            .unwrap();
        prop_assert_eq!(&decoded, &bytes);
        let mut output = Vec::new();
        write_hex(&bytes, &mut output);
        prop_assert_eq!(from_hex(&String::from_utf8(output).unwrap()), bytes);
    }

    #[test]
    fn csv_reads_back_as_written((columns, rows) in rows()) {
        let schema = schema_of(columns);
        let batch = batch_of(columns, &rows);
        let output = encode(Box::new(CsvEncoder::new()), &schema, &batch);
        let decoder = CsvDecoder::new(schema.columns.clone(), CsvOptions::default());
        prop_assert_eq!(decode(decoder, &output), rows);
    }

    #[test]
    fn ndjson_reads_back_as_written((columns, rows) in rows()) {
        let schema = schema_of(columns);
        let batch = batch_of(columns, &rows);
        let encoder = Box::new(JsonEncoder::ndjson(JsonOptions::default()));
        let output = encode(encoder, &schema, &batch);
        let decoder = NdjsonDecoder::new(schema.columns.clone(), NdjsonOptions::default()).unwrap();
        prop_assert_eq!(decode(decoder, &output), rows);
    }
}
