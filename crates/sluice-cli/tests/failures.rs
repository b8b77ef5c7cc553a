//! The README's failure paths, end to end through the binary: each ends with the
//! documented exit code and one clear message, and nothing half-done is left
//! looking complete.

mod support;

use std::process::Output;

use sluice_testkit::{ClusterBuilder, TestDb};
use support::{assert_exit, run, sluice};

fn export(url: &str, query: &str, extra: &[&str]) -> Output {
    run(
        sluice()
            .args(["export", "--db", url, "--query", query])
            .args(extra),
        b"",
    )
}

fn import(url: &str, table: &str, extra: &[&str], input: &[u8]) -> Output {
    run(
        sluice()
            .args([
                "import", "--db", url, "--table", table, "--format", "ndjson",
            ])
            .args(extra),
        input,
    )
}

#[test]
fn a_division_by_zero_at_row_500000_exits_1_after_the_rows_before_it() {
    let db = TestDb::new();
    let output = export(
        db.url(),
        "select g as id, 1 / (500000 - g) as inverse from generate_series(1, 1000000) g",
        &[],
    );
    let stderr = assert_exit(&output, 1);
    assert!(
        stderr.contains("22012") && stderr.contains("division by zero"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    // What was written is whole rows 1, 2, 3, … in order, and none past the error.
    let stdout = String::from_utf8(output.stdout).unwrap();
    let ids: Vec<u64> = stdout
        .lines()
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).expect("a whole row");
            row["id"].as_u64().expect("an id")
        })
        .collect();
    assert!(!ids.is_empty(), "rows before the error reached the output");
    assert!(ids.len() < 500_000, "{} rows", ids.len());
    assert!(
        ids.iter().copied().eq(1..=ids.len() as u64),
        "rows in order"
    );
}

#[test]
fn a_refused_login_exits_3_naming_the_role() {
    let cluster = ClusterBuilder::new()
        .hba_line("host all app_user 127.0.0.1/32 scram-sha-256")
        .start();
    cluster.execute("create role app_user login password 'right';");
    let url = |password: &str| {
        format!(
            "postgres://app_user:{password}@127.0.0.1:{}/sluice_test",
            cluster.port()
        )
    };
    assert_exit(&export(&url("right"), "select 1", &[]), 0);
    let stderr = assert_exit(&export(&url("wrong"), "select 1", &[]), 3);
    assert!(
        stderr.contains("28P01") && stderr.contains("\"app_user\""),
        "{stderr}"
    );
    let missing = format!(
        "postgres://postgres@127.0.0.1:{}/no_such_database",
        cluster.port()
    );
    let stderr = assert_exit(&export(&missing, "select 1", &[]), 3);
    assert!(
        stderr.contains("3D000") && stderr.contains("no_such_database"),
        "{stderr}"
    );
}

#[test]
fn an_output_file_that_cannot_be_created_exits_4() {
    let db = TestDb::new();
    let output = export(db.url(), "select 1", &["--output", "/nonexistent/x.ndjson"]);
    let stderr = assert_exit(&output, 4);
    assert!(stderr.contains("/nonexistent/x.ndjson"), "{stderr}");
}

const PARENT_AND_CHILD: &str = "
    create table parent (id int primary key);
    insert into parent values (1), (2);
    create table child (id int primary key, parent int references parent, note text default 'none');";

#[test]
fn a_foreign_key_violation_read_from_stdin_exits_1_and_commits_nothing() {
    let db = TestDb::new();
    db.execute(PARENT_AND_CHILD);
    let input = b"{\"id\":1,\"parent\":1}\n{\"id\":2,\"parent\":7}\n{\"id\":3,\"parent\":2}\n";
    let stderr = assert_exit(&import(db.url(), "child", &[], input), 1);
    // Standard input cannot be read twice, so the server's words name the key.
    assert!(
        stderr.contains("23503") && stderr.contains("(parent)=(7)"),
        "{stderr}"
    );
    assert_eq!(db.query_text("select count(*) from child"), "0");
}

#[test]
fn unknown_keys_are_refused_unless_ignored() {
    let db = TestDb::new();
    db.execute(PARENT_AND_CHILD);
    let input = b"{\"id\":1,\"parent\":1,\"extra\":5}\n";
    let stderr = assert_exit(&import(db.url(), "child", &[], input), 5);
    // The library names no option; the command names its own flag.
    assert_eq!(
        stderr,
        "sluice: line 1, column extra: the table has no such column \
         (use --ignore-unknown to skip unknown keys)\n"
    );
    assert_eq!(db.query_text("select count(*) from child"), "0");
    let stderr = assert_exit(
        &import(db.url(), "child", &["--on-error", "skip"], input),
        0,
    );
    assert!(
        stderr.contains(
            "sluice: rejected line 1, column extra: the table has no such column \
             (use --ignore-unknown to skip unknown keys)"
        ),
        "{stderr}"
    );
    assert_exit(&import(db.url(), "child", &["--ignore-unknown"], input), 0);
    assert_eq!(
        db.query_text("select id, parent, note from child"),
        "1|1|none"
    );
}

#[test]
fn columns_choose_what_is_filled_and_the_rest_keep_their_defaults() {
    let db = TestDb::new();
    db.execute(PARENT_AND_CHILD);
    let filled = import(
        db.url(),
        "child",
        &["--columns", "id,parent"],
        b"{\"id\":1,\"parent\":2}\n{\"id\":2}\n",
    );
    assert_exit(&filled, 0);
    assert_eq!(
        db.query_text(
            "select string_agg(concat_ws(',', id, parent, note), ';' order by id) from child"
        ),
        "1,2,none;2,none"
    );
    let refused = import(
        db.url(),
        "child",
        &["--columns", "id,parent"],
        b"{\"id\":3,\"parent\":1,\"note\":\"given\"}\n",
    );
    let stderr = assert_exit(&refused, 5);
    assert!(
        stderr.contains("line 1, column note: the column is not among the columns to import"),
        "{stderr}"
    );
}

#[test]
fn skip_mode_reports_rejected_records_on_stderr_by_default() {
    let db = TestDb::new();
    db.execute(PARENT_AND_CHILD);
    let output = import(
        db.url(),
        "child",
        &["--on-error", "skip"],
        b"{\"id\":4,\"parent\":1}\n{\"id\":5,\"parent\":\"x\"}\n{\"id\":6,\"parent\":9}\n",
    );
    let stderr = assert_exit(&output, 0);
    assert!(
        stderr.contains("rejected line 2, column parent: invalid input syntax for type integer"),
        "{stderr}"
    );
    assert!(stderr.contains("rejected line 3"), "{stderr}");
    assert!(
        stderr.contains("1 of 3 records imported, 2 rejected"),
        "{stderr}"
    );
    assert_eq!(db.query_text("select id from child"), "4");
}
