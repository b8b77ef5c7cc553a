//! `--format arrow`, `arrow-file` and `parquet` against the reference readers:
//! pyarrow reads every file sluice writes and each cell, turned back into the
//! text PostgreSQL prints for it (`support/arrow_oracle.py`), must equal the
//! server's own text of that cell; DuckDB reads the Parquet files too. The
//! Python environment comes from `sluice_testkit::python_oracle`.

mod support;

use std::path::Path;
use std::process::Output;

use futures_util::StreamExt;
use serde_json::Value;
use sluice_testkit::{run_python, TestDb, TestMariaDb};
use support::server::{quoted, write_config, Server};
use support::{assert_exit, run, sluice};

const ORACLE: &str = include_str!("support/arrow_oracle.py");

/// Every PostgreSQL type the mapping names, with NULLs, extremes, eras,
/// infinities, quoting and nesting.
const EVERY_TYPE_SQL: &str = r#"
create type mood as enum ('sad', 'ok', 'happy');
create type pair as (id int, label text, tags text[]);
create table every_type (
    id int primary key,
    c_int2 int2, c_int4 int4, c_int8 int8, c_float4 float4, c_float8 float8,
    c_numeric_typed numeric(12,3), c_numeric numeric, c_bool bool,
    c_text text, c_varchar varchar(20), c_char char(5), c_name name, c_enum mood,
    c_bytea bytea, c_date date, c_time time, c_timetz timetz,
    c_timestamp timestamp, c_timestamptz timestamptz, c_interval interval,
    c_uuid uuid, c_json json, c_jsonb jsonb,
    c_int_array int[], c_text_array text[], c_matrix int[][], c_pair pair
);
insert into every_type values
(1, 1, 2, 3, 1.5, 0.1, 123456789.125, 12345678901234567890.123456789, true,
 'plain', 'varying', 'ch', 'a_name', 'happy', '\x00ff10',
 '2024-02-29', '13:14:15.5', '10:00:00+02', '2024-02-29 13:14:15.123456',
 '2024-02-29 13:14:15.5+05:30', '1 year 2 mons 3 days 04:05:06.789',
 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}', '{"b": {"c": null}}',
 '{1,NULL,3}', array['a b', 'c"d', null, 'NULL', '', 'back\slash', 'é,{}'],
 '{{1,2,3}}', row(1, 'a b', array['x', null])),
(2, -32768, -2147483648, -9223372036854775808, 'NaN', 'Infinity', -0.001, 'NaN', false,
 '', 'x y', '', 'n', 'sad', '\x',
 '0044-03-15 BC', '24:00:00', '00:00:00-03:30', '4713-01-01 00:00:00 BC',
 '0001-01-01 00:00:00+00 BC', '-1 years -2 mons +3 days -04:05:06',
 '00000000-0000-0000-0000-000000000000', '[]', '[]',
 '{}', '{}', '{{1,2},{3,4}}', row(null, 'say "hi", \ ok', array['x', null])),
(3, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
 null, null, null, null, null, null, null, null, null, null, null, null, null),
(4, 32767, 2147483647, 9223372036854775807, '-Infinity', '-Infinity', 999999999.999,
 '0.00000000000000000001', true, e'multi\nline\ttab', 'ü', 'abcde', 'n2', 'ok', '\x0a',
 'infinity', '23:59:59.999999', '23:59:59.999999+14', '-infinity', 'infinity',
 '100:00:00', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '{"k": "üñí"}', '{}',
 '{-1}', array['ü'], '{}', row(2, '', array[]::text[]));
"#;

/// The columns of `every_type` in order, as text PostgreSQL prints.
const COLUMNS: [&str; 28] = [
    "id",
    "c_int2",
    "c_int4",
    "c_int8",
    "c_float4",
    "c_float8",
    "c_numeric_typed",
    "c_numeric",
    "c_bool",
    "c_text",
    "c_varchar",
    "c_char",
    "c_name",
    "c_enum",
    "c_bytea",
    "c_date",
    "c_time",
    "c_timetz",
    "c_timestamp",
    "c_timestamptz",
    "c_interval",
    "c_uuid",
    "c_json",
    "c_jsonb",
    "c_int_array",
    "c_text_array",
    "c_matrix",
    "c_pair",
];

/// The Arrow type pyarrow reports for each column of `every_type`.
const ARROW_TYPES: [&str; 28] = [
    "int32",
    "int16",
    "int32",
    "int64",
    "float",
    "double",
    "decimal128(12, 3)",
    "string",
    "bool",
    "string",
    "string",
    "string",
    "string",
    "string",
    "binary",
    "date32[day]",
    "time64[us]",
    "string",
    "timestamp[us]",
    "timestamp[us, tz=UTC]",
    "month_day_nano_interval",
    "extension<arrow.uuid>",
    "extension<arrow.json>",
    "extension<arrow.json>",
    "list<item: int32>",
    "list<item: string>",
    "list<item: list<item: int32>>",
    "struct<id: int64, label: string, tags: list<item: string>>",
];

/// `db`'s URL with the session time zone set to Newfoundland's (offsets of
/// -03:30, and -03:30:52 before 1884), so timestamps with zones arrive with
/// offsets the encoder must apply.
fn url_in_st_johns(db: &TestDb) -> String {
    db.url().replacen(
        "options=",
        "options=-c%20TimeZone%3DAmerica%2FSt_Johns%20",
        1,
    )
}

/// The server's text of every cell of `query`'s columns, in UTC, as JSON rows:
/// `format('%s')` is the type's output function (a cast to text is not: it
/// spells booleans `true` and trims `char(n)`).
fn server_cells(db: &TestDb, columns: &[&str], from: &str) -> String {
    let texts: Vec<String> = columns
        .iter()
        .map(|c| format!("case when {c} is null then null else format('%s', {c}) end"))
        .collect();
    db.query_text(&format!(
        "set timezone = 'UTC'; set datestyle = 'ISO'; set intervalstyle = 'postgres'; \
         select coalesce(json_agg(json_build_array({}) order by id), '[]') from {from};",
        texts.join(", ")
    ))
}

fn export(url: &str, query: &str, format: &str, path: &Path, extra: &[&str]) -> Output {
    run(
        sluice()
            .args(["export", "--db", url, "--query", query, "--format", format])
            .arg("--output")
            .arg(path)
            .args(extra),
        b"",
    )
}

/// What the oracle makes of the file at `path`: types, names, rows, mismatches.
fn oracle(format: &str, path: &Path, cells: &str) -> Value {
    let path = path.to_str().unwrap();
    let printed = run_python(ORACLE, &[format, path], cells.as_bytes());
    serde_json::from_slice(&printed).unwrap()
}

fn assert_no_mismatches(read: &Value, format: &str) {
    assert_eq!(
        read["mismatches"],
        serde_json::json!([]),
        "{format}: cells that differ from the server's (row, column, server, file)"
    );
}

#[test]
fn every_postgres_type_reads_back_cell_for_cell_in_arrow_arrow_file_and_parquet() {
    let db = TestDb::new();
    db.execute(EVERY_TYPE_SQL);
    let cells = server_cells(&db, &COLUMNS, "every_type");
    let directory = tempfile::tempdir().unwrap();
    let url = url_in_st_johns(&db);
    for (format, file) in [
        ("arrow", "t.arrows"),
        ("arrow-file", "t.arrow"),
        ("parquet", "t.parquet"),
    ] {
        let path = directory.path().join(file);
        let query = "select * from every_type order by id";
        assert_exit(&export(&url, query, format, &path, &[]), 0);
        let read = oracle(format, &path, &cells);
        assert_eq!(read["rows"], 4, "{format}");
        assert_eq!(read["names"], serde_json::json!(COLUMNS), "{format}");
        let mut types = ARROW_TYPES.map(str::to_owned).to_vec();
        if format == "parquet" {
            // Parquet has no month-day-nanosecond interval: a struct of its parts.
            types[20] = "struct<months: int32 not null, days: int32 not null, \
                         nanoseconds: int64 not null>"
                .into();
        }
        assert_eq!(read["types"], serde_json::json!(types), "{format}");
        assert_no_mismatches(&read, format);
    }
    let parquet = directory.path().join("t.parquet");
    let duckdb = run_python(
        "import sys, duckdb\n\
         print(duckdb.sql(\"select count(*), sum(c_int2), max(c_text) filter (where id = 1), \
         max(c_int8), max(c_numeric_typed)::varchar from read_parquet('\" + sys.argv[1] + \"')\").fetchone())",
        &[parquet.to_str().unwrap()],
        b"",
    );
    assert_eq!(
        String::from_utf8(duckdb).unwrap().trim(),
        "(4, 0, 'plain', 9223372036854775807, '999999999.999')"
    );
}

#[test]
fn numeric_without_precision_becomes_decimal128_at_the_scale_asked_for() {
    let db = TestDb::new();
    db.execute(
        "create table n (id int, v numeric);
         insert into n values (1, 12.5), (2, -0.01), (3, null), (4, 123456789012345678901234567890.12);",
    );
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("n.arrows");
    let query = "select id, v from n order by id";
    assert_exit(
        &export(db.url(), query, "arrow", &path, &["--numeric-scale", "2"]),
        0,
    );
    let read = oracle("arrow", &path, &server_cells(&db, &["id", "v"], "n"));
    assert_eq!(read["types"][1], "decimal128(38, 2)");
    assert_no_mismatches(&read, "arrow");

    // A value that would need rounding is refused, naming its cell, and no
    // file is left.
    db.execute("insert into n values (5, 1.005)");
    let output = export(db.url(), query, "arrow", &path, &["--numeric-scale", "2"]);
    let stderr = assert_exit(&output, 5);
    assert!(
        stderr.contains(
            "row 5, column v (numeric): \"1.005\" has more than 2 digits after the point"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("has been removed"), "{stderr}");
}

#[test]
fn empty_results_are_valid_files_with_their_schema() {
    let db = TestDb::new();
    db.execute(EVERY_TYPE_SQL);
    let directory = tempfile::tempdir().unwrap();
    for format in ["arrow", "arrow-file", "parquet"] {
        let path = directory.path().join(format!("empty.{format}"));
        let query = "select * from every_type where false";
        assert_exit(&export(db.url(), query, format, &path, &[]), 0);
        let read = oracle(format, &path, "[]");
        assert_eq!(read["rows"], 0, "{format}");
        assert_eq!(read["names"], serde_json::json!(COLUMNS), "{format}");
        // With no array to learn it from, the matrix is one list deep.
        assert_eq!(read["types"][26], "list<item: int32>", "{format}");
        assert_eq!(read["types"][1], "int16", "{format}");
    }
}

#[test]
fn parquet_needs_a_file_and_format_flags_their_format() {
    let db = TestDb::new();
    let refused = |arguments: &[&str]| {
        let output = run(
            sluice()
                .args(["export", "--db", db.url(), "--query", "select 1 as a"])
                .args(arguments),
            b"",
        );
        assert_exit(&output, 2)
    };
    let stderr = refused(&["--format", "parquet"]);
    assert!(
        stderr.contains("--format parquet needs --output FILE"),
        "{stderr}"
    );
    let stderr = refused(&["--format", "arrow", "--compression", "lz4"]);
    assert!(stderr.contains("go with --format parquet"), "{stderr}");
    let stderr = refused(&["--format", "csv", "--numeric-scale", "2"]);
    assert!(stderr.contains("go with --format arrow"), "{stderr}");
    let stderr = refused(&["--format", "arrow", "--numeric-scale", "39"]);
    assert!(stderr.contains("--numeric-scale"), "{stderr}");

    // To a pipe, the Arrow stream needs no file.
    let output = run(
        sluice().args([
            "export",
            "--db",
            db.url(),
            "--query",
            "select 1 as a",
            "--format",
            "arrow",
        ]),
        b"",
    );
    assert_exit(&output, 0);
    let rows = run_python(
        "import sys, pyarrow as pa\nprint(pa.ipc.open_stream(sys.stdin.buffer).read_all().to_pylist())",
        &[],
        &output.stdout,
    );
    assert_eq!(String::from_utf8(rows).unwrap().trim(), "[{'a': 1}]");
}

#[test]
fn parquet_row_groups_and_codecs_follow_the_flags() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    let query = "select g as id, md5(g::text) as h from generate_series(1, 10000) g";
    for (codec, name) in [
        ("zstd", "ZSTD"),
        ("snappy", "SNAPPY"),
        ("lz4", "LZ4"),
        ("none", "UNCOMPRESSED"),
    ] {
        let path = directory.path().join(format!("{codec}.parquet"));
        let flags = [
            "--compression",
            codec,
            "--row-group-rows",
            "3000",
            "--batch-rows",
            "1000",
        ];
        assert_exit(&export(db.url(), query, "parquet", &path, &flags), 0);
        let described = run_python(
            "import sys, pyarrow.parquet as pq\n\
             m = pq.ParquetFile(sys.argv[1]).metadata\n\
             print(m.num_rows, m.num_row_groups, m.row_group(0).num_rows, m.row_group(0).column(1).compression)",
            &[path.to_str().unwrap()],
            b"",
        );
        assert_eq!(
            String::from_utf8(described).unwrap().trim(),
            format!("10000 4 3000 {name}")
        );
    }
}

#[test]
fn mariadb_decimals_unsigned_bigints_datetimes_json_and_blobs_read_back() {
    let db = TestMariaDb::new();
    db.execute(
        "create table m (id int primary key, d decimal(10,2), u bigint unsigned, dt datetime(6),
                         ts timestamp(6) null, j json, b blob, t tinyint, f float);
         set time_zone = '+00:00';
         insert into m values
           (1, 12345678.91, 18446744073709551615, '2024-02-29 13:14:15.123456',
            '2024-02-29 13:14:15.5', '{\"a\": [1, 2]}', x'00ff10', -128, 0.1),
           (2, -0.05, 0, '1000-01-01 00:00:00', '1970-01-01 00:00:01', '[]', x'', 127, -3.5),
           (3, null, null, null, null, null, null, null, null);",
    );
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("m.arrows");
    let query = "select id, d, u, dt, ts, j, b, t, f from m order by id";
    assert_exit(&export(db.url(), query, "arrow", &path, &[]), 0);
    let script = r#"
import sys, pyarrow as pa
with open(sys.argv[1], "rb") as source:
    table = pa.ipc.open_stream(source).read_all()
print([str(t) for t in table.schema.types])
def plain(column):
    if isinstance(column.type, pa.ExtensionType):
        column = column.storage
    if pa.types.is_timestamp(column.type):
        return column.cast(pa.int64()).to_pylist()
    if pa.types.is_binary(column.type):
        return [None if v is None else v.hex() for v in column.to_pylist()]
    return [None if v is None else str(v) for v in column.to_pylist()]
for column in table.columns:
    print(plain(column.combine_chunks()))
"#;
    let printed = String::from_utf8(run_python(script, &[path.to_str().unwrap()], b"")).unwrap();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(
        lines[0],
        "['int32', 'decimal128(10, 2)', 'uint64', 'timestamp[us]', 'timestamp[us, tz=UTC]', \
         'extension<arrow.json>', 'binary', 'int16', 'float']"
    );
    assert_eq!(lines[2], "['12345678.91', '-0.05', None]");
    assert_eq!(lines[3], "['18446744073709551615', '0', None]");
    // 2024-02-29 13:14:15.123456 and 1000-01-01 as microseconds from 1970.
    assert_eq!(lines[4], "[1709212455123456, -30610224000000000, None]");
    assert_eq!(lines[5], "[1709212455500000, 1000000, None]");
    assert_eq!(lines[6], "['{\"a\": [1, 2]}', '[]', None]");
    assert_eq!(lines[7], "['00ff10', '', None]");
    assert_eq!(lines[8], "['-128', '127', None]");
    assert_eq!(lines[9], "['0.10000000149011612', '-3.5', None]");
}

#[test]
fn sluice_serve_streams_arrow_that_pyarrow_reads_and_aborts_on_a_late_error() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    let config = write_config(
        &directory,
        &format!(
            "[databases.main]\nurl = {}\n\
             [queries.series]\nsql = \"select g as id, md5(g::text) as h, now() as at from generate_series(1, 200000) g\"\n\
             [queries.late_error]\nsql = \"select g as id, 1 / (g - 150000) as q from generate_series(1, 200000) g\"\n",
            quoted(db.url())
        ),
    );
    let server = Server::start(&["--config", &config]);
    let address = server.address;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, media, body) = runtime.block_on(async {
        let response = reqwest::Client::new()
            .get(format!("http://{address}/queries/series"))
            .header("accept", "application/vnd.apache.arrow.stream")
            .send()
            .await
            .unwrap();
        let media = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        (response.status(), media, response.bytes().await.unwrap())
    });
    assert_eq!(status, 200);
    assert_eq!(media, "application/vnd.apache.arrow.stream");
    let summary = run_python(
        "import sys, hashlib, pyarrow as pa\n\
         t = pa.ipc.open_stream(sys.stdin.buffer).read_all()\n\
         print(t.num_rows, sum(t.column('id').to_pylist()), str(t.schema.field('at').type), \
         t.column('h').to_pylist()[41] == hashlib.md5(b'42').hexdigest())",
        &[],
        &body,
    );
    let oracle = db.query_text("select sum(g) from generate_series(1, 200000) g");
    assert_eq!(
        String::from_utf8(summary).unwrap().trim(),
        format!("200000 {oracle} timestamp[us, tz=UTC] True")
    );
    let rss = server.peak_rss();
    assert!(rss < 128 << 20, "server peak RSS {rss} bytes");

    let (parquet, late) = runtime.block_on(async {
        let client = reqwest::Client::new();
        let parquet = client
            .get(format!("http://{address}/queries/series?format=parquet"))
            .send()
            .await
            .unwrap();
        let parquet = (parquet.status().as_u16(), parquet.text().await.unwrap());
        let response = client
            .get(format!("http://{address}/queries/late_error?format=arrow"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.bytes_stream();
        let mut received = 0usize;
        let mut failed = false;
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(chunk) => received += chunk.len(),
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        (parquet, (received, failed))
    });
    assert_eq!(parquet.0, 406, "{}", parquet.1);
    assert!(parquet.1.contains("not offered over HTTP"), "{}", parquet.1);
    // The first record batches went out before the division by zero: the
    // body must end in an error, never as a shorter stream that reads whole.
    let (received, failed) = late;
    assert!(
        received > 0 && failed,
        "received {received} bytes, failed: {failed}"
    );
}

/// PostgreSQL's timestamps reach 294276 AD, Arrow's microseconds from 1970
/// about 294247 AD: a later one (arriving in binary) is an error naming its
/// row and column, never a wrapped value, and the output is not left behind.
#[test]
fn a_timestamp_past_arrows_range_is_an_error_naming_row_and_column() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("t.parquet");
    let query = "select n, case when n = 3 then timestamp '294270-01-01 00:00:00' \
                 else timestamp '2024-01-01' end as late from generate_series(1, 4) as n";
    let output = export(db.url(), query, "parquet", &path, &[]);
    // Exit 5: the data did not convert.
    let stderr = assert_exit(&output, 5);
    assert!(stderr.contains("row 3"), "{stderr}");
    assert!(stderr.contains("late"), "{stderr}");
    assert!(stderr.contains("294,247 AD"), "{stderr}");
    assert!(!path.exists(), "no partial Parquet file");
}
