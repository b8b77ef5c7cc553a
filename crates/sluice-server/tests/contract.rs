//! What the README promises about the gateway's responses, checked against oracles
//! that are not sluice: compressed bodies decompressed by their reference codecs
//! and compared with PostgreSQL's `COPY` and `row_to_json`, metrics read back by
//! value, both limits, and the routes that stay open when tokens are configured.

mod common;

use std::io::Read;

use axum::http::{header, StatusCode};
use common::*;
use sluice_gateway::AppState;
use sluice_testkit::TestDb;

const QUERIES: &str = r#"
[queries.events]
sql = "select id, kind, at, amount, note from events order by id"

[queries.series]
sql = "select g as id, 'row ' || g as label from generate_series(1, $1::int) g"
params = [{ name = "n", type = "int", required = true }]

[queries.wide]
sql = "select g, repeat('x', 1000) as filler from generate_series(1, $1::int) g"
params = [{ name = "n", type = "int", required = true }]
max_bytes = "1MiB"
"#;

fn setup(rest: &str) -> (TestDb, AppState) {
    let db = TestDb::new();
    db.execute(
        "create table events (id int primary key, kind text, at timestamptz, amount numeric(10,2), note text);
         insert into events select g, case when g % 3 = 0 then 'refund' else 'sale' end,
           timestamptz '2024-01-01 00:00:00+00' + g * interval '1 hour', g * 1.25,
           case when g % 4 = 0 then null else 'note, \"' || g || '\"' || chr(10) || 'line two' end
         from generate_series(1, 5000) g;",
    );
    let config = postgres_config(db.url(), "pool_size = 2", &format!("{QUERIES}{rest}"));
    (db, AppState::new(config))
}

fn decompress(encoding: &str, bytes: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    match encoding {
        "gzip" => flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut plain)
            .unwrap(),
        "zstd" => zstd::stream::read::Decoder::new(bytes)
            .unwrap()
            .read_to_end(&mut plain)
            .unwrap(),
        other => panic!("no decoder for {other}"),
    };
    plain
}

#[tokio::test]
async fn compressed_bodies_decompress_to_the_servers_own_output() {
    let (db, state) = setup("");
    let copy = db.psql_bytes(
        "copy (select id, kind, at, amount, note from events order by id) \
         to stdout with (format csv, header)",
    );
    let row_to_json = db.query_text(
        "select json_agg(row_to_json(e) order by id) \
         from (select id, kind, at, amount, note from events) e",
    );
    let row_to_json: Vec<serde_json::Value> = serde_json::from_str(&row_to_json).unwrap();
    for encoding in ["gzip", "zstd"] {
        for accept in ["text/csv", "application/x-ndjson"] {
            let response = oneshot(
                &state,
                get(
                    "/queries/events",
                    &[("accept", accept), ("accept-encoding", encoding)],
                ),
            )
            .await;
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(response.headers()[header::CONTENT_ENCODING], encoding);
            let compressed = body(response).await.unwrap();
            let plain = decompress(encoding, &compressed);
            if accept == "text/csv" {
                assert_eq!(
                    String::from_utf8_lossy(&plain),
                    String::from_utf8_lossy(&copy),
                    "{encoding} CSV"
                );
            } else {
                let rows: Vec<serde_json::Value> = String::from_utf8(plain)
                    .unwrap()
                    .lines()
                    .map(|line| serde_json::from_str(line).unwrap())
                    .collect();
                assert_eq!(rows, row_to_json, "{encoding} NDJSON");
            }
        }
    }
}

/// The value of one series on `/metrics` (0 while absent).
async fn metric(state: &AppState, series: &str) -> f64 {
    let text = String::from_utf8(
        body(oneshot(state, get("/metrics", &[])).await)
            .await
            .unwrap(),
    )
    .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |value| value.trim().parse().unwrap())
}

#[tokio::test]
async fn metrics_count_the_rows_bytes_and_round_trips_served() {
    let (_db, state) = setup("");
    let rows = r#"sluice_rows_total{query="series"}"#;
    let bytes = r#"sluice_response_bytes_total{query="series"}"#;
    let trips = r#"sluice_db_round_trips_total{query="series"}"#;
    let requests = r#"sluice_http_requests_total{route="queries",query="series",status="200",outcome="complete"}"#;
    // Metrics are process-wide: read what is there before this test's requests.
    let before = (
        metric(&state, rows).await,
        metric(&state, bytes).await,
        metric(&state, trips).await,
        metric(&state, requests).await,
    );
    let mut served = 0;
    for n in [1234, 1, 20_000] {
        let response = oneshot(&state, get(&format!("/queries/series?n={n}"), &[])).await;
        served += body(response).await.unwrap().len();
    }
    assert_eq!(metric(&state, rows).await - before.0, 21_235.0);
    assert_eq!(metric(&state, bytes).await - before.1, served as f64);
    assert_eq!(metric(&state, requests).await - before.3, 3.0);
    // README: a named query costs two round trips the first time a pooled
    // session runs it (prepare, then execute) and one after that (the session
    // keeps it prepared), whatever its row count. The requests came one after
    // another, so one session served them all.
    assert_eq!(metric(&state, trips).await - before.2, 4.0);
}

#[tokio::test]
async fn a_kept_statement_whose_table_changed_fails_once_and_is_prepared_again() {
    let (db, state) = setup("[queries.by_id]\nsql = \"select * from events where id = $1::int\"\nparams = [{ name = \"id\", type = \"int\" }]\n");
    let trips = r#"sluice_db_round_trips_total{query="by_id"}"#;
    let before = metric(&state, trips).await;
    for _ in 0..3 {
        let response = oneshot(&state, get("/queries/by_id?id=7", &[])).await;
        assert_eq!(response.status(), StatusCode::OK);
        body(response).await.unwrap();
    }
    assert_eq!(metric(&state, trips).await - before, 4.0);
    // The result's columns change under the kept statement: PostgreSQL refuses
    // to run it (0A000), that session is dropped, and the next one prepares
    // the statement again and answers with the new columns.
    db.execute("alter table events add column extra int default 5");
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let response = oneshot(&state, get("/queries/by_id?id=7", &[])).await;
        let status = response.status();
        let text = String::from_utf8(body(response).await.unwrap_or_default()).unwrap();
        if status == StatusCode::OK {
            assert!(text.contains("\"extra\":5"), "{text}");
        }
        statuses.push(status);
    }
    assert_eq!(statuses.last(), Some(&StatusCode::OK), "{statuses:?}");
    assert!(
        statuses.iter().filter(|s| **s != StatusCode::OK).count() <= 1,
        "{statuses:?}"
    );
}

#[tokio::test]
async fn max_bytes_aborts_the_body_instead_of_cutting_it_short() {
    let (_db, state) = setup("");
    // About 1 KB a row: 900 rows fit in 1 MiB, 2,000 do not.
    let response = oneshot(&state, get("/queries/wide?n=900", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    let whole = body(response).await.unwrap();
    assert_eq!(whole.iter().filter(|&&byte| byte == b'\n').count(), 900);

    let response = oneshot(&state, get("/queries/wide?n=2000", &[])).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "the status went out first"
    );
    let error = body(response).await.unwrap_err();
    assert!(error.contains("max_bytes"), "{error}");
}

#[tokio::test]
async fn health_metrics_and_openapi_need_no_token_when_tokens_are_configured() {
    let (_db, state) = setup(
        r#"
[[tokens]]
name = "reader"
token = "reader-token-0123456789"
queries = ["*"]
"#,
    );
    assert_eq!(
        oneshot(&state, get("/queries/series?n=1", &[]))
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    for open in ["/health", "/metrics", "/openapi.json"] {
        assert_eq!(
            oneshot(&state, get(open, &[])).await.status(),
            StatusCode::OK,
            "{open}"
        );
    }
}
