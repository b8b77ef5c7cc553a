//! Tests of the test kit's MariaDB against a real server
//! (SLUICE_TEST_MARIADB_URL or an ephemeral one).

use std::io::Write;
use std::time::{Duration, Instant};

use sluice_testkit::{dropped_within, mariadb_server_url, TestMariaDb};

/// How many tables `db` holds.
fn table_count(db: &TestMariaDb) -> String {
    db.query_text("SELECT count(*) FROM information_schema.tables WHERE table_schema = database()")
}

#[test]
fn databases_are_fresh_isolated_and_usable_in_parallel() {
    let a = TestMariaDb::new();
    let b = TestMariaDb::new();
    assert_ne!(a.name(), b.name());
    assert_ne!(a.url(), b.url());
    assert_eq!(table_count(&a), "0");
    assert_eq!(table_count(&b), "0");
    std::thread::scope(|scope| {
        for (db, rows) in [(&a, "(1, 'from a')"), (&b, "(2, 'from b'), (3, 'also b')")] {
            scope.spawn(move || {
                db.execute(&format!(
                    "CREATE TABLE items (id int, name text); INSERT INTO items VALUES {rows};"
                ));
            });
        }
    });
    assert_eq!(
        a.query_text("SELECT id, name FROM items ORDER BY id"),
        "1\tfrom a"
    );
    assert_eq!(
        b.query_text("SELECT id, name FROM items ORDER BY id"),
        "2\tfrom b\n3\talso b"
    );
    assert_eq!(a.query_text("SELECT database()"), a.name());
}

#[test]
fn execute_and_query_text_round_trip() {
    let db = TestMariaDb::new();
    db.execute(
        "CREATE TABLE t (id int PRIMARY KEY, s varchar(20), n int);
         INSERT INTO t VALUES (1, 'plain', 10), (2, 'é ü 😀', NULL);
         INSERT INTO t VALUES (3, 'tab\there', 30);",
    );
    assert_eq!(
        db.query_text("SELECT id, s, n FROM t ORDER BY id"),
        "1\tplain\t10\n2\té ü 😀\tNULL\n3\ttab\there\t30"
    );
    assert_eq!(
        db.query_text("SELECT hex(s) FROM t WHERE id = 2"),
        "C3A920C3BC20F09F9880"
    );
    assert_eq!(db.query_text("SELECT count(*) FROM t WHERE n IS NULL"), "1");
}

#[test]
#[should_panic(expected = "doesn't exist")]
fn failing_sql_panics_with_the_clients_error() {
    TestMariaDb::new().execute("SELECT * FROM no_such_table");
}

#[test]
fn dropping_removes_the_database() {
    let observer = TestMariaDb::new();
    let db = TestMariaDb::new();
    let name = db.name().to_owned();
    let exists =
        format!("SELECT count(*) FROM information_schema.schemata WHERE schema_name = '{name}'");
    db.execute("CREATE TABLE t (id int); INSERT INTO t VALUES (1);");
    assert_eq!(observer.query_text(&exists), "1");
    drop(db);
    assert_eq!(observer.query_text(&exists), "0");
}

#[test]
fn a_session_left_in_a_transaction_does_not_keep_the_database_from_dropping() {
    let observer = TestMariaDb::new();
    let db = TestMariaDb::new();
    let name = db.name().to_owned();
    db.execute("CREATE TABLE t (id int); INSERT INTO t VALUES (1);");
    let mut session = db.open_session();
    let mut input = session.stdin.take().unwrap();
    // The SELECT holds the table's metadata lock until the transaction
    // ends; the named lock says the SELECT has run.
    let ready = format!("{name}-ready");
    input
        .write_all(format!("BEGIN;\nSELECT * FROM t;\nSELECT GET_LOCK('{ready}', 0);\n").as_bytes())
        .unwrap();
    input.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while observer.query_text(&format!("SELECT IS_USED_LOCK('{ready}') IS NULL")) == "1" {
        assert!(
            Instant::now() < deadline,
            "the session never ran its SELECT"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        dropped_within(db, Duration::from_secs(90)),
        "the database's drop waited on the session's lock"
    );
    let exists =
        format!("SELECT count(*) FROM information_schema.schemata WHERE schema_name = '{name}'");
    assert_eq!(observer.query_text(&exists), "0");
    drop(input);
    let _ = session.wait();
}

#[test]
fn helpers_wait_for_a_metadata_lock_two_minutes_at_most() {
    assert_eq!(
        TestMariaDb::new().query_text("SELECT @@SESSION.lock_wait_timeout"),
        "120"
    );
}

#[test]
fn urls_name_the_database() {
    let db = TestMariaDb::new();
    let name = db.name();
    let parts: Vec<&str> = name.split('_').collect();
    assert_eq!(parts.len(), 4, "{name}");
    assert_eq!(parts[0], "t");
    assert_eq!(parts[1], std::process::id().to_string());
    assert!(
        db.url().starts_with("mariadb://") || db.url().starts_with("mysql://"),
        "{}",
        db.url()
    );
    let path_end = db.url().find('?').unwrap_or(db.url().len());
    assert!(
        db.url()[..path_end].ends_with(&format!("/{name}")),
        "{}",
        db.url()
    );
    assert!(!mariadb_server_url().contains(name));
    if std::env::var_os("SLUICE_TEST_MARIADB_URL").is_none() {
        let server = mariadb_server_url();
        assert!(
            server.starts_with("mariadb://sluice:sluice@127.0.0.1:"),
            "{server}"
        );
        assert_eq!(db.url(), format!("{server}/{name}"));
    }
}
