//! `sluice export --jobs N` against real servers: a table cut by its storage
//! and a query cut by a column's values give every row once (in CSV, NDJSON
//! and an Arrow stream, read back with arrow-rs), in one snapshot while writes
//! run, with each part's rows in `--stats`; a failing part leaves no file, and
//! what cannot be split is refused before anything runs. `--output-dir`
//! writes a file per part, and a directory appears whole or not at all.

mod support;

use std::time::{Duration, Instant};

use sluice_testkit::{TestDb, TestMariaDb};
use support::{assert_exit, export, run, sluice};

/// `sluice export --db URL ARGUMENTS…` (a `--table` export names no query).
fn export_table(url: &str, arguments: &[&str]) -> std::process::Output {
    let mut command = sluice();
    command
        .args(["export", "--db", url])
        .args(arguments)
        .env_remove("MYSQL_PWD");
    run(&mut command, b"")
}

fn sorted_lines(bytes: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

fn items(db: &TestDb) {
    db.execute(
        "create table items (id int8 primary key, amount numeric(12,2), note text);
         insert into items select g, g / 100.0, case when g % 5 = 0 then null else 'n' || g end
         from generate_series(1, 60000) g;
         analyze items;",
    );
}

#[test]
fn a_table_in_parts_is_every_row_once_in_each_format() {
    let db = TestDb::new();
    items(&db);
    let expected = db.psql_bytes("copy (select * from items) to stdout with (format csv)");
    let output = export_table(
        db.url(),
        &[
            "--table", "items", "--jobs", "3", "--format", "csv", "--stats",
        ],
    );
    let stderr = assert_exit(&output, 0);
    let (header, rows) = output
        .stdout
        .split_at(output.stdout.iter().position(|&b| b == b'\n').unwrap() + 1);
    assert_eq!(header, b"id,amount,note\n");
    assert_eq!(sorted_lines(rows), sorted_lines(&expected));
    let parts: Vec<u64> = stderr
        .lines()
        .filter_map(|line| {
            line.strip_prefix("part ")
                .and_then(|rest| rest.split_once(" rows: "))
        })
        .map(|(_, rows)| rows.parse().unwrap())
        .collect();
    assert_eq!(parts.len(), 3, "{stderr}");
    assert_eq!(parts.iter().sum::<u64>(), 60000);
    assert!(parts.iter().all(|&rows| rows > 0), "{parts:?}");

    // An Arrow stream: one schema, the parts' record batches.
    let output = export_table(
        db.url(),
        &["--table", "items", "--jobs", "2", "--format", "arrow"],
    );
    assert_exit(&output, 0);
    let reader = arrow_ipc::reader::StreamReader::try_new(&output.stdout[..], None).unwrap();
    let mut ids = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let column = batch
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .unwrap();
        ids.extend(column.values().iter().copied());
    }
    ids.sort_unstable();
    assert_eq!(ids, (1..=60000).collect::<Vec<i64>>());
}

#[test]
fn a_query_split_by_a_column_keeps_its_parameters() {
    let db = TestDb::new();
    items(&db);
    let query = "select id, note from items where id > $1";
    let output = export(
        db.url(),
        query,
        &["--param", "100", "--split-by", "id", "--jobs", "4"],
    );
    assert_exit(&output, 0);
    let expected =
        db.psql_bytes("copy (select json_build_object('id', id, 'note', note) from items where id > 100) to stdout");
    let got: Vec<String> = sorted_lines(&output.stdout)
        .into_iter()
        .map(|line| line.replace(' ', ""))
        .collect();
    let want: Vec<String> = sorted_lines(&expected)
        .into_iter()
        .map(|line| line.replace(' ', ""))
        .collect();
    assert_eq!(got.len(), 59900);
    assert_eq!(got, want);
}

#[test]
fn the_parts_read_one_snapshot_while_writes_run() {
    let db = TestDb::new();
    db.execute(
        "create table accounts (id int8 primary key, balance int8 not null);
         insert into accounts select g, 100 from generate_series(1, 100000) g;
         create table stop (now bool);",
    );
    let writer = "do $$
        declare i int8 := 0;
        begin
          loop
            i := i + 1;
            update accounts set balance = balance - 1 where id = (i * 7919) % 100000 + 1;
            update accounts set balance = balance + 1 where id = (i * 104729) % 100000 + 1;
            commit;
            exit when i >= 500000 or exists (select 1 from stop);
          end loop;
        end $$;";
    let output = std::thread::scope(|scope| {
        let running = scope.spawn(|| db.execute(writer));
        // Let the transfers begin, then read while they run.
        let deadline = Instant::now() + Duration::from_secs(30);
        while db.query_text("select count(*) from accounts where balance <> 100") == "0"
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let output = export_table(
            db.url(),
            &["--table", "accounts", "--jobs", "4", "--format", "csv"],
        );
        db.execute("insert into stop values (true)");
        running.join().unwrap();
        output
    });
    assert_exit(&output, 0);
    let text = String::from_utf8(output.stdout).unwrap();
    let balances: Vec<i64> = text
        .lines()
        .skip(1)
        .map(|line| line.split_once(',').unwrap().1.parse().unwrap())
        .collect();
    // One consistent read: every account once, and the money all there.
    assert_eq!(balances.len(), 100000);
    assert_eq!(balances.iter().sum::<i64>(), 10_000_000);
}

#[test]
fn a_failing_part_leaves_no_file() {
    let db = TestDb::new();
    items(&db);
    let directory = std::env::temp_dir().join(format!("sluice-export-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("out.parquet");
    let output = export(
        db.url(),
        "select id, 1 / (id - 45000) as x from items",
        &[
            "--split-by",
            "id",
            "--jobs",
            "3",
            "--format",
            "parquet",
            "--output",
            path.to_str().unwrap(),
        ],
    );
    let stderr = assert_exit(&output, 1);
    assert!(stderr.contains("division by zero"), "{stderr}");
    assert!(!path.exists());
    assert_eq!(
        std::fs::read_dir(&directory).unwrap().count(),
        0,
        "no staged file is left"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn columns_of_a_table_are_the_only_ones_read_in_their_order() {
    let db = TestDb::new();
    items(&db);
    db.execute(r#"alter table items add column "Odd ""n""" int4 default 7"#);
    let expected = db.psql_bytes(
        r#"copy (select note, id, "Odd ""n""" from items) to stdout with (format csv)"#,
    );
    for jobs in ["1", "3"] {
        let output = export_table(
            db.url(),
            &[
                "--table",
                "items",
                "--columns",
                r#"note,id,Odd "n""#,
                "--jobs",
                jobs,
                "--format",
                "csv",
            ],
        );
        assert_exit(&output, 0);
        let (header, rows) = output
            .stdout
            .split_at(output.stdout.iter().position(|&b| b == b'\n').unwrap() + 1);
        assert_eq!(header, b"note,id,\"Odd \"\"n\"\"\"\n", "--jobs {jobs}");
        assert_eq!(sorted_lines(rows), sorted_lines(&expected), "--jobs {jobs}");
    }
    // A name the table lacks is the database's error, naming it.
    let output = export_table(db.url(), &["--table", "items", "--columns", "id,nope"]);
    let stderr = assert_exit(&output, 1);
    assert!(
        stderr.contains(r#"column "nope" does not exist"#),
        "{stderr}"
    );
    // --columns picks a table's columns; a query selects its own.
    let output = export(db.url(), "select 1", &["--columns", "id"]);
    let stderr = assert_exit(&output, 2);
    assert!(
        stderr.contains("cannot be used with '--columns"),
        "{stderr}"
    );

    let mariadb = TestMariaDb::new();
    mariadb.execute(
        "create table t (id int primary key, `a b` int, c text); insert into t values (1, 2, 'x');",
    );
    let output = export_table(mariadb.url(), &["--table", "t", "--columns", "a b,id"]);
    assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "{\"a b\":2,\"id\":1}\n"
    );
}

#[test]
fn what_cannot_be_split_is_refused_before_anything_runs() {
    let db = TestDb::new();
    items(&db);
    let output = export(db.url(), "select * from items", &["--jobs", "2"]);
    let stderr = assert_exit(&output, 2);
    assert!(stderr.contains("--split-by"), "{stderr}");
    let output = export(db.url(), "select * from items", &["--split-by", "id"]);
    let stderr = assert_exit(&output, 2);
    assert!(stderr.contains("--jobs"), "{stderr}");
    let mut both = sluice();
    both.args([
        "export",
        "--db",
        db.url(),
        "--query",
        "select 1",
        "--table",
        "items",
    ]);
    assert_exit(&run(&mut both, b""), 2);

    let mariadb = TestMariaDb::new();
    mariadb.execute("create table t (id int primary key); insert into t values (1), (2);");
    let output = export_table(mariadb.url(), &["--table", "t", "--jobs", "2"]);
    let stderr = assert_exit(&output, 2);
    assert!(stderr.contains("parallel parts"), "{stderr}");
}

/// The names in `directory`, sorted.
fn names(directory: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn parquet_ids(path: &std::path::Path) -> Vec<i64> {
    use arrow_array::cast::AsArray;
    let file = std::fs::File::open(path).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(file, 8192)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    reader
        .flat_map(|batch| {
            let batch = batch.unwrap();
            batch
                .column(0)
                .as_primitive::<arrow_array::types::Int64Type>()
                .values()
                .to_vec()
        })
        .collect()
}

#[test]
fn a_directory_holds_a_complete_file_per_part() {
    let db = TestDb::new();
    items(&db);
    let scratch = tempfile::tempdir().unwrap();
    let directory = scratch.path().join("items");
    let output = export_table(
        db.url(),
        &[
            "--table",
            "items",
            "--jobs",
            "3",
            "--format",
            "parquet",
            "--output-dir",
            directory.to_str().unwrap(),
            "--stats",
        ],
    );
    let stderr = assert_exit(&output, 0);
    assert!(stderr.contains("part 2 rows: "), "{stderr}");
    assert_eq!(
        names(scratch.path()),
        ["items"],
        "no staging directory is left"
    );
    let names = names(&directory);
    assert_eq!(
        names,
        [
            "part-00000.parquet",
            "part-00001.parquet",
            "part-00002.parquet"
        ]
    );
    let mut ids = Vec::new();
    for name in &names {
        let part = parquet_ids(&directory.join(name));
        assert!(!part.is_empty(), "{name} holds rows");
        ids.extend(part);
    }
    ids.sort_unstable();
    assert_eq!(ids, (1..=60000).collect::<Vec<i64>>());

    // One query without --jobs is one part; an empty directory may be named.
    let empty = scratch.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let output = export(
        db.url(),
        "select id from items where id <= 10",
        &["--format", "csv", "--output-dir", empty.to_str().unwrap()],
    );
    assert_exit(&output, 0);
    let csv = std::fs::read_to_string(empty.join("part-00000.csv")).unwrap();
    assert_eq!(csv.lines().count(), 11, "a header and ten rows");
}

#[test]
fn a_failing_part_leaves_no_directory_and_a_full_one_is_refused() {
    let db = TestDb::new();
    items(&db);
    let scratch = tempfile::tempdir().unwrap();
    let directory = scratch.path().join("out");
    let failing = |extra: &[&str]| {
        let mut arguments = vec![
            "--split-by",
            "id",
            "--jobs",
            "3",
            "--format",
            "arrow-file",
            "--output-dir",
            directory.to_str().unwrap(),
        ];
        arguments.extend_from_slice(extra);
        export(
            db.url(),
            "select id, 1 / (id - 45000) as x from items",
            &arguments,
        )
    };
    let stderr = assert_exit(&failing(&[]), 1);
    assert!(stderr.contains("division by zero"), "{stderr}");
    assert!(stderr.contains("has been removed"), "{stderr}");
    assert_eq!(names(scratch.path()), Vec::<String>::new());

    let stderr = assert_exit(&failing(&["--keep-partial"]), 1);
    assert!(stderr.contains("is kept as"), "{stderr}");
    assert_eq!(names(scratch.path()), ["out.partial"]);

    // A directory that holds anything would mix its files with the parts.
    let full = scratch.path().join("out.partial");
    let output = export(
        db.url(),
        "select 1",
        &["--output-dir", full.to_str().unwrap()],
    );
    let stderr = assert_exit(&output, 4);
    assert!(stderr.contains("is not empty"), "{stderr}");
}

/// An `--output-dir` the final rename could not replace (a symbolic link to
/// a directory or to nothing, a file) or could not be staged beside (a parent
/// that is a file or missing; as root no permission bit stops a write, so a
/// file stands in for an unwritable parent) is refused before the export
/// connects: the query, which would advance a sequence, never runs, and
/// nothing is left beside it.
#[test]
fn an_output_dir_that_cannot_be_written_is_refused_before_the_query_runs() {
    let db = TestDb::new();
    db.execute("create sequence probe");
    let scratch = tempfile::tempdir().unwrap();
    let path = |name: &str| scratch.path().join(name);
    let empty = path("empty");
    std::fs::create_dir(&empty).unwrap();
    std::os::unix::fs::symlink(&empty, path("link")).unwrap();
    std::os::unix::fs::symlink(path("nowhere"), path("dangling")).unwrap();
    std::fs::write(path("file"), "not a directory\n").unwrap();
    let file_parent = format!("{} is not a directory", path("file").display());
    let cases = [
        ("link", "it is a symbolic link"),
        ("dangling", "it is a symbolic link"),
        (
            "file",
            "it is not a directory: name a new or empty directory",
        ),
        ("file/parts", file_parent.as_str()),
        ("missing/parts", "No such file or directory"),
    ];
    for (name, words) in cases {
        let directory = path(name);
        let output = export(
            db.url(),
            "select nextval('probe') as n",
            &["--output-dir", directory.to_str().unwrap()],
        );
        assert_eq!(
            db.query_text("select is_called from probe"),
            "f",
            "{name}: the query ran"
        );
        let stderr = assert_exit(&output, 4);
        assert!(
            stderr.starts_with(&format!(
                "sluice: cannot write {}: {words}",
                directory.display()
            )),
            "{name}: {stderr}"
        );
        assert_eq!(
            names(scratch.path()),
            ["dangling", "empty", "file", "link"],
            "{name}: nothing is staged or replaced"
        );
    }
    assert!(names(&empty).is_empty());
}
