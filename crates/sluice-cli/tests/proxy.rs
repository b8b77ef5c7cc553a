//! `sluice proxy` as a command against a real PostgreSQL: its connection limit,
//! and refusals counted in the live summary, the exit report and `--report`;
//! findings as fields in the JSON report and `--fail-on` as a CI gate.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_core::Meter;
use sluice_postgres::config::Target;
use sluice_postgres::tls::TlsSettings;
use sluice_postgres::{Config, Connection};
use sluice_testkit::TestDb;
use support::proxy::RunningProxy;

fn start_proxy(upstream: &str, max_connections: &str, report: &Path) -> RunningProxy {
    start_proxy_with(upstream, &["--max-connections", max_connections], report)
}

fn start_proxy_with(upstream: &str, options: &[&str], report: &Path) -> RunningProxy {
    let report = report.to_str().expect("a UTF-8 path");
    let options: Vec<&str> = options
        .iter()
        .copied()
        .chain(["--output", report])
        .collect();
    RunningProxy::start(upstream, &options)
}

/// The SQLSTATE a raw client sending `startup` through `proxy` is answered with.
fn refusal_code(proxy: &str, startup: &[u8]) -> String {
    let mut stream = TcpStream::connect(proxy).unwrap();
    stream.write_all(startup).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    assert_eq!(answer.first(), Some(&b'E'), "an ErrorResponse: {answer:?}");
    let code = answer
        .split(|&byte| byte == 0)
        .find_map(|field| field.strip_prefix(b"C"))
        .expect("a SQLSTATE field");
    String::from_utf8_lossy(code).into_owned()
}

fn startup_message(config: &Config) -> Vec<u8> {
    let mut body = 196_608u32.to_be_bytes().to_vec();
    for (name, value) in [("user", &config.user), ("database", &config.database)] {
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut message = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    message.extend_from_slice(&body);
    message
}

/// `host:port` of the test server.
fn upstream(db: &TestDb) -> String {
    let config: Config = db.url().parse().unwrap();
    let Target::Tcp(host, port) = config.targets[0].clone() else {
        panic!("the test server is reached over TCP");
    };
    format!("{host}:{port}")
}

/// The proxy's listening address, from its first line, and `db`'s settings
/// pointing at it.
fn through(proxy: &mut RunningProxy, db: &TestDb) -> (String, Config) {
    let address = proxy.address();
    let (proxy_host, proxy_port) = address.rsplit_once(':').unwrap();
    let mut config: Config = db.url().parse().unwrap();
    config.targets = vec![Target::Tcp(proxy_host.into(), proxy_port.parse().unwrap())];
    // The proxy reads the protocol: it cannot see into TLS.
    config.tls = TlsSettings::disabled();
    (address, config)
}

/// One proxy run with a limit of one connection: one client admitted, one
/// refused; returns the whole stderr and the report file.
fn run_with_one_refusal(db: &TestDb, report: &Path) -> (String, String) {
    let mut proxy = start_proxy(&upstream(db), "1", report);
    proxy.line_with("at most 1 connections");
    let (address, config) = through(&mut proxy, db);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let admitted = runtime
        .block_on(Connection::connect(&config, &Meter::new()))
        .unwrap();
    assert_eq!(refusal_code(&address, &startup_message(&config)), "53300");
    proxy.line_with("1 refused at the limit of 1");
    runtime.block_on(admitted.close());
    let stderr = proxy.stop();
    let report = std::fs::read_to_string(report).unwrap();
    (stderr, report)
}

#[test]
fn the_proxy_command_refuses_beyond_its_limit_and_counts_it() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();

    let (stderr, json) = run_with_one_refusal(&db, &directory.path().join("report.json"));
    assert!(
        stderr.contains("refused connections: 1 (the limit of 1 open connections was reached)"),
        "the exit report counts the refusal:\n{stderr}"
    );
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["refused_connections"], 1, "{json}");
    assert_eq!(json["max_connections"], 1, "{json}");
    assert_eq!(json["connections"].as_array().unwrap().len(), 1, "{json}");

    let (_, csv) = run_with_one_refusal(&db, &directory.path().join("report.csv"));
    assert!(
        csv.lines().any(|line| line
            == "\"(connections refused: the proxy's limit was reached)\",1,0,0,0,0,\"\""),
        "{csv}"
    );
}

#[test]
fn a_limit_of_no_connections_is_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "--max-connections", "0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the proxy must allow at least 1 connection"),
        "{stderr}"
    );
}

#[test]
fn a_delay_without_a_unit_is_a_usage_error_asking_for_one() {
    // "30" was 30 ms here and an error in the server's configuration: now both
    // ask for the unit.
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "--rtt", "30"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("give a unit: 30s, 30ms"), "{stderr}");
}

#[test]
fn shaping_options_slow_every_trip_and_sigusr1_writes_the_report() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    let report = directory.path().join("report.json");
    let options = ["--rtt", "4ms", "--jitter", "2ms", "--bandwidth", "8mbit"];
    let mut proxy = start_proxy_with(&upstream(&db), &options, &report);
    let (_, config) = through(&mut proxy, &db);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut connection = runtime
        .block_on(Connection::connect(&config, &Meter::new()))
        .unwrap();
    // Lower bounds only: a busy machine makes trips slower, never faster.
    // Each trip is delayed by the RTT ± half the jitter: at least 3 ms.
    for _ in 0..10 {
        let started = Instant::now();
        runtime
            .block_on(connection.query_rows("select 1", &[]))
            .unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(3),
            "{:?}",
            started.elapsed()
        );
    }
    // 8 Mbit/s is 1 MB/s: a 1 MB answer takes about a second to arrive.
    let started = Instant::now();
    let rows = runtime
        .block_on(connection.query_rows("select repeat('x', 1000000)", &[]))
        .unwrap();
    assert_eq!(rows[0][0].as_deref().map(str::len), Some(1_000_000));
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );

    // SIGUSR1: the report, to stderr and the file, while the proxy keeps running.
    assert!(!report.exists());
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(proxy.child.id() as libc::pid_t, libc::SIGUSR1) };
    proxy.line_with("round trips, ");
    let deadline = Instant::now() + Duration::from_secs(20);
    let json: serde_json::Value = loop {
        let text = std::fs::read_to_string(&report).unwrap_or_default();
        if let Ok(json) = serde_json::from_str(&text) {
            break json;
        }
        assert!(Instant::now() < deadline, "no report written on SIGUSR1");
        std::thread::sleep(Duration::from_millis(20));
    };
    let statements = json["statements"]
        .as_array()
        .expect("statements in the report");
    let select_one = statements
        .iter()
        .find(|statement| statement["example"] == "select 1")
        .unwrap_or_else(|| panic!("select 1 in {json}"));
    assert_eq!(select_one["executions"], 10, "{json}");
    runtime
        .block_on(connection.query_rows("select 2", &[]))
        .expect("still proxying after SIGUSR1");
    runtime.block_on(connection.close());
    proxy.stop();
}

/// Books of authors, loaded as an ORM's lazy many-to-one relation does: the
/// books in one statement, then each book's author by its key, once per
/// distinct author (the identity map holds the rest).
fn lazy_many_to_one(config: &Config) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut connection = Connection::connect(config, &Meter::new()).await.unwrap();
        let books = connection
            .query_rows("select id, author_id from books order by id", &[])
            .await
            .unwrap();
        assert_eq!(books.len(), 1000);
        let mut loaded = std::collections::HashSet::new();
        for book in &books {
            let author = book[1].clone().unwrap();
            if loaded.insert(author.clone()) {
                connection
                    .query_rows(
                        "select id, name from authors where id = $1",
                        &[Some(author.as_str())],
                    )
                    .await
                    .unwrap();
            }
        }
        connection.close().await;
    });
}

#[test]
fn a_lazy_many_to_one_load_is_an_n_plus_one_that_fails_the_gate() {
    let db = TestDb::new();
    db.execute(
        "create table authors (id int primary key, name text);
         insert into authors select n, 'author ' || n from generate_series(5001, 5100) n;
         create table books (id int primary key, author_id int references authors);
         insert into books select n, 5001 + n % 100 from generate_series(1, 1000) n;",
    );
    let directory = tempfile::tempdir().unwrap();
    let report = directory.path().join("report.json");
    let options = ["--fail-on", "row-by-row,n-plus-one"];
    let mut proxy = start_proxy_with(&upstream(&db), &options, &report);
    let (_, config) = through(&mut proxy, &db);
    lazy_many_to_one(&config);
    let (code, stderr) = proxy.stop_with_code();
    assert_eq!(code, Some(6), "{stderr}");
    assert!(stderr.contains("found n-plus-one (--fail-on)"), "{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let finding = &json["findings"][0];
    assert_eq!(finding["kind"], "n-plus-one", "{json}");
    assert_eq!(
        finding["parent"],
        "select id, author_id from books order by id"
    );
    assert_eq!(
        finding["statement"],
        "select id, name from authors where id = $1"
    );
    assert_eq!(finding["parent_rows"], 1000, "{finding}");
    assert_eq!(finding["keys"], 100, "{finding}");
    assert_eq!(finding["executions"], 100, "{finding}");
    assert_eq!(finding["round_trips"], 100, "{finding}");
    let advice = finding["advice"].as_str().unwrap();
    assert!(
        advice.contains("100 keys") && !advice.contains("COPY"),
        "{advice}"
    );
    assert!(finding["message"]
        .as_str()
        .unwrap()
        .starts_with("N+1 query"));
    // Named as the N+1 it is, not also as row by row.
    let kinds: Vec<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| finding["kind"].as_str().unwrap())
        .collect();
    assert!(!kinds.contains(&"row-by-row"), "{kinds:?}");

    // Without the pattern, the gate passes.
    let mut quiet = start_proxy_with(&upstream(&db), &options, &report);
    let (_, config) = through(&mut quiet, &db);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
            connection
                .query_rows(
                    "select b.id, a.name from books b join authors a on a.id = b.author_id",
                    &[],
                )
                .await
                .unwrap();
            connection.close().await;
        });
    let (code, stderr) = quiet.stop_with_code();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn an_unknown_kind_of_finding_is_a_usage_error_listing_the_kinds() {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["proxy", "--fail-on", "n+1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not a kind of finding: n-plus-one, row-by-row"),
        "{stderr}"
    );
}
