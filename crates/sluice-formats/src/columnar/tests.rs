//! The encoder end to end: its output read back by arrow-rs's own IPC and
//! Parquet readers.

use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_ipc::reader::{FileReader, StreamReader};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sluice_core::{Column, DecimalShape, Kind};

use super::*;

fn schema() -> Schema {
    Schema {
        columns: vec![
            Column::new("id", Kind::Integer, "int4"),
            Column::new("amount", Kind::Decimal, "numeric").with_decimal(Some(DecimalShape {
                precision: 10,
                scale: 2,
            })),
            Column::new("blob", Kind::Bytes, "bytea"),
            Column::new("id", Kind::Text, "text"),
            Column::new("at", Kind::Interval, "interval"),
        ],
    }
}

fn rows(count: usize) -> Batch {
    let mut batch = Batch::new(5);
    for row in 0..count {
        batch.push_value(row.to_string().as_bytes());
        batch.push_value(format!("{row}.5").as_bytes());
        batch.push_value(&[row as u8, 0xff]);
        match row % 3 {
            0 => batch.push_null(),
            _ => batch.push_value(format!("row {row}").as_bytes()),
        }
        batch.push_value(b"1 day 00:00:01");
    }
    batch
}

fn small_batches() -> ColumnarOptions {
    ColumnarOptions {
        batch_rows: 4,
        ..ColumnarOptions::default()
    }
}

/// Runs `encoder` over `batches` and returns its output.
fn encode(mut encoder: ColumnarEncoder, schema: &Schema, batches: &[Batch]) -> Vec<u8> {
    let mut output = Vec::new();
    encoder.begin(schema, &mut output).unwrap();
    for batch in batches {
        encoder.encode(batch, &mut output).unwrap();
    }
    encoder.finish(&mut output).unwrap();
    output
}

fn read_stream(bytes: &[u8]) -> (arrow_schema::SchemaRef, Vec<RecordBatch>) {
    let reader = StreamReader::try_new(bytes, None).unwrap();
    let schema = reader.schema();
    (schema, reader.map(Result::unwrap).collect())
}

#[test]
fn record_batches_hold_batch_rows_and_values_survive() {
    let output = encode(
        ColumnarEncoder::arrow_stream(small_batches()),
        &schema(),
        &[rows(3), rows(7)],
    );
    let (schema, batches) = read_stream(&output);
    let sizes: Vec<usize> = batches.iter().map(RecordBatch::num_rows).collect();
    assert_eq!(sizes, [4, 4, 2]);
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "amount", "blob", "id_2", "at"]);
    assert_eq!(schema.field(0).data_type(), &DataType::Int32);
    assert_eq!(schema.field(1).data_type(), &DataType::Decimal128(10, 2));
    // The fourth row written is the first of the second source batch.
    let first = &batches[0];
    assert_eq!(first.column(0).as_primitive::<Int32Type>().value(3), 0);
    assert!(first.column(3).is_null(3));
    let second = &batches[1];
    assert_eq!(second.column(0).as_primitive::<Int32Type>().value(0), 1);
    assert_eq!(
        second.column(1).as_primitive::<Decimal128Type>().value(0),
        150
    );
    assert_eq!(second.column(2).as_binary::<i32>().value(0), &[1, 0xff]);
    assert_eq!(second.column(3).as_string::<i32>().value(0), "row 1");
}

#[test]
fn the_byte_limit_emits_batches_early() {
    let options = ColumnarOptions {
        batch_bytes: 40,
        ..ColumnarOptions::default()
    };
    // Row 0 holds 20 bytes of values; the check runs after each source batch.
    let output = encode(
        ColumnarEncoder::arrow_stream(options),
        &schema(),
        &[rows(1), rows(1), rows(1)],
    );
    let sizes: Vec<usize> = read_stream(&output)
        .1
        .iter()
        .map(RecordBatch::num_rows)
        .collect();
    assert_eq!(sizes, [2, 1]);
}

#[test]
fn empty_results_are_valid_with_their_schema() {
    let (read, batches) = read_stream(&encode(
        ColumnarEncoder::arrow_stream(ColumnarOptions::default()),
        &schema(),
        &[],
    ));
    assert_eq!(read.fields().len(), 5);
    assert!(batches.is_empty());

    let file = encode(
        ColumnarEncoder::arrow_file(ColumnarOptions::default()),
        &schema(),
        &[],
    );
    let reader = FileReader::try_new(std::io::Cursor::new(file), None).unwrap();
    assert_eq!(reader.schema().fields().len(), 5);
    assert_eq!(reader.num_batches(), 0);

    let parquet = encode(
        ColumnarEncoder::parquet(ColumnarOptions::default()),
        &schema(),
        &[],
    );
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(parquet)).unwrap();
    assert_eq!(builder.metadata().file_metadata().num_rows(), 0);
    assert_eq!(builder.schema().fields().len(), 5);
}

#[test]
fn arrow_files_and_parquet_read_back_with_every_codec() {
    let file = encode(
        ColumnarEncoder::arrow_file(small_batches()),
        &schema(),
        &[rows(10)],
    );
    let reader = FileReader::try_new(std::io::Cursor::new(file), None).unwrap();
    assert_eq!(reader.num_batches(), 3);

    for compression in [
        ParquetCompression::Zstd,
        ParquetCompression::Snappy,
        ParquetCompression::Lz4,
        ParquetCompression::None,
    ] {
        let options = ColumnarOptions {
            row_group_rows: 5,
            compression,
            ..small_batches()
        };
        let parquet = encode(ColumnarEncoder::parquet(options), &schema(), &[rows(12)]);
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(parquet)).unwrap();
        assert_eq!(builder.metadata().num_row_groups(), 3, "{compression:?}");
        let interval = builder.schema().field(4).data_type().clone();
        assert!(matches!(interval, DataType::Struct(_)), "{interval:?}");
        let batches: Vec<RecordBatch> = builder.build().unwrap().map(Result::unwrap).collect();
        let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(total, 12);
        let intervals = batches[0].column(4).as_struct();
        assert_eq!(intervals.column(1).as_primitive::<Int32Type>().value(0), 1);
        assert_eq!(
            intervals.column(2).as_primitive::<Int64Type>().value(0),
            1_000_000_000
        );
    }
}

#[test]
fn a_bad_cell_is_an_error_naming_its_row_and_column() {
    let mut encoder = ColumnarEncoder::arrow_stream(small_batches());
    let mut output = Vec::new();
    encoder.begin(&schema(), &mut output).unwrap();
    encoder.encode(&rows(6), &mut output).unwrap();
    let mut bad = Batch::new(5);
    for value in [&b"1"[..], b"NaN", b"", b"x", b"1 day"] {
        bad.push_value(value);
    }
    let error = encoder.encode(&bad, &mut output).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Data);
    assert_eq!(
        error.to_string(),
        "Arrow IPC stream output, row 7, column amount (numeric): \"NaN\" has no place in a Decimal column"
    );
}

#[test]
fn a_large_row_in_pieces_reads_like_a_whole_one_within_the_value_limit() {
    let options = ColumnarOptions {
        max_value_bytes: 6,
        ..ColumnarOptions::default()
    };
    let mut encoder = ColumnarEncoder::arrow_stream(options);
    let mut output = Vec::new();
    encoder.begin(&schema(), &mut output).unwrap();
    encoder.begin_row(&mut output).unwrap();
    encoder.row_value(0, Some(b"7"), &mut output).unwrap();
    // A decimal gathered from pieces, bytes and text taken straight.
    encoder.begin_value(1, &mut output).unwrap();
    encoder.value_piece(1, b"12", &mut output).unwrap();
    encoder.value_piece(1, b".25", &mut output).unwrap();
    encoder.end_value(1, &mut output).unwrap();
    encoder.begin_value(2, &mut output).unwrap();
    encoder.value_piece(2, b"\x00\x01", &mut output).unwrap();
    encoder.value_piece(2, b"\x02", &mut output).unwrap();
    encoder.end_value(2, &mut output).unwrap();
    encoder.begin_value(3, &mut output).unwrap();
    encoder
        .value_piece(3, &"\u{e9}t\u{e9}".as_bytes()[..1], &mut output)
        .unwrap();
    encoder
        .value_piece(3, &"\u{e9}t\u{e9}".as_bytes()[1..], &mut output)
        .unwrap();
    encoder.end_value(3, &mut output).unwrap();
    encoder.row_value(4, None, &mut output).unwrap();
    encoder.end_row(&mut output).unwrap();
    encoder.finish(&mut output).unwrap();
    let (_, batches) = read_stream(&output);
    let batch = &batches[0];
    assert_eq!(
        batch.column(1).as_primitive::<Decimal128Type>().value(0),
        1225
    );
    assert_eq!(batch.column(2).as_binary::<i32>().value(0), &[0, 1, 2]);
    assert_eq!(batch.column(3).as_string::<i32>().value(0), "\u{e9}t\u{e9}");

    let mut encoder = ColumnarEncoder::arrow_stream(options);
    encoder.begin(&schema(), &mut output).unwrap();
    encoder.encode(&rows(2), &mut output).unwrap();
    encoder.begin_row(&mut output).unwrap();
    encoder.row_value(0, Some(b"7"), &mut output).unwrap();
    encoder.row_value(1, None, &mut output).unwrap();
    encoder.begin_value(2, &mut output).unwrap();
    encoder.value_piece(2, b"1234", &mut output).unwrap();
    let error = encoder.value_piece(2, b"567", &mut output).unwrap_err();
    assert!(
        error.to_string().starts_with(
            "Arrow IPC stream output, row 3, column blob (bytea): the value is larger than 6 bytes"
        ),
        "{error}"
    );
}

#[test]
fn settings_out_of_range_and_columnless_parquet_are_refused() {
    let mut output = Vec::new();
    for options in [
        ColumnarOptions {
            batch_rows: 0,
            ..ColumnarOptions::default()
        },
        ColumnarOptions {
            numeric_scale: Some(39),
            ..ColumnarOptions::default()
        },
        ColumnarOptions {
            max_value_bytes: 2 << 30,
            ..ColumnarOptions::default()
        },
    ] {
        let error = ColumnarEncoder::arrow_stream(options)
            .begin(&schema(), &mut output)
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Config);
    }
    let error = ColumnarEncoder::parquet(ColumnarOptions::default())
        .begin(&Schema::default(), &mut output)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unsupported);
    // The IPC formats write a result without columns (an INSERT's).
    let stream = encode(
        ColumnarEncoder::arrow_stream(ColumnarOptions::default()),
        &Schema::default(),
        &[],
    );
    assert!(read_stream(&stream).1.is_empty());
}
