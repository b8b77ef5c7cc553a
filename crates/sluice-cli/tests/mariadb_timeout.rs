//! `--timeout` on MariaDB: a connection that goes silent after the login (a
//! relay in front of the real server stops forwarding, see
//! [`support::relay`]) ends `export`, `import`, `call` and `copy` with the
//! same message and exit code as on PostgreSQL, an export saying its output is
//! incomplete, an import, a single-transaction call or a copy committing
//! nothing; rows that keep moving, however slowly, are never cut, while a
//! server silent for longer than the limit is given up, busy or not (the limit
//! cannot tell the two apart).

mod support;

use std::process::Output;
use std::time::{Duration, Instant};

use sluice_testkit::{TestDb, TestMariaDb};
use support::relay::{Relay, StallAfter};
use support::{assert_exit, export, rows_in_order, run, sluice, split_url};

/// A relay in front of `db`'s server, and `db`'s URL through it.
fn relay_to(db: &TestMariaDb, stall: StallAfter) -> (Relay, String) {
    let (before, upstream, after) = split_url(db.url());
    let relay = Relay::start(upstream, stall);
    let url = format!("{before}{}{after}", relay.address());
    (relay, url)
}

/// NDJSON lines `{"n": …}` for `rows` rows.
fn numbers(rows: usize) -> Vec<u8> {
    (1..=rows)
        .map(|n| format!("{{\"n\":{n}}}\n"))
        .collect::<String>()
        .into_bytes()
}

/// Asserts the command was ended by the 1 s timeout.
fn assert_stalled(output: &Output) {
    let stderr = assert_exit(output, 3);
    assert!(
        stderr.contains("stopped answering") && stderr.contains("(--timeout 1s)"),
        "{stderr}"
    );
}

#[test]
fn an_export_stalled_mid_result_ends_at_the_timeout_saying_the_output_is_incomplete() {
    let db = TestMariaDb::new();
    let (relay, url) = relay_to(&db, StallAfter::server_bytes(200_000));
    let started = Instant::now();
    let query = "select seq as n from seq_1_to_200000";
    let output = export(&url, query, &["--timeout", "1s"]);
    let stderr = assert_exit(&output, 3);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(
        stderr,
        format!(
            "sluice: the database server at {} stopped answering: nothing was \
             received or sent for 1s, so the connection was given up (--timeout 1s); \
             the output is incomplete\n",
            relay.address()
        )
    );
    // What reached standard output is whole rows, in order, and not all.
    let rows = rows_in_order(&output.stdout);
    assert!(rows < 200_000, "{rows} rows");
}

#[test]
fn an_import_stalled_mid_way_commits_nothing() {
    let db = TestMariaDb::new();
    db.execute("create table t (n int)");
    let (relay, url) = relay_to(&db, StallAfter::client_bytes(100_000));
    let started = Instant::now();
    let output = run(
        sluice().args([
            "import",
            "--db",
            &url,
            "--table",
            "t",
            "--format",
            "ndjson",
            "--timeout",
            "1s",
        ]),
        &numbers(100_000),
    );
    assert_stalled(&output);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(db.query_text("select count(*) from t"), "0");
    // The server's session ends with the relay's sockets, its load undone.
    drop(relay);
}

#[test]
fn a_call_in_one_transaction_stalled_mid_way_commits_nothing() {
    let db = TestMariaDb::new();
    db.execute("create table t (n int)");
    let (relay, url) = relay_to(&db, StallAfter::client_bytes(50_000));
    let sets: String = (1..=100_000).map(|n| format!("[{n}]\n")).collect();
    let output = run(
        sluice().args([
            "call",
            "--db",
            &url,
            "--query",
            "insert into t values (?)",
            "--transaction",
            "single",
            "--timeout",
            "1s",
        ]),
        sets.as_bytes(),
    );
    assert_stalled(&output);
    assert_eq!(db.query_text("select count(*) from t"), "0");
    drop(relay);
}

#[test]
fn a_copy_into_mariadb_stalled_mid_way_commits_nothing() {
    let source = TestDb::new();
    let target = TestMariaDb::new();
    target.execute("create table t (n bigint)");
    let (relay, url) = relay_to(&target, StallAfter::client_bytes(100_000));
    let output = run(
        sluice().args([
            "copy",
            "--from",
            source.url(),
            "--query",
            "select g as n from generate_series(1, 200000) g",
            "--to",
            &url,
            "--table",
            "t",
            "--timeout",
            "1s",
        ]),
        b"",
    );
    assert_stalled(&output);
    assert_eq!(target.query_text("select count(*) from t"), "0");
    drop(relay);
}

#[test]
fn rows_that_keep_moving_are_not_cut_but_a_silent_server_is() {
    let db = TestMariaDb::new();
    // Six rows 0.4 s apart, each large enough to leave the server at once:
    // 2.4 s in all, never 1 s without a byte.
    let moving = "select seq as n, repeat('x', 100000) as filler, sleep(0.4) as nap \
                  from seq_1_to_6";
    let output = export(db.url(), moving, &["--timeout", "1s"]);
    assert_exit(&output, 0);
    assert_eq!(String::from_utf8(output.stdout).unwrap().lines().count(), 6);

    // A server computing for 2 s before its first byte is, to the limit, a
    // silent one: --timeout is for where a stalled network is likelier than a
    // long silence, and without it the query is waited on.
    assert_stalled(&export(
        db.url(),
        "select sleep(2) as nap",
        &["--timeout", "1s"],
    ));
    let output = export(db.url(), "select sleep(2) as nap", &[]);
    assert_exit(&output, 0);
}
