//! The gateway's pool connects over TLS as the `[databases]` URL says: a
//! verified session for named queries and for writes, and a refused
//! certificate that keeps the server from starting queries (503, logged).

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use sluice_gateway::AppState;
use sluice_testkit::{ClusterBuilder, TestCertificates};

#[tokio::test]
async fn named_queries_run_on_verified_tls_sessions() {
    let certificates = TestCertificates::generate(&["localhost"]);
    let cluster = ClusterBuilder::new()
        .tls(&certificates)
        .hba_line("hostnossl all all all reject")
        .start();
    let url = format!(
        "postgres://postgres@localhost:{}/sluice_test?sslmode=verify-full&sslrootcert={}",
        cluster.port(),
        certificates.ca().display()
    );
    let state = AppState::new(postgres_config(
        &url,
        "pool_size = 2",
        QUERIES_WITHOUT_TOKENS,
    ));
    let response = oneshot(&state, get("/queries/encrypted", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    let row = json(response).await;
    assert_eq!(row["ssl"], true, "{row}");
    assert!(
        row["version"].as_str().unwrap().starts_with("TLSv1."),
        "{row}"
    );

    // Another CA: the pool cannot connect, and says so as a 503.
    let stranger = TestCertificates::generate(&["localhost"]);
    let url = format!(
        "postgres://postgres@localhost:{}/sluice_test?sslmode=verify-full&sslrootcert={}",
        cluster.port(),
        stranger.ca().display()
    );
    let state = AppState::new(postgres_config(
        &url,
        "pool_size = 2",
        QUERIES_WITHOUT_TOKENS,
    ));
    let response = oneshot(
        &state,
        Request::get("/queries/encrypted")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
}

const QUERIES_WITHOUT_TOKENS: &str = r#"
[queries.encrypted]
database = "main"
sql = "select ssl, version from pg_stat_ssl where pid = pg_backend_pid()"
"#;
