//! The SQLite source against real SQLite files: canonical values through the real
//! encoders, back-pressure, cancellation, timeouts and errors.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_core::{pump, BatchSource, ErrorKind, Progress};
use sluice_formats::{Format, JsonOptions};
use sluice_sqlite::{Param, SqliteOptions, SqliteStream};

fn database(sql: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("test.db");
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection.execute_batch(sql).unwrap();
    (directory, path)
}

async fn ndjson(path: &std::path::Path, sql: &str, params: Vec<Param>) -> Vec<Value> {
    let mut stream = SqliteStream::start(path, sql, params, SqliteOptions::default())
        .await
        .unwrap();
    let mut encoder = Format::Ndjson.encoder(JsonOptions::default());
    let mut output = Vec::new();
    pump(&mut stream, &mut encoder, &mut output, &Progress::new())
        .await
        .unwrap();
    String::from_utf8(output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

const BIG: &str = "create table big (id integer primary key, name text);
    insert into big
    with recursive c(x) as (select 1 union all select x + 1 from c where x < 300000)
    select x, 'name number ' || x from c;";

#[tokio::test]
async fn values_are_written_in_their_declared_kinds() {
    let (_directory, path) = database(
        "create table t (i integer, r real, d decimal text, b boolean, ts timestamptz,
                         j jsonb, bl blob, tx text, n numeric(12,2));
         insert into t values (-7, 0.1, '12.30', 1, '2024-02-29 13:14:15.5+00',
                               '{\"a\": [1, 2]}', x'00ff', 'say \"hi\"', '3.50');
         insert into t values (null, 1e300, '-0.01', 0, null, 'null', x'', '', 2);",
    );
    let rows = ndjson(&path, "select * from t order by rowid", vec![]).await;
    // Parsed from text so the expectation keeps `12.30` however serde_json is built.
    let expected: Vec<Value> = [
        r#"{"i": -7, "r": 0.1, "d": 12.30, "b": true, "ts": "2024-02-29T13:14:15.5+00:00",
            "j": {"a": [1, 2]}, "bl": "AP8=", "tx": "say \"hi\"", "n": 3.5}"#,
        r#"{"i": null, "r": 1e300, "d": -0.01, "b": false, "ts": null,
            "j": null, "bl": "", "tx": "", "n": 2}"#,
    ]
    .iter()
    .map(|text| serde_json::from_str(text).unwrap())
    .collect();
    assert_eq!(rows, expected);
    // The decimal stored as text keeps its digits exactly; NUMERIC affinity does not.
    let mut stream = SqliteStream::start(&path, "select d, n from t", vec![], Default::default())
        .await
        .unwrap();
    let batch = stream.next_batch().await.unwrap().unwrap();
    assert_eq!(batch.row(0).get(0), Some(&b"12.30"[..]));
    assert_eq!(batch.row(0).get(1), Some(&b"3.5"[..]));
}

#[tokio::test]
async fn expressions_take_the_kind_of_their_first_value_and_params_bind_typed() {
    let (_directory, path) = database(BIG);
    let rows = ndjson(
        &path,
        "select count(*) as n, ?1 * 2 as twice, ?2 as label, max(id) > ?3 as more \
         from big where id <= ?1",
        vec![
            Param::Integer(10),
            Param::Text("x".into()),
            Param::Real(5.5),
        ],
    )
    .await;
    assert_eq!(
        rows,
        [json!({"n": 10, "twice": 20, "label": "x", "more": 1})]
    );

    let error = SqliteStream::start(
        &path,
        "select ?1, ?2",
        vec![Param::Null],
        Default::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Config);
    assert!(
        error.to_string().contains("2 parameters but 1 value"),
        "{error}"
    );
}

#[tokio::test]
async fn a_slow_reader_holds_the_statement_back_and_dropping_it_releases_the_file() {
    let (_directory, path) = database(BIG);
    let mut stream = SqliteStream::start(&path, "select * from big", vec![], Default::default())
        .await
        .unwrap();
    let first = stream.next_batch().await.unwrap().unwrap().num_rows();
    assert!(first > 0 && first < 300_000);
    tokio::time::sleep(Duration::from_millis(200)).await;

    // The statement is parked waiting for the reader, still holding its read lock,
    // so nobody can take the file exclusively.
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer.busy_timeout(Duration::ZERO).unwrap();
    assert!(writer.execute_batch("begin exclusive").is_err());

    drop(stream);
    writer.busy_timeout(Duration::from_secs(1)).unwrap();
    let started = Instant::now();
    writer.execute_batch("begin exclusive; commit").unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn a_query_busy_inside_sqlite_is_interrupted_when_the_reader_leaves() {
    let (_directory, path) = database(BIG);
    // A count over a billion generated rows: no row for a long time, however
    // fast the machine (a cross join of the test table finished within the
    // timeout once SQLite was built optimised).
    let sql =
        "with recursive c(x) as (select 1 union all select x + 1 from c where x < 1000000000) \
               select count(*) from c cross join (select 1 from big limit 1)";
    let start = SqliteStream::start(&path, sql, vec![], Default::default());
    // Give up on the start before the first row exists.
    assert!(tokio::time::timeout(Duration::from_millis(300), start)
        .await
        .is_err());
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer.busy_timeout(Duration::from_secs(2)).unwrap();
    writer.execute_batch("begin exclusive; commit").unwrap();
}

#[tokio::test]
async fn the_statement_timeout_is_reported_like_postgresql_does() {
    let (_directory, path) = database(BIG);
    let options = SqliteOptions {
        statement_timeout: Some(Duration::from_millis(200)),
        ..Default::default()
    };
    let started = Instant::now();
    let error = SqliteStream::start(
        &path,
        "select count(*) from big a, big b where a.name = b.name || 'x'",
        vec![],
        options,
    )
    .await
    .unwrap_err();
    assert_eq!(error.code(), Some("57014"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_value_that_breaks_its_kind_mid_stream_is_an_error_not_an_end() {
    let (_directory, path) = database(&format!(
        "{BIG} create table mixed (v integer);
         insert into mixed select id from big;
         insert into mixed values ('not a number');"
    ));
    let mut stream = SqliteStream::start(
        &path,
        "select v from mixed order by rowid",
        vec![],
        Default::default(),
    )
    .await
    .unwrap();
    let mut rows = 0;
    let error = loop {
        match stream.next_batch().await {
            Ok(Some(batch)) => rows += batch.num_rows(),
            Ok(None) => panic!("the stream ended cleanly after {rows} rows"),
            Err(error) => break error,
        }
    };
    // Whole batches before the bad row arrived; the batch holding it did not.
    assert!((200_000..300_000).contains(&rows), "{rows}");
    assert_eq!(error.kind(), ErrorKind::Data);
    assert!(error.to_string().contains("not a number"), "{error}");
}

#[tokio::test]
async fn writes_are_refused_and_missing_files_are_connection_errors() {
    let (_directory, path) = database("create table t (a int);");
    let error = SqliteStream::start(
        &path,
        "insert into t values (1)",
        vec![],
        Default::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Config);
    let error = SqliteStream::start(
        path.with_file_name("missing.db"),
        "select 1",
        vec![],
        Default::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Connect);
    let error = SqliteStream::start(&path, "select nope from t", vec![], Default::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Database);
    assert!(error.to_string().contains("no such column"), "{error}");
}
