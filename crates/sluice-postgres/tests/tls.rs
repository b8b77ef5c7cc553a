//! TLS as libpq's settings ask for it, against real servers: a dedicated
//! cluster with `ssl = on` and certificates the test kit generates, and the
//! shared cluster, which has no TLS.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use sluice_core::BatchSource;
use sluice_core::{ErrorKind, Meter};
use sluice_postgres::{Config, Connection, QueryOptions, QueryStream};
use sluice_testkit::{Cluster, ClusterBuilder, TestCertificates};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TLS cluster whose certificate names only `localhost`, with a role for
/// each way of logging in over TLS.
fn tls_cluster() -> (Cluster, TestCertificates) {
    let certificates = TestCertificates::generate(&["localhost"]);
    let cluster = ClusterBuilder::new()
        .tls(&certificates)
        .hba_line("hostssl all cert_user 127.0.0.1/32 cert")
        .hba_line("hostssl all cert_user ::1/128 cert")
        .hba_line("hostssl all scram_user 127.0.0.1/32 scram-sha-256")
        .hba_line("hostssl all scram_user ::1/128 scram-sha-256")
        .hba_line("hostnossl all scram_user all reject")
        .start();
    cluster.execute(
        "set password_encryption = 'scram-sha-256';
         create role scram_user login password 'secret';
         create role cert_user login;",
    );
    (cluster, certificates)
}

fn config(text: &str) -> Result<Config, sluice_core::Error> {
    text.parse()
}

async fn connect(text: &str) -> Result<(Connection, Meter), sluice_core::Error> {
    let meter = Meter::new();
    let connection = Connection::connect(&config(text)?, &meter).await?;
    Ok((connection, meter))
}

fn url(host: &str, cluster: &Cluster, user: &str, settings: &str) -> String {
    format!(
        "postgres://{user}@{host}:{}/sluice_test?{settings}",
        cluster.port()
    )
}

fn path(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test]
async fn verify_full_checks_the_root_and_the_name() {
    let (cluster, certificates) = tls_cluster();
    let root = format!(
        "sslmode=verify-full&sslrootcert={}",
        path(&certificates.ca())
    );
    let (connection, _) = connect(&url("localhost", &cluster, "postgres", &root))
        .await
        .expect("verify-full with the right CA and name");
    let encryption = connection.encryption().expect("encrypted");
    assert!(encryption.starts_with("TLSv1_"), "{encryption}");

    // The certificate names localhost, not 127.0.0.1.
    let error = connect(&url("127.0.0.1", &cluster, "postgres", &root))
        .await
        .expect_err("the wrong name");
    assert_eq!(error.kind(), ErrorKind::Connect, "{error}");
    assert!(
        error
            .to_string()
            .contains("verify-full checks the host name"),
        "{error}"
    );
    // verify-ca does not check the name.
    let chain_only = format!("sslmode=verify-ca&sslrootcert={}", path(&certificates.ca()));
    connect(&url("127.0.0.1", &cluster, "postgres", &chain_only))
        .await
        .expect("verify-ca ignores the name");

    // Another CA does not vouch for this server.
    let stranger = TestCertificates::generate(&["localhost"]);
    let error = connect(&url(
        "localhost",
        &cluster,
        "postgres",
        &format!("sslmode=verify-full&sslrootcert={}", path(&stranger.ca())),
    ))
    .await
    .expect_err("an untrusted CA");
    assert!(
        error.to_string().contains("not signed by a trusted root"),
        "{error}"
    );
}

#[tokio::test]
async fn the_tls_handshake_shows_in_the_connect_round_trips() {
    let (cluster, _certificates) = tls_cluster();
    let (plain, plain_meter) = connect(&url("127.0.0.1", &cluster, "postgres", "sslmode=disable"))
        .await
        .unwrap();
    assert_eq!(plain.encryption(), None);
    let (_tls, tls_meter) = connect(&url("127.0.0.1", &cluster, "postgres", "sslmode=require"))
        .await
        .unwrap();
    // SSLRequest and its answer, then the handshake's flight.
    assert!(
        tls_meter.snapshot().round_trips >= plain_meter.snapshot().round_trips + 2,
        "plain {:?}, TLS {:?}",
        plain_meter.snapshot(),
        tls_meter.snapshot()
    );
}

#[tokio::test]
async fn a_client_certificate_logs_in() {
    let (cluster, certificates) = tls_cluster();
    let client = certificates.client("cert_user");
    let settings = format!(
        "sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
        path(&certificates.ca()),
        path(&client.certificate),
        path(&client.key)
    );
    let (connection, _) = connect(&url("localhost", &cluster, "cert_user", &settings))
        .await
        .expect("login by certificate");
    assert!(connection.encryption().is_some());

    // Without the certificate the server refuses the role.
    let error = connect(&url("localhost", &cluster, "cert_user", "sslmode=require"))
        .await
        .expect_err("no certificate");
    assert_eq!(error.kind(), ErrorKind::Authentication, "{error}");

    // A key others may read is refused before connecting, as libpq does.
    std::fs::set_permissions(&client.key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let error = config(&url("localhost", &cluster, "cert_user", &settings)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Config, "{error}");
    assert!(
        error.to_string().contains("group or world access"),
        "{error}"
    );
    // A missing file is named.
    let error =
        config("sslmode=require sslcert=/nonexistent/c.crt sslkey=/nonexistent/c.key").unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("sslcert /nonexistent/c.crt: "),
        "{error}"
    );
}

#[tokio::test]
async fn channel_binding_is_required_and_achieved_over_tls() {
    let (cluster, _certificates) = tls_cluster();
    let url = |settings: &str| {
        format!(
            "postgres://scram_user:secret@127.0.0.1:{}/sluice_test?{settings}",
            cluster.port()
        )
    };
    connect(&url("sslmode=require&channel_binding=require"))
        .await
        .expect("SCRAM-SHA-256-PLUS over TLS");
    connect(&url("sslmode=require&channel_binding=disable"))
        .await
        .expect("plain SCRAM over TLS");
    let error = config(&url("sslmode=disable&channel_binding=require")).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Config, "{error}");
    // allow: plain first, refused by `hostnossl … reject`, then TLS.
    let (connection, _) = connect(&url("sslmode=allow"))
        .await
        .expect("allow falls back to TLS");
    assert!(connection.encryption().is_some());
}

#[tokio::test]
async fn prefer_falls_back_and_require_refuses_a_server_without_tls() {
    let cluster = ClusterBuilder::new().start();
    let plain = |settings: &str| {
        format!(
            "postgres://postgres@127.0.0.1:{}/sluice_test?{settings}",
            cluster.port()
        )
    };
    let (connection, _) = connect(&plain("sslmode=prefer"))
        .await
        .expect("prefer goes plain");
    assert_eq!(connection.encryption(), None);
    let (connection, _) = connect(&plain("")).await.expect("prefer is the default");
    assert_eq!(connection.encryption(), None);
    let error = connect(&plain("sslmode=require"))
        .await
        .expect_err("no TLS");
    assert_eq!(error.kind(), ErrorKind::Connect, "{error}");
    assert!(
        error
            .to_string()
            .contains("does not accept TLS connections, but sslmode=require"),
        "{error}"
    );
    let error = connect(&plain("sslmode=require&channel_binding=require"))
        .await
        .expect_err("no TLS");
    assert_eq!(error.kind(), ErrorKind::Connect, "{error}");
}

#[tokio::test]
async fn queries_stream_over_tls() {
    // A result of 20 MB crosses many TLS records and reads.
    let (cluster, certificates) = tls_cluster();
    let settings = format!(
        "sslmode=verify-full&sslrootcert={}",
        path(&certificates.ca())
    );
    let (connection, meter) = connect(&url("localhost", &cluster, "postgres", &settings))
        .await
        .unwrap();
    let connected = meter.snapshot();
    let mut stream = QueryStream::start(
        connection,
        "select g, repeat('x', 1000) from generate_series(1, 20000) g",
        QueryOptions::default(),
    )
    .await
    .unwrap();
    let mut rows = 0;
    while let Some(batch) = stream.next_batch().await.unwrap() {
        rows += batch.num_rows();
    }
    assert_eq!(rows, 20000);
    // One query, streamed: as few round trips as over plain TCP.
    assert!(
        (meter.snapshot() - connected).round_trips <= 2,
        "{:?}",
        meter.snapshot() - connected
    );
    let mut connection = stream.into_connection().expect("the session is reusable");
    let answer = connection.simple_query("select 42").await.unwrap();
    assert_eq!(answer, [vec![Some("42".to_owned())]]);
}

/// Forwards connections on a local port to `port`, keeping each connection's
/// first eight bytes: an `SSLRequest` or a `CancelRequest` shows there.
async fn recording_proxy(port: u16) -> (u16, Arc<Mutex<Vec<[u8; 8]>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let local = listener.local_addr().unwrap().port();
    let openings = Arc::new(Mutex::new(Vec::new()));
    let recorded = openings.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let recorded = recorded.clone();
            tokio::spawn(async move {
                let mut opening = [0u8; 8];
                if client.read_exact(&mut opening).await.is_err() {
                    return;
                }
                recorded.lock().unwrap().push(opening);
                let mut server = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
                server.write_all(&opening).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    (local, openings)
}

/// `SSLRequest`'s and `CancelRequest`'s codes, after their length (8, 16).
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
const CANCEL_REQUEST: [u8; 8] = [0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e];

/// Runs `select pg_sleep(60)` on a session reached through a recording proxy
/// with `settings`, cancels it, and returns what each connection opened with.
async fn cancel_through_proxy(cluster: &Cluster, settings: &str) -> Vec<[u8; 8]> {
    let (port, openings) = recording_proxy(cluster.port()).await;
    let text = format!("postgres://postgres@localhost:{port}/sluice_test?{settings}");
    let config = config(&text).unwrap();
    let (mut connection, _meter) = connect(&text).await.unwrap();
    let token = connection.cancel_token();
    let running = tokio::spawn(async move { connection.simple_query("select pg_sleep(60)").await });
    // Cancel until the query has started and been stopped (a cancel that
    // arrives before the query does nothing).
    let error = loop {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        token.cancel(&config).await.unwrap();
        if running.is_finished() {
            break running.await.unwrap().unwrap_err();
        }
    };
    assert_eq!(error.code(), Some("57014"), "{error}");
    let openings = openings.lock().unwrap().clone();
    openings
}

#[tokio::test]
async fn cancel_requests_are_encrypted_when_their_session_is() {
    let (cluster, certificates) = tls_cluster();
    let verified = format!(
        "sslmode=verify-full&sslrootcert={}",
        path(&certificates.ca())
    );
    let openings = cancel_through_proxy(&cluster, &verified).await;
    assert!(openings.len() >= 2, "{openings:?}");
    assert!(
        openings.iter().all(|opening| *opening == SSL_REQUEST),
        "every connection, the cancels too, must start with an SSLRequest: {openings:?}"
    );

    let openings = cancel_through_proxy(&cluster, "sslmode=disable").await;
    assert!(
        openings[1..]
            .iter()
            .all(|opening| *opening == CANCEL_REQUEST),
        "a plain session is cancelled in plain: {openings:?}"
    );
}
