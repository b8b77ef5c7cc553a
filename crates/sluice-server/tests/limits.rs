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
use tokio::io::AsyncReadExt;
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
