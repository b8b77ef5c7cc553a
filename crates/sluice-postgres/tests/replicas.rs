//! Several hosts and `target_session_attrs`, against a primary and its
//! streaming standby (`pg_basebackup -R`), and libpq's password and service files.

use std::os::unix::fs::PermissionsExt;

use sluice_core::{ErrorKind, Meter};
use sluice_postgres::{Config, Connection};
use sluice_testkit::ClusterBuilder;

async fn in_recovery(text: &str) -> Result<bool, sluice_core::Error> {
    let config: Config = text.parse()?;
    let mut connection = Connection::connect(&config, &Meter::new()).await?;
    let rows = connection
        .simple_query("select pg_is_in_recovery()")
        .await?;
    Ok(rows[0][0].as_deref() == Some("t"))
}

#[tokio::test]
async fn target_session_attrs_choose_between_a_primary_and_its_standby() {
    let primary = ClusterBuilder::new().start();
    let standby = primary.start_standby();
    let (p, s) = (primary.port(), standby.port());
    let url = |ports: [u16; 2], attrs: &str| {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/sluice_test?target_session_attrs={attrs}",
            ports[0], ports[1]
        )
    };
    for order in [[p, s], [s, p]] {
        assert!(
            !in_recovery(&url(order, "read-write")).await.unwrap(),
            "{order:?}"
        );
        assert!(
            !in_recovery(&url(order, "primary")).await.unwrap(),
            "{order:?}"
        );
        assert!(
            in_recovery(&url(order, "standby")).await.unwrap(),
            "{order:?}"
        );
        assert!(
            in_recovery(&url(order, "read-only")).await.unwrap(),
            "{order:?}"
        );
        assert!(
            in_recovery(&url(order, "prefer-standby")).await.unwrap(),
            "{order:?}"
        );
    }
    assert!(
        in_recovery(&url([s, p], "any")).await.unwrap(),
        "the first that accepts"
    );
    let random = format!("{}&load_balance_hosts=random", url([p, s], "read-write"));
    assert!(!in_recovery(&random).await.unwrap());

    drop(standby);
    // The standby is gone: prefer-standby settles for the primary; standby fails clearly.
    assert!(!in_recovery(&url([s, p], "prefer-standby")).await.unwrap());
    let error = in_recovery(&url([s, p], "standby")).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Connect, "{error}");
    let message = error.to_string();
    assert!(
        message.starts_with("no server matches target_session_attrs=standby")
            && message.contains(&format!("127.0.0.1:{p} did not"))
            && message.contains(&format!("could not connect to 127.0.0.1:{s}")),
        "{message}"
    );
    // Every host down: the last failure, naming its host.
    let error = in_recovery(&format!(
        "postgres://postgres@127.0.0.1:{s}/sluice_test?connect_timeout=2"
    ))
    .await
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Connect, "{error}");
}

#[tokio::test]
async fn passwords_and_settings_come_from_libpq_files() {
    let cluster = ClusterBuilder::new()
        .hba_line("host all file_user 127.0.0.1/32 scram-sha-256")
        .start();
    cluster.execute(
        "set password_encryption = 'scram-sha-256'; create role file_user login password 'from file';",
    );
    let dir = tempfile::tempdir().unwrap();
    let passfile = dir.path().join("pgpass");
    std::fs::write(
        &passfile,
        format!("127.0.0.1:{}:*:file_user:from file\n", cluster.port()),
    )
    .unwrap();
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).unwrap();
    let url = format!(
        "postgres://file_user@127.0.0.1:{}/sluice_test?passfile={}",
        cluster.port(),
        passfile.display()
    );
    assert!(!in_recovery(&url).await.expect("the password from the file"));
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o644)).unwrap();
    let error = in_recovery(&url).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Authentication, "{error}");
    assert!(
        error.to_string().contains("group or world access"),
        "{error}"
    );
}
