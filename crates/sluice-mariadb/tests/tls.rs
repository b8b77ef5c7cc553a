//! TLS to a real MariaDB server with generated certificates: what each
//! `ssl-mode` checks, refused certificates named in one line, password and
//! certificate logins inside TLS, round trips as on a plain socket, and the
//! `KILL QUERY` session encrypted like the one it stops; a Unix socket without TLS.

use std::sync::OnceLock;

use sluice_core::{BatchSource, ErrorKind, Meter};
use sluice_mariadb::tls::SslMode;
use sluice_mariadb::{CancelToken, Config, Connection, QueryOptions, QueryStream};
use sluice_testkit::{MariaDbServer, TestCertificates, TestMariaDb};

/// One TLS server for the whole file (starting one takes seconds): its
/// certificate names `localhost` only, so `127.0.0.1` is a wrong name.
fn server() -> &'static (MariaDbServer, TestCertificates) {
    static SERVER: OnceLock<(MariaDbServer, TestCertificates)> = OnceLock::new();
    SERVER.get_or_init(|| {
        let certificates = TestCertificates::generate(&["localhost"]);
        let server = MariaDbServer::start_tls(&certificates);
        server.execute(
            "CREATE USER 'certified'@'%' REQUIRE X509;
             GRANT SELECT ON *.* TO 'certified'@'%';",
        );
        (server, certificates)
    })
}

/// `user@host:port` of the TLS server with `options` in the query.
fn url(user: &str, host: &str, options: &str) -> String {
    let (server, _) = server();
    format!("mariadb://{user}@{host}:{}/mysql?{options}", server.port())
}

fn ca() -> String {
    server().1.ca().display().to_string()
}

async fn connect(url: &str) -> Result<Connection, sluice_core::Error> {
    let config: Config = url.parse()?;
    Connection::connect(&config, &Meter::new()).await
}

async fn one_row(connection: &mut Connection) -> String {
    let answer = connection.simple_query("select 'ok'").await.unwrap();
    String::from_utf8(answer.rows[0][0].clone().unwrap()).unwrap()
}

#[tokio::test]
async fn verify_identity_checks_the_name_and_encrypts() {
    let options = format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={}", ca());
    let mut connection = connect(&url("sluice:sluice", "localhost", &options))
        .await
        .unwrap();
    let encryption = connection.encryption().expect("encrypted");
    assert!(encryption.starts_with("TLSv1_"), "{encryption}");
    assert_eq!(one_row(&mut connection).await, "ok");
    // The server agrees that the session is encrypted.
    let cipher = connection
        .simple_query("show session status like 'Ssl_cipher'")
        .await
        .unwrap();
    assert!(!cipher.rows[0][1].as_ref().unwrap().is_empty());

    // 127.0.0.1 is not a name the certificate gives.
    let error = connect(&url("sluice:sluice", "127.0.0.1", &options))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Connect);
    let message = error.to_string();
    assert!(
        message.contains("TLS handshake with 127.0.0.1"),
        "{message}"
    );
    assert!(message.contains("VERIFY_CA does not"), "{message}");

    // VERIFY_CA checks the chain only.
    let options = format!("ssl-mode=VERIFY_CA&ssl-ca={}", ca());
    let mut connection = connect(&url("sluice:sluice", "127.0.0.1", &options))
        .await
        .unwrap();
    assert_eq!(one_row(&mut connection).await, "ok");
}

#[tokio::test]
async fn a_certificate_from_another_authority_is_refused() {
    let strangers = TestCertificates::generate(&["localhost"]);
    let options = format!("ssl-ca={}", strangers.ca().display());
    let error = connect(&url("sluice:sluice", "localhost", &options))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Connect);
    let message = error.to_string();
    assert!(
        message.contains("not signed by a trusted root (check ssl-ca)"),
        "{message}"
    );
}

#[tokio::test]
async fn preferred_and_required_encrypt_without_checking() {
    for options in ["", "ssl-mode=REQUIRED"] {
        let mut connection = connect(&url("sluice:sluice", "127.0.0.1", options))
            .await
            .unwrap();
        assert!(connection.encryption().is_some(), "{options}");
        assert_eq!(one_row(&mut connection).await, "ok");
    }
    let connection = connect(&url("sluice:sluice", "127.0.0.1", "ssl-mode=DISABLED"))
        .await
        .unwrap();
    assert_eq!(connection.encryption(), None);
}

#[tokio::test]
async fn a_client_certificate_logs_in_a_user_who_requires_one() {
    let error = connect(&url("certified", "localhost", &format!("ssl-ca={}", ca())))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Authentication, "{error}");
    let client = server().1.client("certified");
    let options = format!(
        "ssl-ca={}&ssl-cert={}&ssl-key={}",
        ca(),
        client.certificate.display(),
        client.key.display()
    );
    let mut connection = connect(&url("certified", "localhost", &options))
        .await
        .unwrap();
    assert_eq!(one_row(&mut connection).await, "ok");
}

#[tokio::test]
async fn tls_costs_connect_trips_only() {
    let mut trips = Vec::new();
    for options in ["ssl-mode=DISABLED", "ssl-mode=REQUIRED"] {
        let meter = Meter::new();
        let config: Config = url("sluice:sluice", "127.0.0.1", options).parse().unwrap();
        let connection = Connection::connect(&config, &meter).await.unwrap();
        let connected = meter.snapshot();
        let mut stream = QueryStream::start(
            connection,
            "select seq from seq_1_to_100000",
            QueryOptions::default(),
        )
        .await
        .unwrap();
        let mut rows = 0;
        while let Some(batch) = stream.next_batch().await.unwrap() {
            rows += batch.num_rows();
        }
        assert_eq!(rows, 100_000);
        let query = (meter.snapshot() - connected).round_trips;
        trips.push((connected.round_trips, query));
    }
    let [(plain_connect, plain_query), (tls_connect, tls_query)] = trips[..] else {
        unreachable!()
    };
    assert_eq!(plain_query, 1, "a streamed result is one round trip");
    assert_eq!(tls_query, plain_query, "TLS adds nothing per query");
    assert!(
        tls_connect > plain_connect,
        "{tls_connect} vs {plain_connect}"
    );
}

#[tokio::test]
async fn kill_query_travels_as_encrypted_as_the_session() {
    let options = format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={}", ca());
    let config: Config = url("sluice:sluice", "localhost", &options).parse().unwrap();
    assert_eq!(config.tls.mode, SslMode::VerifyIdentity);
    let connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let token = CancelToken::new(config, connection.server().connection_id);
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        token.cancel().await
    });
    let started = std::time::Instant::now();
    let stream = QueryStream::start(connection, "select sleep(30)", QueryOptions::default()).await;
    canceller.await.unwrap().unwrap();
    let error = match stream {
        Ok(mut stream) => stream.next_batch().await.unwrap_err(),
        Err(error) => error,
    };
    assert_eq!(error.code(), Some("70100"), "{error}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[tokio::test]
async fn required_means_tls_or_no_connection() {
    // The shared test server: the ephemeral one serves no TLS; one named by
    // SLUICE_TEST_MARIADB_URL may.
    let db = TestMariaDb::new();
    let has_tls = db.query_text("select @@have_ssl") == "YES";
    let separator = if db.url().contains('?') { '&' } else { '?' };
    let required = format!("{}{separator}ssl-mode=REQUIRED", db.url());
    match connect(&required).await {
        Ok(connection) => {
            assert!(has_tls, "connected without TLS although REQUIRED");
            assert!(connection.encryption().is_some());
        }
        Err(error) => {
            assert!(!has_tls, "{error}");
            let message = error.to_string();
            assert!(
                message.contains("does not accept TLS connections, but ssl-mode=REQUIRED"),
                "{message}"
            );
        }
    }
    // PREFERRED (the default) takes the server as it is.
    let connection = connect(db.url()).await.unwrap();
    assert_eq!(connection.encryption().is_some(), has_tls);
}

#[tokio::test]
async fn a_unix_socket_carries_no_tls_whatever_the_mode() {
    let (server, _) = server();
    // The socket does not leave the machine: even VERIFY_IDENTITY connects
    // without TLS there, as MySQL's clients do.
    let url = format!(
        "{}&ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
        server.socket_url(),
        ca()
    );
    let config: Config = url.parse().unwrap();
    assert!(!config.target.is_tcp());
    let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    assert_eq!(connection.encryption(), None);
    assert_eq!(one_row(&mut connection).await, "ok");
}
