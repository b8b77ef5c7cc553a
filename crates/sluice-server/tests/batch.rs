//! `POST /queries/{name}/batch`: a named query for every line of the body,
//! pipelined, results streamed back in order.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use serde_json::Value;
use sluice_gateway::AppState;
use sluice_testkit::TestDb;
use tokio::io::AsyncWriteExt;

const WRITER: &str = "writer-token-0123456789";
const READER: &str = "reader-token-0123456789";
const OUTSIDER: &str = "outsider-token-012345";

fn config(prefix: &str) -> String {
    format!(
        r#"
[queries.{prefix}_add]
sql = "insert into items (id, label, at) values ($1::int, $2, $3::timestamptz) returning id, label"
params = [
  {{ name = "id", type = "int", required = true }},
  {{ name = "label", type = "text", required = true }},
  {{ name = "at", type = "timestamptz", default = "2024-01-01T00:00:00Z" }},
]

[queries.{prefix}_touch]
sql = "update items set label = label || '!' where id = $1::int"
params = [{{ name = "id", type = "int", required = true }}]

[queries.{prefix}_get]
sql = "select id, label from items where id = $1::int"
params = [{{ name = "id", type = "int", required = true }}]

[[tokens]]
name = "writer"
token = "{WRITER}"
queries = ["*"]
scopes = ["write"]

[[tokens]]
name = "reader"
token = "{READER}"
queries = ["*"]

[[tokens]]
name = "outsider"
token = "{OUTSIDER}"
queries = ["{prefix}_get"]
"#
    )
}

/// A database with an empty `items` table, the application_name of the app's
/// sessions, and the app.
fn setup(prefix: &str) -> (TestDb, String, AppState) {
    let db = TestDb::new();
    db.execute("create table items (id int primary key, label text not null, at timestamptz);");
    let application = application_name();
    let config = postgres_config(
        &with_application_name(db.url(), &application),
        "pool_size = 4",
        &config(prefix),
    );
    (db, application, AppState::new(config))
}

fn post(uri: &str, token: Option<&str>, body: String) -> Request<Body> {
    let mut builder = Request::post(uri).header("content-type", "application/x-ndjson");
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    builder.body(Body::from(body)).unwrap()
}

/// Lines `{"id": n, "label": "item n"}` (odd n) or `[n, "item n"]` (even n).
fn calls(ids: impl Iterator<Item = u32>) -> String {
    ids.map(|id| {
        if id % 2 == 1 {
            format!("{{\"id\":{id},\"label\":\"item {id}\"}}\n")
        } else {
            format!("[{id}, \"item {id}\", \"2024-06-01T00:00:00Z\"]\n")
        }
    })
    .collect()
}

fn lines(body: &[u8]) -> Vec<Value> {
    std::str::from_utf8(body)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn count(db: &TestDb) -> u64 {
    db.query_text("select count(*) from items").parse().unwrap()
}

/// The round trips `/metrics` has recorded for `query`, once its request is logged.
async fn round_trips(state: &AppState, query: &str) -> u64 {
    let needle = format!("sluice_db_round_trips_total{{query=\"{query}\"}} ");
    let line = metric_line(state, &needle).await;
    line[needle.len()..].trim().parse().unwrap()
}

#[tokio::test]
async fn a_thousand_calls_come_back_in_order_in_few_round_trips() {
    let (db, _, state) = setup("thousand");
    let response = oneshot(
        &state,
        post("/queries/thousand_add/batch", Some(WRITER), calls(1..=1000)),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let results = lines(&body(response).await.unwrap());
    assert_eq!(results.len(), 1000);
    for (index, result) in results.iter().enumerate() {
        let id = index as u64 + 1;
        assert_eq!(result["line"], id);
        assert_eq!(
            result["rows"],
            serde_json::json!([{"id": id, "label": format!("item {id}")}]),
            "{result}"
        );
    }
    assert_eq!(count(&db), 1000);
    assert_eq!(
        db.query_text("select count(*) from items where at = '2024-01-01T00:00:00Z'"),
        "500",
        "defaults fill what a line leaves out"
    );
    // Prepare once, pipeline the calls: a constant handful of trips, not 1,000.
    let trips = round_trips(&state, "thousand_add").await;
    // README: 1,000 calls cost 5 round trips, the whole pipeline from BEGIN to
    // COMMIT being one of them.
    assert_eq!(trips, 5, "round trips for 1,000 calls");

    // Statements without rows report the affected count; blank lines are skipped
    // but counted.
    let response = oneshot(
        &state,
        post(
            "/queries/thousand_touch/batch?transaction=each",
            Some(WRITER),
            "{\"id\":1}\n\n[2]\n5000\n".into(),
        ),
    )
    .await;
    let results = lines(&body(response).await.unwrap());
    assert_eq!(
        results,
        [
            serde_json::json!({"line": 1, "affected": 1}),
            serde_json::json!({"line": 3, "affected": 1}),
            serde_json::json!({"line": 4, "affected": 0}),
        ]
    );
}

#[tokio::test]
async fn a_real_client_gets_results_streamed_in_order() {
    let (db, _, state) = setup("socket");
    let (address, stop, _task) = listen(state, Duration::from_secs(5)).await;
    // Enough calls to fill the pipeline's window several times over, sent in pieces.
    let pieces = futures_util::stream::iter(
        (0..50u32).map(|piece| Ok::<_, std::io::Error>(calls(piece * 400 + 1..=piece * 400 + 400))),
    );
    let response = reqwest::Client::new()
        .post(format!("http://{address}/queries/socket_add/batch"))
        .bearer_auth(WRITER)
        .body(reqwest::Body::wrap_stream(pieces))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let results = lines(&response.bytes().await.unwrap());
    assert_eq!(results.len(), 20_000);
    assert!(results
        .iter()
        .enumerate()
        .all(|(index, result)| result["line"] == index as u64 + 1
            && result["rows"][0]["id"] == index as u64 + 1));
    assert_eq!(count(&db), 20_000);
    let _ = stop.send(());
}

#[tokio::test]
async fn in_single_mode_one_failure_rolls_everything_back() {
    let (db, _, state) = setup("single");
    // Line 600 repeats id 5: the unique key refuses it.
    let body = format!("{}{}{}", calls(1..=599), calls(5..=5), calls(601..=1000));
    let response = oneshot(
        &state,
        post("/queries/single_add/batch", Some(WRITER), body),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let results = lines(&body_of(response).await);
    assert_eq!(results.len(), 1000, "one line per call");
    let failed = &results[599];
    assert_eq!(failed["line"], 600);
    assert_eq!(failed["error"]["code"], "23505", "{failed}");
    assert!(results[600..]
        .iter()
        .all(|result| result["rolled_back"] == true));
    assert_eq!(
        results
            .iter()
            .map(|result| result["line"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        (1..=1000).collect::<Vec<_>>()
    );
    assert_eq!(count(&db), 0, "single mode: nothing is committed");

    // An invalid line fails the batch in its place, naming the parameter.
    let body = format!(
        "{}{{\"id\":\"seven\",\"label\":\"x\"}}\n{}",
        calls(1..=3),
        calls(5..=6)
    );
    let results = lines(
        &body_of(
            oneshot(
                &state,
                post("/queries/single_add/batch", Some(WRITER), body),
            )
            .await,
        )
        .await,
    );
    assert_eq!(results.len(), 6);
    assert_eq!(results[3]["line"], 4);
    let message = results[3]["error"]["message"].as_str().unwrap();
    assert!(message.contains("parameter \"id\""), "{message}");
    assert_eq!(
        results[5],
        serde_json::json!({"line": 6, "rolled_back": true})
    );
    assert_eq!(count(&db), 0);

    // A failure early in a body far larger than the pipeline's window: every
    // line still gets its result line, and nothing is committed.
    let body = format!("{}{}", calls(1..=1).repeat(2), calls(2..=29_999));
    let results = lines(
        &body_of(
            oneshot(
                &state,
                post("/queries/single_add/batch", Some(WRITER), body),
            )
            .await,
        )
        .await,
    );
    assert_eq!(results.len(), 30_000);
    assert_eq!(results[1]["error"]["code"], "23505");
    assert!(results[2..]
        .iter()
        .all(|result| result["rolled_back"] == true));
    assert_eq!(results[29_999]["line"], 30_000);
    assert_eq!(count(&db), 0);
}

async fn body_of(response: axum::http::Response<Body>) -> Vec<u8> {
    body(response).await.unwrap()
}

#[tokio::test]
async fn in_each_mode_the_other_calls_commit() {
    let (db, _, state) = setup("each");
    let body = format!("{}{}{}", calls(1..=599), calls(5..=5), calls(601..=1000));
    let response = oneshot(
        &state,
        post(
            "/queries/each_add/batch?transaction=each",
            Some(WRITER),
            body,
        ),
    )
    .await;
    let results = lines(&body_of(response).await);
    assert_eq!(results.len(), 1000);
    assert_eq!(results[599]["error"]["code"], "23505");
    assert_eq!(
        results
            .iter()
            .filter(|result| result.get("rows").is_some())
            .count(),
        999
    );
    assert_eq!(count(&db), 999);
}

#[tokio::test]
async fn writing_needs_scope_write_and_the_query_permission() {
    let (db, _, state) = setup("auth");
    let status = |token: Option<&'static str>, uri: &'static str| {
        let state = state.clone();
        async move {
            oneshot(&state, post(uri, token, calls(1..=2)))
                .await
                .status()
                .as_u16()
        }
    };
    assert_eq!(status(None, "/queries/auth_add/batch").await, 401);
    assert_eq!(
        status(Some("wrong-token-0123456789"), "/queries/auth_add/batch").await,
        401
    );
    assert_eq!(status(Some(OUTSIDER), "/queries/auth_add/batch").await, 403);
    assert_eq!(status(Some(OUTSIDER), "/queries/nope/batch").await, 403);
    assert_eq!(status(Some(WRITER), "/queries/nope/batch").await, 404);
    assert_eq!(
        status(
            Some(WRITER),
            "/queries/auth_add/batch?transaction=sometimes"
        )
        .await,
        400
    );

    // The query permission without scope write: the calls run read-only.
    let response = oneshot(
        &state,
        post("/queries/auth_add/batch", Some(READER), calls(1..=3)),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let results = lines(&body_of(response).await);
    assert_eq!(results[0]["error"]["code"], "25006", "{}", results[0]);
    assert_eq!(count(&db), 0);
    // Reading works, and the session went back to the pool writable.
    db.execute("insert into items values (1, 'one', null)");
    let response = oneshot(
        &state,
        post(
            "/queries/auth_get/batch",
            Some(OUTSIDER),
            "[1]\n[2]\n".into(),
        ),
    )
    .await;
    assert_eq!(
        lines(&body_of(response).await),
        [
            serde_json::json!({"line": 1, "rows": [{"id": 1, "label": "one"}]}),
            serde_json::json!({"line": 2, "rows": []}),
        ]
    );
    for _ in 0..4 {
        let response = oneshot(
            &state,
            post("/queries/auth_touch/batch", Some(WRITER), "[1]\n".into()),
        )
        .await;
        assert_eq!(lines(&body_of(response).await)[0]["affected"], 1);
    }
    assert_eq!(db.query_text("select label from items"), "one!!!!");
}

// Multi-threaded so that, should it fail while the cut request still holds its
// transaction open, the server can end that transaction and the test's schema
// can be dropped (on one thread, dropping the schema would wait for it forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_cut_off_mid_body_commits_nothing() {
    let (db, application, state) = setup("cut");
    let sessions = Sessions::watch(&db, &application).await;
    let (address, stop, _task) = listen(state.clone(), Duration::from_secs(5)).await;
    // Several windows' worth, so calls are already running when the client vanishes.
    let body = calls(1..=40_000).into_bytes();
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    socket
        .write_all(
            format!(
                "POST /queries/cut_add/batch HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {WRITER}\r\n\
                 Content-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    socket.write_all(&body[..body.len() / 2]).await.unwrap();
    let sessions = &sessions;
    wait_until(
        PATIENCE,
        "the batch's first inserts to have run in its open transaction",
        move || async move { sessions.writing().await == 1 },
    )
    .await;
    drop(socket);
    let line = ended_request(&state, "batch", "cut_add").await;
    assert!(
        line.contains("route=\"batch\",query=\"cut_add\",status=\"200\",outcome=\"client_gone\""),
        "{line}"
    );
    assert_eq!(count(&db), 0);
    let _ = stop.send(());
}
