//! End-to-end tests of `sluice import`: exit codes, messages, reject files, stats.

mod support;

use std::process::Output;

use sluice_testkit::TestDb;

/// Runs `sluice arguments…` with `stdin` (none: an empty input).
fn sluice(arguments: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut command = support::sluice();
    command.args(arguments);
    support::run(&mut command, stdin.unwrap_or_default())
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const TABLE: &str = "create table items (id int primary key, qty int not null check (qty > 0), label text);
                     create table parents (id int primary key); insert into parents values (1);
                     create table children (id int primary key, parent int references parents (id));";

#[test]
fn a_bad_record_aborts_with_exit_5_or_1_and_commits_nothing() {
    let db = TestDb::new();
    db.execute(TABLE);
    let output = sluice(
        &["import", "--db", db.url(), "--table", "items"],
        Some(b"{\"id\": 1, \"qty\": 1}\n{\"id\": 2, \"qty\": \n"),
    );
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    assert!(
        stderr(&output).starts_with("sluice: line 2: invalid JSON"),
        "{}",
        stderr(&output)
    );

    let output = sluice(
        &[
            "import",
            "--db",
            db.url(),
            "--table",
            "items",
            "--format",
            "csv",
        ],
        Some(b"id,qty\n1,1\n2,0\n"),
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("line 3"), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("items_qty_check"),
        "{}",
        stderr(&output)
    );
    assert_eq!(db.query_text("select count(*) from items"), "0");
}

#[test]
fn a_foreign_key_error_from_a_file_names_the_line() {
    let db = TestDb::new();
    db.execute(TABLE);
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("children.csv");
    std::fs::write(&path, "id,parent\n1,1\n2,1\n3,5\n").unwrap();
    let output = sluice(
        &[
            "import",
            "--db",
            db.url(),
            "--table",
            "children",
            path.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.starts_with("sluice: line 4: "), "{message}");
    assert!(message.contains("(parent)=(5)"), "{message}");
    assert_eq!(db.query_text("select count(*) from children"), "0");
}

#[test]
fn skip_mode_writes_a_reject_file_and_reports_the_counts() {
    let db = TestDb::new();
    db.execute(TABLE);
    let directory = tempfile::tempdir().unwrap();
    let rejects = directory.path().join("rejects.ndjson");
    let output = sluice(
        &[
            "import", "--db", db.url(), "--table", "items", "--on-error", "skip",
            "--reject-file", rejects.to_str().unwrap(), "--stats",
        ],
        Some(b"{\"id\": 1, \"qty\": 1}\n{\"id\": 2, \"qty\": 0}\nnope\n{\"id\": 3, \"qty\": 3, \"label\": \"x\"}\n"),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("2 of 4 records imported, 2 rejected"),
        "{message}"
    );
    assert!(message.contains("\naccepted: 2\n"), "{message}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&rejects)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let mut by_line: Vec<(u64, String)> = lines
        .iter()
        .map(|value| {
            (
                value["line"].as_u64().unwrap(),
                value["record"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    by_line.sort();
    assert_eq!(by_line[0], (2, "{\"id\": 2, \"qty\": 0}".to_owned()));
    assert_eq!(by_line[1], (3, "nope".to_owned()));
    assert_eq!(
        db.query_text("select string_agg(id::text, ',' order by id) from items"),
        "1,3"
    );
}

#[test]
fn export_then_import_moves_a_table() {
    let db = TestDb::new();
    db.execute(TABLE);
    db.execute(
        "insert into items select g, g, 'label ' || g from generate_series(1, 5000) g;
                create table items_copy (like items including all);",
    );
    let exported = sluice(
        &[
            "export",
            "--db",
            db.url(),
            "--query",
            "select * from items order by id",
        ],
        None,
    );
    assert!(exported.status.success());
    let output = sluice(
        &[
            "import",
            "--db",
            db.url(),
            "--table",
            "items_copy",
            "--stats",
        ],
        Some(&exported.stdout),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("\nrows written: 5000\n"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        db.query_text(
            "select count(*) from (select * from items except select * from items_copy) d"
        ),
        "0"
    );
}

/// Imports `csv` (from a file, as psql's `\copy … csv` writes it) into `pairs`
/// (a int, b text) with `extra` arguments; returns the run and the rows, `a:b;…`.
fn import_csv(db: &TestDb, csv: &str, extra: &[&str]) -> (Output, String) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("pairs.csv");
    std::fs::write(&path, csv).unwrap();
    let mut arguments = vec![
        "import",
        "--db",
        db.url(),
        "--table",
        "pairs",
        "--stats",
        path.to_str().unwrap(),
    ];
    arguments.extend_from_slice(extra);
    let output = sluice(&arguments, None);
    let rows =
        db.query_text("select coalesce(string_agg(a || ':' || b, ';' order by a), '') from pairs");
    db.execute("truncate pairs");
    (output, rows)
}

#[test]
fn a_headerless_csv_is_refused_unless_header_false_and_then_keeps_every_row() {
    let db = TestDb::new();
    db.execute("create table pairs (a int, b text)");
    let headerless = "1,one\n2,two\n3,three\n";

    // The header line is read, not skipped: "1,one" is not "a,b".
    let (output, rows) = import_csv(&db, headerless, &["--columns", "a,b"]);
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "sluice: line 1: the CSV header does not match --columns: column 1 is \"1\" where \
         \"a\" was expected (header: \"1\", \"one\"; --columns: \"a\", \"b\"); if line 1 is \
         data, not a header, say --header false\n"
    );
    assert_eq!(rows, "");

    for extra in [
        &["--header", "false", "--columns", "a,b"][..],
        &["--header", "false"],
    ] {
        let (output, rows) = import_csv(&db, headerless, extra);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{extra:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).starts_with("records: 3\n"),
            "{}",
            stderr(&output)
        );
        assert_eq!(rows, "1:one;2:two;3:three", "{extra:?}");
    }
    let (output, rows) = import_csv(
        &db,
        "2,two\n1,one\n",
        &["--header", "false", "--columns", "b,a"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).starts_with("sluice: line 1, column a: "),
        "{}",
        stderr(&output)
    );
    assert_eq!(rows, "");

    // A header that names --columns, or the table's columns, is still a header.
    let with_header = "a,b\n1,one\n";
    for extra in [
        &["--columns", "a,b"][..],
        &[],
        &["--header", "true"],
        &["--header", "match"],
    ] {
        let (output, rows) = import_csv(&db, with_header, extra);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{extra:?}: {}",
            stderr(&output)
        );
        assert_eq!(rows, "1:one", "{extra:?}");
    }
}

#[test]
fn line_numbers_stay_physical_lines_with_or_without_a_header() {
    let db = TestDb::new();
    db.execute("create table pairs (a int, b text)");
    let (output, _) = import_csv(&db, "x,one\n2,two\n", &["--header", "false"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output)
            .starts_with("sluice: line 1, column a: invalid input syntax for type integer"),
        "{}",
        stderr(&output)
    );
    let (output, _) = import_csv(&db, "a,b\nx,one\n", &["--header", "match"]);
    assert!(
        stderr(&output).starts_with("sluice: line 2, column a: "),
        "{}",
        stderr(&output)
    );
    // A record that breaks a line inside quotes still counts its lines.
    let (output, _) = import_csv(
        &db,
        "1,\"multi\nline\"\n2,\"x\",extra\n",
        &["--header", "false"],
    );
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "sluice: line 3: expected 2 fields, found 3\n"
    );
}

#[test]
fn header_match_needs_the_table_s_columns_in_order() {
    let db = TestDb::new();
    db.execute("create table pairs (a int, b text)");
    let (output, rows) = import_csv(&db, "b,a\none,1\n", &["--header", "match"]);
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "sluice: line 1: the CSV header does not match the table's columns (--header match): \
         column 1 is \"b\" where \"a\" was expected (header: \"b\", \"a\"; table: \"a\", \"b\"); \
         --header true fills only the columns the header names\n"
    );
    assert_eq!(rows, "");
    // Without match, the header's order is the file's.
    let (output, rows) = import_csv(&db, "b,a\none,1\n", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(rows, "1:one");
}

#[test]
fn header_is_refused_for_ndjson() {
    let db = TestDb::new();
    db.execute("create table pairs (a int, b text)");
    let output = sluice(
        &[
            "import",
            "--db",
            db.url(),
            "--table",
            "pairs",
            "--header",
            "false",
        ],
        Some(b"{\"a\": 1}\n"),
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "sluice: --header goes with CSV input; this input is read as NDJSON (say --format csv)\n"
    );
    let output = sluice(
        &[
            "import",
            "--db",
            db.url(),
            "--table",
            "pairs",
            "--format",
            "csv",
            "--header",
            "maybe",
        ],
        Some(b"a,b\n"),
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(db.query_text("select count(*) from pairs"), "0");
}

#[test]
fn ignore_unknown_is_refused_for_csv_in_this_command_s_words() {
    let db = TestDb::new();
    db.execute("create table pairs (a int, b text)");
    let output = sluice(
        &[
            "import",
            "--db",
            db.url(),
            "--table",
            "pairs",
            "--format",
            "csv",
            "--ignore-unknown",
        ],
        Some(b"a,b\n1,x\n"),
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "sluice: --ignore-unknown goes with NDJSON input; this input is read as CSV \
         (say --format ndjson)\n"
    );
    assert_eq!(db.query_text("select count(*) from pairs"), "0");
}
