//! The book's type tables (`docs/src/type-tables.md`), made by running sluice:
//! a table with a column per sample value is created in each database, then
//! exported as NDJSON, CSV and an Arrow stream, and each column's JSON text,
//! CSV field and Arrow type is written into its row of the page. So the page
//! shows what the code does, and this test fails when the code and the page
//! part (`SLUICE_BLESS=1` rewrites it).

mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use arrow_schema::Field;
use serde_json::value::RawValue;
use sluice_testkit::{TestDb, TestMariaDb};
use support::{assert_exit, export};

/// One sample: the column's declared type and the SQL literal of its value.
struct Sample {
    ty: &'static str,
    literal: &'static str,
}

const fn sample(ty: &'static str, literal: &'static str) -> Sample {
    Sample { ty, literal }
}

const POSTGRES_SETUP: &str = "create type mood as enum ('sad', 'ok', 'happy');
     create type pair as (id int, label text);";

const POSTGRES: &[Sample] = &[
    sample("bool", "true"),
    sample("int2", "32767"),
    sample("int4", "-2147483648"),
    sample("int8", "9007199254740993"),
    sample("numeric(12,2)", "1234.5"),
    sample("numeric", "123456789012345678901234567890.123"),
    sample("numeric", "'NaN'"),
    sample("float4", "1.1"),
    sample("float8", "0.1"),
    sample("float8", "'-Infinity'"),
    sample("text", "'say \"hi\", then go'"),
    sample("varchar(10)", "'abc'"),
    sample("char(4)", "'ab'"),
    sample("mood", "'happy'"),
    sample("uuid", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"),
    sample("bytea", "'\\x00ff'"),
    sample("json", "'{\"a\": [1, 2.50]}'"),
    sample("jsonb", "'{\"a\": [1, 2.50]}'"),
    sample("date", "'2024-02-29'"),
    sample("date", "'0044-03-15 BC'"),
    sample("date", "'infinity'"),
    sample("time", "'13:14:15.5'"),
    sample("timetz", "'13:14:15+05:30'"),
    sample("timestamp", "'2024-02-29 13:14:15.123456'"),
    sample("timestamptz", "'2024-02-29 13:14:15.5+05:30'"),
    sample("timestamptz", "'-infinity'"),
    sample("interval", "'1 year 2 mons 3 days 04:05:06.789'"),
    sample("int4[]", "'{1,NULL,3}'"),
    sample("int4[]", "'{{1,2},{3,4}}'"),
    sample("text[]", "'{\"a b\",c}'"),
    sample("numeric(5,2)[]", "'{1.5,NULL}'"),
    sample("pair", "row(7, 'x')"),
    sample("inet", "'192.168.0.1/24'"),
    sample("bit(4)", "B'1010'"),
    sample("int4range", "'[1,5)'"),
    sample("point", "'(1.5,-2)'"),
];

const MARIADB: &[Sample] = &[
    sample("TINYINT", "-128"),
    sample("TINYINT(1)", "TRUE"),
    sample("SMALLINT UNSIGNED", "65535"),
    sample("MEDIUMINT", "8388607"),
    sample("INT", "-2147483648"),
    sample("BIGINT", "9007199254740993"),
    sample("BIGINT UNSIGNED", "18446744073709551615"),
    sample("YEAR", "2024"),
    sample("DECIMAL(12,2)", "1234.5"),
    sample("FLOAT", "1.1"),
    sample("DOUBLE", "0.1"),
    sample("CHAR(4)", "'ab'"),
    sample("VARCHAR(20)", "'say \"hi\", then go'"),
    sample("TEXT", "'héllo'"),
    sample("ENUM('sad','happy')", "'happy'"),
    sample("SET('a','b','c')", "'a,c'"),
    sample("BINARY(2)", "X'00FF'"),
    sample("VARBINARY(8)", "X'00FF'"),
    sample("BLOB", "X'00FF'"),
    sample("BIT(4)", "b'0101'"),
    sample("JSON", "'{\"a\": [1, 2.50]}'"),
    sample("DATE", "'2024-02-29'"),
    sample("DATETIME(6)", "'2024-02-29 13:14:15.123456'"),
    sample("TIMESTAMP(6)", "'2024-02-29 13:14:15.5'"),
    sample("TIME", "'-838:59:59'"),
    sample("POINT", "POINT(1.5, -2)"),
];

const SQLITE: &[Sample] = &[
    sample("INTEGER", "9007199254740993"),
    sample("REAL", "0.1"),
    sample("TEXT", "'say \"hi\", then go'"),
    sample("BLOB", "X'00FF'"),
    sample("BOOLEAN", "1"),
    sample("DECIMAL TEXT", "'1234.50'"),
    sample("DATE", "'2024-02-29'"),
    sample("TIMESTAMP", "'2024-02-29 13:14:15.5'"),
    sample("TIMESTAMPTZ", "'2024-02-29 13:14:15.5+05:30'"),
    sample("JSON", "'{\"a\": [1, 2.50]}'"),
    sample("", "42"),
];

/// What sluice wrote for one sample.
struct Written {
    json: String,
    csv: String,
    arrow: String,
}

#[test]
fn the_type_tables_are_what_sluice_writes() {
    let postgres = TestDb::new();
    postgres.execute(POSTGRES_SETUP);
    postgres.execute(&create_and_fill("samples", POSTGRES, "\""));
    let mariadb = TestMariaDb::new();
    // TIMESTAMP values are moments: written here in UTC, as sluice reads them.
    mariadb.execute(&format!(
        "SET time_zone = '+00:00'; {}",
        create_and_fill("samples", MARIADB, "`")
    ));
    let directory = tempfile_directory();
    let sqlite = directory.join("samples.db");
    let connection = rusqlite::Connection::open(&sqlite).unwrap();
    connection
        .execute_batch(&create_and_fill("samples", SQLITE, "\""))
        .unwrap();
    drop(connection);

    let mut page = String::from(HEADER);
    let sqlite_url = format!("sqlite://{}", sqlite.display());
    for (title, url, samples) in [
        ("PostgreSQL", postgres.url(), POSTGRES),
        ("MariaDB", mariadb.url(), MARIADB),
        ("SQLite", sqlite_url.as_str(), SQLITE),
    ] {
        let written = written(url, samples.len());
        write_table(&mut page, title, samples, &written);
    }
    std::fs::remove_dir_all(&directory).unwrap();
    check_or_bless(&page);
}

const HEADER: &str = "# Type tables

<!-- Generated by crates/sluice-cli/tests/type_tables.rs, which fails when this page is
stale: SLUICE_BLESS=1 cargo test -p sluice-cli --test type_tables rewrites it. -->

What sluice writes for a value of each type, as run by the test that made this page:
a column of each type below holds the value, and the table is exported with
`--format ndjson`, `csv` and `arrow`. Parquet columns have the Arrow types (intervals
excepted: a `Struct{months, days, nanoseconds}`). The rules behind these values, and
the types not shown, are in [Type mappings](types.md).
";

/// `create table NAME (c1 TYPE, …); insert into NAME values (LITERAL, …)`,
/// quoting names with `quote`.
fn create_and_fill(name: &str, samples: &[Sample], quote: &str) -> String {
    let columns: Vec<String> = samples
        .iter()
        .enumerate()
        .map(|(index, sample)| format!("{quote}c{index}{quote} {}", sample.ty))
        .collect();
    let values: Vec<&str> = samples.iter().map(|sample| sample.literal).collect();
    format!(
        "create table {name} ({}); insert into {name} values ({});",
        columns.join(", "),
        values.join(", ")
    )
}

/// Exports the samples table of `url` in each format and reads each column back.
fn written(url: &str, columns: usize) -> Vec<Written> {
    let query = "select * from samples";
    let ndjson = exported(url, query, "ndjson");
    let row: BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(ndjson.trim_ascii_end()).expect("one NDJSON row");
    let csv = exported(url, query, "csv");
    let fields = csv_record(csv_second_record(&csv));
    let arrow = exported(url, query, "arrow");
    let reader = arrow_ipc::reader::StreamReader::try_new(&arrow[..], None).unwrap();
    let schema = reader.schema();
    assert_eq!(fields.len(), columns, "{}", String::from_utf8_lossy(&csv));
    (0..columns)
        .map(|index| Written {
            json: row[&format!("c{index}")].get().to_owned(),
            csv: fields[index].clone(),
            arrow: arrow_type(schema.field(index)),
        })
        .collect()
}

fn exported(url: &str, query: &str, format: &str) -> Vec<u8> {
    let output = export(url, query, &["--format", format]);
    assert_exit(&output, 0);
    output.stdout
}

/// The Arrow type, with the extension or the `sluice.text` note that says
/// what a `Utf8` or binary column holds.
fn arrow_type(field: &Field) -> String {
    let metadata = field.metadata();
    let note = metadata
        .get("ARROW:extension:name")
        .or_else(|| metadata.get("sluice.text"));
    match note {
        Some(note) => format!("{} ({note})", field.data_type()),
        None => field.data_type().to_string(),
    }
}

/// The CSV after its header line (every sample value is on one line).
fn csv_second_record(csv: &[u8]) -> &str {
    let text = std::str::from_utf8(csv).unwrap();
    let (_, record) = text.split_once('\n').expect("a header line");
    record.trim_end_matches('\n')
}

/// The fields of one CSV record as written: quoted ones keep their quotes, so
/// the table shows the CSV text itself.
fn csv_record(record: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    for character in record.chars() {
        match character {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                fields.push(String::new());
                continue;
            }
            _ => {}
        }
        fields.last_mut().unwrap().push(character);
    }
    fields
}

fn write_table(page: &mut String, title: &str, samples: &[Sample], written: &[Written]) {
    writeln!(page, "\n## {title}\n").unwrap();
    writeln!(
        page,
        "| type | value (SQL) | JSON and NDJSON | CSV | Arrow |"
    )
    .unwrap();
    writeln!(page, "|---|---|---|---|---|").unwrap();
    for (sample, written) in samples.iter().zip(written) {
        let ty = if sample.ty.is_empty() {
            "(none)"
        } else {
            sample.ty
        };
        writeln!(
            page,
            "| {} | {} | {} | {} | {} |",
            code(ty),
            code(sample.literal),
            code(&written.json),
            code(&written.csv),
            code(&written.arrow)
        )
        .unwrap();
    }
}

/// `text` as a code span in a table cell: pipes escaped, and empty text shown
/// as nothing.
fn code(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let fence = if text.contains('`') { "``" } else { "`" };
    format!("{fence}{}{fence}", text.replace('|', "\\|"))
}

fn page_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/type-tables.md")
}

fn check_or_bless(page: &str) {
    let path = page_path();
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::write(&path, page).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == page,
        "docs/src/type-tables.md is stale: run SLUICE_BLESS=1 cargo test -p sluice-cli --test type_tables\n\
         --- what sluice writes now ---\n{page}"
    );
}

fn tempfile_directory() -> PathBuf {
    let directory = std::env::temp_dir().join(format!("sluice-type-tables-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    directory
}
