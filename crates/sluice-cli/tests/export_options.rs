//! `sluice export` options and value forms the README promises, each against an
//! oracle of the server's own: anonymous records, `--bytea hex`, `--lob inline` to
//! CSV, and connection settings from `PG*` variables and `SLUICE_DB`.

mod support;

use std::process::Output;

use sluice_testkit::TestDb;
use support::{assert_exit, run, sluice};

fn export(arguments: &[&str]) -> Output {
    run(sluice().arg("export").args(arguments), b"")
}

fn stdout(output: &Output) -> String {
    assert_exit(output, 0);
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

/// The JSON text of `value` as PostgreSQL's `to_json` writes it.
fn server_json(db: &TestDb, sql_value: &str) -> String {
    db.query_text(&format!("select to_json({sql_value})"))
}

#[test]
fn anonymous_records_are_written_as_their_text() {
    let db = TestDb::new();
    let record = "row(1, 'a b', null::int, '\"q\"')";
    let output = export(&[
        "--db",
        db.url(),
        "--query",
        &format!("select {record} as r"),
    ]);
    // No field names to key an object by: the record's text, as a JSON string.
    let text = db.query_text(&format!("select {record}::text"));
    assert_eq!(text, r#"(1,"a b",,"""q""")"#);
    assert_eq!(
        stdout(&output),
        format!(
            "{{\"r\":{}}}\n",
            server_json(&db, &format!("{record}::text"))
        )
    );
}

#[test]
fn bytea_hex_is_the_servers_escape_text() {
    let db = TestDb::new();
    let query = r"select '\x00ff10'::bytea as b, array['\x01'::bytea, null] as bs";
    let output = export(&["--db", db.url(), "--query", query, "--bytea", "hex"]);
    let oracle = db.query_text(&format!("select row_to_json(t) from ({query}) t"));
    let ours: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let theirs: serde_json::Value = serde_json::from_str(&oracle).unwrap();
    assert_eq!(ours, theirs);
    assert_eq!(ours["b"], r"\x00ff10");
}

#[test]
fn large_objects_inline_to_csv_equal_copy_of_their_bytes() {
    let db = TestDb::new();
    db.execute(
        "create table documents (id int, doc oid);
         insert into documents values
           (1, lo_from_bytea(0, '\\x00012c22ff'::bytea)),
           (2, null),
           (3, lo_from_bytea(0, convert_to(repeat('large, \"quoted\" ', 100000), 'UTF8'))),
           (4, lo_from_bytea(0, ''::bytea));",
    );
    let output = export(&[
        "--db",
        db.url(),
        "--query",
        "select id, doc from documents order by id",
        "--lob",
        "inline",
        "--format",
        "csv",
    ]);
    let copied = db.psql_bytes(
        "copy (select id, lo_get(doc) as doc from documents order by id) \
         to stdout with (format csv, header)",
    );
    let ours = stdout(&output);
    db.execute("select lo_unlink(doc) from documents where doc is not null");
    assert_eq!(ours, String::from_utf8(copied).unwrap());
}

/// The parts of a `postgres://user[:password]@host:port/database[?…]` URL.
struct UrlParts {
    user: String,
    password: Option<String>,
    host: String,
    port: String,
    database: String,
}

fn url_parts(url: &str) -> UrlParts {
    let rest = url.split_once("://").expect("a URL").1;
    let rest = rest.split('?').next().unwrap();
    let (credentials, address) = rest.rsplit_once('@').expect("the test URL names its user");
    let (user, password) = match credentials.split_once(':') {
        Some((user, password)) => (user, Some(password.to_owned())),
        None => (credentials, None),
    };
    let (host_port, database) = address
        .split_once('/')
        .expect("the test URL names its database");
    let (host, port) = host_port.rsplit_once(':').unwrap_or((host_port, "5432"));
    UrlParts {
        user: user.to_owned(),
        password,
        host: host.to_owned(),
        port: port.to_owned(),
        database: database.to_owned(),
    }
}

#[test]
fn connection_settings_come_from_pg_variables_and_sluice_db() {
    let db = TestDb::new();
    db.execute(
        "create table marker (schema_name text); insert into marker values (current_schema());",
    );
    let parts = url_parts(sluice_testkit::server_url());
    let identity = "select current_user as who, current_database() as db, \
                    inet_server_port()::text as port";
    let mut command = sluice();
    command
        .env("PGHOST", &parts.host)
        .env("PGPORT", &parts.port)
        .env("PGUSER", &parts.user)
        .env("PGDATABASE", &parts.database)
        .args(["export", "--db", "", "--query", identity]);
    match &parts.password {
        Some(password) => command.env("PGPASSWORD", password),
        None => command.env_remove("PGPASSWORD"),
    };
    let output = run(&mut command, b"");
    let expected = format!(
        "{{\"who\":\"{}\",\"db\":\"{}\",\"port\":\"{}\"}}\n",
        parts.user, parts.database, parts.port
    );
    assert_eq!(stdout(&output), expected);

    // SLUICE_DB stands in for --db (here with the test's search_path in it).
    let output = run(
        sluice().env("SLUICE_DB", db.url()).args([
            "export",
            "--query",
            "select schema_name from marker",
        ]),
        b"",
    );
    assert_eq!(
        stdout(&output),
        format!("{{\"schema_name\":\"{}\"}}\n", db.schema())
    );
}

/// The same `export` reads a SQLite file when `--db` names one: the database is
/// chosen by its URL, not by the command. A command SQLite cannot serve says so.
#[test]
fn a_sqlite_url_exports_through_the_same_command_and_an_import_is_refused_clearly() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("shop.db");
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection
        .execute_batch(
            "create table items (id integer primary key, name text, price real);
             insert into items values (1, 'tea', 2.5), (2, 'cake', null), (3, 'jam', 4);",
        )
        .unwrap();
    drop(connection);
    let url = format!("sqlite://{}", path.display());
    let output = run(
        sluice().args([
            "export",
            "--db",
            &url,
            "--query",
            "select id, name, price from items where id <= ?1 order by id",
            "--param",
            "2",
        ]),
        b"",
    );
    assert_eq!(
        stdout(&output),
        "{\"id\":1,\"name\":\"tea\",\"price\":2.5}\n{\"id\":2,\"name\":\"cake\",\"price\":null}\n"
    );

    let output = run(
        sluice().args(["import", "--db", &url, "--table", "items"]),
        b"{\"id\":4,\"name\":\"bun\"}\n",
    );
    let message = assert_exit(&output, 2);
    assert!(
        message.contains("SQLite does not support loading tables"),
        "{message}"
    );
}
