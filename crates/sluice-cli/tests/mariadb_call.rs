//! `sluice call` on MariaDB through the binary: NDJSON parameter sets on
//! standard input, one result line per input line, exit codes, and the round
//! trips `--stats` counts (the PostgreSQL cases of `call.rs`, for MariaDB).

mod support;

use sluice_testkit::TestMariaDb;
use support::{assert_exit, run, sluice};

fn call(url: &str, sql: &str, extra: &[&str], stdin: &[u8]) -> std::process::Output {
    let mut command = sluice();
    command
        .args(["call", "--db", url, "--query", sql])
        .args(extra)
        .env_remove("MYSQL_PWD");
    run(&mut command, stdin)
}

/// `round trips for the query: N` from `--stats`.
fn query_round_trips(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("round trips for the query: "))
        .unwrap_or_else(|| panic!("no round trips in the stats:\n{stderr}"))
        .parse()
        .unwrap()
}

const DEBIT: &str = "update accounts set balance = balance - ? where id = ?";

fn accounts(db: &TestMariaDb) {
    db.execute(
        "create table accounts (id int primary key, balance int check (balance >= 0));
         insert into accounts values (1, 100), (2, 100);",
    );
}

#[test]
fn ten_thousand_inserts_take_a_few_round_trips_in_one_bulk() {
    let db = TestMariaDb::new();
    db.execute("create table people (id int primary key, name varchar(40))");
    let input: String = (1..=10_000)
        .map(|id| format!("[{id}, \"name {id}\"]\n"))
        .collect();
    let output = call(
        db.url(),
        "insert into people (id, name) values (?, ?)",
        &["--stats"],
        input.as_bytes(),
    );
    let stderr = assert_exit(&output, 0);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 10_000);
    // A bulk's sets have no counts of their own (its total is 10,000).
    assert_eq!(
        stdout.lines().next(),
        Some("{\"line\":1,\"affected\":null}")
    );
    assert_eq!(
        stdout.lines().last(),
        Some("{\"line\":10000,\"affected\":null}")
    );
    assert!(
        stderr.starts_with("calls: 10000\nsucceeded: 10000\nfailed: 0\n"),
        "{stderr}"
    );
    // Prepare, the bulk, COMMIT: 3 when the whole input is read at once; a
    // pipe that is not ready splits the bulk, one more trip per piece.
    let trips = query_round_trips(&stderr);
    assert!((3..=20).contains(&trips), "{trips} round trips\n{stderr}");
    assert_eq!(
        db.query_text("select count(*), sum(id) from people"),
        "10000\t50005000"
    );
}

#[test]
fn rows_come_back_one_line_per_input_line_in_order() {
    let db = TestMariaDb::new();
    accounts(&db);
    let output = call(
        db.url(),
        "select id, balance - ? as after from accounts where id = ?",
        &["--param-names", "amount,id", "--stats"],
        b"[10, 1]\n\n{\"id\": 2, \"amount\": 20}\n[30, 3]\n",
    );
    let stderr = assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "{\"line\":1,\"rows\":[{\"id\":1,\"after\":90}]}\n\
         {\"line\":3,\"rows\":[{\"id\":2,\"after\":80}]}\n\
         {\"line\":4,\"rows\":[]}\n"
    );
    assert!(stderr.starts_with("calls: 3\nsucceeded: 3\n"), "{stderr}");
}

#[test]
fn a_failure_in_single_mode_exits_1_and_commits_nothing() {
    let db = TestMariaDb::new();
    accounts(&db);
    let output = call(db.url(), DEBIT, &[], b"[10, 1]\n[500, 2]\n[5, 1]\n");
    let stderr = assert_exit(&output, 1);
    assert!(
        stderr.contains("line 2") && stderr.contains("nothing was committed"),
        "{stderr}"
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    // The bulk failed; its sets ran again one by one to find the one refused.
    assert_eq!(lines[0], "{\"line\":1,\"affected\":1}");
    assert!(
        lines[1].starts_with("{\"line\":2,\"error\":{\"code\":\"23000\""),
        "{stdout}"
    );
    assert_eq!(lines[2], "{\"line\":3,\"rolled_back\":true}");
    assert_eq!(db.query_text("select sum(balance) from accounts"), "200");
}

#[test]
fn a_duplicate_key_in_single_mode_is_named_with_its_line() {
    let db = TestMariaDb::new();
    db.execute("create table people (id int primary key, name varchar(40))");
    let output = call(
        db.url(),
        "insert into people values (?, ?)",
        &[],
        b"[1, \"a\"]\n[2, \"b\"]\n[1, \"c\"]\n",
    );
    let stderr = assert_exit(&output, 1);
    assert!(
        stderr.contains("line 3: ERROR 23000: Duplicate entry '1'"),
        "{stderr}"
    );
    assert_eq!(db.query_text("select count(*) from people"), "0");
}

#[test]
fn an_unreadable_line_in_single_mode_exits_5_and_commits_nothing() {
    let db = TestMariaDb::new();
    accounts(&db);
    let output = call(db.url(), DEBIT, &[], b"[10, 1]\n[5, 2]\nnot json\n[1, 1]\n");
    let stderr = assert_exit(&output, 5);
    assert!(
        stderr.contains("line 3") && stderr.contains("nothing was committed"),
        "{stderr}"
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("{\"line\":3,\"error\":{\"message\":\"invalid JSON"),
        "{stdout}"
    );
    assert_eq!(db.query_text("select sum(balance) from accounts"), "200");
}

#[test]
fn each_mode_commits_the_good_calls_and_exits_0() {
    let db = TestMariaDb::new();
    accounts(&db);
    let output = call(
        db.url(),
        DEBIT,
        &["--transaction", "each", "--stats"],
        b"[10, 1]\n[500, 2]\nnot json\n[5, 1]\n",
    );
    let stderr = assert_exit(&output, 0);
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[0], "{\"line\":1,\"affected\":1}");
    // MariaDB's CHECK violation: SQLSTATE 23000, error 4025.
    assert!(
        lines[1].starts_with("{\"line\":2,\"error\":{\"code\":\"23000\""),
        "{stdout}"
    );
    assert!(lines[2].starts_with("{\"line\":3,\"error\":{\"message\":\"invalid JSON"));
    assert_eq!(lines[3], "{\"line\":4,\"affected\":1}");
    assert!(
        stderr.contains("calls: 4\nsucceeded: 2\nfailed: 2\n"),
        "{stderr}"
    );
    assert!(stderr.contains("2 of 4 calls failed"), "{stderr}");
    assert_eq!(
        db.query_text("select group_concat(balance order by id) from accounts"),
        "85,100"
    );
}

#[test]
fn the_window_bounds_the_calls_in_flight() {
    let db = TestMariaDb::new();
    let input: String = (1..=300).map(|value| format!("[{value}]\n")).collect();
    let run = |window: &str| {
        let output = call(
            db.url(),
            "select ? * 2 as doubled",
            &["--window-bytes", window, "--stats"],
            input.as_bytes(),
        );
        let stderr = assert_exit(&output, 0);
        (
            String::from_utf8(output.stdout).unwrap(),
            query_round_trips(&stderr),
        )
    };
    let (pipelined, pipelined_trips) = run("1048576");
    let (one_at_a_time, one_at_a_time_trips) = run("1");
    assert_eq!(pipelined, one_at_a_time, "same answers, in order");
    assert_eq!(pipelined.lines().count(), 300);
    assert_eq!(
        pipelined.lines().nth(2),
        Some("{\"line\":3,\"rows\":[{\"doubled\":6}]}")
    );
    // A window of one byte holds one call: each waits for its answer.
    assert!(one_at_a_time_trips >= 300, "{one_at_a_time_trips}");
    assert!(pipelined_trips <= 10, "{pipelined_trips}");
}
