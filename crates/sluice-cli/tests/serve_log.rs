//! The request log of `sluice serve`, read from the binary's stderr: one line per
//! request with its route, query, token, status, outcome, rows, bytes and round
//! trips; the `limit`, `rejected`, `error` and `shutdown` outcomes; and
//! `--log-json`, whose lines are JSON objects with typed fields.
//!
//! (`client_gone` has its tests in `serve.rs` and `sluice-server`'s tests.)

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_testkit::TestDb;
use support::server::{quoted, wait_for_metric, write_config, Server};

const READER_TOKEN: &str = "reader-token-0123456789abcdef";
const NARROW_TOKEN: &str = "narrow-token-0123456789abcdef";

/// One row per number, about 50 bytes of NDJSON each.
const NUMBERS_SQL: &str = "select g as id, md5(g::text) as hash from generate_series(1, $1::int) g";

/// More rows than the first response chunk holds: a chunk is sent once 64 KiB of
/// output are encoded (some 1,300 of these rows), so a limit logged with fewer
/// rows was hit before the response began, one logged with more after it.
const ROWS_BEFORE_FIRST_CHUNK_AT_MOST: u64 = 2_000;

/// Named queries over [`NUMBERS_SQL`] with limits hit before the first chunk
/// (`few_*`) and after it (`many_*`), a division by zero at row 30,000, and two
/// tokens: `reader` may run everything, `narrow` only `numbers`.
fn config(db: &TestDb) -> String {
    let numbers = |name: &str, limit: &str| {
        format!(
            "[queries.{name}]\nsql = {}\nparams = [{{ name = \"n\", type = \"int\", required = true }}]\n{limit}\n",
            quoted(NUMBERS_SQL)
        )
    };
    [
        format!(
            "[databases.main]\nurl = {}\npool_size = 2\n",
            quoted(db.url())
        ),
        numbers("numbers", ""),
        numbers("few_rows", "max_rows = 10"),
        numbers("many_rows", "max_rows = 20000"),
        numbers("few_bytes", "max_bytes = \"1KiB\""),
        numbers("many_bytes", "max_bytes = \"1MiB\""),
        "[queries.divide]\nsql = \"select g, 1 / (30000 - g) as inverse from generate_series(1, 40000) g\"\n".into(),
        format!("[[tokens]]\nname = \"reader\"\ntoken = {}\nqueries = [\"*\"]\n", quoted(READER_TOKEN)),
        format!("[[tokens]]\nname = \"narrow\"\ntoken = {}\nqueries = [\"numbers\"]\n", quoted(NARROW_TOKEN)),
    ]
    .join("\n")
}

/// What a client saw: the status, the body bytes that arrived, and whether the
/// body ended cleanly.
struct Reply {
    status: u16,
    body: Vec<u8>,
    complete: bool,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Complete lines of the body.
    fn lines(&self) -> u64 {
        self.body.iter().filter(|&&byte| byte == b'\n').count() as u64
    }
}

/// Sends `method path` with an optional bearer token and reads the whole body (or
/// as much as arrives before the server aborts it).
fn request(address: SocketAddr, method: &str, path: &str, token: Option<&str>) -> Reply {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let mut builder =
            client.request(method.parse().unwrap(), format!("http://{address}{path}"));
        if let Some(token) = token {
            builder = builder.bearer_auth(token);
        }
        let response = builder.send().await.unwrap();
        let status = response.status().as_u16();
        let mut stream = response.bytes_stream();
        let mut body = Vec::new();
        let complete = loop {
            match futures_util::StreamExt::next(&mut stream).await {
                Some(Ok(chunk)) => body.extend_from_slice(&chunk),
                Some(Err(_)) => break false,
                None => break true,
            }
        };
        Reply {
            status,
            body,
            complete,
        }
    })
}

/// The fields of a text request line (`… sluice::request: request key=value …`),
/// string values unquoted; `None` for other lines.
fn text_fields(line: &str) -> Option<BTreeMap<String, String>> {
    let rest = line.split(" sluice::request: request ").nth(1)?;
    let mut fields = BTreeMap::new();
    let mut characters = rest.chars().peekable();
    loop {
        while characters.next_if_eq(&' ').is_some() {}
        let key: String = characters.by_ref().take_while(|&c| c != '=').collect();
        if key.is_empty() {
            return Some(fields);
        }
        let mut value = String::new();
        if characters.next_if_eq(&'"').is_some() {
            while let Some(character) = characters.next() {
                match character {
                    '\\' => value.extend(characters.next()),
                    '"' => break,
                    other => value.push(other),
                }
            }
        } else {
            while let Some(character) = characters.next_if(|&c| c != ' ') {
                value.push(character);
            }
        }
        fields.insert(key, value);
    }
}

/// Reads the server's request lines in order, each at most once.
struct RequestLog {
    seen: usize,
}

impl RequestLog {
    /// The next request line after those already returned, waiting for it (at
    /// most 20 s: stderr arrives through a pipe).
    fn next(&mut self, server: &mut Server) -> BTreeMap<String, String> {
        let started = Instant::now();
        loop {
            let lines = server.lines();
            if let Some((index, fields)) = lines
                .iter()
                .enumerate()
                .skip(self.seen)
                .find_map(|(index, line)| Some((index, text_fields(line)?)))
            {
                self.seen = index + 1;
                return fields;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no further request line; stderr:\n{}",
                lines.join("\n")
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Asserts the line names the request and the outcome, and has every field the
/// README lists; returns rows, bytes and round trips.
fn check_line(
    line: &BTreeMap<String, String>,
    (route, query, token): (&str, &str, &str),
    (status, outcome): (u16, &str),
) -> (u64, u64, u64) {
    let field = |key: &str| {
        line.get(key)
            .unwrap_or_else(|| panic!("no {key} in {line:?}"))
            .as_str()
    };
    assert_eq!(
        (field("route"), field("query"), field("token")),
        (route, query, token),
        "{line:?}"
    );
    assert_eq!(
        (field("status"), field("outcome")),
        (status.to_string().as_str(), outcome),
        "{line:?}"
    );
    assert!(field("duration_ms").parse::<f64>().is_ok(), "{line:?}");
    let number = |key: &str| {
        field(key)
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{key} is not a count in {line:?}"))
    };
    (number("rows"), number("bytes"), number("round_trips"))
}

#[test]
fn every_request_is_logged_once_with_its_route_token_status_and_outcome() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(&directory, &config(&db));
    let mut server = Server::start_logging(&["--config", &path], "info");
    let address = server.address;
    let mut log = RequestLog { seen: 0 };
    let reader = Some(READER_TOKEN);

    // Complete: every row served, two round trips (prepare, execute).
    let reply = request(address, "GET", "/queries/numbers?n=10", reader);
    assert!(reply.status == 200 && reply.complete && reply.lines() == 10);
    let line = log.next(&mut server);
    let served = check_line(&line, ("queries", "numbers", "reader"), (200, "complete"));
    assert_eq!(served, (10, reply.body.len() as u64, 2), "{line:?}");

    // Limits hit before the first chunk: a JSON 400, nothing sent.
    for (path, limit) in [
        ("/queries/few_rows?n=11", "max_rows"),
        ("/queries/few_bytes?n=100", "max_bytes"),
    ] {
        let reply = request(address, "GET", path, reader);
        assert_eq!(reply.status, 400, "{path}: {}", reply.text());
        assert!(reply.text().contains(limit), "{path}: {}", reply.text());
        let query = &path["/queries/".len()..path.find('?').unwrap()];
        let line = log.next(&mut server);
        let (rows, bytes, round_trips) =
            check_line(&line, ("queries", query, "reader"), (400, "limit"));
        // One round trip on a session that ran this SQL before (it stays
        // prepared), two on a fresh one: which one serves depends on the pool.
        assert!(bytes == 0 && (1..=2).contains(&round_trips), "{line:?}");
        // `rows` counts the rows read: 0 for max_rows (checked before a batch is
        // encoded), the whole batch (100) for max_bytes, though none was sent.
        assert!(rows <= ROWS_BEFORE_FIRST_CHUNK_AT_MOST, "{line:?}");
        assert!(line["error"].contains(limit), "{line:?}");
    }

    // Limits hit mid-stream: the 200 stands, the body is aborted, never cut short.
    for (path, limit, max_rows, max_bytes) in [
        ("/queries/many_rows?n=20001", "max_rows", 20_000, u64::MAX),
        (
            "/queries/many_bytes?n=100000",
            "max_bytes",
            u64::MAX,
            1 << 20,
        ),
    ] {
        let reply = request(address, "GET", path, reader);
        assert_eq!(reply.status, 200, "{path}");
        assert!(
            !reply.complete,
            "{path}: a body over a limit must not end cleanly"
        );
        let query = &path["/queries/".len()..path.find('?').unwrap()];
        let line = log.next(&mut server);
        let (rows, bytes, round_trips) =
            check_line(&line, ("queries", query, "reader"), (200, "limit"));
        assert!(line["error"].contains(limit), "{line:?}");
        assert!((1..=2).contains(&round_trips), "{line:?}");
        // Past the first chunk, within the limit, and at least what arrived.
        assert!(
            rows > ROWS_BEFORE_FIRST_CHUNK_AT_MOST && rows <= max_rows,
            "{line:?}"
        );
        assert!(bytes > 0 && bytes <= max_bytes, "{line:?}");
        assert!(reply.body.len() as u64 <= bytes, "{line:?}");
        assert!(reply.lines() <= rows, "{line:?}");
    }

    // A database error mid-stream.
    let reply = request(address, "GET", "/queries/divide", reader);
    assert!(reply.status == 200 && !reply.complete);
    let line = log.next(&mut server);
    let (rows, _, _) = check_line(&line, ("queries", "divide", "reader"), (200, "error"));
    assert!(line["error"].contains("division by zero"), "{line:?}");
    assert!(rows < 30_000 && reply.lines() <= rows, "{line:?}");

    // Rejected before any SQL runs: nothing served, no round trip.
    let rejected = [
        (
            "GET",
            "/queries/numbers?n=ten",
            reader,
            400,
            ("queries", "numbers", "reader"),
        ),
        (
            "GET",
            "/queries/numbers?n=1&m=2",
            reader,
            400,
            ("queries", "numbers", "reader"),
        ),
        (
            "GET",
            "/queries/numbers",
            reader,
            400,
            ("queries", "numbers", "reader"),
        ),
        (
            "GET",
            "/queries/nope",
            reader,
            404,
            ("queries", "nope", "-"),
        ),
        (
            "GET",
            "/queries/numbers?n=1",
            None,
            401,
            ("queries", "numbers", "-"),
        ),
        (
            "GET",
            "/queries/numbers?n=1",
            Some("not-a-token-at-all"),
            401,
            ("queries", "numbers", "-"),
        ),
        (
            "GET",
            "/queries/few_rows?n=1",
            Some(NARROW_TOKEN),
            403,
            ("queries", "few_rows", "-"),
        ),
        ("GET", "/nowhere", reader, 404, ("other", "", "-")),
        (
            "POST",
            "/queries/nope/batch",
            reader,
            404,
            ("batch", "nope", "-"),
        ),
    ];
    for (method, path, token, status, names) in rejected {
        let reply = request(address, method, path, token);
        assert_eq!(reply.status, status, "{method} {path}: {}", reply.text());
        let line = log.next(&mut server);
        let counts = check_line(&line, names, (status, "rejected"));
        assert_eq!(counts, (0, 0, 0), "{method} {path}: {line:?}");
    }

    // Nothing was logged twice: the next line is the next request's.
    let reply = request(address, "GET", "/openapi.json", None);
    assert_eq!(reply.status, 200);
    let line = log.next(&mut server);
    check_line(&line, ("openapi", "", "-"), (200, "complete"));
}

/// Polls until a backend of `application` waits for the server to take its rows
/// (`ClientWrite`): the server has stopped reading, held back by its client.
fn wait_for_client_write(db: &TestDb, application: &str) {
    sluice_testkit::wait_until(
        "the stream to be held back by its client",
        Duration::from_secs(60),
        || {
            db.query_text(&format!(
                "select count(*) from pg_stat_activity \
                 where application_name = '{application}' and wait_event = 'ClientWrite'"
            )) == "1"
        },
    );
}

#[test]
fn at_the_shutdown_deadline_streams_and_queued_requests_are_logged_as_shutdown() {
    let db = TestDb::new();
    let application = format!("sluice_log_{}", std::process::id());
    let separator = if db.url().contains('?') { '&' } else { '?' };
    let main_url = format!("{}{separator}application_name={application}", db.url());
    let directory = tempfile::tempdir().unwrap();
    // `napping` (20,000 rows, then a two-minute nap) is read by its client;
    // `stuck` (some 25 MB) is not, and holds the one connection of `main`, for
    // which `queued` waits.
    let path = write_config(
        &directory,
        &format!(
            "[server]\nshutdown_grace = \"300ms\"\n\
             [databases.main]\nurl = {}\npool_size = 1\npool_wait = \"120s\"\n\
             [databases.other]\nurl = {}\npool_size = 1\n\
             [queries.napping]\ndatabase = \"other\"\n\
             sql = \"select g, case when g = 20000 then pg_sleep(120) end as nap from generate_series(1, 30000) g\"\n\
             [queries.stuck]\ndatabase = \"main\"\n\
             sql = \"select g, repeat('x', 100) as pad from generate_series(1, 200000) g\"\n\
             [queries.queued]\ndatabase = \"main\"\nsql = \"select 1 as one\"\n",
            quoted(&main_url),
            quoted(db.url())
        ),
    );
    let mut server = Server::start_logging(&["--config", &path], "info");
    let address = server.address;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let request = |path: &str| {
        let mut socket = std::net::TcpStream::connect(address).unwrap();
        std::io::Write::write_all(
            &mut socket,
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes(),
        )
        .unwrap();
        socket
    };
    let napping = runtime.block_on(async {
        let napping = reqwest::get(format!("http://{address}/queries/napping"))
            .await
            .unwrap();
        assert_eq!(napping.status(), 200);
        napping
    });
    // A client that reads nothing: the server waits on it, not on the database.
    let stuck = request("/queries/stuck");
    wait_for_client_write(&db, &application);
    let queued = request("/queries/queued");
    runtime.block_on(wait_for_metric(
        address,
        "sluice_pool_waiting{database=\"main\"}",
        1.0,
    ));
    server.terminate();
    assert_eq!(
        server.wait(Duration::from_secs(20)),
        Some(0),
        "{}",
        server.stderr()
    );
    drop((napping, stuck, queued));
    let stderr = server.all_lines(Duration::from_secs(20)).join("\n");
    let mut lines: Vec<_> = stderr
        .lines()
        .filter_map(text_fields)
        .filter(|line| line["route"] == "queries")
        .collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    lines.sort_by(|a, b| a["query"].cmp(&b["query"]));
    // The streams had begun (200); the queued request never got a status (503).
    check_line(&lines[0], ("queries", "napping", "-"), (200, "shutdown"));
    check_line(&lines[1], ("queries", "queued", "-"), (503, "shutdown"));
    check_line(&lines[2], ("queries", "stuck", "-"), (200, "shutdown"));
}

/// Checks a `--log-json` request line's field types and names; returns its
/// `fields` object.
fn json_request<'a>(line: &'a Value, query: &str, status: u64, outcome: &str) -> &'a Value {
    assert_eq!(line["target"], "sluice::request", "{line}");
    let fields = &line["fields"];
    assert_eq!(fields["message"], "request", "{line}");
    assert_eq!(fields["route"], "queries", "{line}");
    assert_eq!(fields["query"], query, "{line}");
    assert!(fields["token"].is_string(), "{line}");
    assert_eq!(fields["status"].as_u64(), Some(status), "{line}");
    assert_eq!(fields["outcome"], outcome, "{line}");
    for count in ["rows", "bytes", "round_trips"] {
        assert!(fields[count].is_u64(), "{count} in {line}");
    }
    assert!(fields["duration_ms"].is_f64(), "{line}");
    fields
}

#[test]
fn log_json_writes_json_lines_with_typed_request_fields() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(&directory, &config(&db));
    let mut server = Server::start_logging(&["--config", &path, "--log-json"], "info");
    let address = server.address;
    let reader = Some(READER_TOKEN);
    let mut served = Vec::new();
    // The same query again: the pooled session kept it prepared, so one round
    // trip instead of two.
    for rows in [1000, 1000, 3] {
        let reply = request(
            address,
            "GET",
            &format!("/queries/numbers?n={rows}"),
            reader,
        );
        assert!(reply.status == 200 && reply.complete && reply.lines() == rows);
        served.push((rows, reply.body.len() as u64));
    }
    let reply = request(address, "GET", "/queries/numbers?n=ten", reader);
    assert_eq!(reply.status, 400);
    let reply = request(address, "GET", "/queries/many_rows?n=20001", reader);
    assert!(reply.status == 200 && !reply.complete);
    server.terminate();
    assert_eq!(server.wait(Duration::from_secs(20)), Some(0));

    let lines = server.all_lines(Duration::from_secs(20)).to_vec();
    let listening = lines
        .iter()
        .position(|line| line.contains("listening on http://"))
        .unwrap();
    // Before the port opens, sluice's own start-up lines are plain text; from
    // then on, every line is a JSON object.
    for line in &lines[..=listening] {
        assert!(
            line.starts_with("sluice") || serde_json::from_str::<Value>(line).is_ok(),
            "{line}"
        );
    }
    let parsed: Vec<Value> = lines[listening + 1..]
        .iter()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
            assert!(value.is_object(), "{line}");
            value
        })
        .collect();
    let requests: Vec<&Value> = parsed
        .iter()
        .filter(|line| line["target"] == "sluice::request")
        .collect();
    assert_eq!(requests.len(), 5, "{lines:#?}");
    for ((line, (rows, bytes)), trips) in requests.iter().zip(&served).zip([2, 1, 1]) {
        let fields = json_request(line, "numbers", 200, "complete");
        assert_eq!(line["level"], "INFO", "{line}");
        assert_eq!(fields["token"], "reader", "{line}");
        assert_eq!(fields["rows"].as_u64(), Some(*rows), "{line}");
        assert_eq!(fields["bytes"].as_u64(), Some(*bytes), "{line}");
        assert_eq!(fields["round_trips"].as_u64(), Some(trips), "{line}");
    }
    let fields = json_request(requests[3], "numbers", 400, "rejected");
    assert_eq!(requests[3]["level"], "WARN", "{}", requests[3]);
    assert!(
        fields["error"].as_str().unwrap().contains("n"),
        "{}",
        requests[3]
    );
    let fields = json_request(requests[4], "many_rows", 200, "limit");
    assert!(
        fields["error"].as_str().unwrap().contains("max_rows"),
        "{}",
        requests[4]
    );
}
