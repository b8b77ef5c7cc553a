//! `sluice serve` over HTTPS, with real TLS clients: HTTP/2 or HTTP/1.1 as
//! ALPN chooses, clients that do not trust the certificate refused, a failure
//! mid-stream that resets one HTTP/2 stream and not its neighbours, the
//! handshake under the header-read timeout, and a reloaded certificate that
//! serves new connections while a stream in flight finishes.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::*;
use reqwest::{Certificate, Client, Version};
use sluice_gateway::{AppState, ServerTls, TlsFiles};
use sluice_testkit::{TestCertificates, TestDb};
use tokio::io::AsyncReadExt;

const QUERIES: &str = r#"
[queries.numbers]
sql = "select g as id from generate_series(1, $1::int) g"
params = [{ name = "count", type = "int", required = true }]

[queries.divide]
sql = "select g as id, 1 / (g - $1::int) as inverse from generate_series(1, 1000000) g"
params = [{ name = "zero_at", type = "int", required = true }]
"#;

/// The certificate's files as the server configuration names them.
fn files(certificates: &TestCertificates) -> TlsFiles {
    let server = certificates.server();
    TlsFiles {
        certificate: server.certificate,
        key: server.key,
    }
}

/// An HTTPS server for `localhost` with `[server]` settings `server`.
async fn start(
    db: &TestDb,
    tls: &ServerTls,
    server: &str,
) -> (AppState, SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let config = postgres_config(
        db.url(),
        "pool_size = 4",
        &format!("{QUERIES}\n[server]\n{server}\n"),
    );
    let state = AppState::new(config);
    let (address, stop, _task) =
        listen_with_tls(state.clone(), Some(tls.clone()), Duration::from_secs(5)).await;
    (state, address, stop)
}

/// A client that trusts only the CA at `ca` and finds `localhost` at `address`.
fn client(ca: impl AsRef<Path>, address: SocketAddr) -> reqwest::ClientBuilder {
    let pem = std::fs::read(ca).unwrap();
    Client::builder()
        .add_root_certificate(Certificate::from_pem(&pem).unwrap())
        .resolve("localhost", address)
}

fn url(address: SocketAddr, path: &str) -> String {
    format!("https://localhost:{}{path}", address.port())
}

fn lines(body: &[u8]) -> usize {
    body.iter().filter(|&&byte| byte == b'\n').count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpn_chooses_http2_or_http1_and_only_trusting_clients_connect() {
    let db = TestDb::new();
    let certificates = TestCertificates::generate(&["localhost"]);
    let tls = ServerTls::load(&files(&certificates)).unwrap();
    let (state, address, stop) = start(&db, &tls, "").await;
    let numbers = url(address, "/queries/numbers?count=1000");

    let response = client(certificates.ca(), address)
        .build()
        .unwrap()
        .get(&numbers)
        .send()
        .await
        .unwrap();
    assert_eq!(response.version(), Version::HTTP_2);
    assert_eq!(lines(&response.bytes().await.unwrap()), 1000);

    let response = client(certificates.ca(), address)
        .http1_only()
        .build()
        .unwrap()
        .get(&numbers)
        .send()
        .await
        .unwrap();
    assert_eq!(response.version(), Version::HTTP_11);
    assert_eq!(lines(&response.bytes().await.unwrap()), 1000);

    // A client that trusts another CA refuses the server; the server counts it.
    let stranger = TestCertificates::generate(&["localhost"]);
    let error = client(stranger.ca(), address)
        .build()
        .unwrap()
        .get(&numbers)
        .send()
        .await
        .unwrap_err();
    assert!(error.is_connect(), "{error:?}");
    let failures = metric_line(&state, "sluice_tls_handshake_failures_total").await;
    let count: f64 = failures.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 1.0, "{failures}");

    // Plain HTTP to the HTTPS port gets no HTTP answer, and the server goes on.
    let error = Client::new()
        .get(format!("http://127.0.0.1:{}/health", address.port()))
        .send()
        .await
        .unwrap_err();
    assert!(!error.is_status(), "{error:?}");
    let response = client(certificates.ca(), address)
        .build()
        .unwrap()
        .get(url(address, "/health"))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_mid_stream_resets_its_http2_stream_and_not_its_neighbours() {
    let db = TestDb::new();
    let certificates = TestCertificates::generate(&["localhost"]);
    let tls = ServerTls::load(&files(&certificates)).unwrap();
    let (_state, address, stop) = start(&db, &tls, "").await;
    // One client: both requests share one HTTP/2 connection.
    let client = client(certificates.ca(), address)
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let mut long = client
        .get(url(address, "/queries/numbers?count=1000000"))
        .send()
        .await
        .unwrap();
    assert_eq!(long.version(), Version::HTTP_2);
    let mut received = long.chunk().await.unwrap().unwrap().to_vec();

    let failing = client
        .get(url(address, "/queries/divide?zero_at=500000"))
        .send()
        .await
        .unwrap();
    assert_eq!(failing.status(), 200);
    let error = failing.bytes().await.unwrap_err();
    assert!(error.is_body() || error.is_decode(), "{error:?}");

    // The neighbour on the same connection finishes whole.
    while let Some(chunk) = long.chunk().await.unwrap() {
        received.extend_from_slice(&chunk);
    }
    assert_eq!(lines(&received), 1_000_000);
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_handshake_counts_against_the_header_read_timeout() {
    let db = TestDb::new();
    let certificates = TestCertificates::generate(&["localhost"]);
    let tls = ServerTls::load(&files(&certificates)).unwrap();
    let (state, address, stop) = start(&db, &tls, "header_read_timeout = \"1s\"").await;
    let mut silent = tokio::net::TcpStream::connect(address).await.unwrap();
    let mut buffer = [0u8; 64];
    let read = tokio::time::timeout(PATIENCE, silent.read(&mut buffer))
        .await
        .expect("the server closes a connection that never starts its handshake");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    metric_line(
        &state,
        "sluice_http_connection_timeouts_total{timeout=\"header_read\"}",
    )
    .await;
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_certificate_serves_new_connections_while_streams_finish() {
    let db = TestDb::new();
    let first = TestCertificates::generate(&["localhost"]);
    let second = TestCertificates::generate(&["localhost"]);
    let directory = tempfile::tempdir().unwrap();
    let live = TlsFiles {
        certificate: directory.path().join("server.crt"),
        key: directory.path().join("server.key"),
    };
    let install = |from: &TestCertificates| {
        let source = files(from);
        std::fs::copy(&source.certificate, &live.certificate).unwrap();
        std::fs::copy(&source.key, &live.key).unwrap();
    };
    install(&first);
    let tls = ServerTls::load(&live).unwrap();
    let (_state, address, stop) = start(&db, &tls, "").await;

    let old_client = client(first.ca(), address).build().unwrap();
    let mut stream = old_client
        .get(url(address, "/queries/numbers?count=1000000"))
        .send()
        .await
        .unwrap();
    let mut received = stream.chunk().await.unwrap().unwrap().to_vec();

    install(&second);
    tls.reload().unwrap();

    // New connections get the new certificate: trusted by its CA only.
    let response = client(second.ca(), address)
        .build()
        .unwrap()
        .get(url(address, "/queries/numbers?count=10"))
        .send()
        .await
        .unwrap();
    assert_eq!(lines(&response.bytes().await.unwrap()), 10);
    let error = client(first.ca(), address)
        .build()
        .unwrap()
        .get(url(address, "/health"))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_connect(), "{error:?}");

    // The stream that began under the old certificate finishes whole.
    while let Some(chunk) = stream.chunk().await.unwrap() {
        received.extend_from_slice(&chunk);
    }
    assert_eq!(lines(&received), 1_000_000);
    let _ = stop.send(());
}
