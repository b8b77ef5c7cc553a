//! Binary COPY against a real PostgreSQL: every type with a binary encoder
//! round trips (the same canonical values loaded by binary COPY and by text
//! COPY read back the same), bad values name their line and column and leave
//! nothing written, and the import's strategies (abort, skip bad rows,
//! upsert) work over binary COPY.

use sluice_core::load::{ImportInput, ImportOptions, ImportSummary, OnConflict, OnError, Scope};
use sluice_core::{Batch, Error, ErrorKind, Meter, Progress, Rejected};
use sluice_formats::{CsvDecoder, CsvOptions};
use sluice_postgres::binary_encode::{encoder_for_column, SessionSettings};
use sluice_postgres::{describe_table, import_rows, Config, Connection};
use sluice_testkit::TestDb;

async fn connect(db: &TestDb) -> Connection {
    let config: Config = db.url().parse().unwrap();
    Connection::connect(&config, &Meter::new()).await.unwrap()
}

/// A batch of rows `(n, value)`, `n` counting from 1.
fn batch_of(values: &[Option<&[u8]>]) -> Batch {
    let mut batch = Batch::new(2);
    for (index, value) in values.iter().enumerate() {
        batch.push_value((index + 1).to_string().as_bytes());
        match value {
            Some(value) => batch.push_value(value),
            None => batch.push_null(),
        }
    }
    batch
}

/// Loads `values` into a fresh `(n int4, v sql_type)` table `name` by binary
/// COPY (`binary`) or text COPY.
async fn load_values(
    db: &TestDb,
    name: &str,
    sql_type: &str,
    values: &[Option<&[u8]>],
    binary: bool,
) -> Result<u64, Error> {
    db.execute(&format!("create table {name} (n int4, v {sql_type})"));
    let mut connection = connect(db).await;
    let table = describe_table(&mut connection, name).await?;
    let batch = batch_of(values);
    let rows = 0..batch.num_rows();
    if binary {
        let session = SessionSettings {
            time_zone: connection.time_zone(),
            interval_style: connection.interval_style(),
        };
        let encoders: Vec<_> = table
            .columns
            .iter()
            .map(|column| encoder_for_column(column, table.declared_type(&column.name), &session))
            .collect();
        let encoders: Vec<_> = encoders
            .into_iter()
            .map(|encoder| encoder.unwrap_or_else(|| panic!("no binary encoder for {sql_type}")))
            .collect();
        let statement = format!("copy {name} (n, v) from stdin (format binary)");
        let mut copy = connection
            .copy_in_binary(&statement, &table.columns, encoders)
            .await?;
        copy.write_rows(&batch, rows).await?;
        copy.finish().await
    } else {
        let kinds: Vec<_> = table
            .columns
            .iter()
            .map(|column| column.kind.clone())
            .collect();
        let mut copy = connection
            .copy_in(&format!("copy {name} (n, v) from stdin"), &kinds)
            .await?;
        copy.write_rows(&batch, rows).await?;
        copy.finish().await
    }
}

fn read_back(db: &TestDb, name: &str) -> String {
    db.query_text(&format!(
        "select n, coalesce(v::text, '<null>') from {name} order by n"
    ))
}

/// Loads `values` of `sql_type` both ways and checks they read back equal,
/// and (where given) as `expected`.
async fn round_trip(sql_type: &str, values: &[&str]) -> String {
    let values: Vec<Option<&[u8]>> = values
        .iter()
        .map(|value| (*value != "<null>").then_some(value.as_bytes()))
        .chain([None])
        .collect();
    round_trip_bytes(sql_type, &values).await
}

async fn round_trip_bytes(sql_type: &str, values: &[Option<&[u8]>]) -> String {
    let db = TestDb::new();
    let written = load_values(&db, "by_binary", sql_type, values, true)
        .await
        .unwrap_or_else(|error| panic!("binary COPY of {sql_type}: {error}"));
    assert_eq!(written, values.len() as u64);
    load_values(&db, "by_text", sql_type, values, false)
        .await
        .unwrap_or_else(|error| panic!("text COPY of {sql_type}: {error}"));
    let binary = read_back(&db, "by_binary");
    assert_eq!(binary, read_back(&db, "by_text"), "{sql_type}");
    binary
}

/// The text of each value, in order, as `read_back` prints them.
fn texts(read: &str) -> Vec<&str> {
    read.lines()
        .map(|line| line.split_once('|').map_or(line, |(_, text)| text))
        .collect()
}

#[tokio::test]
async fn integers_round_trip_at_their_limits() {
    let read = round_trip("int2", &["-32768", "32767", "0", " 12 ", "+7"]).await;
    assert_eq!(texts(&read), ["-32768", "32767", "0", "12", "7", "<null>"]);
    round_trip("int4", &["-2147483648", "2147483647", "-0"]).await;
    let read = round_trip("int8", &["-9223372036854775808", "9223372036854775807"]).await;
    assert_eq!(
        texts(&read)[..2],
        ["-9223372036854775808", "9223372036854775807"]
    );
}

#[tokio::test]
async fn floats_round_trip_with_their_specials() {
    let specials = [
        "NaN",
        "Infinity",
        "-Infinity",
        "-0",
        "0.1",
        "inf",
        "-INF",
        "nan",
    ];
    let float4 = ["3.4028235e38", "1.1754944e-38", "1e-45", "-1.5"];
    let float8 = [
        "1.7976931348623157e308",
        "5e-324",
        "-1.5e-300",
        "2.2250738585072014e-308",
    ];
    let read = round_trip("float4", &[&specials[..], &float4[..]].concat()).await;
    assert_eq!(texts(&read)[..4], ["NaN", "Infinity", "-Infinity", "-0"]);
    round_trip("float8", &[&specials[..], &float8[..]].concat()).await;
}

#[tokio::test]
async fn numerics_round_trip_huge_tiny_and_special() {
    let huge = format!("{}.{}", "9".repeat(300), "1".repeat(300));
    let values = [
        "0",
        "-0",
        "0.000",
        "123.45",
        "-0.0005",
        "1e-20",
        "5e10",
        "10000",
        "9999.9999",
        "-1.000",
        "123456789012345678901234567890.123456789",
        "1e1000",
        "-1e-1000",
        "1.5E+3",
        " 42 ",
        "NaN",
        "Infinity",
        "-Infinity",
        &huge,
    ];
    let read = round_trip("numeric", &values).await;
    assert_eq!(texts(&read)[..4], ["0", "0", "0.000", "123.45"]);
    // The column's typmod is the server's to apply, also to binary values.
    let read = round_trip("numeric(12,2)", &["1.005", "-2.5", "1234567890.12"]).await;
    assert_eq!(texts(&read)[..3], ["1.01", "-2.50", "1234567890.12"]);
    let read = round_trip("numeric(5,-2)", &["12345", "-99949"]).await;
    assert_eq!(texts(&read)[..2], ["12300", "-99900"]);
}

#[tokio::test]
async fn booleans_round_trip_every_spelling() {
    let read = round_trip(
        "bool",
        &["t", "f", "true", "no", "on", "OFF", "1", "0", " yes "],
    )
    .await;
    assert_eq!(
        texts(&read),
        ["true", "false", "true", "false", "true", "false", "true", "false", "true", "<null>"]
    );
}

#[tokio::test]
async fn text_types_round_trip_as_is() {
    let values = [
        "a\tb",
        "line\nbreak\r\n",
        "back\\slash \\N",
        "ünïcödé 🎉 中文",
        "",
        "\"quoted\"",
    ];
    round_trip("text", &values).await;
    round_trip("varchar", &values).await;
    // name clips to 63 bytes on a character boundary, over both formats.
    let long_name = "é".repeat(40);
    let read = round_trip("name", &["a name", "ü", &long_name]).await;
    assert_eq!(texts(&read)[2], "é".repeat(31));
    let read = round_trip("varchar(5)", &["abc", "abcde", "ab   "]).await;
    assert_eq!(texts(&read)[..2], ["abc", "abcde"]);
    // char(n) pads; its cast to text drops the padding again.
    let read = round_trip("char(3)", &["ab", "abc", "x  "]).await;
    assert_eq!(texts(&read)[..3], ["ab", "abc", "x"]);
}

#[tokio::test]
async fn typmod_limits_are_checked_by_the_server() {
    let db = TestDb::new();
    let error = load_values(&db, "short", "char(3)", &[Some(b"abcd")], true)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Database, "{error}");
    assert!(error.to_string().contains("too long"), "{error}");
}

#[tokio::test]
async fn citext_is_text_on_the_wire() {
    let db = TestDb::new();
    db.execute("create extension if not exists citext");
    let values: Vec<Option<&[u8]>> = vec![Some(b"MiXeD"), Some("ünï".as_bytes()), None];
    load_values(&db, "by_binary", "citext", &values, true)
        .await
        .unwrap();
    assert_eq!(
        db.query_text("select count(*) from by_binary where v = 'mixed'"),
        "1"
    );
}

#[tokio::test]
async fn bytea_round_trips_raw_bytes() {
    let values: Vec<Option<&[u8]>> = vec![
        Some(b"\x00\xff\\\t\n"),
        Some(b""),
        Some("ünï".as_bytes()),
        None,
    ];
    let read = round_trip_bytes("bytea", &values).await;
    assert_eq!(texts(&read)[0], "\\x00ff5c090a");
}

#[tokio::test]
async fn dates_round_trip_bc_and_infinity() {
    let values = [
        "2000-01-01",
        "1999-12-31",
        "2024-02-29",
        "1970-01-01",
        "0001-01-01",
        "0001-12-31 BC",
        "0005-02-29 BC",
        "4713-11-24 BC",
        "5874897-12-31",
        "infinity",
        "-infinity",
        "epoch",
    ];
    let read = round_trip("date", &values).await;
    assert_eq!(texts(&read)[5], "0001-12-31 BC");
}

#[tokio::test]
async fn times_round_trip_to_the_microsecond() {
    let values = [
        "00:00:00",
        "23:59:59.999999",
        "24:00:00",
        "12:34:56.5",
        "12:34",
        "23:59:60",
        "12:00:00.0000005",
        "01:02:03.1234567",
    ];
    round_trip("time", &values).await;
    round_trip("time(2)", &["12:34:56.789"]).await;
}

#[tokio::test]
async fn timestamps_round_trip_bc_infinity_and_rounding() {
    let values = [
        "2024-01-01 00:00:00",
        "2024-01-01T10:11:12.123456",
        "0044-03-15 12:00:00 BC",
        "4713-11-24 00:00:00 BC",
        "294276-12-31 23:59:59.999999",
        "1999-12-31 23:59:59.9999995",
        "2024-06-30 23:59:60",
        "2024-02-29",
        "2024-01-01 10:00:00+05",
        "infinity",
        "-infinity",
    ];
    round_trip("timestamp", &values).await;
    round_trip("timestamp(0)", &["2024-01-01 00:00:00.5"]).await;
}

#[tokio::test]
async fn timestamps_with_time_zone_round_trip_odd_offsets() {
    let values = [
        "2024-01-01 00:00:00+00",
        "2024-01-01 10:00:00+05:45",
        "2024-01-01 10:00:00-03:30",
        "1900-01-01 00:00:00+00:19:32",
        "2024-06-01 12:00:00.5+0530",
        "2024-06-01T12:00:00Z",
        "0044-03-15 12:00:00+00 BC",
        "2024-01-01 00:00:00.123456-12",
        // No offset: the session's zone, UTC here (else no binary encoder).
        "2024-01-01 12:00:00",
        "infinity",
        "-infinity",
    ];
    round_trip("timestamptz", &values).await;
}

#[tokio::test]
async fn uuids_round_trip_in_every_spelling() {
    let values = [
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "{A0EEBC99-9C0B4EF8-BB6D6BB9-BD380A11}",
        "a0eebc999c0b4ef8bb6d6bb9bd380a11",
        "00000000-0000-0000-0000-000000000000",
    ];
    let read = round_trip("uuid", &values).await;
    assert_eq!(texts(&read)[1], "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
}

#[tokio::test]
async fn json_and_jsonb_round_trip() {
    let values = [r#"{"a": [1, 2.50, "x"]}"#, r#""ünï""#, "null", "[]", "1e3"];
    let read = round_trip("json", &values).await;
    assert_eq!(texts(&read)[0], r#"{"a": [1, 2.50, "x"]}"#);
    let read = round_trip("jsonb", &values).await;
    assert_eq!(texts(&read)[0], r#"{"a": [1, 2.50, "x"]}"#);
}

#[tokio::test]
async fn arrays_round_trip_empty_nested_and_with_nulls() {
    round_trip(
        "int4[]",
        &[
            "{}",
            "{1,NULL,3}",
            "{{1,2},{3,4}}",
            "[0:1]={5,6}",
            "{ 7 , 8 }",
        ],
    )
    .await;
    round_trip("int2[]", &["{-32768,32767}"]).await;
    round_trip("int8[]", &["{-9223372036854775808,NULL}"]).await;
    round_trip("float4[]", &["{NaN,-Infinity,1.5,-0}"]).await;
    round_trip("float8[]", &["{NaN,Infinity,5e-324}"]).await;
    round_trip("numeric[]", &["{1.5,NaN,-0.001,Infinity}"]).await;
    round_trip("bool[]", &["{t,f,NULL}"]).await;
    let texts_array = r#"{"a b",NULL,"q\"uote","back\\slash",ünï,"NULL","",null}"#;
    let read = round_trip("text[]", &[texts_array, "{{a,b},{c,d}}"]).await;
    assert_eq!(
        texts(&read)[0],
        r#"{"a b",NULL,"q\"uote","back\\slash",ünï,"NULL","",NULL}"#
    );
    round_trip("varchar[]", &[texts_array]).await;
    round_trip("char(2)[]", &["{ab,c,NULL}"]).await;
    round_trip("name[]", &["{a,b}"]).await;
    round_trip("bytea[]", &[r#"{"\\x00ff","\\x",NULL}"#]).await;
    round_trip("date[]", &["{2024-01-01,infinity,\"0001-01-01 BC\"}"]).await;
    round_trip("time[]", &["{00:00:00,23:59:59.999999}"]).await;
    round_trip("timestamp[]", &[r#"{"2024-01-01 00:00:00",-infinity}"#]).await;
    round_trip("timestamptz[]", &[r#"{"2024-01-01 00:00:00+05:45",NULL}"#]).await;
    round_trip("uuid[]", &["{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}"]).await;
    round_trip("json[]", &[r#"{"{\"a\": 1}",NULL,"[1, 2]"}"#]).await;
    round_trip("jsonb[]", &[r#"{"{\"a\": 1}",NULL,"[1, 2]"}"#]).await;
}

// ------------------------------------------------------------ through import --

struct Outcome {
    summary: ImportSummary,
    rejected: Vec<Rejected>,
}

async fn import_csv(
    db: &TestDb,
    table: &str,
    csv: &str,
    options: ImportOptions,
) -> Result<Outcome, Error> {
    import_csv_on(&mut connect(db).await, table, csv, options).await
}

async fn import_csv_on(
    connection: &mut Connection,
    table: &str,
    csv: &str,
    options: ImportOptions,
) -> Result<Outcome, Error> {
    let info = describe_table(connection, table).await?;
    let mut rejected = Vec::new();
    let mut sink = |record: &Rejected| -> Result<(), Error> {
        rejected.push(record.clone());
        Ok(())
    };
    let mut decoder = CsvDecoder::new(
        info.columns.clone(),
        CsvOptions {
            keep_records: options.on_error == OnError::Skip,
            ..CsvOptions::default()
        },
    );
    let mut reader = csv.as_bytes();
    let summary = import_rows(
        connection,
        &info,
        &mut ImportInput::new(&mut decoder, &mut reader, &Progress::new()),
        &options,
        &mut sink,
        Scope::Own,
    )
    .await?;
    Ok(Outcome { summary, rejected })
}

const TABLE: &str =
    "create table t (id int4 primary key, small int2, day date, amount numeric(12,2), \
                     at timestamptz, tags text[])";

fn csv_with(bad_line: &str) -> String {
    format!(
        "id,small,day,amount,at,tags\n\
         1,1,2024-01-01,1.50,2024-01-01 00:00:00+00,{{a}}\n\
         {bad_line}\n\
         3,3,2024-01-03,3.25,2024-01-03 00:00:00+05:45,\"{{b,NULL}}\"\n"
    )
}

#[tokio::test]
async fn bad_values_name_their_line_and_column_and_write_nothing() {
    // The messages and SQLSTATEs are the server's for the same text.
    let cases = [
        (
            "12x,2,2024-01-02,1,2024-01-02 00:00:00+00,{}",
            "id",
            "22P02",
            "invalid input syntax for type integer: \"12x\"",
        ),
        (
            "2,40000,2024-01-02,1,2024-01-02 00:00:00+00,{}",
            "small",
            "22003",
            "value \"40000\" is out of range for type smallint",
        ),
        (
            "2,2,2024-02-30,1,2024-01-02 00:00:00+00,{}",
            "day",
            "22008",
            "date/time field value out of range: \"2024-02-30\"",
        ),
    ];
    for (bad_line, column, code, reason) in cases {
        let db = TestDb::new();
        db.execute(TABLE);
        let error = import_csv(&db, "t", &csv_with(bad_line), ImportOptions::default())
            .await
            .err()
            .unwrap_or_else(|| panic!("{bad_line} was accepted"));
        assert_eq!(error.kind(), ErrorKind::Database, "{error}");
        assert_eq!(error.code(), Some(code), "{error}");
        let row = error.as_row_error().expect("a row error");
        assert_eq!(row.line, 3, "{error}");
        assert_eq!(row.column.as_deref(), Some(column), "{error}");
        assert_eq!(row.reason, reason);
        assert_eq!(db.query_text("select count(*) from t"), "0");
    }
}

#[tokio::test]
async fn the_servers_refusals_of_binary_rows_name_their_line() {
    let db = TestDb::new();
    db.execute(TABLE);
    // Out of numeric(12,2)'s range: only the server knows the typmod.
    let csv = csv_with("2,2,2024-01-02,12345678901.5,2024-01-02 00:00:00+00,{}");
    let error = import_csv(&db, "t", &csv, ImportOptions::default())
        .await
        .err()
        .expect("an error");
    assert_eq!(error.kind(), ErrorKind::Database, "{error}");
    let row = error.as_row_error().expect("a row error");
    assert_eq!((row.line, row.column.as_deref()), (3, Some("amount")));
    assert_eq!(db.query_text("select count(*) from t"), "0");
}

#[tokio::test]
async fn skip_mode_rejects_unencodable_and_refused_rows_over_binary_copy() {
    let db = TestDb::new();
    db.execute(TABLE);
    let csv = "id,small,day,amount,at,tags\n\
               1,1,2024-01-01,1.50,2024-01-01 00:00:00+00,{a}\n\
               2,40000,2024-01-02,1,2024-01-02 00:00:00+00,{}\n\
               3,3,2024-02-30,1,2024-01-02 00:00:00+00,{}\n\
               4,4,2024-01-04,12345678901.5,2024-01-04 00:00:00+00,{}\n\
               1,5,2024-01-05,5,2024-01-05 00:00:00+00,{}\n\
               6,6,2024-01-06,6.12,2024-01-06 00:00:00-01,\"{x,\"\"y z\"\"}\"\n";
    let options = ImportOptions {
        on_error: OnError::Skip,
        chunk_rows: 2,
        ..ImportOptions::default()
    };
    let outcome = import_csv(&db, "t", csv, options).await.unwrap();
    let lines: Vec<(u64, Option<&str>)> = outcome
        .rejected
        .iter()
        .map(|rejected| (rejected.error.line, rejected.error.column.as_deref()))
        .collect();
    assert_eq!(
        lines,
        [
            (3, Some("small")),
            (4, Some("day")),
            (5, Some("amount")),
            (6, None)
        ]
    );
    assert_eq!(outcome.summary.accepted, 2);
    assert_eq!(
        db.query_text("select id, amount, at, tags from t order by id"),
        "1|1.50|2024-01-01 00:00:00+00|{a}\n6|6.12|2024-01-06 01:00:00+00|{x,\"y z\"}"
    );
}

#[tokio::test]
async fn upserts_stage_rows_over_binary_copy() {
    let db = TestDb::new();
    db.execute(TABLE);
    db.execute("insert into t (id, small) values (1, 100), (9, 900)");
    let csv = "id,small,day,amount,at,tags\n\
               1,1,2024-01-01,1.50,2024-01-01 00:00:00+00,{a}\n\
               2,2,2024-01-02,2,2024-01-02 00:00:00+00,{}\n\
               2,22,2024-01-02,2,2024-01-02 00:00:00+00,{}\n";
    let options = ImportOptions {
        on_conflict: OnConflict::Update,
        key: vec!["id".into()],
        ..ImportOptions::default()
    };
    let outcome = import_csv(&db, "t", csv, options).await.unwrap();
    assert_eq!(outcome.summary.accepted, 3);
    assert_eq!(
        db.query_text("select id, small from t order by id"),
        "1|1\n2|22\n9|900"
    );
}

#[tokio::test]
async fn a_column_without_an_encoder_keeps_the_copy_text() {
    let db = TestDb::new();
    // An interval with fields reads a bare number in its last field (a
    // year here), which the binary encoder would read as seconds: it has
    // none, so the whole COPY is text.
    db.execute("create table t (id int4, span interval year, day date)");
    let mut connection = connect(&db).await;
    let info = describe_table(&mut connection, "t").await.unwrap();
    let session = SessionSettings {
        time_zone: connection.time_zone(),
        interval_style: connection.interval_style(),
    };
    let span = &info.columns[1];
    assert!(encoder_for_column(span, info.declared_type("span"), &session).is_none());
    // Text COPY: the server reads `Jan 5 2024`, which the binary encoder would not.
    let csv = "id,span,day\n1,1,Jan 5 2024\n";
    import_csv(&db, "t", csv, ImportOptions::default())
        .await
        .unwrap();
    assert_eq!(
        db.query_text("select id, span, day from t"),
        "1|1 year|2024-01-05"
    );
}

#[tokio::test]
async fn text_copy_stays_available_when_asked_for() {
    let db = TestDb::new();
    db.execute("create table t (id int4, day date)");
    let csv = "id,day\n1,Jan 5 2024\n";
    let binary = import_csv(&db, "t", csv, ImportOptions::default()).await;
    let error = binary.err().expect("the binary encoder refuses the date");
    assert_eq!(error.code(), Some("22007"), "{error}");
    let options = ImportOptions {
        binary_copy: false,
        ..ImportOptions::default()
    };
    import_csv(&db, "t", csv, options).await.unwrap();
    assert_eq!(db.query_text("select id, day from t"), "1|2024-01-05");
}

#[tokio::test]
async fn timestamps_without_offset_follow_the_sessions_time_zone() {
    let db = TestDb::new();
    db.execute("create table t (id int4, at timestamptz)");
    let csv = "id,at\n1,2024-01-01 12:00:00\n";
    let mut config: Config = db.url().parse().unwrap();
    config
        .settings
        .push(("TimeZone".into(), "Asia/Kathmandu".into()));
    let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    assert_eq!(connection.time_zone(), "Asia/Kathmandu");
    // Not a UTC session: the column has no binary encoder, text COPY reads it.
    import_csv_on(&mut connection, "t", csv, ImportOptions::default())
        .await
        .unwrap();
    let utc = "select at at time zone 'UTC' from t";
    assert_eq!(db.query_text(utc), "2024-01-01 06:15:00");
}

#[tokio::test]
async fn a_row_the_server_refused_first_is_the_error_reported() {
    let db = TestDb::new();
    db.execute(TABLE);
    // Line 3's amount is too large for numeric(12,2) (the server's refusal,
    // made as it reads the row), line 4 holds a value no encoder reads: the
    // earlier line is the error, as over text COPY.
    let csv = "id,small,day,amount,at,tags\n\
               1,1,2024-01-01,1,2024-01-01 00:00:00+00,{}\n\
               2,2,2024-01-02,12345678901.5,2024-01-02 00:00:00+00,{}\n\
               12x,3,2024-01-03,3,2024-01-03 00:00:00+00,{}\n";
    let error = import_csv(&db, "t", csv, ImportOptions::default())
        .await
        .err()
        .expect("an error");
    assert_eq!(error.code(), Some("22003"), "{error}");
    let row = error.as_row_error().expect("a row error");
    assert_eq!((row.line, row.column.as_deref()), (3, Some("amount")));
    assert_eq!(db.query_text("select count(*) from t"), "0");
}

// Intervals and timetz, with the server as the oracle (a file of its own:
// the spellings and their generator are long).
#[path = "binary_copy/intervals.rs"]
mod intervals;
