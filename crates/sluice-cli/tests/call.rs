//! End-to-end tests of `sluice call`.

mod support;

use std::process::Output;

use sluice_testkit::TestDb;

fn call(arguments: &[&str], stdin: &[u8]) -> Output {
    let mut command = support::sluice();
    command.arg("call").args(arguments);
    support::run(&mut command, stdin)
}

#[test]
fn results_come_back_one_line_per_input_line_in_order() {
    let db = TestDb::new();
    db.execute(
        "create table accounts (id int primary key, balance int check (balance >= 0));
                insert into accounts values (1, 100), (2, 100), (3, 100);",
    );
    let output = call(
        &[
            "--db",
            db.url(),
            "--query",
            "update accounts set balance = balance - $2 where id = $1 returning id, balance",
            "--param-names",
            "id,amount",
            "--stats",
        ],
        b"[1, 10]\n\n{\"id\": 2, \"amount\": 20}\n[3, 30]\n",
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "{\"line\":1,\"rows\":[{\"id\":1,\"balance\":90}]}\n\
         {\"line\":3,\"rows\":[{\"id\":2,\"balance\":80}]}\n\
         {\"line\":4,\"rows\":[{\"id\":3,\"balance\":70}]}\n"
    );
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("calls: 3\nsucceeded: 3\n"));
}

#[test]
fn a_failure_in_single_mode_exits_1_and_commits_nothing() {
    let db = TestDb::new();
    db.execute(
        "create table accounts (id int primary key, balance int check (balance >= 0));
                insert into accounts values (1, 100), (2, 100);",
    );
    let output = call(
        &[
            "--db",
            db.url(),
            "--query",
            "update accounts set balance = balance - $2 where id = $1",
        ],
        b"[1, 10]\n[2, 500]\n",
    );
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("{\"line\":2,\"error\":{\"code\":\"23514\""),
        "{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("line 2"),
        "nothing committed is said"
    );
    assert_eq!(db.query_text("select sum(balance) from accounts"), "200");
}

const DEBIT: &str = "update accounts set balance = balance - $2 where id = $1";

fn accounts(db: &TestDb) {
    db.execute(
        "create table accounts (id int primary key, balance int check (balance >= 0));
         insert into accounts values (1, 100), (2, 100);",
    );
}

#[test]
fn an_unreadable_line_in_single_mode_exits_5_and_commits_nothing() {
    let db = TestDb::new();
    accounts(&db);
    let output = call(
        &["--db", db.url(), "--query", DEBIT],
        b"[1, 10]\n[2, 5]\nnot json\n[1, 1]\n",
    );
    assert_eq!(output.status.code(), Some(5));
    let stderr = String::from_utf8_lossy(&output.stderr);
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
    let db = TestDb::new();
    accounts(&db);
    let output = call(
        &[
            "--db",
            db.url(),
            "--query",
            DEBIT,
            "--transaction",
            "each",
            "--stats",
        ],
        b"[1, 10]\n[2, 500]\nnot json\n[1, 5]\n",
    );
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[0], "{\"line\":1,\"affected\":1}");
    assert!(lines[1].starts_with("{\"line\":2,\"error\":{\"code\":\"23514\""));
    assert!(lines[2].starts_with("{\"line\":3,\"error\":{\"message\":\"invalid JSON"));
    assert_eq!(lines[3], "{\"line\":4,\"affected\":1}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("calls: 4\nsucceeded: 2\nfailed: 2\n"),
        "{stderr}"
    );
    assert_eq!(
        db.query_text("select string_agg(balance::text, ',' order by id) from accounts"),
        "85,100"
    );
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

#[test]
fn the_window_bounds_the_calls_in_flight() {
    let db = TestDb::new();
    let input: String = (1..=300).map(|value| format!("[{value}]\n")).collect();
    let run = |window: &str| {
        let output = call(
            &[
                "--db",
                db.url(),
                "--query",
                "select $1::int * 2 as doubled",
                "--window-bytes",
                window,
                "--stats",
            ],
            input.as_bytes(),
        );
        assert_eq!(output.status.code(), Some(0));
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (
            String::from_utf8(output.stdout).unwrap(),
            query_round_trips(&stderr),
        )
    };
    let (pipelined, pipelined_trips) = run("1048576");
    let (one_at_a_time, one_at_a_time_trips) = run("1");
    assert_eq!(pipelined, one_at_a_time, "same answers, in order");
    assert_eq!(pipelined.lines().count(), 300);
    // A window of one byte holds one call: each waits for its answer.
    assert!(one_at_a_time_trips >= 300, "{one_at_a_time_trips}");
    assert!(pipelined_trips <= 10, "{pipelined_trips}");
}

#[test]
fn sets_follow_the_gateway_rules_and_names_must_match_the_statement() {
    let db = TestDb::new();
    db.execute("create table notes (id int primary key, body jsonb, note text)");
    let sql = "insert into notes values ($1, $2, $3) returning id, body, note";
    let output = call(
        &["--db", db.url(), "--query", sql, "--param-names", "id,body,note", "--transaction", "each"],
        b"{\"$id\": 1, \"body\": {\"a\": [1]}}\n[2]\n[3, null, \"x\", 4]\n{\"id\": 5, \"colour\": 1}\n7\n",
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "{\"line\":1,\"rows\":[{\"id\":1,\"body\":{\"a\": [1]},\"note\":null}]}",
            "{\"line\":2,\"rows\":[{\"id\":2,\"body\":null,\"note\":null}]}",
        ]
    );
    for (line, fault) in [
        (
            2,
            "4 values, but the statement takes 3 parameters (id, body, note)",
        ),
        (3, "parameter \\\"colour\\\": unknown parameter"),
        (4, "expected a JSON array or object"),
    ] {
        assert!(lines[line].contains(fault), "{}: {fault}", lines[line]);
    }
    assert_eq!(db.query_text("select count(*) from notes"), "2");

    let output = call(
        &["--db", db.url(), "--query", sql, "--param-names", "id,body"],
        b"[9]\n",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("--param-names gives 2 names, but the statement takes 3 parameters"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
