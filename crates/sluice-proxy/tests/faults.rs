//! Faults on purpose, between real clients and a real PostgreSQL: a cut at the
//! K-th `DataRow` leaves the client exactly K−1 whole rows, a cut mid-COPY or
//! before a statement commits nothing, a reset is a reset, a stall holds the
//! bytes for its duration (or until removed), `refuse` answers in the
//! protocol's words, and the control API adds, lists and removes faults while
//! connections come and go.
//!
//! A raw protocol client (trust authentication, as the test servers use)
//! counts messages exactly; sluice's own client shows what an application sees.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_core::Meter;
use sluice_postgres::config::Target;
use sluice_postgres::tls::TlsSettings;
use sluice_postgres::{Config, Connection};
use sluice_proxy::{ControlToken, Fault, Proxy, ProxyHandle, Shaping, StartError};
use sluice_testkit::{wait_until, TestDb};

fn fault(spec: &str) -> Fault {
    spec.parse().unwrap()
}

/// `host:port` of the test server.
fn upstream(db: &TestDb) -> String {
    let config: Config = db.url().parse().unwrap();
    let Target::Tcp(host, port) = config.targets[0].clone() else {
        panic!("the test server is reached over TCP");
    };
    format!("{host}:{port}")
}

/// A proxy with `faults` and a control API in front of the test server, and
/// a config that goes through it.
fn proxy_with(db: &TestDb, shaping: Shaping, faults: &[&str]) -> (ProxyHandle, Config) {
    let mut proxy = Proxy::new("127.0.0.1:0", &upstream(db), shaping).control("127.0.0.1:0");
    for spec in faults {
        proxy = proxy.fault(fault(spec));
    }
    let proxy = proxy.start().unwrap();
    let mut config: Config = db.url().parse().unwrap();
    config.targets = vec![Target::Tcp("127.0.0.1".into(), proxy.address().port())];
    // The proxy reads the protocol: it cannot see into TLS.
    config.tls = TlsSettings::disabled();
    (proxy, config)
}

/// The shapings the faults are tried under: bytes passed on inline (two
/// threads a connection) and held back by a writer thread (four).
fn shapings() -> [Shaping; 2] {
    [
        Shaping::default(),
        Shaping {
            rtt: Duration::from_millis(2),
            ..Shaping::default()
        },
    ]
}

/// A client speaking the protocol by hand.
struct Raw {
    stream: TcpStream,
}

impl Raw {
    /// Connects through `proxy` and logs in (trust) as `config` says.
    fn login(proxy: SocketAddr, config: &Config) -> Raw {
        let mut raw = Raw::open(proxy, config);
        loop {
            let (tag, body) = raw.message().unwrap().expect("the login completes");
            match tag {
                b'Z' => return raw,
                b'R' if body[..4] != [0, 0, 0, 0] => panic!("the test server must trust"),
                b'E' => panic!("login refused: {}", String::from_utf8_lossy(&body)),
                _ => {}
            }
        }
    }

    /// Connects and sends the startup message, reading nothing.
    fn open(proxy: SocketAddr, config: &Config) -> Raw {
        Raw::open_with(proxy, config, &[])
    }

    /// [`Raw::open`] with more startup parameters (an `application_name`).
    fn open_with(proxy: SocketAddr, config: &Config, more: &[(&str, &str)]) -> Raw {
        let stream = TcpStream::connect(proxy).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut raw = Raw { stream };
        let mut parameters = vec![
            ("user", config.user.as_str()),
            ("database", config.database.as_str()),
        ];
        parameters.extend_from_slice(more);
        if let Some(options) = &config.options {
            parameters.push(("options", options));
        }
        let mut message = bytes::BytesMut::new();
        postgres_protocol::message::frontend::startup_message(parameters, &mut message).unwrap();
        raw.stream.write_all(&message).unwrap();
        raw
    }

    fn query(&mut self, sql: &str) {
        let mut message = bytes::BytesMut::new();
        postgres_protocol::message::frontend::query(sql, &mut message).unwrap();
        self.stream.write_all(&message).unwrap();
    }

    /// The next message, `None` at an orderly end of the stream.
    fn message(&mut self) -> io::Result<Option<(u8, Vec<u8>)>> {
        let mut header = [0u8; 5];
        match self.stream.read_exact(&mut header) {
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        }
        let length = u32::from_be_bytes(header[1..5].try_into().unwrap()) as usize;
        let mut body = vec![0u8; length - 4];
        self.stream.read_exact(&mut body)?;
        Ok(Some((header[0], body)))
    }

    /// Tags of the messages until the end of the stream (or an error, returned
    /// after them).
    fn until_the_end(&mut self) -> (Vec<u8>, io::Result<()>) {
        let mut tags = Vec::new();
        loop {
            match self.message() {
                Ok(Some((tag, _))) => tags.push(tag),
                Ok(None) => return (tags, Ok(())),
                Err(error) => return (tags, Err(error)),
            }
        }
    }

    /// Tags of the messages up to and including the next ReadyForQuery.
    fn until_ready(&mut self) -> Vec<u8> {
        let mut tags = Vec::new();
        loop {
            let (tag, _) = self.message().unwrap().expect("an answer");
            tags.push(tag);
            if tag == b'Z' {
                return tags;
            }
        }
    }
}

fn count(tags: &[u8], tag: u8) -> usize {
    tags.iter().filter(|&&seen| seen == tag).count()
}

#[test]
fn a_cut_at_the_kth_data_row_leaves_the_client_k_minus_1_whole_rows() {
    let db = TestDb::new();
    for shaping in shapings() {
        let (proxy, config) = proxy_with(&db, shaping, &["cut:at-data-row=5"]);
        let mut client = Raw::login(proxy.address(), &config);
        client.query("select g from generate_series(1, 1000) g");
        let (tags, end) = client.until_the_end();
        end.expect("an orderly close (FIN), not a reset");
        assert_eq!(tags.first(), Some(&b'T'), "{shaping:?}");
        assert_eq!(count(&tags, b'D'), 4, "{shaping:?}");
        assert_eq!(tags.len(), 5, "nothing after the rows: {tags:?}");
        assert_eq!(proxy.faults().list()[0].acted, 1);
    }
}

#[test]
fn a_cut_after_n_bytes_passes_exactly_n_bytes() {
    let db = TestDb::new();
    for shaping in shapings() {
        // The server's login answer is longer: the cut falls inside it.
        let (proxy, config) = proxy_with(&db, shaping, &["cut:after-bytes=100:downstream"]);
        let mut client = Raw::open(proxy.address(), &config);
        let mut received = Vec::new();
        client.stream.read_to_end(&mut received).unwrap();
        assert_eq!(received.len(), 100, "{shaping:?}");
    }
}

#[test]
fn a_reset_is_a_connection_reset() {
    let db = TestDb::new();
    for shaping in shapings() {
        let (proxy, config) = proxy_with(&db, shaping, &["reset:at-data-row=3"]);
        let mut client = Raw::login(proxy.address(), &config);
        client.query("select g from generate_series(1, 100000) g");
        let (tags, end) = client.until_the_end();
        let error = end.expect_err("the stream ends in an error");
        assert_eq!(error.kind(), io::ErrorKind::ConnectionReset, "{shaping:?}");
        assert!(count(&tags, b'D') <= 2, "{tags:?}");
    }
    // Without a trigger, a new client is reset before the server is reached
    // (so this client reads at once: a write could already meet the reset).
    let (proxy, _) = proxy_with(&db, Shaping::default(), &["reset"]);
    let mut client = TcpStream::connect(proxy.address()).unwrap();
    let error = client.read(&mut [0u8; 16]).expect_err("reset");
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
}

#[test]
fn a_cut_before_the_kth_statement_never_runs_it() {
    let db = TestDb::new();
    db.execute("create table t (n int)");
    let table = format!("{}.t", db.schema());
    let (_proxy, config) = proxy_with(&db, Shaping::default(), &["cut:at-statement=2"]);
    let mut client = Raw::login(proxy_address(&config), &config);
    client.query(&format!("insert into {table} values (1)"));
    assert_eq!(client.until_ready(), b"CZ");
    client.query(&format!("insert into {table} values (2)"));
    let (tags, end) = client.until_the_end();
    end.unwrap();
    assert!(tags.is_empty(), "no answer to the cut statement: {tags:?}");
    assert_eq!(
        db.query_text(&format!("select string_agg(n::text, ',') from {table}")),
        "1"
    );
}

fn proxy_address(config: &Config) -> SocketAddr {
    let Target::Tcp(host, port) = &config.targets[0] else {
        unreachable!()
    };
    format!("{host}:{port}").parse().unwrap()
}

#[tokio::test]
async fn a_copy_cut_at_the_kth_copy_data_commits_nothing() {
    let db = TestDb::new();
    db.execute("create table t (n int)");
    for shaping in shapings() {
        let (proxy, config) = proxy_with(&db, shaping, &["cut:at-copy-data=500"]);
        let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
        let result = async {
            let mut copy = connection
                .copy_in("copy t (n) from stdin", &[sluice_core::Kind::Integer])
                .await?;
            let mut batch = sluice_core::Batch::new(1);
            for n in 0..10_000 {
                batch.push_value(n.to_string().as_bytes());
            }
            copy.write_rows(&batch, 0..10_000).await?;
            copy.finish().await
        }
        .await;
        let error = result.expect_err("the copy cannot complete");
        assert_eq!(error.kind(), sluice_core::ErrorKind::Closed, "{error}");
        assert_eq!(db.query_text("select count(*) from t"), "0");
        assert_eq!(proxy.faults().list()[0].acted, 1);
    }
}

#[test]
fn a_stall_holds_the_bytes_for_its_duration() {
    let db = TestDb::new();
    for shaping in shapings() {
        let (_proxy, config) = proxy_with(
            &db,
            shaping,
            &["stall:duration=1s:at-data-row=2:downstream"],
        );
        let mut client = Raw::login(proxy_address(&config), &config);
        client.query("select g from generate_series(1, 3) g");
        let started = Instant::now();
        let mut arrivals = Vec::new();
        loop {
            let (tag, _) = client.message().unwrap().unwrap();
            arrivals.push((tag, started.elapsed()));
            if tag == b'Z' {
                break;
            }
        }
        let tags: Vec<u8> = arrivals.iter().map(|(tag, _)| *tag).collect();
        assert_eq!(tags, b"TDDDCZ", "every row arrives");
        let first_row = arrivals[1].1;
        let second_row = arrivals[2].1;
        assert!(
            second_row - first_row >= Duration::from_millis(950),
            "{shaping:?}: {arrivals:?}"
        );
    }
}

#[test]
fn a_stall_without_a_duration_lasts_until_it_is_removed() {
    let db = TestDb::new();
    let (proxy, config) = proxy_with(&db, Shaping::default(), &[]);
    let mut client = Raw::login(proxy.address(), &config);
    // Added while the connection is open: it acts on its next bytes.
    let id = proxy.faults().add(fault("stall"));
    client.query("select 1");
    client
        .stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let error = client.message().expect_err("nothing comes through");
    assert!(
        matches!(
            error.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ),
        "{error}"
    );
    assert!(proxy.faults().remove(id).is_some());
    client
        .stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(client.until_ready(), b"TDCZ");
}

#[tokio::test]
async fn refuse_answers_new_clients_with_an_error_until_removed() {
    let db = TestDb::new();
    let (proxy, config) = proxy_with(&db, Shaping::default(), &["refuse"]);
    let error = Connection::connect(&config, &Meter::new())
        .await
        .expect_err("refused");
    assert_eq!(error.kind(), sluice_core::ErrorKind::Connect);
    assert_eq!(error.code(), Some("08004"), "{error}");
    assert!(
        error
            .to_string()
            .contains("sluice proxy refuses new connections (fault 1: refuse)"),
        "{error}"
    );
    assert_eq!(
        proxy.report().refused_connections,
        0,
        "a refusal on purpose is the fault's, not the limit's"
    );
    assert_eq!(proxy.faults().list()[0].acted, 1);
    proxy.faults().clear();
    Connection::connect(&config, &Meter::new())
        .await
        .unwrap()
        .close()
        .await;
}

#[test]
fn a_once_fault_acts_on_one_connection() {
    let db = TestDb::new();
    let (proxy, config) = proxy_with(&db, Shaping::default(), &["cut:at-data-row=1:once"]);
    for expected_rows in [0, 3] {
        let mut client = Raw::login(proxy.address(), &config);
        client.query("select g from generate_series(1, 3) g");
        let mut tags = Vec::new();
        while let Ok(Some((tag, _))) = client.message() {
            tags.push(tag);
            if tag == b'Z' {
                break;
            }
        }
        assert_eq!(count(&tags, b'D'), expected_rows, "{tags:?}");
    }
    assert_eq!(proxy.faults().list()[0].acted, 1);
}

#[test]
fn latency_is_added_one_way() {
    let db = TestDb::new();
    let (_proxy, config) = proxy_with(&db, Shaping::default(), &["latency:delay=30ms:upstream"]);
    let mut client = Raw::login(proxy_address(&config), &config);
    let mut fastest = Duration::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        client.query("select 1");
        client.until_ready();
        fastest = fastest.min(started.elapsed());
    }
    assert!(fastest >= Duration::from_millis(30), "{fastest:?}");
}

#[test]
fn a_slow_close_holds_the_servers_close_back() {
    let db = TestDb::new();
    let (_proxy, config) = proxy_with(
        &db,
        Shaping::default(),
        &["slow-close:delay=700ms:downstream"],
    );
    let mut client = Raw::login(proxy_address(&config), &config);
    let mut terminate = bytes::BytesMut::new();
    postgres_protocol::message::frontend::terminate(&mut terminate);
    let started = Instant::now();
    client.stream.write_all(&terminate).unwrap();
    let mut rest = Vec::new();
    client.stream.read_to_end(&mut rest).unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(650),
        "{:?}",
        started.elapsed()
    );
}

/// Backends of the test server whose `application_name` is `application`.
fn backends(db: &TestDb, application: &str) -> usize {
    db.query_text(&format!(
        "select count(*) from pg_stat_activity where application_name = '{application}'"
    ))
    .parse()
    .unwrap()
}

/// A client that leaves while a fault holds its connection's bytes back (an
/// hour's latency either way, a stall without end) frees its slot and its
/// session on the server at once: with a single slot, the next client gets in
/// rather than being refused (53300), and the first one's backend is gone.
/// They used to wait for the fault's time: the hour.
#[test]
fn a_client_that_leaves_frees_its_slot_whatever_a_fault_holds_back() {
    let db = TestDb::new();
    for (number, spec) in [
        "latency:delay=1h:downstream:once",
        "latency:delay=1h:once",
        "stall:downstream:once",
    ]
    .into_iter()
    .enumerate()
    {
        let proxy = Proxy::new("127.0.0.1:0", &upstream(&db), Shaping::default())
            .max_connections(1)
            .fault(fault(spec))
            .start()
            .unwrap();
        let mut config: Config = db.url().parse().unwrap();
        config.targets = vec![Target::Tcp("127.0.0.1".into(), proxy.address().port())];
        config.tls = TlsSettings::disabled();
        let application = format!("sluice_leaving_{}_{number}", std::process::id());
        let mut first = Raw::open_with(
            proxy.address(),
            &config,
            &[("application_name", &application)],
        );
        first.query("select 1");
        // Held back on the way down only, the startup message and the query
        // reach the server: its backend runs and waits, answers unread.
        let reaches_the_server = spec.contains("downstream");
        if reaches_the_server {
            wait_until(
                "the first client's backend",
                Duration::from_secs(20),
                || backends(&db, &application) == 1,
            );
        }
        std::thread::sleep(Duration::from_secs(1));
        drop(first);
        wait_until(
            &format!("{spec}: the slot to be free"),
            Duration::from_secs(10),
            || proxy.report().open_connections == 0,
        );
        wait_until(
            &format!("{spec}: the backend to be gone"),
            Duration::from_secs(10),
            || backends(&db, &application) == 0,
        );
        let mut second = Raw::login(proxy.address(), &config);
        second.query("select 1");
        assert_eq!(second.until_ready(), b"TDCZ", "{spec}");
        assert_eq!(proxy.report().refused_connections, 0, "{spec}");
    }
}

/// One HTTP/1.1 exchange with the control API, as curl would send it to
/// `localhost`: the status and the JSON body.
fn http(address: SocketAddr, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let host = format!("localhost:{}", address.port());
    let mut headers = vec![("Host", host.as_str())];
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    let body = body.map_or(String::new(), |body| body.to_string());
    request(address, method, path, &headers, body.as_bytes())
}

/// One HTTP/1.1 request with exactly `headers` (and `Content-Length`): the
/// status and the body, which must be JSON (`Value::Null` when empty). The
/// request is written on a thread of its own, so a body the server does not
/// read cannot block the answer.
fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Value) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut message = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        message += &format!("{name}: {value}\r\n");
    }
    message += &format!("Content-Length: {}\r\n\r\n", body.len());
    let mut bytes = message.into_bytes();
    bytes.extend_from_slice(body);
    let mut writer = stream.try_clone().unwrap();
    let writing = std::thread::spawn(move || {
        // The server may answer and close before reading it all.
        let _ = writer.write_all(&bytes);
    });
    let mut answer = Vec::new();
    let end = stream.read_to_end(&mut answer);
    writing.join().unwrap();
    let answer = String::from_utf8_lossy(&answer);
    let status = answer
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response ({end:?}): {answer:?}"));
    let (_, content) = answer.split_once("\r\n\r\n").unwrap_or_default();
    let json = if content.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(content)
            .unwrap_or_else(|error| panic!("a {status} answer is not JSON ({error}): {content:?}"))
    };
    (status, json)
}

/// The control API's answer to adding a fault with `headers` (a spec that
/// would refuse every new client), and whether the fault was applied.
fn add_refuse(proxy: &ProxyHandle, headers: &[(&str, &str)], body: &str) -> (u16, Value, bool) {
    let control = proxy.control_address().unwrap();
    let (status, answer) = request(control, "POST", "/faults", headers, body.as_bytes());
    let applied = !proxy.faults().list().is_empty();
    proxy.faults().clear();
    (status, answer, applied)
}

/// A JSON error answer's message (the test fails on any other answer).
fn error_of(answer: &Value) -> &str {
    answer["error"]
        .as_str()
        .unwrap_or_else(|| panic!("not a JSON error: {answer}"))
}

const REFUSE: &str = r#"{"spec": "refuse"}"#;

#[test]
fn the_control_api_adds_lists_and_removes_faults_at_run_time() {
    let db = TestDb::new();
    let (proxy, config) = proxy_with(&db, Shaping::default(), &[]);
    let control = proxy.control_address().unwrap();
    assert!(control.ip().is_loopback());
    assert_eq!(
        http(control, "GET", "/faults", None),
        (200, json!({"faults": []}))
    );

    let (status, body) = http(
        control,
        "POST",
        "/faults",
        Some(json!({"spec": "cut:at-data-row=0"})),
    );
    assert_eq!(status, 400);
    assert_eq!(
        body["error"],
        "fault \"cut:at-data-row=0\": at-data-row=0: give a count from 1 (the K-th)"
    );
    let (status, body) = http(control, "POST", "/faults", Some(json!("cut")));
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().contains("{\"spec\": "),
        "{body}"
    );

    let (status, body) = http(
        control,
        "POST",
        "/faults",
        Some(json!({"spec": "every:cut:at-data-row=2"})),
    );
    assert_eq!(status, 400, "an action first: {body}");
    let (status, added) = http(
        control,
        "POST",
        "/faults",
        Some(json!({"spec": " cut:every:at-data-row=2 "})),
    );
    assert_eq!(status, 201);
    assert_eq!(added["spec"], "cut:at-data-row=2", "the canonical spelling");
    let id = added["id"].as_u64().unwrap();

    // A new connection gets one row, then the cut.
    let rows_of_a_new_connection = || {
        let mut client = Raw::login(proxy.address(), &config);
        client.query("select g from generate_series(1, 3) g");
        let mut tags = Vec::new();
        while let Ok(Some((tag, _))) = client.message() {
            tags.push(tag);
            if tag == b'Z' {
                break;
            }
        }
        count(&tags, b'D')
    };
    assert_eq!(rows_of_a_new_connection(), 1);
    assert_eq!(
        http(control, "GET", "/faults", None),
        (
            200,
            json!({"faults": [{"id": id, "spec": "cut:at-data-row=2", "acted": 1}]})
        )
    );

    let path = format!("/faults/{id}");
    assert_eq!(
        http(control, "DELETE", &path, None),
        (
            200,
            json!({"removed": {"id": id, "spec": "cut:at-data-row=2"}})
        )
    );
    assert_eq!(
        http(control, "GET", "/faults", None),
        (200, json!({"faults": []}))
    );
    assert_eq!(rows_of_a_new_connection(), 3, "the fault is gone");

    let (status, body) = http(control, "DELETE", &path, None);
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some(&*format!("no fault {id}")))
    );
    let (status, _) = http(control, "DELETE", "/faults/x", None);
    assert_eq!(status, 400);
    for spec in ["refuse", "latency:delay=1ms"] {
        http(control, "POST", "/faults", Some(json!({ "spec": spec })));
    }
    assert_eq!(
        http(control, "DELETE", "/faults", None),
        (200, json!({"removed": 2}))
    );
    let (status, body) = http(control, "GET", "/nowhere", None);
    assert_eq!(status, 404, "{body}");
    let (status, body) = http(control, "PUT", "/faults", None);
    assert_eq!(status, 405);
    assert!(body["error"].as_str().is_some(), "JSON too: {body}");
}

#[test]
fn the_control_api_refuses_a_delay_beyond_its_bound() {
    let db = TestDb::new();
    let (proxy, _) = proxy_with(&db, Shaping::default(), &[]);
    let control = proxy.control_address().unwrap();
    let spec = "latency:delay=18446744073709551615s";
    let (status, body) = http(control, "POST", "/faults", Some(json!({ "spec": spec })));
    assert_eq!(status, 400, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("delay=18446744073709551615s is too long: at most 1h"),
        "{error}"
    );
    assert!(proxy.faults().list().is_empty(), "the fault is not applied");
}

#[test]
fn a_web_page_cannot_drive_the_control_api() {
    let db = TestDb::new();
    let (proxy, _) = proxy_with(&db, Shaping::default(), &[]);
    // The page's request as the issue showed it: a simple request (no CORS
    // preflight) reaching loopback through DNS rebinding.
    let (status, answer, applied) = add_refuse(
        &proxy,
        &[
            ("Host", "evil.example"),
            ("Origin", "http://evil.example"),
            ("Content-Type", "text/plain"),
        ],
        REFUSE,
    );
    assert_eq!(status, 403, "{answer}");
    assert!(error_of(&answer).contains("evil.example"), "{answer}");
    assert!(!applied, "the fault is not applied");
}

#[test]
fn the_control_api_answers_requests_addressed_to_this_machine_only() {
    let db = TestDb::new();
    let (proxy, _) = proxy_with(&db, Shaping::default(), &[]);
    let port = proxy.control_address().unwrap().port();
    let json = ("Content-Type", "application/json");
    for host in ["evil.example", "evil.example:80", "localhost.evil.example"] {
        let (status, answer, applied) = add_refuse(&proxy, &[("Host", host), json], REFUSE);
        assert_eq!(status, 403, "{host}: {answer}");
        assert!(
            error_of(&answer).contains("DNS rebinding"),
            "{host}: {answer}"
        );
        assert!(!applied, "{host}: the fault is not applied");
    }
    let (status, answer) = request(
        proxy.control_address().unwrap(),
        "GET",
        "/faults",
        &[("Host", "evil.example")],
        b"",
    );
    assert_eq!(status, 403, "reading is refused too: {answer}");
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        "localhost".to_owned(),
    ] {
        let (status, answer, applied) = add_refuse(&proxy, &[("Host", &host), json], REFUSE);
        assert_eq!((status, applied), (201, true), "{host}: {answer}");
    }
}

#[test]
fn the_control_api_refuses_a_foreign_origin() {
    let db = TestDb::new();
    let (proxy, _) = proxy_with(&db, Shaping::default(), &[]);
    let host = format!("127.0.0.1:{}", proxy.control_address().unwrap().port());
    let json = ("Content-Type", "application/json");
    for origin in [
        "http://evil.example",
        "http://localhost:3000",
        "null",
        &format!("http://{host}.evil.example"),
    ] {
        let headers = [("Host", host.as_str()), ("Origin", origin), json];
        let (status, answer, applied) = add_refuse(&proxy, &headers, REFUSE);
        assert_eq!(status, 403, "{origin}: {answer}");
        assert!(error_of(&answer).contains(origin), "{origin}: {answer}");
        assert!(!applied, "{origin}: the fault is not applied");
    }
    // The API's own origin is no foreign one.
    let origin = format!("http://{host}");
    let headers = [("Host", host.as_str()), ("Origin", &origin), json];
    let (status, answer, applied) = add_refuse(&proxy, &headers, REFUSE);
    assert_eq!((status, applied), (201, true), "{answer}");
}

#[test]
fn the_control_api_takes_json_bodies_only() {
    let db = TestDb::new();
    let (proxy, _) = proxy_with(&db, Shaping::default(), &[]);
    let host = ("Host", "localhost");
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let mut headers = vec![host];
        headers.extend(content_type.map(|value| ("Content-Type", value)));
        let (status, answer, applied) = add_refuse(&proxy, &headers, REFUSE);
        assert_eq!(status, 415, "{content_type:?}: {answer}");
        assert!(
            error_of(&answer).contains("Content-Type: application/json"),
            "{answer}"
        );
        assert!(!applied, "{content_type:?}: the fault is not applied");
    }
    let headers = [host, ("Content-Type", "Application/JSON; charset=utf-8")];
    let (status, answer, applied) = add_refuse(&proxy, &headers, REFUSE);
    assert_eq!((status, applied), (201, true), "{answer}");
}

#[test]
fn an_oversized_body_is_refused_in_json() {
    let db = TestDb::new();
    let (proxy, _) = proxy_with(&db, Shaping::default(), &[]);
    let body = format!(
        r#"{{"spec": "refuse", "padding": "{}"}}"#,
        "x".repeat(3 << 20)
    );
    let headers = [("Host", "localhost"), ("Content-Type", "application/json")];
    let (status, answer, applied) = add_refuse(&proxy, &headers, &body);
    assert_eq!(status, 413, "{answer}");
    assert!(error_of(&answer).contains("too large"), "{answer}");
    assert!(!applied);
}

#[test]
fn a_control_token_when_set_is_required_on_every_request() {
    let db = TestDb::new();
    let token: ControlToken = "s3cret-token".parse().unwrap();
    let proxy = Proxy::new("127.0.0.1:0", &upstream(&db), Shaping::default())
        .control("127.0.0.1:0")
        .control_token(token)
        .start()
        .unwrap();
    let control = proxy.control_address().unwrap();
    let host = ("Host", "localhost");
    let json = ("Content-Type", "application/json");
    for authorization in [
        None,
        Some("Bearer wrong"),
        Some("Bearer s3cret-token-and-more"),
        Some("Bearer s3cret-toke"),
        Some("Basic czNjcmV0LXRva2Vu"),
        Some("s3cret-token"),
    ] {
        let mut headers = vec![host];
        headers.extend(authorization.map(|value| ("Authorization", value)));
        let (status, _) = request(control, "GET", "/faults", &headers, b"");
        assert_eq!(status, 401, "{authorization:?}: reading needs it too");
        headers.push(json);
        let (status, answer, applied) = add_refuse(&proxy, &headers, REFUSE);
        assert_eq!(status, 401, "{authorization:?}: {answer}");
        assert!(error_of(&answer).contains("Bearer"), "{answer}");
        assert!(!applied, "{authorization:?}: the fault is not applied");
    }
    let right = ("Authorization", "Bearer s3cret-token");
    let (status, answer, applied) = add_refuse(&proxy, &[host, json, right], REFUSE);
    assert_eq!((status, applied), (201, true), "{answer}");
    let (status, answer) = request(control, "GET", "/faults", &[host, right], b"");
    assert_eq!(status, 200, "{answer}");
    // The token is the defence: the name the API is reached by is free.
    let remote_name = ("Host", "proxy.example:6433");
    let (status, answer, applied) = add_refuse(&proxy, &[remote_name, json, right], REFUSE);
    assert_eq!((status, applied), (201, true), "{answer}");
}

#[test]
fn control_tokens_must_be_presentable() {
    for bad in ["", "two words", "tab\there", " padded"] {
        let error = bad.parse::<ControlToken>().expect_err(bad);
        assert!(
            error.to_string().contains("control token"),
            "{bad:?}: {error}"
        );
    }
    let token: ControlToken = "s3cret-token".parse().unwrap();
    assert!(
        !format!("{token:?}").contains("s3cret"),
        "never printed: {token:?}"
    );
}

#[test]
fn the_control_api_stays_on_loopback_unless_allowed() {
    let db = TestDb::new();
    let refused = Proxy::new("127.0.0.1:0", &upstream(&db), Shaping::default())
        .control("0.0.0.0:0")
        .start();
    assert!(
        matches!(refused, Err(StartError::ControlNotLoopback { .. })),
        "{:?}",
        refused.err()
    );
    let allowed = Proxy::new("127.0.0.1:0", &upstream(&db), Shaping::default())
        .control("0.0.0.0:0")
        .allow_remote_control(true)
        .start()
        .unwrap();
    assert!(allowed.control_address().unwrap().ip().is_unspecified());
    // Reached from elsewhere, by address: a name could be DNS rebinding, an
    // address cannot.
    let port = allowed.control_address().unwrap().port();
    let json = ("Content-Type", "application/json");
    for (host, expected) in [
        (format!("192.0.2.7:{port}"), 201),
        (format!("[2001:db8::7]:{port}"), 201),
        (format!("evil.example:{port}"), 403),
    ] {
        let (status, answer, _) = add_refuse(&allowed, &[("Host", &host), json], REFUSE);
        assert_eq!(status, expected, "{host}: {answer}");
    }
}
