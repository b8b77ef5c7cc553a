//! TLS through the binary, to PostgreSQL and to MariaDB: `--stats` says how
//! the connection is encrypted, a bad setting exits 2 naming it, a refused
//! certificate exits 3 naming the host, and a service file supplies the
//! settings.

mod support;

use std::process::Output;

use sluice_testkit::{Cluster, ClusterBuilder, MariaDbServer, TestCertificates};
use support::{assert_exit, run, sluice};

fn export(url: &str, envs: &[(&str, &str)]) -> Output {
    let mut command = sluice();
    command
        .args([
            "export",
            "--db",
            url,
            "--query",
            "select 1 as one",
            "--stats",
        ])
        .env_remove("PGSSLMODE")
        .env_remove("PGSERVICE");
    for (name, value) in envs {
        command.env(name, value);
    }
    run(&mut command, b"")
}

fn tls_cluster() -> (Cluster, TestCertificates) {
    let certificates = TestCertificates::generate(&["localhost"]);
    let cluster = ClusterBuilder::new().tls(&certificates).start();
    (cluster, certificates)
}

#[test]
fn stats_say_how_the_connection_is_encrypted() {
    let (cluster, certificates) = tls_cluster();
    let url = format!(
        "postgres://postgres@localhost:{}/sluice_test?sslmode=verify-full&sslrootcert={}",
        cluster.port(),
        certificates.ca().display()
    );
    let output = export(&url, &[]);
    let stderr = assert_exit(&output, 0);
    assert_eq!(output.stdout, b"{\"one\":1}\n");
    let encryption = stderr
        .lines()
        .find_map(|line| line.strip_prefix("encryption: "))
        .expect("an encryption line");
    assert!(encryption.starts_with("TLSv1_"), "{stderr}");

    // PGSSLMODE=disable, as psql reads it.
    let plain = format!(
        "postgres://postgres@127.0.0.1:{}/sluice_test",
        cluster.port()
    );
    let stderr = assert_exit(&export(&plain, &[("PGSSLMODE", "disable")]), 0);
    assert!(stderr.contains("encryption: none"), "{stderr}");
}

#[test]
fn bad_settings_exit_2_and_refused_certificates_exit_3() {
    let (cluster, _certificates) = tls_cluster();
    let stderr = assert_exit(
        &export(
            &format!(
                "postgres://postgres@127.0.0.1:{}/sluice_test?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
                cluster.port()
            ),
            &[],
        ),
        2,
    );
    assert!(
        stderr.contains("sslrootcert /nonexistent/ca.pem"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let stranger = TestCertificates::generate(&["localhost"]);
    let stderr = assert_exit(
        &export(
            &format!(
                "postgres://postgres@localhost:{}/sluice_test?sslmode=verify-full&sslrootcert={}",
                cluster.port(),
                stranger.ca().display()
            ),
            &[],
        ),
        3,
    );
    assert!(
        stderr.contains(&format!("TLS handshake with localhost:{}", cluster.port()))
            && stderr.contains("not signed by a trusted root"),
        "{stderr}"
    );
}

#[test]
fn a_service_file_supplies_the_settings() {
    let (cluster, certificates) = tls_cluster();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("services.conf");
    std::fs::write(
        &file,
        format!(
            "[reports]\nhost=localhost\nport={}\ndbname=sluice_test\nuser=postgres\nsslmode=verify-full\nsslrootcert={}\n",
            cluster.port(),
            certificates.ca().display()
        ),
    )
    .unwrap();
    let service_file = file.display().to_string();
    let stderr = assert_exit(
        &export(
            "service=reports",
            &[("PGSERVICEFILE", service_file.as_str())],
        ),
        0,
    );
    assert!(stderr.contains("encryption: TLSv1_"), "{stderr}");
    let stderr = assert_exit(
        &export("service=nope", &[("PGSERVICEFILE", service_file.as_str())]),
        2,
    );
    assert!(
        stderr.contains("service \"nope\" is not defined"),
        "{stderr}"
    );
}

#[test]
fn import_and_call_run_over_verified_tls() {
    let (cluster, certificates) = tls_cluster();
    cluster.execute("create table notes (id int primary key, body text)");
    let url = format!(
        "postgres://postgres@localhost:{}/sluice_test?sslmode=verify-full&sslrootcert={}",
        cluster.port(),
        certificates.ca().display()
    );
    let mut command = sluice();
    command
        .args([
            "import", "--db", &url, "--table", "notes", "--format", "ndjson", "--stats",
        ])
        .env_remove("PGSSLMODE");
    let output = run(
        &mut command,
        b"{\"id\":1,\"body\":\"a\"}\n{\"id\":2,\"body\":\"b\"}\n",
    );
    let stderr = assert_exit(&output, 0);
    assert!(stderr.contains("encryption: TLSv1_"), "{stderr}");

    let mut command = sluice();
    command
        .args([
            "call",
            "--db",
            &url,
            "--query",
            "update notes set body = $2 where id = $1 returning id, body",
        ])
        .env_remove("PGSSLMODE");
    let output = run(&mut command, b"[1, \"x\"]\n[2, \"y\"]\n");
    assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "{\"line\":1,\"rows\":[{\"id\":1,\"body\":\"x\"}]}\n{\"line\":2,\"rows\":[{\"id\":2,\"body\":\"y\"}]}\n"
    );
}

#[test]
fn mariadb_export_and_import_over_verified_tls() {
    let certificates = TestCertificates::generate(&["localhost"]);
    let server = MariaDbServer::start_tls(&certificates);
    server
        .execute("CREATE DATABASE shop; CREATE TABLE shop.notes (id int primary key, body text);");
    let url = |options: &str| {
        format!(
            "mariadb://sluice:sluice@localhost:{}/shop?{options}",
            server.port()
        )
    };
    let verified = url(&format!(
        "ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
        certificates.ca().display()
    ));
    let mut command = sluice();
    command.args([
        "import", "--db", &verified, "--table", "notes", "--format", "ndjson", "--stats",
    ]);
    let output = run(&mut command, b"{\"id\":1,\"body\":\"a\"}\n");
    let stderr = assert_exit(&output, 0);
    assert!(stderr.contains("encryption: TLSv1_"), "{stderr}");

    let output = export(&verified, &[]);
    let stderr = assert_exit(&output, 0);
    assert_eq!(output.stdout, b"{\"one\":1}\n");
    assert!(stderr.contains("encryption: TLSv1_"), "{stderr}");

    let stderr = assert_exit(&export(&url("ssl-mode=DISABLED"), &[]), 0);
    assert!(stderr.contains("encryption: none"), "{stderr}");

    let stderr = assert_exit(&export(&url("ssl-ca=/nonexistent/ca.pem"), &[]), 2);
    assert!(stderr.contains("ssl-ca /nonexistent/ca.pem"), "{stderr}");
    let stderr = assert_exit(&export(&url("sslmode=require"), &[]), 2);
    assert!(stderr.contains("ssl-mode, ssl-ca"), "{stderr}");

    let stranger = TestCertificates::generate(&["localhost"]);
    let stderr = assert_exit(
        &export(&url(&format!("ssl-ca={}", stranger.ca().display())), &[]),
        3,
    );
    assert!(
        stderr.contains(&format!("TLS handshake with localhost:{}", server.port()))
            && stderr.contains("not signed by a trusted root (check ssl-ca)"),
        "{stderr}"
    );
}
