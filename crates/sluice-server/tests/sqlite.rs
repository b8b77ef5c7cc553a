//! The gateway over a real SQLite file: the demo database and its named queries.

mod common;

use std::time::Duration;

use axum::http::{header, StatusCode};
use common::*;
use sluice_core::BatchSource;
use sluice_gateway::AppState;
use sluice_server::demo::{self, Prepared};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ROWS: u64 = 30_000;

fn demo_state(pool: Option<usize>) -> (tempfile::TempDir, std::path::PathBuf, AppState) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("data").join("demo.sqlite");
    assert!(matches!(
        demo::ensure(&path, ROWS).unwrap(),
        Prepared::Created(_)
    ));
    assert_eq!(demo::ensure(&path, ROWS).unwrap(), Prepared::Reused);
    let mut config = demo::config(&path).unwrap();
    if let Some(size) = pool {
        for database in config.databases.values_mut() {
            database.pool_size = size;
            database.pool_wait = Duration::from_millis(200);
        }
    }
    (directory, path, AppState::new(config))
}

/// The first value of `sql`'s result, read from the file through the SQLite
/// driver's source rather than the gateway under test.
async fn first_value(path: &std::path::Path, sql: &str) -> String {
    let mut result = sluice_sqlite::SqliteStream::start(path, sql, Vec::new(), Default::default())
        .await
        .unwrap();
    let batch = result.next_batch().await.unwrap().unwrap();
    String::from_utf8(batch.row(0).get(0).unwrap().to_vec()).unwrap()
}

#[tokio::test]
async fn the_demo_streams_payment_events_with_postgres_renderings() {
    let (_directory, path, state) = demo_state(None);
    let response = oneshot(&state, get("/queries/payment_events", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    let text = String::from_utf8(body(response).await.unwrap()).unwrap();
    assert_eq!(text.lines().count() as u64, ROWS);
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["id"], 1);
    assert!(first["payload"].is_object(), "{first}");
    assert!(
        first["created_at"]
            .as_str()
            .unwrap()
            .starts_with("2024-01-01T00:0"),
        "{first}"
    );
    // Amounts keep their two decimals exactly as stored.
    // `|| ''` makes it an expression without a declared type: the stored text.
    let stored = first_value(
        &path,
        "select amount || '' from payment_events where id = 1",
    )
    .await;
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains(&format!("\"amount\":{stored},")),
        "{stored}"
    );

    // Typed parameters bind with SQLite's storage classes and normalised times.
    let response = oneshot(
        &state,
        get(
            "/queries/payment_events?status=failed&since=2024-01-05T12:00:00%2B02:00&format=csv",
            &[],
        ),
    )
    .await;
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/csv; charset=utf-8"
    );
    let csv = String::from_utf8(body(response).await.unwrap()).unwrap();
    let expected: i64 = first_value(
        &path,
        "select count(*) from payment_events where status = 'failed' and created_at >= '2024-01-05 10:00:00+00'",
    )
    .await
    .parse()
    .unwrap();
    assert!(expected > 10);
    assert!(
        csv.starts_with("id,account_id,amount,currency,status,created_at,description,payload\n")
    );
    // Some descriptions span quotes and commas, so count records by id at line start.
    let records = csv
        .lines()
        .skip(1)
        .filter(|line| line.split(',').nth(4) == Some("failed"))
        .count();
    assert_eq!(records as i64, expected);

    let account: i64 = first_value(&path, "select account_id from payment_events where id = 7")
        .await
        .parse()
        .unwrap();
    let response = oneshot(
        &state,
        get(
            &format!("/queries/account_payments?account_id={account}"),
            &[("accept", "application/json")],
        ),
    )
    .await;
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&body(response).await.unwrap()).unwrap();
    assert!(rows.iter().any(|row| row["id"] == 7));
    assert!(rows.iter().all(|row| row["account_id"] == account));

    let response = oneshot(
        &state,
        get("/queries/account_payments?account_id=seven", &[]),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(json(response).await["parameter"], "account_id");

    let response = oneshot(&state, get("/queries/daily_totals?since=2024-01-10", &[])).await;
    let text = String::from_utf8(body(response).await.unwrap()).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["day"], "2024-01-10");
    assert!(first["payments"].as_i64().unwrap() > 0);
    assert!(first["total"].is_number());

    let response = oneshot(&state, get("/health", &[])).await;
    assert_eq!(json(response).await["databases"]["demo"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_a_sqlite_stream_frees_its_slot() {
    let (_directory, _path, state) = demo_state(Some(1));
    let (address, stop, _task) = listen(state.clone(), Duration::from_secs(5)).await;
    for _ in 0..20 {
        let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
        socket
            .write_all(b"GET /queries/payment_events HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let mut buffer = vec![0u8; 16 * 1024];
        assert!(socket.read(&mut buffer).await.unwrap() > 0);
        drop(socket);
    }
    // The last client's query notices it is gone and gives its slot back; with one
    // slot, any leaked query would keep it forever.
    wait_until(
        PATIENCE,
        "the pool's one slot to be free",
        move || async move {
            reqwest::get(format!("http://{address}/metrics"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
                .contains("sluice_pool_connections_in_use{database=\"demo\"} 0")
        },
    )
    .await;
    let response = reqwest::get(format!("http://{address}/queries/daily_totals"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // Read to the end: a result slower than the flush interval holds the slot
    // until its body is read.
    assert!(!response.text().await.unwrap().is_empty());
    let metrics = reqwest::get(format!("http://{address}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("sluice_pool_connections_in_use{database=\"demo\"} 0"),
        "{metrics}"
    );
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_get_identical_bodies() {
    let (_directory, _path, state) = demo_state(None);
    let (address, stop, _task) = listen(state, Duration::from_secs(5)).await;
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..8 {
        clients.spawn(async move {
            reqwest::get(format!("http://{address}/queries/payment_events"))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
        });
    }
    let mut bodies = Vec::new();
    while let Some(body) = clients.join_next().await {
        bodies.push(body.unwrap());
    }
    assert!(bodies.iter().all(|body| body == &bodies[0]));
    assert_eq!(
        bodies[0].iter().filter(|&&byte| byte == b'\n').count() as u64,
        ROWS
    );
    let _ = stop.send(());
}

#[tokio::test]
async fn sqlite_named_queries_are_prepared_and_compared_at_start_up() {
    let (_directory, path, demo) = demo_state(None);
    assert!(demo.check_databases().await.problems.is_empty());
    let text = format!(
        r#"[databases.demo]
sqlite = {}

[queries.extra]
sql = "select id from payment_events where id = ?1 or id = ?2"
params = [{{ name = "id", type = "int" }}]

[queries.broken]
sql = "select x from nowhere"

[queries.writes]
sql = "delete from payment_events where id = ?1"
params = [{{ name = "id", type = "int" }}]
"#,
        quoted(&path.display().to_string())
    );
    let config = sluice_gateway::Config::parse(&text, "demo.toml").unwrap();
    let report = AppState::new(config).check_databases().await;
    let found: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0].starts_with(
            "demo.toml:9: queries.broken.sql: the database refuses this SQL: no such table"
        ),
        "{}",
        found[0]
    );
    assert_eq!(
        found[1],
        "demo.toml:5: queries.extra.params: the SQL takes 2 parameters (?1 to ?2), but 1 is declared"
    );
    assert_eq!(
        found[2],
        "demo.toml:12: queries.writes.sql: this SQL writes, but SQLite databases are served read-only"
    );
}
