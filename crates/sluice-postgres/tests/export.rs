//! Streaming export against a real PostgreSQL: every type compared with the server's
//! own `row_to_json` and `COPY … CSV`, round trips counted, errors reported.

use sluice_core::{pump, BatchSource, Encoding, ErrorKind, Meter, MeterSnapshot, Progress};
use sluice_formats::{BytesEncoding, Format, JsonOptions};
use sluice_postgres::{Config, Connection, QueryOptions, QueryStream};
use sluice_testkit::TestDb;

mod common;
use common::ALL_TYPES;

struct Exported {
    bytes: Vec<u8>,
    rows: u64,
    /// Round trips and bytes of the query alone (after connecting).
    query: MeterSnapshot,
}

async fn export_with(
    db: &TestDb,
    sql: &str,
    format: Format,
    options: QueryOptions,
    json: JsonOptions,
) -> Result<Exported, sluice_core::Error> {
    let config: Config = db.url().parse()?;
    let meter = Meter::new();
    let connection = Connection::connect(&config, &meter).await?;
    let connected = meter.snapshot();
    let mut stream = QueryStream::start(connection, sql, options).await?;
    let mut encoder = format.encoder(json);
    let mut bytes = Vec::new();
    let summary = pump(&mut stream, &mut encoder, &mut bytes, &Progress::new()).await?;
    let query = meter.snapshot() - connected;
    assert!(
        stream.into_connection().is_some(),
        "session idle after the result"
    );
    Ok(Exported {
        bytes,
        rows: summary.rows,
        query,
    })
}

async fn export(db: &TestDb, sql: &str, format: Format) -> Exported {
    let hex = JsonOptions {
        bytes: BytesEncoding::Hex,
    };
    export_with(db, sql, format, QueryOptions::default(), hex)
        .await
        .unwrap()
}

fn json_lines(bytes: &[u8]) -> Vec<serde_json::Value> {
    std::str::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[tokio::test]
async fn ndjson_rows_equal_the_servers_row_to_json() {
    let db = TestDb::new();
    db.execute(ALL_TYPES);
    let ours = export(&db, "select * from all_types order by id", Format::Ndjson).await;
    assert_eq!(ours.rows, 4);
    let text = std::str::from_utf8(&ours.bytes).unwrap();
    assert_eq!(text.lines().count(), 4, "one line per row:\n{text}");
    let server = db.query_text(
        "set IntervalStyle = iso_8601;\n\
         select json_agg(row_to_json(t) order by id) from all_types t;",
    );
    // One array: a `json` value may hold raw line breaks, so lines cannot separate rows.
    let theirs: Vec<serde_json::Value> = serde_json::from_str(&server).unwrap();
    let ours = json_lines(&ours.bytes);
    assert_eq!(ours.len(), theirs.len());
    for (our_row, their_row) in ours.iter().zip(&theirs) {
        let (ours, theirs) = (our_row.as_object().unwrap(), their_row.as_object().unwrap());
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            theirs.keys().collect::<Vec<_>>(),
            "keys in column order"
        );
        for (key, their_value) in theirs {
            assert_eq!(
                &ours[key], their_value,
                "row {} column {key}: sluice {} vs row_to_json {}",
                theirs["id"], ours[key], their_value
            );
        }
    }
}

/// A role whose own defaults are the opposite of what sluice's text parsing
/// assumes; sluice must set its session settings over them. The time zone is a
/// presentation choice sluice keeps (psql does too), so the oracle uses it.
fn role_with_odd_session_defaults(db: &TestDb) -> sluice_testkit::TestRole {
    let role = db.create_role("odd_defaults");
    db.execute(&format!(
        "grant select on all tables in schema {schema} to {role};
         alter role {role} set DateStyle = 'SQL, DMY';
         alter role {role} set IntervalStyle = 'sql_standard';
         alter role {role} set TimeZone = 'Asia/Kathmandu';
         alter role {role} set extra_float_digits = -3;
         alter role {role} set bytea_output = 'escape';",
        schema = db.schema(),
        role = role.name
    ));
    role
}

#[tokio::test]
async fn a_roles_session_defaults_change_nothing_but_the_time_zone() {
    let db = TestDb::new();
    db.execute(ALL_TYPES);
    let role = role_with_odd_session_defaults(&db);
    let query = "select * from all_types order by id";
    let hex = JsonOptions {
        bytes: BytesEncoding::Hex,
    };
    let as_role = |format| {
        let url = role.url.clone();
        async move {
            let config: Config = url.parse().unwrap();
            let connection = Connection::connect(&config, &Meter::new()).await.unwrap();
            let mut stream = QueryStream::start(connection, query, QueryOptions::default())
                .await
                .unwrap();
            let mut encoder = Format::encoder(format, hex);
            let mut bytes = Vec::new();
            pump(&mut stream, &mut encoder, &mut bytes, &Progress::new())
                .await
                .unwrap();
            bytes
        }
    };
    // NDJSON equals row_to_json in a default session set to the same time zone.
    let theirs = db.query_text(
        "set IntervalStyle = iso_8601; set TimeZone = 'Asia/Kathmandu';\n\
         select json_agg(row_to_json(t) order by id) from all_types t;",
    );
    let theirs: Vec<serde_json::Value> = serde_json::from_str(&theirs).unwrap();
    assert_eq!(json_lines(&as_role(Format::Ndjson).await), theirs);
    // CSV equals COPY in a default session set to the same time zone.
    let copied = db.psql_bytes(&format!(
        "set TimeZone = 'Asia/Kathmandu';\n\
         COPY ({query}) TO STDOUT WITH (FORMAT csv, HEADER)"
    ));
    assert_eq!(
        String::from_utf8_lossy(&as_role(Format::Csv).await),
        String::from_utf8_lossy(&copied)
    );
}

#[tokio::test]
async fn csv_is_byte_identical_to_copy() {
    let db = TestDb::new();
    db.execute(ALL_TYPES);
    for query in [
        "select * from all_types order by id",
        "select id as \"weird, \"\"name\"\"\", c_text from all_types order by id",
        "select '\\.'::text as only_column union all select null union all select ''",
        "select 1 as a where false",
    ] {
        let ours = export(&db, query, Format::Csv).await;
        let theirs = db.psql_bytes(&format!(
            "COPY ({query}) TO STDOUT WITH (FORMAT csv, HEADER)"
        ));
        assert_eq!(
            String::from_utf8_lossy(&ours.bytes),
            String::from_utf8_lossy(&theirs),
            "query: {query}"
        );
    }
}

#[tokio::test]
async fn json_array_is_valid_and_bytea_defaults_to_base64() {
    let db = TestDb::new();
    let empty = export(&db, "select 1 as a where false", Format::Json).await;
    assert_eq!(empty.bytes, b"[]\n");
    let options = QueryOptions::default();
    let exported = export_with(
        &db,
        "select '\\x00ff10'::bytea as b, array['\\x01'::bytea] as bs, 1 as a, 2 as a",
        Format::Json,
        options,
        JsonOptions::default(),
    )
    .await
    .unwrap();
    let parsed: serde_json::Value = serde_json::from_slice(&exported.bytes).unwrap();
    assert_eq!(
        parsed,
        serde_json::json!([{"b": "AP8Q", "bs": ["AQ=="], "a": 1, "a_2": 2}])
    );
}

#[tokio::test]
async fn streaming_costs_the_same_round_trips_whatever_the_row_count() {
    let db = TestDb::new();
    let mut trips = Vec::new();
    for rows in [1u64, 1_000, 200_000] {
        let exported = export(
            &db,
            &format!("select g, 'row ' || g as label from generate_series(1, {rows}) g"),
            Format::Ndjson,
        )
        .await;
        assert_eq!(exported.rows, rows);
        trips.push(exported.query.round_trips);
    }
    assert!(trips.iter().all(|&t| t == trips[0]), "trips: {trips:?}");
    assert_eq!(trips[0], 2, "prepare, then execute");
}

#[tokio::test]
async fn fetch_size_costs_one_round_trip_per_batch() {
    let db = TestDb::new();
    for (rows, fetch_size) in [(10_000u64, 1_000u32), (10_001, 1_000), (999, 10), (5, 100)] {
        let exported = export_with(
            &db,
            &format!("select g from generate_series(1, {rows}) g"),
            Format::Ndjson,
            QueryOptions {
                params: Vec::new(),
                fetch_size: Some(fetch_size),
                lob_inline: false,
                ..QueryOptions::default()
            },
            JsonOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(exported.rows, rows);
        // README: ⌊rows/N⌋ + 3 for the query: prepare; one fetch per N rows, and the
        // last (partial or empty) that completes the portal; the Sync that ends it.
        let trips = exported.query.round_trips;
        assert_eq!(
            trips,
            rows / u64::from(fetch_size) + 3,
            "{rows} rows, fetch size {fetch_size}"
        );
        let lines = json_lines(&exported.bytes);
        assert_eq!(lines.first().unwrap()["g"], serde_json::json!(1));
        assert_eq!(lines.last().unwrap()["g"], serde_json::json!(rows));
    }
}

#[tokio::test]
async fn types_outside_the_builtin_table_cost_one_lookup() {
    let db = TestDb::new();
    db.execute(ALL_TYPES);
    let plain = export(&db, "select c_text from all_types", Format::Ndjson).await;
    let custom = export(
        &db,
        "select c_mood, c_pair_array from all_types",
        Format::Ndjson,
    )
    .await;
    assert_eq!(plain.query.round_trips, 2);
    // pair[] → pair → (its fields are built-in): two catalog levels.
    assert!(custom.query.round_trips <= 4, "{:?}", custom.query);
}

#[tokio::test]
async fn parameters_are_bound_as_text_and_converted_by_the_server() {
    let db = TestDb::new();
    db.execute(ALL_TYPES);
    let exported = export_with(
        &db,
        "select id, c_mood from all_types where c_mood = $1 and id > $2 and $3::text is null",
        Format::Ndjson,
        QueryOptions {
            params: vec![Some("happy".into()), Some("0".into()), None],
            fetch_size: None,
            lob_inline: false,
            ..QueryOptions::default()
        },
        JsonOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        json_lines(&exported.bytes),
        [serde_json::json!({"id": 1, "c_mood": "happy"})]
    );
}

#[tokio::test]
async fn errors_carry_sqlstate_and_position() {
    let db = TestDb::new();
    let error = export_with(
        &db,
        "select 1 from nowhere_at_all",
        Format::Ndjson,
        QueryOptions::default(),
        JsonOptions::default(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(error.kind(), ErrorKind::Database);
    let db_error = error.as_db_error().unwrap();
    assert_eq!(db_error.code, "42P01");
    assert_eq!(db_error.position, Some(15));

    let error = export_with(
        &db,
        "select $1::int, $2::int",
        Format::Ndjson,
        QueryOptions {
            params: vec![Some("1".into())],
            fetch_size: None,
            lob_inline: false,
            ..QueryOptions::default()
        },
        JsonOptions::default(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(error.kind(), ErrorKind::Config);
    assert!(error.to_string().contains("2 parameters"), "{error}");

    let error = export_with(
        &db,
        "select $1::int",
        Format::Ndjson,
        QueryOptions {
            params: vec![Some("not a number".into())],
            fetch_size: None,
            lob_inline: false,
            ..QueryOptions::default()
        },
        JsonOptions::default(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(error.code(), Some("22P02"), "{error}");
}

#[tokio::test]
async fn an_error_after_rows_have_flowed_is_never_a_clean_end() {
    let db = TestDb::new();
    for fetch_size in [None, Some(100)] {
        let config: Config = db.url().parse().unwrap();
        let connection = Connection::connect(&config, &Meter::new()).await.unwrap();
        let mut stream = QueryStream::start(
            connection,
            "select 1 / (g - 5000) from generate_series(1, 10000) g",
            QueryOptions {
                params: Vec::new(),
                fetch_size,
                lob_inline: false,
                ..QueryOptions::default()
            },
        )
        .await
        .unwrap();
        let mut rows = 0;
        let error = loop {
            match stream.next_batch().await {
                Ok(Some(batch)) => rows += batch.num_rows(),
                Ok(None) => panic!("a failed query must not end cleanly"),
                Err(error) => break error,
            }
        };
        assert_eq!(error.code(), Some("22012"), "{error}");
        assert!(rows < 5000);
        // The session is usable again after the error.
        let mut connection = stream.into_connection().expect("idle after the error");
        let rows = connection.simple_query("select 42").await.unwrap();
        assert_eq!(rows, [[Some("42".to_string())]]);
    }
}

#[tokio::test]
async fn a_server_that_goes_away_mid_stream_is_an_error() {
    let db = TestDb::new();
    let config: Config = db.url().parse().unwrap();
    let connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let pid = connection.process_id();
    let mut stream = QueryStream::start(
        connection,
        "select g, repeat('x', 200) from generate_series(1, 100000000) g",
        QueryOptions::default(),
    )
    .await
    .unwrap();
    assert!(stream.next_batch().await.unwrap().is_some());
    db.execute(&format!("select pg_terminate_backend({pid})"));
    let error = loop {
        match stream.next_batch().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("a terminated query must not end cleanly"),
            Err(error) => break error,
        }
    };
    assert!(
        matches!(error.kind(), ErrorKind::Closed | ErrorKind::Database),
        "{error:?}"
    );
}

#[tokio::test]
async fn statements_without_rows_and_empty_queries_export_nothing() {
    let db = TestDb::new();
    db.execute("create table t (a int)");
    let inserted = export(&db, "insert into t values (1), (2)", Format::Ndjson).await;
    assert_eq!(inserted.rows, 0);
    assert!(inserted.bytes.is_empty());
    assert_eq!(db.query_text("select count(*) from t"), "2");
    let empty = export(&db, "", Format::Ndjson).await;
    assert!(empty.bytes.is_empty());
}

/// Asked for binary values, the stream marks exactly the types whose binary
/// result format is core's binary form and hands their bytes over as the
/// server sends them; everything else stays canonical text.
#[tokio::test]
async fn binary_values_come_big_endian_from_2000_and_only_for_their_types() {
    let db = TestDb::new();
    let config: Config = db.url().parse().unwrap();
    let connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let sql = "select 7::int2, -7::int4, 7::int8, 1.5::float4, true, date '2000-01-02', \
               timestamptz '2000-01-01 00:00:01+00', time '00:00:00.000002', \
               'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 12.5::numeric, 'text', \
               date 'infinity', null::int8";
    let options = QueryOptions {
        binary_values: true,
        ..QueryOptions::default()
    };
    let mut stream = QueryStream::start(connection, sql, options).await.unwrap();
    let encodings: Vec<Encoding> = stream
        .schema()
        .columns
        .iter()
        .map(|column| column.encoding)
        .collect();
    let binary = Encoding::Binary;
    let text = Encoding::Text;
    assert_eq!(
        encodings,
        [
            binary, binary, binary, binary, binary, binary, binary, binary, binary, text, text,
            binary, binary
        ]
    );
    let batch = stream.next_batch().await.unwrap().unwrap();
    let row = batch.row(0);
    assert_eq!(row.get(0), Some(&7i16.to_be_bytes()[..]));
    assert_eq!(row.get(1), Some(&(-7i32).to_be_bytes()[..]));
    assert_eq!(row.get(2), Some(&7i64.to_be_bytes()[..]));
    assert_eq!(row.get(3), Some(&1.5f32.to_be_bytes()[..]));
    assert_eq!(row.get(4), Some(&[1u8][..]));
    assert_eq!(row.get(5), Some(&1i32.to_be_bytes()[..]));
    assert_eq!(row.get(6), Some(&1_000_000i64.to_be_bytes()[..]));
    assert_eq!(row.get(7), Some(&2i64.to_be_bytes()[..]));
    assert_eq!(row.get(8).map(<[u8]>::len), Some(16));
    assert_eq!(row.get(9), Some(&b"12.5"[..]));
    assert_eq!(row.get(10), Some(&b"text"[..]));
    assert_eq!(row.get(11), Some(&i32::MAX.to_be_bytes()[..]));
    assert_eq!(row.get(12), None);
}
