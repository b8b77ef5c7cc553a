//! sluice's own commands against a network that fails on purpose: `sluice
//! proxy --fault …` (and its control API) between them and a real PostgreSQL.
//! A server cut mid-export exits 3 saying the output is incomplete; cut
//! mid-import or mid-`call` in one transaction, nothing is committed; a
//! stall longer than `--timeout` (or `connect_timeout`, while connecting)
//! ends the command with a message naming the limit; `refuse` is a clear
//! connection error.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_testkit::TestDb;
use support::proxy::RunningProxy;
use support::{assert_exit, export, rows_in_order, run, sluice, split_url};

/// `sluice proxy` in front of the test server with these options.
fn start_proxy(db: &TestDb, options: &[&str]) -> RunningProxy {
    let (_, upstream, _) = split_url(db.url());
    RunningProxy::start(upstream, options)
}

/// The test database's URL through `proxy`, without TLS (the proxy reads the
/// protocol) and with `extra` parameters.
fn url_through(db: &TestDb, proxy: &mut RunningProxy, extra: &str) -> String {
    let (before, _, after) = split_url(db.url());
    let address = proxy.address();
    let separator = if after.contains('?') { '&' } else { '?' };
    format!("{before}{address}{after}{separator}sslmode=disable{extra}")
}

/// NDJSON lines `{"n": …}` for `rows` rows.
fn numbers(rows: usize) -> Vec<u8> {
    (1..=rows)
        .map(|n| format!("{{\"n\":{n}}}\n"))
        .collect::<String>()
        .into_bytes()
}

const BIG: &str = "select g as n from generate_series(1, 200000) g";

#[test]
fn an_export_cut_mid_stream_exits_3_saying_the_output_is_incomplete() {
    let db = TestDb::new();
    for fault in ["cut:at-data-row=20000", "reset:at-data-row=20000"] {
        let mut proxy = start_proxy(&db, &["--fault", fault]);
        let url = url_through(&db, &mut proxy, "");
        let output = export(&url, BIG, &[]);
        let stderr = assert_exit(&output, 3);
        assert!(
            stderr.starts_with("sluice: connection to the database was lost")
                || stderr.starts_with("sluice: the database server closed the connection"),
            "{fault}: {stderr}"
        );
        assert!(
            stderr.ends_with("; the output is incomplete\n"),
            "{fault}: {stderr}"
        );
        // Whatever reached standard output is whole rows, in order, and fewer
        // than the cut let through.
        let rows = rows_in_order(&output.stdout);
        assert!(rows < 20000, "{fault}: {rows} rows");
    }

    // To a file: nothing is left under its name, or only FILE.partial when asked.
    let mut proxy = start_proxy(&db, &["--fault", "cut:at-data-row=20000"]);
    let url = url_through(&db, &mut proxy, "");
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("out.ndjson");
    let path = file.to_str().unwrap();
    let stderr = assert_exit(&export(&url, BIG, &["--output", path]), 3);
    assert!(
        stderr.ends_with(&format!(
            "; the output was incomplete and has been removed ({path} not written)\n"
        )),
        "{stderr}"
    );
    assert!(!file.exists());
    let stderr = assert_exit(&export(&url, BIG, &["--output", path, "--keep-partial"]), 3);
    assert!(stderr.contains("is kept as"), "{stderr}");
    assert!(!file.exists() && directory.path().join("out.ndjson.partial").exists());
}

#[test]
fn an_import_cut_mid_copy_commits_nothing() {
    let db = TestDb::new();
    db.execute("create table t (n int)");
    let mut proxy = start_proxy(&db, &["--fault", "cut:at-copy-data=10000"]);
    let url = url_through(&db, &mut proxy, "");
    let output = run(
        sluice().args(["import", "--db", &url, "--table", "t", "--format", "ndjson"]),
        &numbers(50_000),
    );
    let stderr = assert_exit(&output, 3);
    assert!(stderr.starts_with("sluice: "), "{stderr}");
    assert_eq!(db.query_text("select count(*) from t"), "0");
    let report = proxy.stop();
    assert!(
        report.contains("fault 1: cut:at-copy-data=10000"),
        "{report}"
    );
}

#[test]
fn a_call_in_one_transaction_cut_mid_way_commits_nothing() {
    let db = TestDb::new();
    db.execute("create table t (n int)");
    let call = |url: &str, mode: &str| {
        run(
            sluice().args([
                "call",
                "--db",
                url,
                "--query",
                "insert into t values ($1::int)",
                "--transaction",
                mode,
            ]),
            &(1..=500)
                .map(|n| format!("{n}\n"))
                .collect::<String>()
                .into_bytes(),
        )
    };
    let mut proxy = start_proxy(&db, &["--fault", "cut:at-statement=200"]);
    let url = url_through(&db, &mut proxy, "");
    // Each call on its own: the calls before the cut commit, so it is mid-way.
    assert_exit(&call(&url, "each"), 3);
    let committed: u32 = db.query_text("select count(*) from t").parse().unwrap();
    assert!((1..500).contains(&committed), "{committed} calls committed");
    db.execute("truncate t");
    // One transaction: none of them.
    let stderr = assert_exit(&call(&url, "single"), 3);
    assert!(stderr.starts_with("sluice: "), "{stderr}");
    assert_eq!(db.query_text("select count(*) from t"), "0");
}

#[test]
fn a_stall_longer_than_the_timeout_ends_the_command_naming_the_limit() {
    let db = TestDb::new();
    db.execute("create table t (n int)");
    // A stall with no duration lasts until the proxy goes: only the timeout ends it.
    let mut proxy = start_proxy(&db, &["--fault", "stall:at-data-row=1000"]);
    let url = url_through(&db, &mut proxy, "");
    let started = Instant::now();
    let stderr = assert_exit(&export(&url, BIG, &["--timeout", "1s"]), 3);
    assert!(started.elapsed() < Duration::from_secs(30));
    let address = proxy.address();
    assert_eq!(
        stderr,
        format!(
            "sluice: the database server at {address} stopped answering: nothing was \
             received or sent for 1s, so the connection was given up (--timeout 1s); \
             the output is incomplete\n"
        )
    );

    // Mid-import: the rows stop flowing, nothing is committed.
    let mut proxy = start_proxy(&db, &["--fault", "stall:at-copy-data=1000"]);
    let url = url_through(&db, &mut proxy, "");
    let output = run(
        sluice().args(["import", "--db", &url, "--table", "t", "--timeout", "1s"]),
        &numbers(100_000),
    );
    let stderr = assert_exit(&output, 3);
    assert!(
        stderr.contains("stopped answering") && stderr.contains("(--timeout 1s)"),
        "{stderr}"
    );
    assert_eq!(db.query_text("select count(*) from t"), "0");

    // While connecting: connect_timeout covers the login, not only the socket.
    let mut proxy = start_proxy(&db, &["--fault", "stall"]);
    let url = url_through(&db, &mut proxy, "&connect_timeout=2");
    let address = proxy.address();
    let started = Instant::now();
    let stderr = assert_exit(&export(&url, "select 1", &[]), 3);
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert_eq!(
        stderr,
        format!(
            "sluice: could not connect to {address}: no complete login within 2s \
             (connect_timeout)\n"
        )
    );
}

#[test]
fn refuse_is_a_clear_connection_error() {
    let db = TestDb::new();
    let mut proxy = start_proxy(&db, &["--fault", "refuse:once"]);
    let url = url_through(&db, &mut proxy, "");
    let stderr = assert_exit(&export(&url, "select 1", &[]), 3);
    assert_eq!(
        stderr,
        "sluice: FATAL 08004: sluice proxy refuses new connections (fault 1: refuse); \
         hint: Remove the proxy's refuse fault to let clients in again.\n"
    );
    // `once`: spent, so the next client gets in.
    assert_exit(&export(&url, "select 1", &[]), 0);
}

/// One HTTP/1.1 exchange with the control API: the status and the JSON body.
fn http(address: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let body = body.map(|body| body.to_string());
    let (status, json) = sluice_testkit::http_exchange(address, method, path, body.as_deref());
    (status, serde_json::from_str(&json).unwrap_or(Value::Null))
}

#[test]
fn faults_added_through_the_control_api_act_on_new_connections_until_removed() {
    let db = TestDb::new();
    let mut proxy = start_proxy(&db, &["--control", "127.0.0.1:0"]);
    let control = proxy.control();
    let url = url_through(&db, &mut proxy, "");
    assert_exit(&export(&url, BIG, &[]), 0);

    let (status, added) = http(
        &control,
        "POST",
        "/faults",
        Some(json!({"spec": "cut:at-data-row=100"})),
    );
    assert_eq!(status, 201, "{added}");
    let id = added["id"].as_u64().unwrap();
    let stderr = assert_exit(&export(&url, BIG, &[]), 3);
    assert!(stderr.ends_with("; the output is incomplete\n"), "{stderr}");
    assert_eq!(
        http(&control, "GET", "/faults", None),
        (
            200,
            json!({"faults": [{"id": id, "spec": "cut:at-data-row=100", "acted": 1}]})
        )
    );
    assert_eq!(
        http(&control, "DELETE", &format!("/faults/{id}"), None).0,
        200
    );
    assert_eq!(
        http(&control, "GET", "/faults", None),
        (200, json!({"faults": []}))
    );
    assert_exit(&export(&url, BIG, &[]), 0);
}

#[test]
fn bad_fault_settings_are_usage_errors() {
    let usage = |args: &[&str]| assert_exit(&run(sluice().args(args), b""), 2);
    let stderr = usage(&["proxy", "--fault", "cut:at-data-row=0"]);
    assert!(
        stderr.contains("at-data-row=0: give a count from 1"),
        "{stderr}"
    );
    let stderr = usage(&["proxy", "--listen", "127.0.0.1:0", "--control", "0.0.0.0:0"]);
    assert!(
        stderr.contains("--control 0.0.0.0:0 is not a loopback address")
            && stderr.contains("--control-allow-remote"),
        "{stderr}"
    );
    let stderr = usage(&[
        "export",
        "--db",
        "postgres://x",
        "--query",
        "select 1",
        "--timeout",
        "5",
    ]);
    assert!(stderr.contains("give a unit: 5s, 5ms"), "{stderr}");
}
