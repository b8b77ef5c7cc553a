//! `sluice copy` through the binary, against real servers: every path between
//! PostgreSQL, MariaDB and SQLite files; `--create` for every mapped type (the
//! values compared through text with the source), NOT NULL and the primary key
//! carried over; columns matched by name; a failure half-way leaving the
//! target as it was (with `--truncate` and `--create` too) and naming the
//! source row and column; bad input told clearly with nothing written;
//! `--on-conflict`; the round trips of each side; and between two
//! PostgreSQL databases, values passed on in binary form where every column's
//! type is built in and the same on both sides, in text otherwise.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use sluice_testkit::{eventually, wait_until, TestDb, TestMariaDb};
use support::{assert_exit, run, sluice};

/// Runs `sluice copy` with `arguments`.
fn copy(arguments: &[&str]) -> std::process::Output {
    let mut command = sluice();
    command.arg("copy").args(arguments).env_remove("MYSQL_PWD");
    run(&mut command, b"")
}

/// Runs `sluice copy` and returns its standard error, panicking unless it exits 0.
fn copy_ok(arguments: &[&str]) -> String {
    assert_exit(&copy(arguments), 0)
}

/// A SQLite file made by `sql`, with its `sqlite://` URL (the directory goes with it).
fn sqlite_file(sql: &str) -> (tempfile::TempDir, String) {
    let directory = tempfile::tempdir().unwrap();
    let path: PathBuf = directory.path().join("source.db");
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection.execute_batch(sql).unwrap();
    drop(connection);
    let url = format!("sqlite://{}", path.display());
    (directory, url)
}

/// A PostgreSQL table's columns as `name type nullability`, in order.
fn pg_columns(db: &TestDb, table: &str) -> String {
    db.query_text(&format!(
        "select string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) \
                || case when a.attnotnull then ' not null' else '' end, ', ' order by a.attnum) \
         from pg_attribute a where a.attrelid = '{table}'::regclass and a.attnum > 0 \
           and not a.attisdropped"
    ))
}

/// A PostgreSQL table's primary key columns, in key order.
fn pg_primary_key(db: &TestDb, table: &str) -> String {
    db.query_text(&format!(
        "select string_agg(a.attname, ',' order by k.ord) from pg_index i, \
                unnest(i.indkey) with ordinality k(attnum, ord), pg_attribute a \
         where i.indrelid = '{table}'::regclass and i.indisprimary \
           and a.attrelid = i.indrelid and a.attnum = k.attnum"
    ))
}

/// Whether the PostgreSQL table exists in the test's schema.
fn pg_exists(db: &TestDb, table: &str) -> bool {
    db.query_text(&format!("select to_regclass('{table}') is not null")) == "t"
}

/// A MariaDB table's columns as `name type nullability key`, in order.
fn mariadb_columns(db: &TestMariaDb, table: &str) -> String {
    db.query_text(&format!(
        "select group_concat(concat_ws(' ', column_name, column_type, \
                if(is_nullable = 'NO', 'not null', null), nullif(column_key, '')) \
                order by ordinal_position separator ', ') \
         from information_schema.columns \
         where table_schema = database() and table_name = '{table}'"
    ))
}

fn mariadb_exists(db: &TestMariaDb, table: &str) -> bool {
    db.query_text(&format!(
        "select count(*) from information_schema.tables \
         where table_schema = database() and table_name = '{table}'"
    )) == "1"
}

/// The figure `key: N` of a `--stats` report.
fn figure(stats: &str, key: &str) -> u64 {
    let prefix = format!("{key}: ");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {key:?} in:\n{stats}"))
        .parse()
        .unwrap()
}

/// PostgreSQL's types, one column each, with NULLs in a second row.
const PG_TYPES: &str = "create type mood as enum ('sad', 'happy');
    create table t (
        id int8 not null, small int2, whole int4 not null, amount numeric(12,2), free numeric,
        ratio float8, single float4, flag bool, name text, label varchar(20), code char(3),
        raw bytea, day date, clock time, clock_tz timetz, at timestamp(3), at_tz timestamptz,
        span interval, id2 uuid, doc json, docb jsonb, numbers int4[], words text[],
        feeling mood, address inet,
        primary key (id, whole));
    insert into t values
        (1, -2, 3, 1234567890.12, 1e-20, 1.5e300, 0.25, true, 'tab\there, \"quoted\"', 'café',
         'ab', '\\x00ff10', '2024-02-29', '23:59:59.999999', '10:00:00+02', '2024-06-01 10:00:00.5',
         '2024-06-01 10:00:00+02', '1 year 2 days 03:04:05', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
         '{\"b\": [1, 2], \"a\": null}', '{\"b\": [1, 2], \"a\": null}', '{1,NULL,3}', '{x,\"y z\"}',
         'happy', '192.168.0.1/24'),
        (2, null, 4, null, null, null, null, null, null, null, null, null, null, null, null, null,
         null, null, null, null, null, null, null, null, null);";

#[test]
fn postgresql_to_postgresql_creates_every_type_with_its_keys_and_values() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(PG_TYPES);
    // The enum's type must exist on the target for its name to be kept.
    target.execute("create type mood as enum ('sad', 'happy');");
    let stats = copy_ok(&[
        "--from",
        source.url(),
        "--table",
        "t",
        "--to",
        target.url(),
        "--table",
        "t",
        "--create",
        "--stats",
    ]);
    // The enum's binary form is not the same in every database: all text.
    assert!(stats.contains("values: as text"), "{stats}");
    assert_eq!(pg_columns(&target, "t"), pg_columns(&source, "t"));
    assert_eq!(pg_primary_key(&target, "t"), "id,whole");
    let all = "select * from t order by id";
    assert_eq!(target.query_text(all), source.query_text(all));
}

#[test]
fn postgresql_to_postgresql_from_a_query_with_parameters() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(
        "create table s (id int primary key, name text);
         insert into s select g, 'n' || g from generate_series(1, 10) g;",
    );
    copy_ok(&[
        "--from",
        source.url(),
        "--query",
        "select id, upper(name) as name, id * 2 as twice from s where id > $1",
        "--param",
        "7",
        "--to",
        target.url(),
        "--table",
        "picked",
        "--create",
    ]);
    assert_eq!(
        pg_columns(&target, "picked"),
        "id integer, name text, twice integer"
    );
    assert_eq!(
        target.query_text("select * from picked order by id"),
        "8|N8|16\n9|N9|18\n10|N10|20"
    );
}

/// PostgreSQL's built-in types with their edge values, one column each, and
/// a row of NULLs: every one passes in binary form.
const PG_BUILT_IN: &str = r#"create table t (
        id int8 primary key, i2 int2, i4 int4, i8 int8, n numeric, n2 numeric(12,2),
        f4 float4, f8 float8, b bool, tx text, vc varchar(10), ch char(3), nm name, by bytea,
        d date, tm time, ttz timetz, ts timestamp, tstz timestamptz, iv interval, u uuid,
        j json, jb jsonb, x xml, m money, ip inet, net cidr, mac macaddr, bits bit(4),
        vb varbit, o oid, jp jsonpath, ai int4[], atx text[], an numeric[], a2 int8[],
        ats timestamptz[], ajb jsonb[], au uuid[], ab bytea[]);
    insert into t values
        (1, -32768, -2147483648, -9223372036854775808, 'NaN', -9999999999.99, '-Infinity',
         '-0', false, E'tab\t nl\n cr\r bs\\ quote" ü 😀', 'café', 'ab', 'a name', '\x00ff0a5c',
         '4713-01-01 BC', '00:00', '00:00:00-15:59', '-infinity', '-infinity',
         '-178000000 years -3 days -00:00:00.000001', '00000000-0000-0000-0000-000000000000',
         '{"b": [1, 2], "a": null, "b": 3}', '{"b": [1, 2], "a": null}', '<a>x&amp;y</a>',
         '-92233720368547758.08', '::1', '10.0.0.0/8', '08:00:2b:01:02:03', B'1010', B'', 0,
         '$.a[*] ? (@ > 1)', '{}', '{NULL,"",a,"b c","{}"}', '{1.5,NaN,NULL,-0.000001}',
         '{{1,2},{3,4}}', '{infinity,"2024-02-29 12:00:00.000001+05:45"}',
         '{"{\"a\": [1]}",NULL}', '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}', '{"\\x",NULL}'),
        (2, 32767, 2147483647, 9223372036854775807, '-1e-300', 9999999999.99, '3.4e38',
         '1e-308', true, '', '', '', '', '\x', '5874897-12-31', '24:00:00', '23:59:59.999999+15:59',
         '294276-12-31 23:59:59.999999', 'infinity', '1 mon -2 days 00:00:00.000001',
         'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '[]', '{"deep": {"er": [true, false, null]}}',
         '', '92233720368547758.07', '192.168.0.1/24', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff',
         B'0101', B'1', 4294967295, '$', '{-1}', '{}', '{}', '{}', '{}', '{}', '{}', '{}'),
        (3, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
         null, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
         null, null, null, null, null, null, null, null, null, null);
    insert into t (id, n, f8) values (4, '1e1000', 'NaN'), (5, 'Infinity', 'Infinity'),
        (6, '-123456789012345678901234567890.000000000000000000001', 2.2250738585072014e-308);"#;

#[test]
fn postgresql_to_postgresql_passes_built_in_values_on_in_binary_form() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(PG_BUILT_IN);
    let arguments = |table: &'static str, create: bool| {
        let mut arguments = vec![
            "--from",
            source.url(),
            "--table",
            "t",
            "--to",
            target.url(),
            "--table",
            table,
            "--stats",
        ];
        if create {
            arguments.push("--create");
        }
        arguments
    };
    let stats = copy_ok(&arguments("created", true));
    assert!(
        stats.contains("values: passed on in the source's binary form, unread"),
        "{stats}"
    );
    let all = |table: &str| format!("select * from {table} order by id");
    assert_eq!(
        target.query_text(&all("created")),
        source.query_text(&all("t"))
    );
    assert_eq!(pg_columns(&target, "created"), pg_columns(&source, "t"));

    // An existing table of the same types takes them too.
    target.execute("create table existing (like created)");
    let stats = copy_ok(&arguments("existing", false));
    assert!(
        stats.contains("values: passed on in the source's binary"),
        "{stats}"
    );
    assert_eq!(
        target.query_text(&all("existing")),
        source.query_text(&all("t"))
    );
}

#[test]
fn postgresql_to_postgresql_goes_as_text_where_the_types_differ() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(
        "create table s (id int4, amount numeric(12,2), at timestamptz);
         insert into s values (1, 12.5, '2024-06-01 10:00:00+02'), (2, null, null);",
    );
    target.execute("create table s (id int8, amount float8, at timestamp)");
    let stats = copy_ok(&[
        "--from",
        source.url(),
        "--table",
        "s",
        "--to",
        target.url(),
        "--stats",
    ]);
    assert!(stats.contains("values: as text"), "{stats}");
    assert_eq!(
        target.query_text(
            "select id, amount, at = '2024-06-01 10:00:00+02'::timestamptz::timestamp \
             from s order by id"
        ),
        "1|12.5|t\n2||"
    );
}

#[test]
fn a_binary_copy_that_fails_half_way_names_the_source_row_and_writes_nothing() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(
        "create table s (id int8 primary key, n int8 not null);
         insert into s select g, g from generate_series(1, 10000) g;",
    );
    target.execute(
        "create table s (id int8 primary key, n int8 not null);
         insert into s values (5000, 0);",
    );
    let arguments = [
        "--from",
        source.url(),
        "--table",
        "s",
        "--to",
        target.url(),
        "--stats",
    ];
    let message = assert_exit(&copy(&arguments), 1);
    assert!(message.contains("source row 5000"), "{message}");
    assert!(message.contains("duplicate key"), "{message}");
    assert_eq!(target.query_text("select * from s"), "5000|0");
}

/// SQLite's declared types, one column each.
const SQLITE_TYPES: &str = "create table t (
        id integer not null primary key, n int, r real, d decimal(10,2), s text not null,
        b blob, flag boolean, day date, at datetime, at_tz timestamptz, doc json, v varchar(10),
        anything);
    insert into t values
        (1, 42, 1.5, 12.34, 'héllo', x'00ff', 1, '2024-06-01', '2024-06-01 10:00:00',
         '2024-06-01 10:00:00+02:00', '{\"a\": [1, 2]}', 'short', 'free'),
        (2, null, null, null, '', null, 0, null, null, null, null, null, null);";

#[test]
fn sqlite_to_postgresql_creates_mapped_types() {
    let (_directory, source) = sqlite_file(SQLITE_TYPES);
    let target = TestDb::new();
    copy_ok(&[
        "--from",
        &source,
        "--table",
        "t",
        "--to",
        target.url(),
        "--table",
        "t",
        "--create",
    ]);
    assert_eq!(
        pg_columns(&target, "t"),
        "id bigint not null, n bigint, r double precision, d numeric, s text not null, \
         b bytea, flag boolean, day date, at timestamp without time zone, \
         at_tz timestamp with time zone, doc jsonb, v text, anything text"
    );
    assert_eq!(pg_primary_key(&target, "t"), "id");
    assert_eq!(
        target.query_text("set timezone = 'UTC'; select * from t order by id"),
        "1|42|1.5|12.34|héllo|\\x00ff|t|2024-06-01|2024-06-01 10:00:00|2024-06-01 08:00:00+00|\
         {\"a\": [1, 2]}|short|free\n\
         2||||||f||||||"
    );
}

/// MariaDB's types, one column each.
const MARIADB_TYPES: &str = "create table t (
        id int not null, small smallint, big bigint unsigned not null, amount decimal(10,2),
        ratio double, single float, flag tinyint(1), name varchar(20), body text, raw blob,
        day date, clock time(6), at datetime(6), stamp timestamp(3) null, doc json,
        state enum('a','b'), yr year, primary key (id));
    insert into t values
        (1, -2, 18446744073709551615, 12345678.90, 1.5e300, 0.25, 1, 'tab\\there', 'ünï',
         x'00ff10', '2024-02-29', '-838:59:59', '2024-06-01 10:00:00.5', '2024-06-01 10:00:00.25',
         '{\"a\": [1, 2]}', 'b', 2024),
        (2, null, 0, null, null, null, null, null, null, null, null, null, null, null, null,
         null, null);";

#[test]
fn mariadb_to_postgresql_creates_mapped_types() {
    let source = TestMariaDb::new();
    source.execute(&format!("set time_zone = '+00:00'; {MARIADB_TYPES}"));
    let target = TestDb::new();
    copy_ok(&[
        "--from",
        source.url(),
        "--table",
        "t",
        "--to",
        target.url(),
        "--table",
        "t",
        "--create",
    ]);
    assert_eq!(
        pg_columns(&target, "t"),
        "id bigint not null, small bigint, big numeric(20,0) not null, amount numeric(10,2), \
         ratio double precision, single double precision, flag bigint, name text, body text, \
         raw bytea, day date, clock interval, at timestamp without time zone, \
         stamp timestamp with time zone, doc jsonb, state text, yr bigint"
    );
    assert_eq!(pg_primary_key(&target, "t"), "id");
    assert_eq!(
        target.query_text("set timezone = 'UTC'; select * from t order by id"),
        "1|-2|18446744073709551615|12345678.90|1.5e+300|0.25|1|tab\there|ünï|\\x00ff10|\
         2024-02-29|-838:59:59|2024-06-01 10:00:00.5|2024-06-01 10:00:00.25+00|\
         {\"a\": [1, 2]}|b|2024\n\
         2||0||||||||||||||"
    );
}

#[test]
fn postgresql_to_mariadb_creates_mapped_types() {
    let source = TestDb::new();
    source.execute(
        "create table t (
            id int8 not null primary key, whole int4, amount numeric(12,2), free numeric,
            ratio float8, flag bool, name text not null, label varchar(20), raw bytea, day date,
            clock time, clock_tz timetz, at timestamp(3), at_tz timestamptz, span interval,
            doc jsonb, numbers int4[], id2 uuid);
         insert into t values
            (1, 3, 1234567890.12, 2.5, 1.5e300, true, 'tab\there', 'café', '\\x00ff10',
             '2024-02-29', '23:59:59.5', '10:00:00+02', '2024-06-01 10:00:00.5',
             '2024-06-01 10:00:00+02', '03:04:05', '{\"b\": [1, 2]}', '{1,NULL,3}',
             'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
            (2, null, null, null, null, false, '', null, null, null, null, null, null, null,
             null, null, null, null);",
    );
    let target = TestMariaDb::new();
    copy_ok(&[
        "--from",
        source.url(),
        "--table",
        "t",
        "--to",
        target.url(),
        "--table",
        "t",
        "--create",
    ]);
    assert_eq!(
        mariadb_columns(&target, "t"),
        "id bigint(20) not null PRI, whole bigint(20), amount decimal(12,2), \
         free decimal(65,30), ratio double, flag tinyint(1), name longtext not null, \
         label longtext, raw longblob, day date, clock time(6), clock_tz longtext, \
         at datetime(6), at_tz datetime(6), span time(6), doc longtext, numbers longtext, \
         id2 longtext"
    );
    assert_eq!(
        target.query_text(
            "select id, whole, amount, free, ratio, flag, name, label, hex(raw), day, clock, \
             clock_tz, at, at_tz, span, doc, numbers, id2 from t order by id"
        ),
        "1\t3\t1234567890.12\t2.500000000000000000000000000000\t1.5e300\t1\ttab\there\tcafé\t\
         00FF10\t2024-02-29\t23:59:59.500000\t10:00:00+02\t2024-06-01 10:00:00.500000\t\
         2024-06-01 08:00:00.000000\t03:04:05.000000\t{\"b\": [1, 2]}\t[1,null,3]\t\
         a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\n\
         2\tNULL\tNULL\tNULL\tNULL\t0\t\tNULL\tNULL\tNULL\tNULL\tNULL\tNULL\tNULL\tNULL\tNULL\t\
         NULL\tNULL"
    );
}

#[test]
fn sqlite_to_mariadb_creates_mapped_types() {
    let (_directory, source) = sqlite_file(SQLITE_TYPES);
    let target = TestMariaDb::new();
    copy_ok(&[
        "--from",
        &source,
        "--table",
        "t",
        "--to",
        target.url(),
        "--table",
        "t",
        "--create",
    ]);
    assert_eq!(
        mariadb_columns(&target, "t"),
        "id bigint(20) not null PRI, n bigint(20), r double, d decimal(65,30), \
         s longtext not null, b longblob, flag tinyint(1), day date, at datetime(6), \
         at_tz datetime(6), doc longtext, v longtext, anything longtext"
    );
    assert_eq!(
        target.query_text("select id, n, r, d, s, hex(b), flag, day, at, at_tz, doc, v from t order by id"),
        "1\t42\t1.5\t12.340000000000000000000000000000\théllo\t00FF\t1\t2024-06-01\t2024-06-01 10:00:00.000000\t\
         2024-06-01 08:00:00.000000\t{\"a\": [1, 2]}\tshort\n\
         2\tNULL\tNULL\tNULL\t\tNULL\t0\tNULL\tNULL\tNULL\tNULL\tNULL"
    );
}

#[test]
fn an_existing_target_is_filled_by_column_name_and_a_misfit_is_named_before_any_row() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(
        "create table s (id int, name text, paid bool);
         insert into s values (1, 'a', true), (2, 'b', null);",
    );
    target.execute(
        "create table t (note text default 'none', paid int, \"NAME\" text, id int8 not null);
         insert into t (id) values (100);",
    );
    let arguments = |query: &'static str| {
        vec![
            "--from".to_owned(),
            source.url().to_owned(),
            "--query".to_owned(),
            query.to_owned(),
            "--to".to_owned(),
            target.url().to_owned(),
            "--table".to_owned(),
            "t".to_owned(),
        ]
    };
    let run_with = |query: &'static str| {
        let owned = arguments(query);
        let borrowed: Vec<&str> = owned.iter().map(String::as_str).collect();
        copy(&borrowed)
    };
    assert_exit(&run_with("select * from s order by id"), 0);
    assert_eq!(
        target.query_text("select * from t order by id"),
        "none|1|a|1\nnone||b|2\nnone|||100"
    );

    let message = assert_exit(&run_with("select id, name, 'x' as colour from s"), 2);
    assert!(
        message.contains("the target table t has no column \"colour\""),
        "{message}"
    );
    let message = assert_exit(&run_with("select name from s"), 2);
    assert!(message.contains("column \"id\" is NOT NULL"), "{message}");
    let message = assert_exit(&run_with("select id, '{}'::jsonb as paid from s"), 2);
    assert!(
        message.contains("column \"paid\": the source's jsonb values cannot go into"),
        "{message}"
    );
    assert_eq!(target.query_text("select count(*) from t"), "3");
}

/// 10,000 source rows of which row 5,000 breaks the target: a duplicate key or
/// a value the target's column cannot read.
fn ten_thousand_rows_breaking_at_5000(source: &TestDb) {
    source.execute(
        "create table s (id int8 not null primary key, n text not null);
         insert into s select g, g::text from generate_series(1, 10000) g;
         update s set n = 'not a number' where id = 5000;",
    );
}

/// The arguments of a `--create` copy into `fresh` whose source fails at row
/// 5,000 of 10,000 (a division by zero), after the first rows went in.
fn created_then_source_fails<'a>(source: &'a TestDb, target: &'a str) -> Vec<&'a str> {
    vec![
        "--from",
        source.url(),
        "--query",
        "select id, 100 / (5000 - id) as n from s order by id",
        "--to",
        target,
        "--table",
        "fresh",
        "--create",
    ]
}

#[test]
fn a_failure_half_way_leaves_a_postgresql_target_as_it_was() {
    let source = TestDb::new();
    let target = TestDb::new();
    ten_thousand_rows_breaking_at_5000(&source);
    target.execute(
        "create table t (id int8 primary key, n int8);
         insert into t values (1, 1), (2, 2), (3, 3);",
    );
    let before = target.query_text("select * from t order by id");
    let mut base = vec!["--from", source.url()];
    base.extend([
        "--query",
        "select * from s order by id",
        "--to",
        target.url(),
    ]);
    base.extend(["--table", "t"]);

    // A value the target's column cannot read, with --truncate.
    let with_truncate = [base.as_slice(), &["--truncate"]].concat();
    let message = assert_exit(&copy(&with_truncate), 1);
    assert!(
        message.contains("source row 5000, column n: invalid input syntax for type bigint"),
        "{message}"
    );
    assert!(message.starts_with("sluice: target: "), "{message}");
    assert_eq!(target.query_text("select * from t order by id"), before);

    // A duplicate key: the target's row 3 meets the source's.
    let duplicate = "select id, id as n from s order by id";
    let mut keyed = base.clone();
    keyed[3] = duplicate;
    let message = assert_exit(&copy(&keyed), 1);
    assert!(message.contains("source row 1"), "{message}");
    assert!(message.contains("duplicate key"), "{message}");
    assert_eq!(target.query_text("select * from t order by id"), before);

    // With --create, the table made for the copy is not left behind when the
    // source fails half-way, after rows went in.
    let created = created_then_source_fails(&source, target.url());
    let message = assert_exit(&copy(&created), 1);
    assert!(
        message.starts_with("sluice: source: ERROR 22012: division by zero"),
        "{message}"
    );
    assert!(!pg_exists(&target, "fresh"));
}

#[test]
fn a_failure_half_way_leaves_a_mariadb_target_as_it_was() {
    let source = TestDb::new();
    let target = TestMariaDb::new();
    ten_thousand_rows_breaking_at_5000(&source);
    target.execute(
        "create table t (id bigint primary key, n bigint);
         insert into t values (1, 1), (2, 2), (3, 3);",
    );
    let before = target.query_text("select * from t order by id");
    let mut base = vec!["--from", source.url()];
    base.extend([
        "--query",
        "select * from s order by id",
        "--to",
        target.url(),
    ]);
    base.extend(["--table", "t"]);

    let with_truncate = [base.as_slice(), &["--truncate"]].concat();
    let message = assert_exit(&copy(&with_truncate), 1);
    assert!(message.contains("source row 5000"), "{message}");
    assert!(message.contains("column n"), "{message}");
    assert_eq!(target.query_text("select * from t order by id"), before);

    let created = created_then_source_fails(&source, target.url());
    let message = assert_exit(&copy(&created), 1);
    assert!(message.contains("division by zero"), "{message}");
    assert!(!mariadb_exists(&target, "fresh"));
}

/// Rows whose reading takes 30 s each, so a copy of them is under way, its
/// table made and no row in, until a signal stops it. `nap` is declared
/// immutable (it is not) so that `--split-by`'s least and greatest value,
/// which does not read its column, does not wait for it.
const NAPPING_ROWS: &str = "select n, nap(n) as m from generate_series(1::int8, 4) n";

/// Makes `nap`. Cancelled, it takes 3 s more to stop, as a statement with
/// much to undo does: a copy that exited once it had asked for the cancels
/// would be gone before its own failure could undo its work.
fn napping(source: &TestDb) {
    source.execute(
        "create function nap(n int8) returns int8 language plpgsql immutable as $$
         begin
           perform pg_sleep(30);
           return n;
         exception when query_canceled then
           perform pg_sleep(3);
           raise;
         end $$;",
    );
}

/// `url` with `application_name=name`, so that its sessions can be told apart.
fn named(url: &str, name: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={name}")
}

/// A `sluice copy` of [`NAPPING_ROWS`] with `--create`, running until a
/// signal stops it; killed (and reaped) if the test ends before it does.
struct Signalled {
    child: std::process::Child,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Signalled {
    /// Starts the copy from `source` into `table` of `target` with `jobs`.
    fn start(source: &str, target: &str, table: &str, jobs: usize) -> Signalled {
        let mut command = sluice();
        command
            .args(["copy", "--from", source, "--query", NAPPING_ROWS])
            .args(["--to", target, "--table", table, "--create"])
            .args(["--jobs", &jobs.to_string()])
            .env_remove("MYSQL_PWD")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if jobs > 1 {
            command.args(["--split-by", "n"]);
        }
        let mut child = command.spawn().expect("could not start sluice");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        Signalled {
            child,
            stderr: Some(stderr),
        }
    }

    /// Waits until `condition` holds, the copy still running.
    fn wait_until(&mut self, what: &str, mut condition: impl FnMut() -> bool) {
        wait_until(what, Duration::from_secs(30), || {
            if let Some(status) = self.child.try_wait().unwrap() {
                let stderr = self.stderr.take().map(|reader| reader.join().unwrap());
                panic!("sluice ended ({status}) before {what}: {stderr:?}");
            }
            condition()
        });
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// Waits for the exit; its code and standard error.
    fn finish(mut self) -> (Option<i32>, String) {
        let mut status = None;
        wait_until("sluice to exit", Duration::from_secs(30), || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        let stderr = self.stderr.take().unwrap().join().unwrap();
        assert!(!stderr.contains("panicked"), "{stderr}");
        (status.and_then(|status| status.code()), stderr)
    }
}

impl Drop for Signalled {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// What each signal makes of a copy: its exit code and its line.
const SIGNALS: [(libc::c_int, i32, &str); 2] = [
    (
        libc::SIGINT,
        130,
        "sluice: interrupted; the copy was cancelled on both servers; nothing was committed to the target\n",
    ),
    (
        libc::SIGTERM,
        143,
        "sluice: terminated; the copy was cancelled on both servers; nothing was committed to the target\n",
    ),
];

/// Stops a `--create` copy into a table with each signal, with one job and
/// with two, and says what went wrong each way (an exit code or line not the
/// signal's, the table left, the source still reading), so that every way is
/// tried. `target` gives the target's URL for a table; `begun(table,
/// sessions)` whether the copy has made the table and its `sessions` target
/// sessions (the jobs', and the lead's with more than one) have begun
/// loading it, idle while the source naps; `exists` whether the table is
/// there afterwards.
fn each_way_stopped(
    source: &TestDb,
    target: impl Fn(&str) -> String,
    begun: impl Fn(&str, usize) -> bool,
    exists: impl Fn(&str) -> bool,
) -> Vec<String> {
    let reading = format!("{}_reading", source.schema());
    let source_url = named(source.url(), &reading);
    let still_reading = || {
        source.query_text(&format!(
            "select count(*) from pg_stat_activity \
             where application_name = '{reading}' and state = 'active'"
        )) != "0"
    };
    let mut wrong = Vec::new();
    for jobs in [1, 2] {
        let sessions = if jobs > 1 { jobs + 1 } else { 1 };
        for (signal, code, line) in SIGNALS {
            let table = format!("signalled_{jobs}_{code}");
            let mut copy = Signalled::start(&source_url, &target(&table), &table, jobs);
            copy.wait_until("the copy to begin loading", || begun(&table, sessions));
            copy.signal(signal);
            let (exit, stderr) = copy.finish();
            let way = format!("--jobs {jobs}, signal {signal}");
            if exit != Some(code) || stderr != line {
                wrong.push(format!("{way}: exit {exit:?}, {stderr:?}"));
            }
            if exists(&table) {
                wrong.push(format!("{way}: {table} is left"));
            }
            // Cancelled, each read ends within nap's 3 s.
            if !eventually(Duration::from_secs(20), || !still_reading()) {
                wrong.push(format!("{way}: the source still reads"));
            }
        }
    }
    wrong
}

/// Ctrl-C or SIGTERM during `copy --create` into PostgreSQL leaves no table,
/// with one job (the table made in the copy's transaction) and with two (made
/// and committed first, so that the jobs' sessions see it, then dropped).
#[test]
fn a_signal_during_a_create_leaves_no_postgresql_table() {
    let source = TestDb::new();
    napping(&source);
    let target = TestDb::new();
    // The copy's target sessions are told apart by their name.
    let loading = |table: &str| format!("{}_{table}", target.schema());
    let wrong = each_way_stopped(
        &source,
        |table| named(target.url(), &loading(table)),
        // The table is made in the transaction every session has open.
        |table, sessions| {
            target.query_text(&format!(
                "select count(*) from pg_stat_activity where application_name = '{}' \
                 and state = 'idle in transaction'",
                loading(table)
            )) == sessions.to_string()
        },
        |table| pg_exists(&target, table),
    );
    assert_eq!(wrong, Vec::<String>::new());
}

/// The same into MariaDB, whose `CREATE TABLE` commits at once, so the table
/// is dropped again on the way out.
#[test]
fn a_signal_during_a_create_leaves_no_mariadb_table() {
    let source = TestDb::new();
    napping(&source);
    let target = TestMariaDb::new();
    let exists = |table: &str| mariadb_exists(&target, table);
    let wrong = each_way_stopped(
        &source,
        |_| target.url().to_owned(),
        |table, sessions| {
            exists(table)
                && target.query_text(
                    "select count(*) from information_schema.processlist \
                     where db = database() and command = 'Sleep'",
                ) == sessions.to_string()
        },
        exists,
    );
    assert_eq!(wrong, Vec::<String>::new());
}

/// A second Ctrl-C exits at once, without waiting for the undoing, and says
/// what may be left: here the drop of the table made for two jobs waits for
/// a lock another session holds on it.
#[test]
fn a_second_ctrl_c_exits_without_waiting_for_the_undoing() {
    let source = TestDb::new();
    napping(&source);
    let target = TestDb::new();
    let loading = format!("{}_held", target.schema());
    let mut copy = Signalled::start(source.url(), &named(target.url(), &loading), "held", 2);
    copy.wait_until("the table to be made", || pg_exists(&target, "held"));
    let mut holder = target.open_session();
    let mut input = holder.stdin.take().expect("piped stdin");
    std::io::Write::write_all(
        &mut input,
        b"begin; lock table held in access share mode;\n",
    )
    .unwrap();
    copy.wait_until("the lock to be held", || {
        target.query_text(
            "select count(*) from pg_locks l join pg_stat_activity a using (pid) \
             where l.relation = 'held'::regclass and l.granted and a.application_name = 'psql'",
        ) == "1"
    });
    copy.signal(libc::SIGINT);
    copy.wait_until("the drop to wait for the lock", || {
        target.query_text(&format!(
            "select count(*) from pg_stat_activity \
             where application_name = '{loading}' and wait_event_type = 'Lock'"
        )) == "1"
    });
    copy.signal(libc::SIGINT);
    let (exit, stderr) = copy.finish();
    assert_eq!(exit, Some(130), "{stderr}");
    assert_eq!(
        stderr,
        "sluice: interrupted again: exiting at once; a table the copy created may be left on \
         the target, empty\n"
    );
    drop(input);
    holder.wait().unwrap();
}

#[test]
fn an_unknown_source_table_or_an_unreachable_target_writes_nothing() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute("create table s (id int); insert into s values (1);");
    let message = assert_exit(
        &copy(&[
            "--from",
            source.url(),
            "--table",
            "missing",
            "--to",
            target.url(),
            "--table",
            "t",
            "--create",
        ]),
        2,
    );
    assert!(
        message.contains("source: table \"missing\" does not exist"),
        "{message}"
    );
    assert!(!pg_exists(&target, "t"));

    let message = assert_exit(
        &copy(&[
            "--from",
            source.url(),
            "--table",
            "s",
            "--to",
            "postgres://nobody@127.0.0.1:1/none",
            "--table",
            "t",
            "--create",
        ]),
        3,
    );
    assert!(message.starts_with("sluice: target (--to): "), "{message}");
    assert!(message.contains("nothing was written"), "{message}");

    let message = assert_exit(
        &copy(&[
            "--from",
            source.url(),
            "--table",
            "s",
            "--to",
            "sqlite:///tmp/whatever.db",
            "--table",
            "t",
        ]),
        2,
    );
    assert!(message.contains("target"), "{message}");
}

#[test]
fn conflicts_are_ignored_or_update_on_both_targets() {
    let source = TestDb::new();
    source.execute(
        "create table s (id int primary key, name text);
         insert into s values (1, 'new one'), (2, 'new two'), (4, 'new four');",
    );
    let pg = TestDb::new();
    let mariadb = TestMariaDb::new();
    let existing = "create table t (id int primary key, name text);
         insert into t values (1, 'old one'), (3, 'old three');";
    pg.execute(existing);
    mariadb.execute(existing);
    for (url, mode) in [
        (pg.url(), "ignore"),
        (mariadb.url(), "ignore"),
        (pg.url(), "update"),
        (mariadb.url(), "update"),
    ] {
        let stats = copy_ok(&[
            "--from",
            source.url(),
            "--table",
            "s",
            "--to",
            url,
            "--table",
            "t",
            "--on-conflict",
            mode,
            "--key",
            "id",
            "--stats",
        ]);
        assert_eq!(figure(&stats, "rows"), 3, "{stats}");
        if mode == "ignore" {
            assert_eq!(figure(&stats, "rows written"), 2, "{url}: {stats}");
        }
    }
    assert_eq!(
        pg.query_text("select * from t order by id"),
        "1|new one\n2|new two\n3|old three\n4|new four"
    );
    assert_eq!(
        mariadb.query_text("select * from t order by id"),
        "1\tnew one\n2\tnew two\n3\told three\n4\tnew four"
    );
}

#[test]
fn ten_thousand_rows_cost_a_fixed_handful_of_round_trips_on_each_side() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(
        "create table s (id int8 primary key, name text, amount numeric(10,2));
         insert into s select g, 'name ' || g, g / 100.0 from generate_series(1, 10000) g;",
    );
    let stats = copy_ok(&[
        "--from",
        source.url(),
        "--table",
        "s",
        "--to",
        target.url(),
        "--table",
        "t",
        "--create",
        "--stats",
    ]);
    assert_eq!(figure(&stats, "rows"), 10_000, "{stats}");
    assert_eq!(figure(&stats, "rows written"), 10_000, "{stats}");
    // Source: describe the table, resolve its types, the query, its close.
    // Target: begin + create in one, describe, resolve types, COPY start,
    // COPY end, commit.
    assert_eq!(
        figure(&stats, "source round trips for the copy"),
        4,
        "{stats}"
    );
    assert_eq!(
        figure(&stats, "target round trips for the copy"),
        6,
        "{stats}"
    );
    assert_eq!(
        target.query_text("select count(*), sum(amount) from t"),
        "10000|500050.00"
    );
}
