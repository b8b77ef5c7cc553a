//! sluice's CSV decoder and PostgreSQL's own `COPY … FROM STDIN (FORMAT csv)`
//! agree on generated CSV text: both accept it and make the same rows (NULL
//! and empty string apart), or both refuse it. The text is drawn from the
//! characters CSV gives meaning to, so quoting, line breaks inside quotes,
//! `\r\n`, the end-of-data marker `\.` and short and long records all come up.
//!
//! One difference is meant: a line `\.` inside a quoted field is data to sluice
//! (as RFC 4180 reads it), while PostgreSQL 15 takes it for the end of the data
//! and refuses the field left open. Such inputs are left out of the
//! comparison and pinned by a test of their own; anywhere else the two agree.

use std::io::Write;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use serde_json::Value;
use sluice_core::{Column, Decoded, Decoder, Kind};
use sluice_formats::{CsvDecoder, CsvHeader, CsvOptions};
use sluice_testkit::{psql_path, TestDb};

const COLUMNS: usize = 3;

/// What sluice makes of `input`: the rows, or `None` when it refuses a record.
fn sluice_rows(input: &[u8]) -> Option<Vec<Vec<Value>>> {
    let table = (0..COLUMNS)
        .map(|index| Column::new(format!("c{index}"), Kind::Text, "text"))
        .collect();
    let options = CsvOptions {
        header: CsvHeader::Absent,
        ..CsvOptions::default()
    };
    let mut decoder = CsvDecoder::new(table, options);
    let mut decoded = Decoded::default();
    decoder.decode(input, true, &mut decoded).ok()?;
    if !decoded.rejected.is_empty() {
        return None;
    }
    let rows = decoded
        .batch
        .rows()
        .map(|row| {
            (0..row.len())
                .map(|index| match row.get(index) {
                    Some(text) => Value::String(String::from_utf8(text.to_vec()).unwrap()),
                    None => Value::Null,
                })
                .collect()
        })
        .collect();
    Some(rows)
}

/// What PostgreSQL makes of `input` (through psql's `\copy … from pstdin`), in
/// a fresh table: the rows in order, or `None` when the COPY fails.
fn postgres_rows(db: &TestDb, input: &[u8]) -> Option<Vec<Vec<Value>>> {
    db.execute("drop table if exists t; create table t (ord bigserial, c0 text, c1 text, c2 text)");
    let copy = format!(
        "\\copy {}.t (c0, c1, c2) from pstdin with (format csv)",
        db.schema()
    );
    let mut child = Command::new(psql_path())
        .args([db.url(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", &copy])
        .env("PGCLIENTENCODING", "UTF8")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("psql runs");
    child.stdin.take().unwrap().write_all(input).unwrap();
    if !child.wait().unwrap().success() {
        return None;
    }
    let json = db.query_text(
        "select coalesce(json_agg(json_build_array(c0, c1, c2) order by ord), '[]') from t",
    );
    let rows: Vec<Vec<Value>> = serde_json::from_str(&json).unwrap();
    Some(rows)
}

/// CSV-ish text: the characters CSV gives meaning to, a letter, a multi-byte one.
fn csv_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just(","),
            Just("\""),
            Just("\n"),
            Just("\r\n"),
            Just("\r"),
            Just("\\."),
            Just("\\"),
            Just("."),
            Just(" "),
            Just("a"),
            Just("é"),
        ],
        0..24,
    )
    .prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_csv_decoder_agrees_with_copy_from(text in csv_text()) {
        let db = TestDb::new();
        let ours = sluice_rows(text.as_bytes());
        let theirs = postgres_rows(&db, text.as_bytes());
        // Where PostgreSQL stopped at a marker inside quotes, sluice read on
        // (the test below pins what it makes); elsewhere they agree.
        if !(theirs.is_none() && marker_inside_quotes(&text)) {
            prop_assert_eq!(ours, theirs, "input {:?}", text);
        }
    }
}

/// Whether a line of `text` that is exactly `\.` lies inside a quoted field
/// (a quote opens and closes a field; `""` inside one is an escaped quote,
/// which toggling twice reads the same).
fn marker_inside_quotes(text: &str) -> bool {
    let mut quoted = false;
    let mut line_start = true;
    let bytes = text.as_bytes();
    for (index, &byte) in bytes.iter().enumerate() {
        if line_start && quoted && bytes[index..].starts_with(b"\\.") {
            let after = &bytes[index + 2..];
            if after.is_empty() || after[0] == b'\n' || after[0] == b'\r' {
                return true;
            }
        }
        line_start = byte == b'\n' || byte == b'\r';
        if byte == b'"' {
            quoted = !quoted;
        }
    }
    false
}

#[test]
fn a_marker_line_inside_quotes_is_data_to_sluice_and_the_end_to_postgresql() {
    let db = TestDb::new();
    let text = "\"\n\\.\n\",,\"\"";
    assert!(marker_inside_quotes(text));
    assert!(!marker_inside_quotes("a\n\\.\nb"));
    assert_eq!(
        sluice_rows(text.as_bytes()),
        Some(vec![vec![
            Value::String("\n\\.\n".into()),
            Value::Null,
            Value::String(String::new())
        ]])
    );
    assert_eq!(postgres_rows(&db, text.as_bytes()), None);
}
