//! Logging in: every authentication method sluice speaks, and the server's own
//! refusals (before and after it asks for a password) reported as the server's
//! message with its SQLSTATE. Each test starts a dedicated cluster with the
//! `pg_hba.conf` lines or limits it needs.

use sluice_core::{ErrorKind, Meter};
use sluice_postgres::{Config, Connection};
use sluice_testkit::ClusterBuilder;

fn config(url: &str) -> Config {
    url.parse().expect("test URL parses")
}

/// A URL for `user`/`password` on the cluster listening on `port`.
fn url_for(port: u16, user: &str, password: &str) -> String {
    format!("postgres://{user}:{password}@127.0.0.1:{port}/sluice_test")
}

#[tokio::test]
async fn too_many_clients_is_the_servers_own_error() {
    // No reserved slots, so the third connection is refused before authentication,
    // as the first message the server sends ("sorry, too many clients already").
    let cluster = ClusterBuilder::new()
        .setting("max_connections", "2")
        .setting("superuser_reserved_connections", "0")
        .start();
    let meter = Meter::new();
    let first = Connection::connect(&config(cluster.url()), &meter)
        .await
        .unwrap();
    let second = Connection::connect(&config(cluster.url()), &meter)
        .await
        .unwrap();
    let error = Connection::connect(&config(cluster.url()), &meter)
        .await
        .expect_err("a third connection exceeds max_connections");
    assert_eq!(error.code(), Some("53300"), "{error}");
    assert_eq!(error.kind(), ErrorKind::Connect, "{error}");
    assert!(
        error.to_string().contains("too many clients"),
        "the server's own words: {error}"
    );
    drop((first, second));
}

#[tokio::test]
async fn each_password_method_logs_in_and_a_wrong_password_names_the_role() {
    let cluster = ClusterBuilder::new()
        .hba_line("host all scram_user 127.0.0.1/32 scram-sha-256")
        .hba_line("host all md5_user 127.0.0.1/32 md5")
        .hba_line("host all plain_user 127.0.0.1/32 password")
        .start();
    // md5 needs an MD5-hashed password stored; the others take SCRAM's.
    cluster.execute(
        "set password_encryption = 'scram-sha-256';
         create role scram_user login password 'scram secret';
         create role plain_user login password 'plain secret';
         set password_encryption = 'md5';
         create role md5_user login password 'md5 secret';",
    );
    let port = cluster.port();
    for (user, password) in [
        ("scram_user", "scram%20secret"),
        ("md5_user", "md5%20secret"),
        ("plain_user", "plain%20secret"),
    ] {
        let meter = Meter::new();
        let connection = Connection::connect(&config(&url_for(port, user, password)), &meter)
            .await
            .unwrap_or_else(|error| panic!("{user} logs in: {error}"));
        drop(connection);

        let error = Connection::connect(&config(&url_for(port, user, "wrong")), &meter)
            .await
            .expect_err("a wrong password is refused");
        assert_eq!(error.kind(), ErrorKind::Authentication, "{user}: {error}");
        assert_eq!(error.code(), Some("28P01"), "{user}: {error}");
        assert!(
            error.to_string().contains(&format!("\"{user}\"")),
            "the message names the role: {error}"
        );
    }
}

#[tokio::test]
async fn a_missing_password_is_asked_for_by_name() {
    let cluster = ClusterBuilder::new()
        .hba_line("host all scram_user 127.0.0.1/32 scram-sha-256")
        .start();
    cluster.execute("create role scram_user login password 'secret';");
    let url = format!(
        "postgres://scram_user@127.0.0.1:{}/sluice_test",
        cluster.port()
    );
    let error = Connection::connect(&config(&url), &Meter::new())
        .await
        .expect_err("no password given");
    assert_eq!(error.kind(), ErrorKind::Authentication, "{error}");
    assert!(error.to_string().contains("scram_user"), "{error}");
}
