//! Smoke tests of the test kit against a real server (SLUICE_TEST_PG_URL or ephemeral).

use std::io::Write;
use std::time::{Duration, Instant};

use sluice_testkit::{dropped_within, server_url, TestDb};

#[test]
fn schemas_are_isolated() {
    let a = TestDb::new();
    let b = TestDb::new();
    assert_ne!(a.schema(), b.schema());
    a.execute("CREATE TABLE items (id int, name text); INSERT INTO items VALUES (1, 'from a');");
    b.execute(
        "CREATE TABLE items (id int, name text); INSERT INTO items VALUES (2, 'from b'), (3, 'also b');",
    );
    assert_eq!(
        a.query_text("SELECT id, name FROM items ORDER BY id"),
        "1|from a"
    );
    assert_eq!(
        b.query_text("SELECT id, name FROM items ORDER BY id"),
        "2|from b\n3|also b"
    );
    assert_eq!(a.query_text("SELECT current_schema()"), a.schema());
    assert_eq!(b.query_text("SELECT current_schema()"), b.schema());
}

#[test]
fn copy_output_is_captured_byte_for_byte() {
    let db = TestDb::new();
    let out = db.psql_bytes("COPY (select 1 as a, 'x' as b) TO STDOUT WITH (FORMAT csv, HEADER)");
    assert_eq!(out, b"a,b\n1,x\n");
}

#[test]
fn urls_carry_the_schema() {
    let db = TestDb::new();
    let schema = db.schema();
    let name = schema.strip_prefix('t').unwrap();
    let parts: Vec<&str> = name.split('_').collect();
    assert_eq!(parts.len(), 4, "{schema}");
    assert_eq!(parts[1], std::process::id().to_string());
    assert!(db.url().starts_with("postgres://") || db.url().starts_with("postgresql://"));
    assert!(
        db.url()
            .ends_with(&format!("options=-c%20search_path%3D{schema}"))
            || db
                .url()
                .contains(&format!("%20-c%20search_path%3D{schema}")),
        "{}",
        db.url()
    );
    assert!(!server_url().contains(schema));
    if std::env::var_os("SLUICE_TEST_PG_URL").is_none() {
        assert!(
            server_url().starts_with("postgres://postgres@127.0.0.1:"),
            "{}",
            server_url()
        );
        assert!(server_url().ends_with("/sluice_test"), "{}", server_url());
    }
}

#[test]
fn schema_is_dropped_on_drop() {
    let db = TestDb::new();
    db.execute("CREATE TABLE t (x int); INSERT INTO t VALUES (1);");
    let schema = db.schema().to_owned();
    let observer = TestDb::new();
    let count = format!("SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'");
    assert_eq!(observer.query_text(&count), "1");
    drop(db);
    assert_eq!(observer.query_text(&count), "0");
}

#[test]
fn a_session_left_holding_a_lock_does_not_keep_the_schema_from_dropping() {
    let db = TestDb::new();
    db.execute("CREATE TABLE t (x oid);");
    let schema = db.schema().to_owned();
    let observer = TestDb::new();
    let mut session = db.open_session();
    let mut input = session.stdin.take().unwrap();
    input
        .write_all(b"BEGIN;\nLOCK TABLE t IN ACCESS EXCLUSIVE MODE;\n")
        .unwrap();
    input.flush().unwrap();
    let locked = format!(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '{schema}' AND l.granted"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while observer.query_text(&locked) == "0" {
        assert!(Instant::now() < deadline, "the session never took its lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        dropped_within(db, Duration::from_secs(90)),
        "the schema's drop waited on the session's lock"
    );
    let count = format!("SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'");
    assert_eq!(observer.query_text(&count), "0");
    drop(input);
    let _ = session.wait();
}

#[test]
fn helpers_wait_for_a_lock_two_minutes_at_most() {
    assert_eq!(TestDb::new().query_text("SHOW lock_timeout"), "2min");
}

#[test]
fn many_schemas_in_parallel() {
    let handles: Vec<_> = (0..16)
        .map(|i| {
            std::thread::spawn(move || {
                let db = TestDb::new();
                db.execute(&format!("CREATE TABLE n AS SELECT {i} AS v;"));
                assert_eq!(db.query_text("SELECT v FROM n"), i.to_string());
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn query_text_formats() {
    let db = TestDb::new();
    assert_eq!(db.query_text("SELECT 1, NULL::text, 'z'"), "1||z");
    assert_eq!(db.query_text("SELECT 'only'"), "only");
    // Statements before the query print nothing (-q).
    assert_eq!(
        db.query_text("CREATE TABLE q (v int); INSERT INTO q VALUES (7); SELECT v FROM q;"),
        "7"
    );
}

#[test]
#[should_panic(expected = "relation \"no_such_table\" does not exist")]
fn failing_sql_panics_with_stderr() {
    let db = TestDb::new();
    db.execute("SELECT * FROM no_such_table;");
}
