//! What keeps one client from holding the server: per-token concurrency and
//! rate (429), body and query-string sizes (413, 414), a client that stops
//! reading (`idle_write_timeout`) and a stream that runs too long
//! (`max_stream_duration`), both ending the body in an error and cancelling the
//! query; and the trailers that tell a complete body from a cut one.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use http_body_util::BodyExt;
use sluice_gateway::AppState;
use sluice_testkit::TestDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const QUERIES: &str = r#"
[queries.big]
sql = "select g as id, repeat('x', 200) as pad from (select generate_series(1, 20000000) as g) s"
idle_write_timeout = "1s"

[queries.stall]
sql = "select g as id, case when g = 20000 then pg_sleep(120) end as nap from generate_series(1, 30000) g"
max_stream_duration = "2s"

[queries.asleep]
sql = "select pg_sleep(120) as nap"
max_stream_duration = "1s"

[queries.series]
sql = "select g as n from generate_series(1, $1::int) g"
params = [{ name = "n", type = "int", required = true }]

[queries.divide]
sql = "select 1 / (g - 50000) as x from generate_series(1, 100000) g"
"#;

const TOKENS: &str = r#"
[[tokens]]
name = "single"
token = "single-token-0123456789"
queries = ["*"]
max_concurrent = 1

[[tokens]]
name = "slow"
token = "slow-token-01234567890"
queries = ["*"]
rate = 0.5
burst = 2

[[tokens]]
name = "writer"
token = "writer-token-0123456789"
queries = ["*"]
scopes = ["write"]

[tables.payments]
table = "payments"
max_body = "1KiB"

[server]
max_query_string = 200
max_body = "2KiB"
"#;

/// A test database with a `payments` table, the app's sessions on it, the app.
async fn setup() -> (TestDb, Sessions, AppState) {
    let db = TestDb::new();
    db.execute("create table payments (id int primary key, note text);");
    let application = application_name();
    let config = postgres_config(
        &with_application_name(db.url(), &application),
        "pool_size = 4",
        &format!("{QUERIES}\n{TOKENS}"),
    );
    let sessions = Sessions::watch(&db, &application).await;
    (db, sessions, AppState::new(config))
}

fn bearer(token: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {token}"))
}

fn get_as(uri: &str, token: &str, extra: &[(&str, &str)]) -> Request<Body> {
    let (name, value) = bearer(token);
    let mut headers: Vec<(&str, &str)> = vec![(name, value.as_str())];
    headers.extend_from_slice(extra);
    get(uri, &headers)
}

/// A GET with the token of no limits.
fn get_open(uri: &str, extra: &[(&str, &str)]) -> Request<Body> {
    get_as(uri, WRITER, extra)
}

const WRITER: &str = "writer-token-0123456789";
const WRITER_HEADER: &str = "Authorization: Bearer writer-token-0123456789\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_over_max_concurrent_gets_429_until_its_stream_ends() {
    let (_db, sessions, state) = setup().await;
    let token = "single-token-0123456789";
    let holding = oneshot(&state, get_as("/queries/stall", token, &[])).await;
    assert_eq!(holding.status(), StatusCode::OK);
    let refused = oneshot(&state, get_as("/queries/series?n=1", token, &[])).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "1");
    let error = json(refused).await;
    assert!(
        error["error"].as_str().unwrap().contains("max_concurrent"),
        "{error}"
    );
    // Another token is not held back by this one.
    let other = oneshot(&state, get_open("/queries/series?n=1", &[])).await;
    assert_eq!(other.status(), StatusCode::OK);
    // The stream's end (its client leaving) gives the slot back.
    drop(holding);
    wait_until_idle(&sessions).await;
    let state = &state;
    wait_until(PATIENCE, "the slot to be free again", move || async move {
        oneshot(state, get_as("/queries/series?n=1", token, &[]))
            .await
            .status()
            == StatusCode::OK
    })
    .await;
}

#[tokio::test]
async fn a_token_over_its_rate_gets_429_with_the_wait_in_retry_after() {
    let (_db, _sessions, state) = setup().await;
    let token = "slow-token-01234567890";
    // A burst of two, then one every two seconds.
    for _ in 0..2 {
        let response = oneshot(&state, get_as("/queries/series?n=1", token, &[])).await;
        assert_eq!(response.status(), StatusCode::OK);
        body(response).await.unwrap();
    }
    let refused = oneshot(&state, get_as("/queries/series?n=1", token, &[])).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&wait), "Retry-After: {wait}");
    assert!(json(refused).await["error"]
        .as_str()
        .unwrap()
        .contains("rate of 0.5 requests per second"));
    // A refused request is logged and counted like any other.
    let line = metric_line(
        &state,
        "sluice_http_requests_total{route=\"queries\",query=\"series\",status=\"429\"",
    )
    .await;
    assert!(line.contains("outcome=\"rejected\""), "{line}");
}

fn upload(uri: &str, body: Body, length: Option<usize>) -> Request<Body> {
    let mut builder = Request::post(uri)
        .header("authorization", format!("Bearer {WRITER}"))
        .header("content-type", "application/x-ndjson");
    if let Some(length) = length {
        builder = builder.header("content-length", length.to_string());
    }
    builder.body(body).unwrap()
}

fn rows(count: usize) -> String {
    (0..count)
        .map(|id| format!("{{\"id\": {id}, \"note\": \"a note of some length\"}}\n"))
        .collect()
}

#[tokio::test]
async fn bodies_and_query_strings_over_their_limits_are_refused_and_write_nothing() {
    let (db, _sessions, state) = setup().await;
    let text = rows(40);
    assert!(text.len() > 1024);
    // Declared too large: refused before a session is taken.
    let response = oneshot(
        &state,
        upload(
            "/tables/payments",
            Body::from(text.clone()),
            Some(text.len()),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(json(response).await["error"]
        .as_str()
        .unwrap()
        .contains("1024 bytes"));
    // Chunked, without a length: read until it passes the limit, then refused,
    // and the rows before the cut are rolled back.
    let chunks: Vec<Result<String, std::io::Error>> = text
        .as_bytes()
        .chunks(100)
        .map(|chunk| Ok(String::from_utf8(chunk.to_vec()).unwrap()))
        .collect();
    let response = oneshot(
        &state,
        upload(
            "/tables/payments",
            Body::from_stream(futures_util::stream::iter(chunks)),
            None,
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(db.query_text("select count(*) from payments"), "0");
    // Within the limit, it loads.
    let small = rows(5);
    let response = oneshot(
        &state,
        upload("/tables/payments", Body::from(small.clone()), None),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(db.query_text("select count(*) from payments"), "5");
    // Batches take [server] max_body.
    let lines = "[1]\n".repeat(600);
    let response = oneshot(
        &state,
        upload(
            "/queries/series/batch",
            Body::from(lines.clone()),
            Some(lines.len()),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // A query string over max_query_string.
    let long = format!("/queries/series?n=1&{}", "x=1&".repeat(60));
    let response = oneshot(&state, get_open(&long, &[])).await;
    assert_eq!(response.status(), StatusCode::URI_TOO_LONG);
    assert!(json(response).await["error"]
        .as_str()
        .unwrap()
        .contains("max_query_string"));
}

/// Reads what is left until the server closes the connection (or `PATIENCE`).
async fn read_to_end(socket: &mut TcpStream, received: &mut Vec<u8>) {
    let mut buffer = vec![0u8; 256 * 1024];
    let started = std::time::Instant::now();
    while started.elapsed() < PATIENCE {
        match tokio::time::timeout(Duration::from_secs(1), socket.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
            Err(_) => {}
        }
    }
    panic!("the server did not close the connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_takes_nothing_is_cut_off_and_its_query_cancelled() {
    let (_db, sessions, state) = setup().await;
    let (address, stop, _task) = listen(state.clone(), Duration::from_secs(5)).await;
    let (mut socket, mut received) = start_reading(address, "/queries/big", WRITER_HEADER, 1).await;
    // The client reads no more: the socket buffers fill, the server waits for
    // the client, and after idle_write_timeout (1 s) gives up.
    let sessions = &sessions;
    wait_until(
        PATIENCE,
        "the backend to be held back, waiting to write to sluice",
        move || async move { sessions.wait_event().await == "ClientWrite" },
    )
    .await;
    let took = wait_until_idle(sessions).await;
    assert!(
        took < Duration::from_secs(10),
        "the query was cancelled {took:?} after the client stopped"
    );
    let line = ended_request(&state, "queries", "big").await;
    assert!(line.contains("outcome=\"timeout\""), "{line}");
    // Reading again, the client finds a body that is cut, never a whole one.
    read_to_end(&mut socket, &mut received).await;
    assert!(
        !received.ends_with(b"0\r\n\r\n"),
        "the body looked complete"
    );
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_past_max_stream_duration_is_aborted_and_its_query_cancelled() {
    let (_db, sessions, state) = setup().await;
    // Rows flow, then the query sleeps: after 2 s the body ends in an error.
    let started = std::time::Instant::now();
    let response = oneshot(&state, get_open("/queries/stall", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    let error = body(response).await.unwrap_err();
    assert!(error.contains("max_stream_duration = 2s"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(30));
    wait_until_idle(&sessions).await;
    // Before the first byte, the same limit is a 504.
    let response = oneshot(&state, get_open("/queries/asleep", &[])).await;
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(json(response).await["error"]
        .as_str()
        .unwrap()
        .contains("max_stream_duration = 1s"));
    wait_until_idle(&sessions).await;
}

#[tokio::test]
async fn trailers_say_how_many_rows_a_complete_body_has() {
    let (_db, _sessions, state) = setup().await;
    let response = oneshot(
        &state,
        get_open("/queries/series?n=3", &[("te", "trailers")]),
    )
    .await;
    assert_eq!(
        response.headers()["trailer"],
        "Sluice-Rows, Sluice-Complete"
    );
    let collected = response.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned().expect("trailers");
    assert_eq!(trailers["sluice-rows"], "3");
    assert_eq!(trailers["sluice-complete"], "true");
    assert_eq!(
        collected.to_bytes().as_ref(),
        b"{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"
    );
    // Not asked for: none.
    let response = oneshot(&state, get_open("/queries/series?n=3", &[])).await;
    assert!(response.headers().get("trailer").is_none());
    assert!(response
        .into_body()
        .collect()
        .await
        .unwrap()
        .trailers()
        .is_none());
    // A body cut by an error ends in that error, without them.
    let response = oneshot(&state, get_open("/queries/divide", &[("te", "trailers")])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(body(response)
        .await
        .unwrap_err()
        .contains("division by zero"));
}

#[tokio::test]
async fn a_body_within_the_first_chunk_has_a_length_and_a_longer_one_streams() {
    use http_body::Body as _;
    let (_db, _sessions, state) = setup().await;
    // A short result is sent whole: its length is known (Content-Length).
    let response = oneshot(&state, get_open("/queries/series?n=3", &[])).await;
    assert_eq!(response.body().size_hint().exact(), Some(24));
    assert_eq!(
        body(response).await.unwrap(),
        b"{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"
    );
    // One over the first chunk streams, chunked, to the end.
    let response = oneshot(&state, get_open("/queries/series?n=200000", &[])).await;
    assert_eq!(response.body().size_hint().exact(), None);
    let streamed = body(response).await.unwrap();
    assert_eq!(
        streamed.iter().filter(|&&byte| byte == b'\n').count(),
        200_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailers_reach_an_http_1_1_client_on_the_wire() {
    let (_db, _sessions, state) = setup().await;
    let (address, stop, _task) = listen(state, Duration::from_secs(5)).await;
    let (mut socket, mut received) = start_reading(
        address,
        "/queries/series?n=2&format=csv",
        &format!("TE: trailers\r\nConnection: close\r\n{WRITER_HEADER}"),
        0,
    )
    .await;
    read_to_end(&mut socket, &mut received).await;
    let text = String::from_utf8(received).unwrap();
    assert!(
        text.ends_with("0\r\nsluice-rows: 2\r\nsluice-complete: true\r\n\r\n"),
        "{text}"
    );
    let _ = stop.send(());
}

/// The server of the slow-body tests: two pooled sessions, bodies that must
/// bring 100 bytes a second over each second of waiting (the defaults are
/// 10 s and 1 KiB a second), a token that reads (`ev_sub`'s batch calls only
/// read), one that writes, and a third that runs `other`.
const SLOW_CONFIG: &str = r#"
[queries.ev_sub]
sql = "select id from payments where note = $1"
params = [{ name = "note", type = "text", required = true }]

[queries.ev_large]
sql = "select id from payments where note = $1"
params = [{ name = "note", type = "text", required = true }]

[queries.other]
sql = "select 42 as answer"

[queries.wide]
sql = "select g as id, repeat('x', 1000) as pad from generate_series(1, 3) g where $1::int > 0"
params = [{ name = "n", type = "int", required = true }]
idle_write_timeout = "1s"

[tables.payments]
table = "payments"

[server]
body_read_timeout = "1s"
min_body_rate = "100"

[[tokens]]
name = "reader"
token = "reader-token-0123456789"
queries = ["ev_sub", "wide"]

[[tokens]]
name = "writer"
token = "writer-token-0123456789"
queries = ["*"]
scopes = ["write"]

[[tokens]]
name = "other"
token = "other-token-01234567890"
queries = ["other"]
"#;

const READER: &str = "reader-token-0123456789";
const OTHER: &str = "other-token-01234567890";

async fn slow_setup() -> (TestDb, Sessions, AppState) {
    let db = TestDb::new();
    db.execute("create table payments (id int primary key, note text);");
    let application = application_name();
    let config = postgres_config(
        &with_application_name(db.url(), &application),
        "pool_size = 2\npool_wait = \"2s\"",
        SLOW_CONFIG,
    );
    let sessions = Sessions::watch(&db, &application).await;
    (db, sessions, AppState::new(config))
}

/// One chunk of a chunked body.
fn chunk(bytes: &[u8]) -> Vec<u8> {
    let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
    chunk.extend_from_slice(bytes);
    chunk.extend_from_slice(b"\r\n");
    chunk
}

/// Starts `POST path` as `token` with a chunked body of `prefix` (sent at
/// once) and then `line` every `every`, never ending it.
async fn start_upload(
    address: std::net::SocketAddr,
    path: &str,
    token: &str,
    prefix: &[u8],
) -> TcpStream {
    let mut socket = TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    if !prefix.is_empty() {
        socket.write_all(&chunk(prefix)).await.unwrap();
    }
    socket
}

/// Sends `line` every `every` on `socket` until the server answers (or
/// closes, or `PATIENCE` passes), and returns what it answered.
async fn trickle_until_answered(mut socket: TcpStream, line: &str, every: Duration) -> String {
    let mut received = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let started = std::time::Instant::now();
    while started.elapsed() < PATIENCE {
        if socket.write_all(&chunk(line.as_bytes())).await.is_err() {
            break;
        }
        match tokio::time::timeout(every, socket.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
            Err(_) => {}
        }
        if received.windows(4).any(|window| window == b"\r\n\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// The report's attack: more clients than pooled sessions trickle bodies (a
/// line every 300 ms: 40 bytes a second, under the 100 required), as a token
/// without scope write (batches) and as a writer (batches and uploads).
/// Meanwhile no session is held, another token's query runs and `/health`
/// finds the database free; then every slow client is answered 408.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_are_ended_with_408_without_holding_a_session() {
    let (db, _sessions, state) = slow_setup().await;
    let (address, stop, _task) = listen(state.clone(), Duration::from_secs(5)).await;
    let line = "[\"nomatch\"]\n";
    let clients = [
        ("/queries/ev_sub/batch", READER, line),
        ("/queries/ev_sub/batch", READER, line),
        ("/queries/ev_sub/batch", READER, line),
        ("/queries/ev_sub/batch", WRITER, line),
        ("/tables/payments", WRITER, "{\"id\": 1}\n"),
        ("/tables/payments", WRITER, "{\"id\": 2}\n"),
    ];
    let mut uploads = tokio::task::JoinSet::new();
    for (path, token, line) in clients {
        let socket = start_upload(address, path, token, line.as_bytes()).await;
        uploads.spawn(trickle_until_answered(
            socket,
            line,
            Duration::from_millis(300),
        ));
    }
    // Every client has sent its head and a first line: before the bodies
    // end, no session waits on them.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let usage = state.databases().next().unwrap().1.usage();
    assert_eq!(usage.in_use, 0, "sessions held by slow bodies: {usage:?}");
    let client = reqwest::Client::new();
    let other = client
        .get(format!("http://{address}/queries/other"))
        .bearer_auth(OTHER)
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    assert_eq!(other.text().await.unwrap(), "{\"answer\":42}\n");
    let health = client
        .get(format!("http://{address}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let health: serde_json::Value = serde_json::from_str(&health.text().await.unwrap()).unwrap();
    assert_eq!(health["databases"]["main"], "ok", "{health}");
    while let Some(answer) = uploads.join_next().await {
        let answer = answer.unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("body_read_timeout"), "{answer}");
    }
    assert_eq!(db.query_text("select count(*) from payments"), "0");
    let line = metric_line(
        &state,
        "sluice_http_requests_total{route=\"batch\",query=\"ev_sub\",status=\"408\"",
    )
    .await;
    assert!(line.ends_with(" 4"), "{line}");
    let _ = stop.send(());
}

/// A body larger than what is read before the session (256 KiB) streams with
/// a session held; if it then slows below its pace, it is ended and the session
/// freed: an upload with 408, nothing written; a batch by cutting its response,
/// its transaction rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_that_slows_down_is_ended_and_frees_its_session() {
    let (db, sessions, state) = slow_setup().await;
    let (address, stop, _task) = listen(state.clone(), Duration::from_secs(5)).await;
    let sessions = &sessions;

    let rows: String = (1..=12_000)
        .map(|id| format!("{{\"id\": {id}, \"note\": \"n\"}}\n"))
        .collect();
    assert!(rows.len() > 256 * 1024);
    let socket = start_upload(address, "/tables/payments", WRITER, rows.as_bytes()).await;
    let upload = tokio::spawn(trickle_until_answered(
        socket,
        "{\"id\": 0, \"note\": \"n\"}\n",
        Duration::from_millis(300),
    ));
    let held = &state;
    wait_until(
        PATIENCE,
        "the upload to hold a session",
        move || async move { held.databases().next().unwrap().1.usage().in_use == 1 },
    )
    .await;
    let answer = upload.await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    wait_until_idle(sessions).await;
    assert_eq!(db.query_text("select count(*) from payments"), "0");

    let calls = "[\"nomatch\"]\n".repeat(24_000);
    assert!(calls.len() > 256 * 1024);
    let mut socket =
        start_upload(address, "/queries/ev_large/batch", WRITER, calls.as_bytes()).await;
    let (mut reader, mut writer) = socket.split();
    let trickled = async {
        // The results are read as they come (a client that reads them).
        let mut received = Vec::new();
        let reading = read_to_end_of(&mut reader, &mut received);
        let writing = async {
            loop {
                tokio::time::sleep(Duration::from_millis(300)).await;
                if writer.write_all(&chunk(b"[\"nomatch\"]\n")).await.is_err() {
                    return;
                }
            }
        };
        tokio::select! {
            () = reading => {}
            () = writing => {}
        }
        received
    };
    let received = tokio::time::timeout(PATIENCE, trickled)
        .await
        .expect("the batch is ended");
    assert!(received.starts_with(b"HTTP/1.1 200"));
    assert!(
        !received.ends_with(b"0\r\n\r\n"),
        "the body looked complete"
    );
    let line = ended_request(&state, "batch", "ev_large").await;
    assert!(
        line.contains("status=\"200\",outcome=\"timeout\""),
        "{line}"
    );
    wait_until_idle(sessions).await;
    let _ = stop.send(());
}

/// Reads until the server closes the connection or resets it.
async fn read_to_end_of(reader: &mut tokio::net::tcp::ReadHalf<'_>, received: &mut Vec<u8>) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => received.extend_from_slice(&buffer[..read]),
        }
    }
}

/// A token without scope write cannot hold a session by not reading a batch's
/// results either: after `idle_write_timeout` (1 s for `wide`) the response is
/// cut and the session freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_client_takes_no_results_is_cut_off() {
    let (_db, _sessions, state) = slow_setup().await;
    let (address, stop, _task) = listen(state.clone(), Duration::from_secs(5)).await;
    // Far more calls than the pipeline keeps in flight, so it goes on asking
    // for the next and handing over results, 3 kB a call: the socket's
    // buffers fill, then the response's channel.
    let calls = "[1]\n".repeat(50_000);
    let mut socket = start_upload(address, "/queries/wide/batch", READER, calls.as_bytes()).await;
    socket.write_all(b"0\r\n\r\n").await.unwrap();
    let line = ended_request(&state, "batch", "wide").await;
    assert!(
        line.contains("status=\"200\",outcome=\"timeout\""),
        "{line}"
    );
    wait_until(PATIENCE, "the batch's session to be given back", || async {
        state.databases().next().unwrap().1.usage().in_use == 0
    })
    .await;
    let mut received = Vec::new();
    read_to_end(&mut socket, &mut received).await;
    assert!(
        !received.ends_with(b"0\r\n\r\n"),
        "the body looked complete"
    );
    let _ = stop.send(());
}
