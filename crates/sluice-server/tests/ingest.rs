//! `POST /tables/{name}`: request bodies streamed into PostgreSQL tables, through
//! the router and through real sockets.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use sluice_gateway::AppState;
use sluice_testkit::TestDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WRITER: &str = "writer-token-0123456789";
const READER: &str = "reader-token-0123456789";

fn tables(names: &[&str]) -> String {
    let mut text = String::from(
        r#"
[queries.count]
sql = "select count(*) as n from payments"

[[tokens]]
name = "writer"
token = "writer-token-0123456789"
queries = ["*"]
scopes = ["write"]

[[tokens]]
name = "reader"
token = "reader-token-0123456789"
queries = ["*"]
"#,
    );
    for name in names {
        text.push_str(&format!("\n[tables.{name}]\ntable = \"payments\"\n"));
    }
    text
}

/// A database with an empty `payments` table, the application_name of the app's
/// sessions, and the app.
fn setup(names: &[&str]) -> (TestDb, String, AppState) {
    let db = TestDb::new();
    db.execute(
        "create table payments (id int primary key, amount numeric(10,2) not null, note text,
                                at timestamptz default now());",
    );
    let application = application_name();
    let config = postgres_config(
        &with_application_name(db.url(), &application),
        "pool_size = 4",
        &tables(names),
    );
    (db, application, AppState::new(config))
}

fn post(uri: &str, token: Option<&str>, content_type: Option<&str>, body: String) -> Request<Body> {
    let mut builder = Request::post(uri);
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    if let Some(content_type) = content_type {
        builder = builder.header("content-type", content_type);
    }
    builder.body(Body::from(body)).unwrap()
}

fn ndjson(rows: std::ops::RangeInclusive<u32>) -> String {
    rows.map(|id| format!("{{\"id\":{id},\"amount\":\"{id}.50\",\"note\":\"n{id}\"}}\n"))
        .collect()
}

fn count(db: &TestDb) -> u64 {
    db.query_text("select count(*) from payments")
        .parse()
        .unwrap()
}

#[tokio::test]
async fn ndjson_and_csv_bodies_stream_into_the_table() {
    let (db, _, state) = setup(&["payments"]);
    let response = oneshot(
        &state,
        post(
            "/tables/payments",
            Some(WRITER),
            Some("application/x-ndjson"),
            ndjson(1..=500),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let summary = json(response).await;
    assert_eq!(summary["records"], 500);
    assert_eq!(summary["accepted"], 500);
    assert_eq!(summary["rejected"], 0);
    assert_eq!(summary["written"], 500);
    // Look up the table, one COPY: a constant handful, whatever the row count.
    let trips = summary["round_trips"].as_u64().unwrap();
    assert!((1..=8).contains(&trips), "{summary}");
    assert!(summary.get("rejects").is_none(), "{summary}");
    assert_eq!(count(&db), 500);
    assert_eq!(
        db.query_text("select amount::text || ' ' || note from payments where id = 7"),
        "7.50 n7"
    );

    // CSV, by Content-Type; a header names the columns.
    let csv = "id,amount,note\n501,1.25,\"a, b\"\n502,2.5,\n";
    let response = oneshot(
        &state,
        post(
            "/tables/payments",
            Some(WRITER),
            Some("text/csv"),
            csv.into(),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(json(response).await["written"], 2);
    assert_eq!(
        db.query_text("select note is null from payments where id = 502"),
        "t"
    );

    // Upsert and dry run, as query parameters.
    let response = oneshot(
        &state,
        post(
            "/tables/payments?on_conflict=update&key=id",
            Some(WRITER),
            None,
            "{\"id\":1,\"amount\":99}\n{\"id\":9000,\"amount\":1}\n".into(),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(json(response).await["written"], 2);
    assert_eq!(
        db.query_text("select amount from payments where id = 1"),
        "99.00"
    );
    let response = oneshot(
        &state,
        post(
            "/tables/payments?dry_run=true&format=ndjson",
            Some(WRITER),
            Some("application/octet-stream"),
            ndjson(10_001..=10_100),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let summary = json(response).await;
    assert_eq!(
        (summary["accepted"].as_u64(), summary["dry_run"].as_bool()),
        (Some(100), Some(true))
    );
    assert_eq!(count(&db), 503);

    // A body of an unknown type is refused before anything runs.
    let response = oneshot(
        &state,
        post(
            "/tables/payments",
            Some(WRITER),
            Some("text/plain"),
            "x".into(),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let response = oneshot(
        &state,
        post(
            "/tables/payments?on_conflict=update",
            Some(WRITER),
            None,
            String::new(),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(json(response).await["parameter"], "key");
}

#[tokio::test]
async fn a_large_body_streams_through_a_real_socket() {
    let (db, _, state) = setup(&["payments"]);
    let (address, stop, _task) = listen(state, Duration::from_secs(5)).await;
    // 200,000 rows sent in 2,000 pieces, never held whole by the client either.
    let pieces = futures_util::stream::iter(
        (0..2000u32)
            .map(|piece| Ok::<_, std::io::Error>(ndjson(piece * 100 + 1..=piece * 100 + 100))),
    );
    let response = reqwest::Client::new()
        .post(format!("http://{address}/tables/payments"))
        .bearer_auth(WRITER)
        .header("content-type", "application/x-ndjson")
        .body(reqwest::Body::wrap_stream(pieces))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let summary: serde_json::Value =
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(summary["written"], 200_000, "{summary}");
    assert!(summary["round_trips"].as_u64().unwrap() <= 8, "{summary}");
    assert_eq!(count(&db), 200_000);
    let _ = stop.send(());
}

#[tokio::test]
async fn a_bad_record_in_abort_mode_is_a_422_naming_line_and_column() {
    let (db, _, state) = setup(&["payments"]);
    let mut body = ndjson(1..=1000);
    body.push_str("{\"id\":1001,\"amount\":\"12,5\"}\n");
    body.push_str(&ndjson(1002..=1100));
    let response = oneshot(&state, post("/tables/payments", Some(WRITER), None, body)).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let error = json(response).await;
    assert_eq!(error["line"], 1001, "{error}");
    assert_eq!(error["column"], "amount", "{error}");
    assert_eq!(error["sqlstate"], "22P02", "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("numeric"),
        "{error}"
    );
    assert_eq!(count(&db), 0);

    // A row the table refuses: its line, and the constraint's SQLSTATE.
    let body = format!("{}{}", ndjson(1..=4), ndjson(2..=2));
    let response = oneshot(&state, post("/tables/payments", Some(WRITER), None, body)).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let error = json(response).await;
    assert_eq!(
        (error["line"].as_u64(), error["sqlstate"].as_str()),
        (Some(5), Some("23505")),
        "{error}"
    );
    assert_eq!(count(&db), 0);

    // Input sluice itself cannot read: the line, no SQLSTATE.
    let body = format!("{}{{\"id\": 3,\n{}", ndjson(1..=2), ndjson(4..=5));
    let response = oneshot(
        &state,
        post(
            "/tables/payments?method=insert&batch_rows=2",
            Some(WRITER),
            None,
            body,
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let error = json(response).await;
    assert_eq!(error["line"], 3, "{error}");
    assert!(error.get("sqlstate").is_none(), "{error}");
    assert_eq!(count(&db), 0);
}

#[tokio::test]
async fn a_deadlock_or_serialization_failure_is_a_503_to_retry_not_a_422() {
    let (db, _, state) = setup(&["payments"]);
    // The server gives the load up as it would when it lost a race: a
    // trigger raises the SQLSTATE at one row.
    for (code, method) in [("40P01", "copy"), ("40001", "insert"), ("55P03", "copy")] {
        db.execute(&format!(
            "create or replace function lose() returns trigger language plpgsql as
               $$ begin if new.id = 500 then raise exception 'lost a race' using errcode = '{code}';
                  end if; return new; end $$;
             drop trigger if exists lose on payments;
             create trigger lose before insert on payments for each row execute function lose();"
        ));
        let uri = format!("/tables/payments?method={method}");
        let response = oneshot(&state, post(&uri, Some(WRITER), None, ndjson(1..=1000))).await;
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{code}");
        assert_eq!(response.headers()["retry-after"], "1");
        let error = json(response).await;
        assert_eq!(error["sqlstate"], code, "{error}");
        assert!(
            error["error"].as_str().unwrap().contains("retry"),
            "{error}"
        );
        assert_eq!(count(&db), 0);
    }
}

#[tokio::test]
async fn skip_mode_commits_good_rows_and_returns_the_rejects() {
    let (db, _, state) = setup(&["payments"]);
    let mut body = String::new();
    for id in 1..=2_000u32 {
        if id % 100 == 0 {
            body.push_str(&format!("{{\"id\":{id},\"amount\":\"lots\"}}\n"));
        } else if id % 101 == 0 {
            body.push_str("{not json}\n");
        } else {
            body.push_str(&format!("{{\"id\":{id},\"amount\":1}}\n"));
        }
    }
    let response = oneshot(
        &state,
        post("/tables/payments?on_error=skip", Some(WRITER), None, body),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let summary = json(response).await;
    assert_eq!(summary["records"], 2_000);
    assert_eq!(summary["rejected"], 20 + 19);
    assert_eq!(summary["accepted"], 2_000 - 39);
    assert_eq!(summary["rejects_omitted"], 0);
    let rejects = summary["rejects"].as_array().unwrap();
    assert_eq!(rejects.len(), 39);
    let refused = rejects.iter().find(|reject| reject["line"] == 100).unwrap();
    assert_eq!(refused["column"], "amount");
    assert_eq!(refused["record"], "{\"id\":100,\"amount\":\"lots\"}");
    assert!(rejects.iter().any(|reject| reject["line"] == 101));
    assert_eq!(count(&db), 2_000 - 39);

    // Past the first 1,000 rejects, they are counted.
    let body: String = (1..=1_500).map(|_| "[]\n").collect();
    let response = oneshot(
        &state,
        post("/tables/payments?on_error=skip", Some(WRITER), None, body),
    )
    .await;
    let summary = json(response).await;
    assert_eq!(summary["rejected"], 1_500);
    assert_eq!(summary["rejects"].as_array().unwrap().len(), 1_000);
    assert_eq!(summary["rejects_omitted"], 500);
}

/// Sends the headers and the first `sent` bytes of the body, and returns the
/// socket (the caller drops it: the client vanishes mid-upload).
async fn start_upload(
    address: std::net::SocketAddr,
    path: &str,
    body: &[u8],
    sent: usize,
) -> tokio::net::TcpStream {
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    socket
        .write_all(
            format!(
                "POST {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {WRITER}\r\n\
                 Content-Type: application/x-ndjson\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    socket.write_all(&body[..sent]).await.unwrap();
    socket.flush().await.unwrap();
    socket
}

// Multi-threaded so that, should it fail while the cut request still holds its
// transaction open, the server can end that transaction and the test's schema
// can be dropped (on one thread, dropping the schema would wait for it forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_cut_off_mid_body_commits_nothing() {
    let (db, application, state) = setup(&["cut_copy", "cut_skip", "cut_upsert"]);
    let sessions = Sessions::watch(&db, &application).await;
    let (address, stop, _task) = listen(state.clone(), Duration::from_secs(5)).await;
    let body = ndjson(1..=50_000).into_bytes();
    let sessions = &sessions;
    for (name, options) in [
        ("cut_copy", ""),
        ("cut_skip", "?on_error=skip"),
        ("cut_upsert", "?on_conflict=ignore"),
    ] {
        let mut socket = start_upload(
            address,
            &format!("/tables/{name}{options}"),
            &body,
            body.len() / 2,
        )
        .await;
        // Rows really are on their way into the table when the client vanishes:
        // in the one COPY of the table (or of the upsert's staging table), or, in
        // skip mode, in chunks already copied inside the open transaction.
        if name == "cut_skip" {
            wait_until(
                PATIENCE,
                "a chunk of rows to be copied inside the import's transaction",
                move || async move { sessions.writing().await == 1 },
            )
            .await;
        } else {
            wait_until(
                PATIENCE,
                &format!("{name}: more than 1,000 rows to be copied before the cut"),
                move || async move { sessions.copying().await > 1_000 },
            )
            .await;
        }
        let mut probe = [0u8; 1];
        let answered =
            tokio::time::timeout(Duration::from_millis(10), socket.read(&mut probe)).await;
        assert!(answered.is_err(), "the server answered a half-sent body");
        drop(socket);
        let line = ended_request(&state, "tables", name).await;
        assert!(line.contains("outcome=\"client_gone\""), "{line}");
        assert_eq!(
            count(&db),
            0,
            "{name}: rows of a cut-off upload were committed"
        );
    }
    // The server is fine afterwards.
    let response = reqwest::Client::new()
        .post(format!("http://{address}/tables/cut_copy"))
        .bearer_auth(WRITER)
        .body(ndjson(1..=10))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(count(&db), 10);
    let _ = stop.send(());
}

#[tokio::test]
async fn writes_need_a_token_with_scope_write() {
    let (db, _, state) = setup(&["payments"]);
    let request = |token: Option<&'static str>, path: &'static str| {
        let state = state.clone();
        async move {
            let response = oneshot(&state, post(path, token, None, ndjson(1..=3))).await;
            response.status().as_u16()
        }
    };
    assert_eq!(request(None, "/tables/payments").await, 401);
    assert_eq!(
        request(Some("wrong-token-0123456789"), "/tables/payments").await,
        401
    );
    assert_eq!(request(Some(READER), "/tables/payments").await, 403);
    assert_eq!(count(&db), 0);
    // Tables not in the configuration: 404 for writers only.
    assert_eq!(request(None, "/tables/secrets").await, 401);
    assert_eq!(request(Some(READER), "/tables/secrets").await, 403);
    assert_eq!(request(Some(WRITER), "/tables/secrets").await, 404);
    assert_eq!(request(Some(WRITER), "/tables/payments").await, 200);
    assert_eq!(count(&db), 3);
}

#[tokio::test]
async fn sqlite_is_read_only() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("demo.sqlite");
    sluice_server::demo::ensure(&path, 100).unwrap();
    let state = AppState::new(sluice_server::demo::config(&path).unwrap());
    let response = oneshot(
        &state,
        post("/tables/payment_events", None, None, "{\"id\":1}\n".into()),
    )
    .await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let error = json(response).await;
    assert!(
        error["error"].as_str().unwrap().contains("read-only"),
        "{error}"
    );

    let response = oneshot(
        &state,
        post(
            "/queries/account_payments/batch",
            None,
            None,
            "[42]\n".into(),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let error = json(response).await;
    assert!(
        error["error"].as_str().unwrap().contains("read-only"),
        "{error}"
    );
}

#[tokio::test]
async fn header_says_whether_line_1_of_a_csv_body_is_a_header() {
    let (db, _, state) = setup(&["payments"]);
    let headerless = "1,1.50\n2,2.50\n3,3.50\n";
    let send = |query: &str, body: &str| {
        oneshot(
            &state,
            post(
                &format!("/tables/payments?{query}"),
                Some(WRITER),
                Some("text/csv"),
                body.to_owned(),
            ),
        )
    };

    // Read as a header, "1,1.50" is not the columns given: a 422 at line 1, nothing kept.
    let response = send("columns=id,amount", headerless).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let error = json(response).await;
    assert_eq!(error["line"], 1, "{error}");
    assert_eq!(
        error["error"],
        "the CSV header does not match columns=: column 1 is \"1\" where \"id\" was expected \
         (header: \"1\", \"1.50\"; columns: \"id\", \"amount\"); if line 1 is data, not a \
         header, add header=false",
        "{error}"
    );
    assert_eq!(count(&db), 0);

    let response = send("columns=id,amount&header=false", headerless).await;
    assert_eq!(response.status(), StatusCode::OK);
    let summary = json(response).await;
    assert_eq!(
        (summary["records"].as_u64(), summary["written"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(count(&db), 3);

    // Line numbers stay the body's lines: with no header, a bad line 1 is line 1.
    let response = send("columns=id,amount&header=false", "4,x\n").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let error = json(response).await;
    assert_eq!(
        (error["line"].as_u64(), error["column"].as_str()),
        (Some(1), Some("amount")),
        "{error}"
    );

    // match: the table's columns, all of them, in order.
    let response = send("header=match", "id,amount,note\n5,5.00,x\n").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let error = json(response).await;
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("the CSV header does not match the table's columns (header=match): it ends after 3 names, without \"at\""),
        "{error}"
    );
    let response = send("header=match", "id,amount,note,at\n5,5.00,x,2024-01-01\n").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(count(&db), 4);

    // NDJSON has no header line: refused, not ignored.
    let response = oneshot(
        &state,
        post(
            "/tables/payments?header=false",
            Some(WRITER),
            None,
            ndjson(6..=6),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(json(response).await["parameter"], "header");
    assert_eq!(count(&db), 4);
}

#[tokio::test]
async fn faults_a_setting_would_fix_name_this_api_s_parameters() {
    let (db, _, state) = setup(&["payments"]);
    let send = |query: &str, body: &str| {
        oneshot(
            &state,
            post(
                &format!("/tables/payments{query}"),
                Some(WRITER),
                None,
                body.to_owned(),
            ),
        )
    };
    let unknown = "{\"id\":1,\"amount\":1,\"colour\":\"red\"}\n";
    let hint = "the table has no such column (set ignore_unknown=true to skip unknown keys)";

    // Abort mode: a 422 in the API's words, never the command line's.
    let response = send("", unknown).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let error = json(response).await;
    assert_eq!(
        (error["error"].as_str(), error["column"].as_str()),
        (Some(hint), Some("colour")),
        "{error}"
    );

    // Skip mode: each reject says the same.
    let response = send("?on_error=skip", unknown).await;
    assert_eq!(response.status(), StatusCode::OK);
    let summary = json(response).await;
    assert_eq!(summary["rejects"][0]["error"], hint, "{summary}");

    // A key the table does not have is the key parameter's fault.
    let response = send("?on_conflict=ignore&key=colour", unknown).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error = json(response).await;
    assert_eq!(error["parameter"], "key", "{error}");
    assert!(!error["error"].as_str().unwrap().contains("--"), "{error}");

    let response = send("?ignore_unknown=true", unknown).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(count(&db), 1);
}
