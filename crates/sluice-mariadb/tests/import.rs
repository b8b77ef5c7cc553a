//! Bulk import into a real MariaDB: `LOAD DATA LOCAL` fed as a stream in a
//! constant number of round trips, every type back as it went out, bad values
//! and refused rows named by their input line with nothing committed, skip
//! mode's accounting, conflicts and INSERT batches. (The fallback for a
//! server that refuses local files is in `import_fallback.rs`.)

use sluice_core::load::{
    ImportInput, ImportOptions, ImportSummary, Method, OnConflict, OnError, Scope,
};
use sluice_core::{pump, Error, ErrorKind, Meter, MeterSnapshot, Progress, Rejected};
use sluice_formats::{CsvDecoder, CsvOptions, Format, JsonOptions, NdjsonDecoder, NdjsonOptions};
use sluice_mariadb::import::{describe_table, import_rows, locate_refused_row};
use sluice_mariadb::{Config, Connection, QueryOptions, QueryStream};
use sluice_testkit::TestMariaDb;

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

async fn load_with(
    url: &str,
    table: &str,
    data: &[u8],
    input: Input,
    options: ImportOptions,
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
    let mut reader = data;
    let summary = match input {
        Input::Ndjson => {
            let mut decoder = NdjsonDecoder::new(
                info.columns.clone(),
                NdjsonOptions {
                    defaulted: info.defaulted.clone(),
                    keep_records,
                    ..NdjsonOptions::default()
                },
            )?;
            let summary = import_rows(
                &mut connection,
                &info,
                &mut ImportInput::new(&mut decoder, &mut reader, &progress),
                &options,
                &mut sink,
                Scope::Own,
            )
            .await;
            match summary {
                Err(error)
                    if error.as_row_error().is_none() && error.kind() == ErrorKind::Database =>
                {
                    // As the CLI does: read the input again to find the row.
                    let mut again = data;
                    let mut decoder = NdjsonDecoder::new(
                        info.columns.clone(),
                        NdjsonOptions {
                            defaulted: info.defaulted.clone(),
                            ..NdjsonOptions::default()
                        },
                    )?;
                    let row = locate_refused_row(
                        &mut connection,
                        &info,
                        &mut decoder,
                        &mut again,
                        &options,
                    )
                    .await?;
                    return Err(match row {
                        Some(row) => error.at_row(row),
                        None => error,
                    });
                }
                other => other?,
            }
        }
        Input::Csv => {
            let mut decoder = CsvDecoder::new(
                info.columns.clone(),
                CsvOptions {
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
    db: &TestMariaDb,
    table: &str,
    data: &[u8],
    input: Input,
    options: ImportOptions,
) -> Result<Outcome, Error> {
    load_with(db.url(), table, data, input, options).await
}

async fn export(db: &TestMariaDb, sql: &str, format: Format) -> Vec<u8> {
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

fn count(db: &TestMariaDb, table: &str) -> u64 {
    db.query_text(&format!("select count(*) from {table}"))
        .parse()
        .unwrap()
}

const PAYMENTS: &str =
    "create table payments (id bigint primary key, amount decimal(12,2) not null \
                        check (amount >= 0), note text)";

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

#[tokio::test]
async fn a_load_costs_a_constant_number_of_round_trips() {
    let db = TestMariaDb::new();
    db.execute(PAYMENTS);
    let mut trips = Vec::new();
    for rows in [10, 100_000] {
        db.execute("truncate table payments");
        let outcome = load(
            &db,
            "payments",
            &ndjson_rows(rows),
            Input::Ndjson,
            ImportOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(outcome.summary.written, rows as u64);
        assert_eq!(count(&db, "payments"), rows as u64);
        trips.push(outcome.trips.round_trips);
    }
    // Describe, the load with the transaction's start, its data, the commit.
    assert_eq!(trips, [4, 4]);
}

const ALL_TYPES: &str = "
create table all_types (
  id int primary key, ti tinyint, bu bigint unsigned, flag tinyint(1), de decimal(30,10),
  fl float, db double, da date, dt datetime(6), ts timestamp(6) null, tm time(6), yr year,
  vc varchar(40), tx text, en enum('a','b c'), st set('x','y'), bn varbinary(8),
  js json, bt bit(10), g geometry
);
insert into all_types values
 (1, -128, 18446744073709551615, 1, -12345678901234567890.0123456789, 123456789,
  0.30000000000000004, '1000-01-01', '9999-12-31 23:59:59.999999', '1970-01-01 00:00:01.5',
  '-838:59:59', 1901, 'héllo \"x\"\\ttab 🦀', 'line\\nbreak\\\\', 'b c', 'x,y', x'00ff10',
  '{\"k\": [1, 2.5e10, null, true]}', b'1000000001', ST_GeomFromText('POINT(1.5 -2)')),
 (2, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
  null, null, null, null, null);
";

#[tokio::test]
async fn every_type_survives_export_import_export() {
    let db = TestMariaDb::new();
    db.execute(ALL_TYPES);
    db.execute("create table copy_of like all_types");
    for (format, input) in [(Format::Ndjson, Input::Ndjson), (Format::Csv, Input::Csv)] {
        db.execute("truncate table copy_of");
        let original = export(&db, "select * from all_types order by id", format).await;
        load(&db, "copy_of", &original, input, ImportOptions::default())
            .await
            .unwrap();
        let copied = export(&db, "select * from copy_of order by id", format).await;
        assert_eq!(
            String::from_utf8_lossy(&copied),
            String::from_utf8_lossy(&original)
        );
    }
}

#[tokio::test]
async fn a_bad_value_at_line_777777_of_a_million_commits_nothing() {
    let db = TestMariaDb::new();
    db.execute(PAYMENTS);
    let mut data = ndjson_rows(1_000_000);
    let line = b"{\"id\": 777777, \"amount\": \"777.25\", \"note\": \"row 777777\"}";
    let start = data
        .windows(line.len())
        .position(|window| window == line)
        .unwrap();
    data.splice(
        start..start + line.len(),
        b"{\"id\": 777777, \"amount\": \"-1\", \"note\": \"row 777777\"}"
            .iter()
            .copied(),
    );
    let error = load(
        &db,
        "payments",
        &data,
        Input::Ndjson,
        ImportOptions::default(),
    )
    .await
    .err()
    .expect("the check constraint refuses the row");
    let row = error.as_row_error().expect("the error names its line");
    assert_eq!(row.line, 777_777, "{error}");
    assert_eq!(count(&db, "payments"), 0);
}

#[tokio::test]
async fn refused_rows_name_their_line_and_column() {
    let db = TestMariaDb::new();
    db.execute(PAYMENTS);
    db.execute(
        "create table parents (id int primary key); insert into parents values (1);
                create table children (id int primary key, parent int not null,
                  foreign key (parent) references parents (id)) engine=InnoDB;",
    );
    // A value that does not fit the column.
    let data = b"{\"id\": 1, \"amount\": \"1\"}\n{\"id\": 2, \"amount\": \"12345678901234\"}\n";
    let error = load(
        &db,
        "payments",
        data,
        Input::Ndjson,
        ImportOptions::default(),
    )
    .await
    .err()
    .unwrap();
    let row = error.as_row_error().unwrap();
    assert_eq!(
        (row.line, row.column.as_deref()),
        (2, Some("amount")),
        "{error}"
    );
    // NULL where the column refuses it.
    let data = b"{\"id\": 1, \"amount\": \"1\"}\n{\"id\": 2, \"amount\": null}\n";
    let error = load(
        &db,
        "payments",
        data,
        Input::Ndjson,
        ImportOptions::default(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(error.as_row_error().map(|row| row.line), Some(2), "{error}");
    // A duplicate key: the server names no row; reading the input again finds it.
    let data = b"{\"id\": 1, \"amount\": \"1\"}\n{\"id\": 2, \"amount\": \"2\"}\n{\"id\": 1, \"amount\": \"3\"}\n";
    let error = load(
        &db,
        "payments",
        data,
        Input::Ndjson,
        ImportOptions::default(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(error.as_row_error().map(|row| row.line), Some(3), "{error}");
    assert_eq!(error.as_db_error().unwrap().vendor_code, Some(1062));
    // A foreign key.
    let data = b"{\"id\": 1, \"parent\": 1}\n{\"id\": 2, \"parent\": 9}\n";
    let error = load(
        &db,
        "children",
        data,
        Input::Ndjson,
        ImportOptions::default(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(error.as_row_error().map(|row| row.line), Some(2), "{error}");
    assert_eq!(count(&db, "payments") + count(&db, "children"), 0);
}

#[tokio::test]
async fn a_value_its_column_would_round_or_cut_is_refused_even_without_select() {
    // MariaDB itself would store 0.125 as 0.13 and 'ab  ' as 'ab ' with only a
    // note. (Its own refusals, of other excess characters or too many digits
    // before the point, are warnings an import fails on already.)
    let db = TestMariaDb::new();
    db.execute(
        "create table limited (id int primary key, amount decimal(5,2), code varchar(3), letters char(2))",
    );
    let user = format!("{}_writer", db.name());
    db.execute(&format!(
        "create user '{user}'@'%' identified by 'pw'; create user '{user}'@'localhost' identified by 'pw';
         grant insert on {name}.limited to '{user}'@'%'; grant insert on {name}.limited to '{user}'@'localhost';",
        name = db.name()
    ));
    let address = db.url().split('@').nth(1).unwrap();
    let writer = format!("mysql://{user}:pw@{address}");
    let cases: [(&[u8], u64, &str, &str); 3] = [
        (b"id,amount\n1,0.12\n2,0.125\n", 3, "amount", "0.125 has more than 2 digits after the point: the column's type (decimal(5,2)) would round it"),
        (b"id,amount\n1,-3\n2,5e-3\n", 3, "amount", "5e-3 has more than 2 digits"),
        (b"id,code\n1,abc\n2,ab  \n", 3, "code", "the value has 4 characters, more than the column's type (varchar(3)) holds: its trailing spaces would be cut"),
    ];
    for (data, line, column, words) in cases {
        let error = load_with(
            &writer,
            "limited",
            data,
            Input::Csv,
            ImportOptions::default(),
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
    let fits =
        "id,amount,code,letters\n1,0.12,abc,ab\n2,-999.990,\u{e4}\u{f6}\u{fc},a\n3,5e-1,ab ,b \n";
    load_with(
        &writer,
        "limited",
        fits.as_bytes(),
        Input::Csv,
        ImportOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        db.query_text(
            "select group_concat(concat_ws('|', amount, code, letters) order by id) from limited"
        ),
        "0.12|abc|ab,-999.99|\u{e4}\u{f6}\u{fc}|a,0.50|ab |b"
    );
    db.execute(&format!(
        "drop user '{user}'@'%'; drop user '{user}'@'localhost';"
    ));
}

#[tokio::test]
async fn skip_mode_commits_good_rows_and_accounts_for_every_record() {
    let db = TestMariaDb::new();
    db.execute(PAYMENTS);
    let data = b"{\"id\": 1, \"amount\": \"1\"}\n\
                 {\"id\": 2, \"amount\": \"-5\"}\n\
                 not json\n\
                 {\"id\": 1, \"amount\": \"2\"}\n\
                 {\"id\": 4, \"amount\": \"4\"}\n";
    let options = ImportOptions {
        on_error: OnError::Skip,
        chunk_rows: 2,
        ..ImportOptions::default()
    };
    let outcome = load(&db, "payments", data, Input::Ndjson, options)
        .await
        .unwrap();
    assert_eq!(outcome.summary.records, 5);
    assert_eq!(outcome.summary.accepted, 2);
    assert_eq!(outcome.summary.rejected, 3);
    let lines: Vec<u64> = outcome
        .rejected
        .iter()
        .map(|rejected| rejected.error.line)
        .collect();
    assert_eq!(lines, [3, 2, 4]);
    assert_eq!(
        outcome.rejected[1].record,
        b"{\"id\": 2, \"amount\": \"-5\"}"
    );
    assert_eq!(
        db.query_text("select group_concat(id order by id) from payments"),
        "1,4"
    );
}

#[tokio::test]
async fn conflicts_can_be_ignored_or_update_the_existing_rows() {
    let db = TestMariaDb::new();
    db.execute(PAYMENTS);
    db.execute("insert into payments values (1, 1.00, 'old'), (2, 2.00, 'old')");
    let data = b"{\"id\": 2, \"amount\": \"20\", \"note\": \"first\"}\n\
                 {\"id\": 3, \"amount\": \"30\", \"note\": \"new\"}\n\
                 {\"id\": 2, \"amount\": \"21\", \"note\": \"last\"}\n";
    let ignore = ImportOptions {
        on_conflict: OnConflict::Ignore,
        ..ImportOptions::default()
    };
    let outcome = load(&db, "payments", data, Input::Ndjson, ignore)
        .await
        .unwrap();
    assert_eq!(outcome.summary.written, 1);
    assert_eq!(
        db.query_text("select group_concat(concat(id, ':', note) order by id) from payments"),
        "1:old,2:old,3:new"
    );
    let update = ImportOptions {
        on_conflict: OnConflict::Update,
        key: vec!["id".into()],
        ..ImportOptions::default()
    };
    let outcome = load(&db, "payments", data, Input::Ndjson, update)
        .await
        .unwrap();
    // Row 2 changed (its last record wins), row 3 as it was.
    assert_eq!(outcome.summary.written, 1);
    assert_eq!(
        db.query_text(
            "select group_concat(concat(id, ':', note, ':', amount) order by id) from payments"
        ),
        "1:old:1.00,2:last:21.00,3:new:30.00"
    );
}

#[tokio::test]
async fn insert_batches_cost_a_round_trip_each() {
    let db = TestMariaDb::new();
    db.execute(PAYMENTS);
    let options = ImportOptions {
        method: Method::Insert { rows: 100 },
        ..ImportOptions::default()
    };
    let outcome = load(&db, "payments", &ndjson_rows(1000), Input::Ndjson, options)
        .await
        .unwrap();
    assert_eq!(count(&db, "payments"), 1000);
    // Describe; the prepare, with the transaction's start; ten INSERTs, one
    // round trip each; the commit.
    assert_eq!(outcome.trips.round_trips, 1 + 1 + 10 + 1);
    assert_eq!(outcome.summary.written, 1000);
}

#[tokio::test]
async fn a_dry_run_checks_everything_and_keeps_nothing() {
    let db = TestMariaDb::new();
    db.execute(PAYMENTS);
    let options = ImportOptions {
        dry_run: true,
        ..ImportOptions::default()
    };
    let outcome = load(&db, "payments", &ndjson_rows(100), Input::Ndjson, options)
        .await
        .unwrap();
    assert_eq!(outcome.summary.accepted, 100);
    assert_eq!(count(&db, "payments"), 0);
}

#[tokio::test]
async fn unknown_tables_are_clear_errors() {
    let db = TestMariaDb::new();
    let error = load(
        &db,
        "missing",
        b"{}\n",
        Input::Ndjson,
        ImportOptions::default(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(error.kind(), ErrorKind::Config);
    assert!(
        error.to_string().contains("\"missing\" does not exist"),
        "{error}"
    );
}
