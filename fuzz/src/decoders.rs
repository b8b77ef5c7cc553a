//! Driving the NDJSON and CSV decoders as an import does: a schema of the
//! column kinds PostgreSQL and MariaDB tables have, the input fed in pieces
//! whose sizes the fuzzer picks, and the invariants every run must keep.

use sluice_core::{Column, Decoded, Decoder, Field, Kind};

use crate::Bytes;

/// Column kinds a table may have, with a database type name each.
fn kinds() -> Vec<(Kind, &'static str)> {
    vec![
        (Kind::Bool, "bool"),
        (Kind::Integer, "int4"),
        (Kind::Integer, "int8"),
        (Kind::Float, "float8"),
        (Kind::Decimal, "numeric"),
        (Kind::Text, "text"),
        (Kind::Bytes, "bytea"),
        (Kind::Json, "jsonb"),
        (Kind::Date, "date"),
        (Kind::Time, "time"),
        (Kind::TimeTz, "timetz"),
        (Kind::Timestamp, "timestamp"),
        (Kind::TimestampTz, "timestamptz"),
        (Kind::Interval, "interval"),
        (Kind::Array(Box::new(Kind::Integer)), "_int4"),
        (Kind::Array(Box::new(Kind::Text)), "_text"),
        (Kind::Array(Box::new(Kind::Bytes)), "_bytea"),
        (Kind::Other, "uuid"),
        (
            Kind::Composite(vec![
                Field {
                    name: "x".into(),
                    kind: Kind::Integer,
                },
                Field {
                    name: "y".into(),
                    kind: Kind::Array(Box::new(Kind::Text)),
                },
            ]),
            "pair",
        ),
    ]
}

/// One to four columns named `a`, `b`, … of kinds the input's first bytes choose.
pub fn schema(input: &mut Bytes<'_>) -> Vec<Column> {
    let kinds = kinds();
    let count = usize::from(input.byte() % 4) + 1;
    (0..count)
        .map(|index| {
            let (kind, type_name) = kinds[usize::from(input.byte()) % kinds.len()].clone();
            Column::new(char::from(b'a' + index as u8).to_string(), kind, type_name)
        })
        .collect()
}

/// What a whole run decoded: each row's line and values, each rejection's
/// line, and the records counted.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    /// `(line, values)` per row, NULL as `None`.
    pub rows: Vec<(u64, Vec<Option<Vec<u8>>>)>,
    /// `(line, column, reason)` per rejected record.
    pub rejected: Vec<(u64, Option<String>, String)>,
    /// The decoder's count of records.
    pub records: u64,
    /// The error that ended the input, if one did.
    pub failure: Option<String>,
}

/// Feeds `input` to `decoder` in pieces of the sizes `pieces` gives (cycled;
/// 0 means "all that is left"), keeping unconsumed bytes as the import loop
/// does, and checks the invariants of every call.
pub fn drive(decoder: &mut dyn Decoder, input: &[u8], pieces: &[u8]) -> Outcome {
    // An upper bound on line numbers: files may end their lines with \r alone.
    let lines = input
        .iter()
        .filter(|byte| matches!(byte, b'\n' | b'\r'))
        .count() as u64
        + 1;
    let mut outcome = Outcome {
        rows: Vec::new(),
        rejected: Vec::new(),
        records: 0,
        failure: None,
    };
    let mut pending: Vec<u8> = Vec::new();
    let mut offset = 0;
    let mut piece = 0;
    let mut decoded = Decoded::default();
    loop {
        let size = match pieces.get(piece % pieces.len().max(1)) {
            Some(0) | None => input.len() - offset,
            Some(size) => usize::from(*size).min(input.len() - offset),
        };
        piece += 1;
        pending.extend_from_slice(&input[offset..offset + size]);
        offset += size;
        let end = offset == input.len();
        decoded.clear();
        match decoder.decode(&pending, end, &mut decoded) {
            Ok(consumed) => {
                assert!(consumed <= pending.len(), "consumed more than given");
                pending.drain(..consumed);
            }
            Err(error) => {
                outcome.failure = Some(error.to_string());
                return outcome;
            }
        }
        collect(&decoded, lines, &mut outcome);
        if end {
            outcome.records = decoder.records_seen();
            return outcome;
        }
    }
}

fn collect(decoded: &Decoded, lines: u64, outcome: &mut Outcome) {
    let batch = &decoded.batch;
    assert_eq!(decoded.lines.len(), batch.num_rows(), "a line per row");
    assert_eq!(
        batch.num_values() % batch.num_columns().max(1),
        0,
        "whole rows only"
    );
    for (index, row) in batch.rows().enumerate() {
        let line = decoded.lines[index];
        assert!((1..=lines).contains(&line), "row line {line} of {lines}");
        let values = (0..row.len())
            .map(|column| row.get(column).map(<[u8]>::to_vec))
            .collect();
        outcome.rows.push((line, values));
    }
    for rejected in &decoded.rejected {
        let error = &rejected.error;
        assert!(
            (1..=lines).contains(&error.line),
            "rejection at line {} of {lines}: {}",
            error.line,
            error.reason
        );
        assert!(!error.reason.is_empty(), "a rejection says why");
        outcome
            .rejected
            .push((error.line, error.column.clone(), error.reason.clone()));
    }
}

/// Decodes `input` whole and in pieces with fresh decoders from `make`: both
/// must agree, whatever the cuts (a decoder must not depend on where a read
/// ends).
pub fn agree(make: impl Fn() -> Box<dyn Decoder>, input: &[u8], pieces: &[u8]) {
    let whole = drive(make().as_mut(), input, &[0]);
    let cut = drive(make().as_mut(), input, pieces);
    assert_eq!(whole, cut, "decoding in pieces changed the result");
}
