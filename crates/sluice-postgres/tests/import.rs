//! Bulk import against a real PostgreSQL: round trips of data and of the network,
//! exact errors, nothing half-written.

use std::pin::Pin;
use std::task::{Context, Poll};

use sluice_core::load::{
    ImportInput, ImportOptions, ImportSummary, Method, OnConflict, OnError, Scope,
};
use sluice_core::{pump, Error, ErrorKind, Meter, MeterSnapshot, Progress, Rejected};
use sluice_formats::{CsvDecoder, CsvOptions, Format, JsonOptions, NdjsonDecoder, NdjsonOptions};
use sluice_postgres::{
    describe_table, import_rows, locate_refused_row, Config, Connection, QueryOptions, QueryStream,
};
use sluice_testkit::TestDb;
use tokio::io::{AsyncRead, ReadBuf};

mod common;
use common::ALL_TYPES;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Input {
    Ndjson,
    Csv,
}

struct Outcome {
    summary: ImportSummary,
    rejected: Vec<Rejected>,
    trips: MeterSnapshot,
}

async fn load_from<R: AsyncRead + Unpin + Send>(
    url: &str,
    table: &str,
    mut reader: R,
    input: Input,
    options: ImportOptions,
    max_line_bytes: usize,
) -> Result<Outcome, Error> {
    let config: Config = url.parse()?;
    let meter = Meter::new();
    let mut connection = Connection::connect(&config, &meter).await?;
    let before = meter.snapshot();
    let info = describe_table(&mut connection, table).await?;
    let mut rejected = Vec::new();
    let mut sink = |record: &Rejected| -> Result<(), Error> {
        rejected.push(record.clone());
        Ok(())
    };
    let keep_records = options.on_error == OnError::Skip;
    let progress = Progress::new();
    let summary = match input {
        Input::Ndjson => {
            let mut decoder = NdjsonDecoder::new(
                info.columns.clone(),
                NdjsonOptions {
                    defaulted: info.defaulted.clone(),
                    max_line_bytes,
                    keep_records,
                    ..NdjsonOptions::default()
                },
            )?;
            import_rows(
                &mut connection,
                &info,
                &mut ImportInput::new(&mut decoder, &mut reader, &progress),
                &options,
                &mut sink,
                Scope::Own,
            )
            .await?
        }
        Input::Csv => {
            let mut decoder = CsvDecoder::new(
                info.columns.clone(),
                CsvOptions {
                    max_record_bytes: max_line_bytes,
                    keep_records,
                    ..CsvOptions::default()
                },
            );
            import_rows(
                &mut connection,
                &info,
                &mut ImportInput::new(&mut decoder, &mut reader, &progress),
                &options,
                &mut sink,
                Scope::Own,
            )
            .await?
        }
    };
    assert_eq!(summary.accepted + summary.rejected, summary.records);
    Ok(Outcome {
        summary,
        rejected,
        trips: meter.snapshot() - before,
    })
}

async fn load(
    db: &TestDb,
    table: &str,
    data: &[u8],
    input: Input,
    options: ImportOptions,
) -> Result<Outcome, Error> {
    load_from(db.url(), table, data, input, options, 64 * 1024 * 1024).await
}

async fn export(db: &TestDb, sql: &str, format: Format) -> Vec<u8> {
    let config: Config = db.url().parse().unwrap();
    let connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let mut stream = QueryStream::start(connection, sql, QueryOptions::default())
        .await
        .unwrap();
    let mut encoder = format.encoder(JsonOptions::default());
    let mut bytes = Vec::new();
    pump(&mut stream, &mut encoder, &mut bytes, &Progress::new())
        .await
        .unwrap();
    bytes
}

fn count(db: &TestDb, table: &str) -> u64 {
    db.query_text(&format!("select count(*) from {table}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn every_type_survives_export_import_export() {
    let db = TestDb::new();
    db.execute(ALL_TYPES);
    for (format, input) in [(Format::Ndjson, Input::Ndjson), (Format::Csv, Input::Csv)] {
        db.execute("drop table if exists copy_of; create table copy_of (like all_types)");
        let first = export(&db, "select * from all_types order by id", format).await;
        let outcome = load(&db, "copy_of", &first, input, ImportOptions::default())
            .await
            .unwrap();
        assert_eq!(outcome.summary.accepted, 4);
        let second = export(&db, "select * from copy_of order by id", format).await;
        let name = if input == Input::Csv { "CSV" } else { "NDJSON" };
        assert_eq!(
            String::from_utf8_lossy(&first),
            String::from_utf8_lossy(&second),
            "{name} round trip"
        );
        assert_eq!(
            rows_differing(&db, "all_types", "copy_of", input),
            "0|0",
            "{name}"
        );
    }
}

/// PostgreSQL's own verdict on an import, independent of sluice's export: how many
/// rows of `original` have no equal in `copy`, and the reverse (`except all`, so
/// duplicates count). CSV must keep every value's text; NDJSON keeps every value but
/// not the whitespace between a `json` value's tokens (its line breaks become
/// spaces so that one row stays one line), so its rows are compared as `jsonb`.
fn rows_differing(db: &TestDb, original: &str, copy: &str, input: Input) -> String {
    let row = match input {
        Input::Csv => "row_to_json(t)::text",
        Input::Ndjson => "row_to_json(t)::jsonb",
    };
    db.query_text(&format!(
        "select (select count(*) from (select {row} from {original} t \
                                       except all select {row} from {copy} t) missing), \
                (select count(*) from (select {row} from {copy} t \
                                       except all select {row} from {original} t) extra)"
    ))
}

fn ndjson_rows(rows: usize) -> Vec<u8> {
    let mut data = Vec::new();
    for id in 1..=rows {
        data.extend_from_slice(
            format!(
                "{{\"id\": {id}, \"amount\": \"{}.25\", \"note\": \"row {id}\"}}\n",
                id % 1000
            )
            .as_bytes(),
        );
    }
    data
}

const PAYMENTS: &str =
    "create table payments (id bigint primary key, amount numeric(12,2) not null \
                        check (amount >= 0), note text)";

#[tokio::test]
async fn copy_costs_a_constant_number_of_round_trips() {
    let db = TestDb::new();
    db.execute(PAYMENTS);
    let small = load(
        &db,
        "payments",
        &ndjson_rows(1_000),
        Input::Ndjson,
        ImportOptions::default(),
    )
    .await
    .unwrap();
    db.execute("truncate payments");
    let large = load(
        &db,
        "payments",
        &ndjson_rows(200_000),
        Input::Ndjson,
        ImportOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(large.summary.accepted, 200_000);
    assert_eq!(count(&db, "payments"), 200_000);
    assert_eq!(small.trips.round_trips, large.trips.round_trips);
    // README: 5 with connecting; `trips` starts after the connection's one.
    assert_eq!(large.trips.round_trips, 4, "{:?}", large.trips);
}

#[tokio::test]
async fn insert_batches_cost_a_round_trip_each() {
    let db = TestDb::new();
    db.execute(PAYMENTS);
    let batches = load(
        &db,
        "payments",
        &ndjson_rows(1_000),
        Input::Ndjson,
        ImportOptions {
            method: Method::Insert { rows: 100 },
            ..ImportOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(count(&db, "payments"), 1_000);
    assert!(
        (10..=20).contains(&batches.trips.round_trips),
        "{:?}",
        batches.trips
    );
    db.execute("truncate payments");
    let row_by_row = load(
        &db,
        "payments",
        &ndjson_rows(250),
        Input::Ndjson,
        ImportOptions {
            method: Method::Insert { rows: 1 },
            ..ImportOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(row_by_row.summary.written, 250);
    assert!(
        row_by_row.trips.round_trips >= 250,
        "{:?}",
        row_by_row.trips
    );
}

/// Loads `data` in abort mode, expects failure, and checks nothing was committed.
async fn refused(db: &TestDb, data: &[u8], input: Input, max_line_bytes: usize) -> Error {
    let error = load_from(
        db.url(),
        "payments",
        data,
        input,
        ImportOptions::default(),
        max_line_bytes,
    )
    .await
    .err()
    .expect("the import must fail");
    assert_eq!(count(db, "payments"), 0, "nothing committed after: {error}");
    error
}

#[tokio::test]
async fn bad_input_names_line_and_column_and_commits_nothing() {
    let db = TestDb::new();
    db.execute(PAYMENTS);
    db.execute("create table parents (id int primary key); insert into parents values (1);");
    let good = |id: u32| format!("{{\"id\": {id}, \"amount\": 1, \"note\": \"ok\"}}\n");
    let with = |line: &str| -> Vec<u8> {
        let mut data = String::new();
        for id in 1..=4 {
            data.push_str(&good(id));
        }
        data.push_str(line);
        data.push('\n');
        data.push_str(&good(99));
        data.into_bytes()
    };

    let error = refused(
        &db,
        &with("{\"id\": 5, \"amount\": "),
        Input::Ndjson,
        1 << 20,
    )
    .await;
    assert_eq!(error.kind(), ErrorKind::Data);
    assert_eq!(error.as_row_error().unwrap().line, 5);

    let error = refused(
        &db,
        &with("{\"id\": 5, \"amount\": \"12,5\"}"),
        Input::Ndjson,
        1 << 20,
    )
    .await;
    let row = error.as_row_error().expect("a row error");
    assert_eq!(
        (row.line, row.column.as_deref()),
        (5, Some("amount")),
        "{error}"
    );
    assert_eq!(error.code(), Some("22P02"));

    let error = refused(
        &db,
        &with("{\"id\": 5, \"amount\": null}"),
        Input::Ndjson,
        1 << 20,
    )
    .await;
    assert_eq!(error.code(), Some("23502"), "{error}");
    assert_eq!(error.as_row_error().unwrap().line, 5);

    let error = refused(
        &db,
        &with("{\"id\": 2, \"amount\": 3}"),
        Input::Ndjson,
        1 << 20,
    )
    .await;
    assert_eq!(error.code(), Some("23505"), "{error}");
    assert_eq!(error.as_row_error().unwrap().line, 5);
    assert!(
        error.to_string().contains("Key (id)=(2) already exists"),
        "{error}"
    );

    let error = refused(
        &db,
        &with("{\"id\": 5, \"amount\": -1}"),
        Input::Ndjson,
        1 << 20,
    )
    .await;
    assert_eq!(error.code(), Some("23514"), "{error}");
    assert_eq!(error.as_row_error().unwrap().line, 5);

    let long = format!(
        "{{\"id\": 5, \"amount\": 1, \"note\": \"{}\"}}",
        "x".repeat(5000)
    );
    let error = refused(&db, &with(&long), Input::Ndjson, 1024).await;
    assert_eq!(error.kind(), ErrorKind::Data);
    assert_eq!(error.as_row_error().unwrap().line, 5);
    assert!(
        error.to_string().contains("longer than the maximum"),
        "{error}"
    );

    let mut invalid = with("{\"id\": 5, \"amount\": 1, \"note\": \"\u{1}\"}");
    let at = invalid.iter().position(|&b| b == 1).unwrap();
    invalid[at] = 0xff;
    let error = refused(&db, &invalid, Input::Ndjson, 1 << 20).await;
    assert_eq!(error.kind(), ErrorKind::Data);
    assert_eq!(error.as_row_error().unwrap().line, 5);

    let error = refused(
        &db,
        b"id,amount,note\n1,1,ok\n2,1,\xff\xfe\n",
        Input::Csv,
        1 << 20,
    )
    .await;
    assert_eq!(error.as_row_error().unwrap().line, 3, "{error}");
    assert!(error.to_string().contains("UTF-8"), "{error}");

    let error = refused(&db, b"id,amount\n1,1\n2,x\n", Input::Csv, 1 << 20).await;
    assert_eq!(error.as_row_error().unwrap().line, 3, "{error}");
}

const LIMITED: &str = "create table limited (id int primary key, amount numeric(5,2), \
                       code varchar(3), letters char(2))";

#[tokio::test]
async fn a_value_its_column_would_round_or_cut_is_refused_even_without_select() {
    // The server itself would store 0.125 as 0.13 and 'ab  ' as 'ab ', silently.
    let db = TestDb::new();
    db.execute(LIMITED);
    let writer = db.create_role("writer");
    db.execute(&format!("grant insert on limited to {}", writer.name));
    let cases: [(&[u8], Input, u64, &str, &str); 5] = [
        (b"id,amount\n1,0.12\n2,0.125\n", Input::Csv, 3, "amount", "0.125 has more than 2 digits after the point: the column's type (numeric(5,2)) would round it"),
        (b"{\"id\": 1, \"amount\": 1.005e0}\n", Input::Ndjson, 1, "amount", "would round it"),
        (b"id,amount\n1,-3\n2,5e-3\n", Input::Csv, 3, "amount", "5e-3 has more than 2 digits"),
        (b"id,code\n1,abc\n2,ab  \n", Input::Csv, 3, "code", "the value has 4 characters, more than the column's type (varchar(3)) holds: its trailing spaces would be cut"),
        (b"{\"id\": 1, \"code\": \"\\u00e4\\u00f6\\u00fc  \"}\n", Input::Ndjson, 1, "code", "5 characters"),
    ];
    // As a role that may insert but not select, whose describe reads the catalog.
    for (data, input, line, column, words) in cases {
        let error = load_from(
            &writer.url,
            "limited",
            data,
            input,
            ImportOptions::default(),
            1 << 20,
        )
        .await
        .err()
        .expect("the import must fail");
        assert_eq!(error.kind(), ErrorKind::Data, "{error}");
        let row = error.as_row_error().expect("a row error");
        assert_eq!(
            (row.line, row.column.as_deref()),
            (line, Some(column)),
            "{error}"
        );
        assert!(row.reason.contains(words), "{error}");
        assert_eq!(count(&db, "limited"), 0, "nothing committed after: {error}");
    }
    // What the server refuses itself stays its error: other characters past
    // the length, too many digits before the point.
    for (data, code) in [
        (&b"id,code\n1,abcd\n"[..], "22001"),
        (b"id,amount\n1,1000\n", "22003"),
    ] {
        let error = load_from(
            &writer.url,
            "limited",
            data,
            Input::Csv,
            ImportOptions::default(),
            1 << 20,
        )
        .await
        .err()
        .expect("the import must fail");
        assert_eq!(error.code(), Some(code), "{error}");
        assert_eq!(error.as_row_error().map(|row| row.line), Some(2), "{error}");
    }
    let fits =
        "id,amount,code,letters\n1,0.12,abc,ab\n2,-999.990,\u{e4}\u{f6}\u{fc},a \n3,5e-1,ab ,b\n";
    load_from(
        &writer.url,
        "limited",
        fits.as_bytes(),
        Input::Csv,
        ImportOptions::default(),
        1 << 20,
    )
    .await
    .unwrap();
    assert_eq!(
        db.query_text("select string_agg(concat_ws('|', amount, code, letters), ',' order by id) from limited"),
        "0.12|abc|ab,-999.99|\u{e4}\u{f6}\u{fc}|a ,0.50|ab |b "
    );

    // Skipping bad rows rejects such a row and keeps the others.
    db.execute("truncate limited");
    let outcome = load(
        &db,
        "limited",
        b"id,amount\n1,0.1\n2,0.125\n3,0.3\n4,1e-3\n",
        Input::Csv,
        ImportOptions {
            on_error: OnError::Skip,
            ..ImportOptions::default()
        },
    )
    .await
    .unwrap();
    let rejected: Vec<(u64, &[u8])> = outcome
        .rejected
        .iter()
        .map(|rejected| (rejected.error.line, rejected.record.as_slice()))
        .collect();
    assert_eq!(rejected, [(3, &b"2,0.125"[..]), (5, &b"4,1e-3"[..])]);
    assert_eq!(
        db.query_text("select string_agg(amount::text, ',' order by id) from limited"),
        "0.10,0.30"
    );
}

#[tokio::test]
async fn a_foreign_key_violation_is_traced_back_to_its_line() {
    let db = TestDb::new();
    db.execute(
        "create table parents (id int primary key); insert into parents values (1), (2);
         create table children (id int primary key, parent int references parents (id));",
    );
    let data = b"id,parent\n1,1\n2,2\n3,9\n4,1\n";
    let error = load(&db, "children", data, Input::Csv, ImportOptions::default())
        .await
        .err()
        .unwrap();
    assert_eq!(error.code(), Some("23503"));
    assert_eq!(count(&db, "children"), 0);
    // The server checks foreign keys after the last row and cannot say which one;
    // reading the input again finds it.
    let config: Config = db.url().parse().unwrap();
    let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let info = describe_table(&mut connection, "children").await.unwrap();
    let mut decoder = CsvDecoder::new(info.columns.clone(), CsvOptions::default());
    let mut reader = &data[..];
    let row = locate_refused_row(
        &mut connection,
        &info,
        &mut decoder,
        &mut reader,
        &ImportOptions::default(),
    )
    .await
    .unwrap()
    .expect("the refused row");
    assert_eq!(row.line, 4);
    assert!(row.reason.contains("(parent)=(9)"), "{}", row.reason);
    assert_eq!(count(&db, "children"), 0, "locating keeps nothing");
}

/// Yields its data, then fails: an upload cut off mid-body.
struct CutOff {
    data: Vec<u8>,
    sent: bool,
}

impl AsyncRead for CutOff {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.sent {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "client went away",
            )));
        }
        let length = this.data.len().min(buffer.remaining());
        buffer.put_slice(&this.data[..length]);
        this.data.drain(..length);
        this.sent = this.data.is_empty();
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn an_input_cut_off_midway_commits_nothing() {
    let db = TestDb::new();
    db.execute(PAYMENTS);
    let reader = CutOff {
        data: ndjson_rows(50_000),
        sent: false,
    };
    let error = load_from(
        db.url(),
        "payments",
        reader,
        Input::Ndjson,
        ImportOptions::default(),
        1 << 20,
    )
    .await
    .err()
    .unwrap();
    assert_eq!(error.kind(), ErrorKind::Io, "{error}");
    assert_eq!(count(&db, "payments"), 0);
}

#[tokio::test]
async fn skip_mode_commits_good_rows_and_accounts_for_every_record() {
    let db = TestDb::new();
    db.execute(
        "create table parents (id int primary key); insert into parents values (1);
         create table items (id int primary key, parent int references parents (id),
                             qty int not null check (qty > 0));",
    );
    let mut data = String::new();
    let mut bad_lines = Vec::new();
    for id in 1..=3_000u32 {
        let line = match id % 500 {
            7 => format!("{{\"id\": {id}, \"parent\": 1, \"qty\": 0}}"),
            11 => format!("{{\"id\": {id}, \"parent\": 42, \"qty\": 1}}"),
            13 => format!("{{\"id\": {id}, \"parent\": 1, \"qty\": \"many\"}}"),
            17 => "{not json".to_owned(),
            19 => format!("{{\"id\": {}, \"parent\": 1, \"qty\": 1}}", id - 1),
            _ => format!("{{\"id\": {id}, \"parent\": 1, \"qty\": 1}}"),
        };
        if [7, 11, 13, 17, 19].contains(&(id % 500)) {
            bad_lines.push(u64::from(id));
        }
        data.push_str(&line);
        data.push('\n');
    }
    let outcome = load(
        &db,
        "items",
        data.as_bytes(),
        Input::Ndjson,
        ImportOptions {
            on_error: OnError::Skip,
            chunk_rows: 1_000,
            ..ImportOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(outcome.summary.records, 3_000);
    assert_eq!(outcome.summary.rejected, bad_lines.len() as u64);
    assert_eq!(count(&db, "items"), 3_000 - bad_lines.len() as u64);
    let mut lines: Vec<u64> = outcome.rejected.iter().map(|r| r.error.line).collect();
    lines.sort_unstable();
    assert_eq!(lines, bad_lines);
    let foreign = outcome
        .rejected
        .iter()
        .find(|r| r.error.line == 11)
        .unwrap();
    assert!(
        foreign.error.reason.contains("foreign key"),
        "{:?}",
        foreign.error
    );
    assert_eq!(foreign.record, b"{\"id\": 11, \"parent\": 42, \"qty\": 1}");
}

#[tokio::test]
async fn conflicts_can_be_ignored_or_update_the_existing_rows() {
    let db = TestDb::new();
    db.execute(PAYMENTS);
    db.execute("insert into payments values (1, 1, 'old'), (2, 2, 'old')");
    let data = b"{\"id\": 2, \"amount\": 20, \"note\": \"new\"}\n{\"id\": 3, \"amount\": 3, \"note\": \"new\"}\n{\"id\": 3, \"amount\": 30, \"note\": \"newer\"}\n";
    let ignored = load(
        &db,
        "payments",
        data,
        Input::Ndjson,
        ImportOptions {
            on_conflict: OnConflict::Ignore,
            ..ImportOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(ignored.summary.written, 1);
    assert_eq!(
        db.query_text("select string_agg(id || ':' || note, ',' order by id) from payments"),
        "1:old,2:old,3:new"
    );
    let updated = load(
        &db,
        "payments",
        data,
        Input::Ndjson,
        ImportOptions {
            on_conflict: OnConflict::Update,
            key: vec!["id".into()],
            ..ImportOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(updated.summary.written, 2);
    assert_eq!(
        db.query_text(
            "select string_agg(id || ':' || amount || ':' || note, ',' order by id) from payments"
        ),
        "1:1.00:old,2:20.00:new,3:30.00:newer"
    );
}

#[tokio::test]
async fn concurrent_imports_into_one_table_succeed_or_fail_cleanly() {
    let db = TestDb::new();
    db.execute(PAYMENTS);
    let first = ndjson_rows(20_000);
    let second: Vec<u8> = String::from_utf8(ndjson_rows(20_000))
        .unwrap()
        .lines()
        .map(|line| line.replacen("{\"id\": ", "{\"id\": 100000", 1) + "\n")
        .collect::<String>()
        .into_bytes();
    let (a, b) = tokio::join!(
        load(
            &db,
            "payments",
            &first,
            Input::Ndjson,
            ImportOptions::default()
        ),
        load(
            &db,
            "payments",
            &second,
            Input::Ndjson,
            ImportOptions::default()
        ),
    );
    assert_eq!(a.unwrap().summary.accepted, 20_000);
    assert_eq!(b.unwrap().summary.accepted, 20_000);
    assert_eq!(count(&db, "payments"), 40_000);
    // The same keys again, twice at once: both fail on the duplicates and keep nothing.
    let (a, b) = tokio::join!(
        load(
            &db,
            "payments",
            &first,
            Input::Ndjson,
            ImportOptions::default()
        ),
        load(
            &db,
            "payments",
            &first,
            Input::Ndjson,
            ImportOptions::default()
        ),
    );
    assert_eq!(a.err().unwrap().code(), Some("23505"));
    assert_eq!(b.err().unwrap().code(), Some("23505"));
    assert_eq!(count(&db, "payments"), 40_000);
}

#[tokio::test]
async fn a_dry_run_checks_everything_and_keeps_nothing() {
    let db = TestDb::new();
    db.execute(PAYMENTS);
    let outcome = load(
        &db,
        "payments",
        &ndjson_rows(100),
        Input::Ndjson,
        ImportOptions {
            dry_run: true,
            ..ImportOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(outcome.summary.accepted, 100);
    assert_eq!(count(&db, "payments"), 0);
}

#[tokio::test]
async fn unknown_tables_and_keys_are_clear_errors() {
    let db = TestDb::new();
    db.execute(PAYMENTS);
    let error = load(
        &db,
        "nope",
        b"{}\n",
        Input::Ndjson,
        ImportOptions::default(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(error.kind(), ErrorKind::Config);
    assert!(
        error.to_string().contains("\"nope\" does not exist"),
        "{error}"
    );
    let error = load(
        &db,
        "payments",
        b"{\"id\": 1, \"amount\": 1, \"colour\": \"red\"}\n",
        Input::Ndjson,
        ImportOptions::default(),
    )
    .await
    .err()
    .unwrap();
    // The library names no option: the CLI and the server each add their own.
    assert_eq!(
        error.to_string(),
        "line 1, column colour: the table has no such column"
    );
    assert_eq!(
        error.as_row_error().and_then(|row| row.fault),
        Some(sluice_core::RowFault::UnknownColumn)
    );
}
