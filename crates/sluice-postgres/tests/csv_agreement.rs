//! sluice's CSV decoder and PostgreSQL's own `COPY … FROM STDIN (FORMAT csv)`
//! agree on generated CSV text: both accept it and make the same rows (NULL
//! and empty string apart), or both refuse it. The text is drawn from the
//! characters CSV gives meaning to, so quoting, line breaks inside quotes,
//! `\r\n`, the end-of-data marker `\.` and short and long records all come up.

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
        prop_assert_eq!(ours, theirs, "input {:?}", text);
    }
}
