//! `--table` (of `export` and `lab`) and a configuration's `table` keys name
//! a table, never SQL: text that is no table's name (a `union`, a subquery, a
//! comment, a second statement) is refused as bad usage before anything
//! connects, on PostgreSQL and MariaDB alike, and a table with an awkward name
//! (quotes, unicode, mixed case, a space) is read whole, in parts and by some
//! of its columns.

mod support;

use std::process::Output;

use sluice_testkit::{TestDb, TestMariaDb};
use support::server::{quoted, write_config, Server};
use support::{assert_exit, run, sluice, split_url};

/// Text that is SQL around a table's name, and so no name.
const NOT_NAMES: [&str; 7] = [
    "other union all select id, secret from ev",
    "(select * from ev) s",
    "other -- a comment",
    "other/*x*/",
    "other;select 1",
    "other where 1 = 1",
    "\"other",
];

/// `sluice export --db URL ARGUMENTS…` run to its end.
fn export(url: &str, arguments: &[&str]) -> Output {
    let mut command = sluice();
    command
        .args(["export", "--db", url])
        .args(arguments)
        .env_remove("MYSQL_PWD");
    run(&mut command, b"")
}

/// `url` pointed at a port nothing listens on: a command that still answers
/// "not a table name" never tried to connect.
fn unreachable(url: &str) -> String {
    let (before, _, after) = split_url(url);
    format!("{before}127.0.0.1:1{after}")
}

/// Asserts that `--table text` (with `extra`) is refused as bad usage, with
/// no rows written, on the server `url` names and on none at all.
fn assert_refused(url: &str, text: &str, extra: &[&str]) {
    for url in [url.to_owned(), unreachable(url)] {
        let mut arguments = vec!["--table", text];
        arguments.extend(extra);
        let output = export(&url, &arguments);
        let stderr = assert_exit(&output, 2);
        assert!(
            stderr.contains(&format!(
                "{text:?} is not a table name (table or schema.table)"
            )),
            "{text:?} {extra:?}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{text:?} {extra:?}");
    }
}

fn sorted_lines(bytes: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn sql_in_a_postgresql_table_name_is_refused_before_anything_connects() {
    let db = TestDb::new();
    db.execute(
        "create table ev (id int8, secret text); insert into ev values (1, 'hidden');
         create table other (id int8, note text); insert into other values (2, 'public');",
    );
    for text in NOT_NAMES {
        for extra in [&[][..], &["--jobs", "2"], &["--columns", "id"]] {
            assert_refused(db.url(), text, extra);
        }
    }
    // Another database's quotes are no quotes here.
    assert_refused(db.url(), "`other`", &[]);
    // The name as a name is read.
    let output = export(db.url(), &["--table", "other"]);
    assert_exit(&output, 0);
    assert_eq!(output.stdout, b"{\"id\":2,\"note\":\"public\"}\n");
}

#[test]
fn sql_in_a_mariadb_table_name_is_refused_before_anything_connects() {
    let db = TestMariaDb::new();
    db.execute(
        "create table ev (id bigint, secret text); insert into ev values (1, 'hidden');
         create table other (id bigint, note text); insert into other values (2, 'public');",
    );
    for text in NOT_NAMES {
        for extra in [&[][..], &["--columns", "id"]] {
            assert_refused(db.url(), text, extra);
        }
    }
    assert_refused(db.url(), "\"other\"", &[]);
    assert_refused(db.url(), "`other", &[]);
    let output = export(db.url(), &["--table", "other"]);
    assert_exit(&output, 0);
    assert_eq!(output.stdout, b"{\"id\":2,\"note\":\"public\"}\n");
}

#[test]
fn an_awkward_postgresql_table_name_is_read_whole_in_parts_and_by_columns() {
    let db = TestDb::new();
    db.execute(
        r#"create table "Odd ""Näme"" Mixed" (id int8 primary key, "Straße" text, café int4);
           insert into "Odd ""Näme"" Mixed"
             select g, 's' || g, g % 7 from generate_series(1, 5000) g;
           analyze "Odd ""Näme"" Mixed";
           create table mixedcase (id int8); insert into mixedcase values (1);
           create table "MixedCase" (id int8); insert into "MixedCase" values (2);"#,
    );
    let whole =
        db.psql_bytes(r#"copy (select * from "Odd ""Näme"" Mixed") to stdout with (format csv)"#);
    let some = db.psql_bytes(
        r#"copy (select café, "Straße", id from "Odd ""Näme"" Mixed") to stdout with (format csv)"#,
    );
    let schema = db.schema();
    let qualified = format!(r#"{schema}."Odd ""Näme"" Mixed""#);
    let upper = format!(r#"{}."Odd ""Näme"" Mixed""#, schema.to_uppercase());
    for name in [r#""Odd ""Näme"" Mixed""#, &qualified, &upper] {
        for jobs in ["1", "3"] {
            let output = export(
                db.url(),
                &["--table", name, "--jobs", jobs, "--format", "csv"],
            );
            assert_exit(&output, 0);
            let rows = output
                .stdout
                .splitn(2, |&byte| byte == b'\n')
                .nth(1)
                .unwrap();
            assert_eq!(
                sorted_lines(rows),
                sorted_lines(&whole),
                "{name} --jobs {jobs}"
            );
            let output = export(
                db.url(),
                &[
                    "--table",
                    name,
                    "--jobs",
                    jobs,
                    "--columns",
                    "café,Straße,id",
                    "--format",
                    "csv",
                ],
            );
            assert_exit(&output, 0);
            let (header, rows) = output
                .stdout
                .split_at(output.stdout.iter().position(|&b| b == b'\n').unwrap() + 1);
            assert_eq!(
                header,
                "café,Straße,id\n".as_bytes(),
                "{name} --jobs {jobs}"
            );
            assert_eq!(
                sorted_lines(rows),
                sorted_lines(&some),
                "{name} --jobs {jobs}"
            );
        }
    }
    // Unquoted, a name is read in lower case, as PostgreSQL reads it.
    for (name, id) in [("MixedCase", 1), ("\"MixedCase\"", 2), ("mixedcase", 1)] {
        let output = export(db.url(), &["--table", name]);
        assert_exit(&output, 0);
        assert_eq!(
            output.stdout,
            format!("{{\"id\":{id}}}\n").as_bytes(),
            "{name}"
        );
    }
}

#[test]
fn an_awkward_mariadb_table_name_is_read_whole_and_by_columns() {
    let db = TestMariaDb::new();
    db.execute(
        "create table `Odd ``Näme`` \"Mixed\"` (id bigint primary key, `Straße` text, café int);
         insert into `Odd ``Näme`` \"Mixed\"` values (1, 's1', 5), (2, 's2', 6);
         create table MixedCase (id bigint); insert into MixedCase values (1);",
    );
    let qualified = format!("`{}`.`Odd ``Näme`` \"Mixed\"`", db.name());
    for name in ["`Odd ``Näme`` \"Mixed\"`", &qualified] {
        let output = export(db.url(), &["--table", name]);
        assert_exit(&output, 0);
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "{\"id\":1,\"Straße\":\"s1\",\"café\":5}\n{\"id\":2,\"Straße\":\"s2\",\"café\":6}\n",
            "{name}"
        );
        let output = export(db.url(), &["--table", name, "--columns", "café,id"]);
        assert_exit(&output, 0);
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "{\"café\":5,\"id\":1}\n{\"café\":6,\"id\":2}\n",
            "{name}"
        );
    }
    // MariaDB keeps an unquoted name's case.
    let output = export(db.url(), &["--table", "MixedCase"]);
    assert_exit(&output, 0);
    assert_eq!(output.stdout, b"{\"id\":1}\n");
}

/// Runs `sluice serve --config` on `text`, which must not start; returns
/// its standard error and the file's path.
fn refused_configuration(text: &str) -> (String, String) {
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(&directory, text);
    let output = run(
        sluice().args(["serve", "--config", &path, "--listen", "127.0.0.1:0"]),
        b"",
    );
    (assert_exit(&output, 2), path)
}

#[test]
fn a_table_key_of_the_configuration_is_a_table_name_checked_as_it_loads() {
    for url in ["postgres://u@127.0.0.1:1/x", "mariadb://u@127.0.0.1:1/x"] {
        for text in NOT_NAMES {
            let (stderr, path) = refused_configuration(&format!(
                "[databases.main]\nurl = {}\n\n[queries.q]\ntable = {}\n",
                quoted(url),
                quoted(text)
            ));
            assert!(
                stderr.starts_with(&format!(
                    "sluice: {path}:5: queries.q.table: {text:?} is not a table name \
                     (table or schema.table)"
                )),
                "{stderr}"
            );
            let (stderr, path) = refused_configuration(&format!(
                "[databases.main]\nurl = {}\n\n[tables.t]\ntable = {}\n\n[[tokens]]\n\
                 name = \"w\"\ntoken = \"a-long-enough-token-value\"\nscopes = [\"write\"]\n",
                quoted(url),
                quoted(text)
            ));
            assert!(
                stderr.starts_with(&format!(
                    "sluice: {path}:5: tables.t.table: {text:?} is not a table name"
                )),
                "{stderr}"
            );
        }
    }

    // A name in the database's own quotes is served, quoted again.
    let db = TestDb::new();
    db.execute(
        r#"create table "Odd ""Näme"" Mixed" (id int8, "Straße" text);
           insert into "Odd ""Näme"" Mixed" values (1, 'x');"#,
    );
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(
        &directory,
        &format!(
            "[databases.main]\nurl = {}\n[queries.odd]\ntable = {}\n",
            quoted(db.url()),
            quoted(&format!(r#"{}."Odd ""Näme"" Mixed""#, db.schema()))
        ),
    );
    let server = Server::start(&["--config", &path]);
    let address = server.address;
    let body = tokio::runtime::Runtime::new().unwrap().block_on(async {
        reqwest::get(format!("http://{address}/queries/odd"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    assert_eq!(body, "{\"id\":1,\"Straße\":\"x\"}\n");
    server.terminate();
}

#[test]
fn the_lab_reads_a_table_name_too_before_anything_connects() {
    let directory = tempfile::tempdir().unwrap();
    let report = directory.path().join("report");
    for text in NOT_NAMES {
        let output = run(
            sluice().args([
                "lab",
                "--db",
                "postgres://u@127.0.0.1:1/x",
                "--quick",
                "--table",
                text,
                "--output",
                report.to_str().unwrap(),
            ]),
            b"",
        );
        let stderr = assert_exit(&output, 2);
        assert!(
            stderr.contains(&format!("{text:?} is not a table name")),
            "{text:?}: {stderr}"
        );
    }
}
