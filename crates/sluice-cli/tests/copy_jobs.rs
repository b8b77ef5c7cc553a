//! `sluice copy --jobs N` against real PostgreSQL servers: the parts of a copy
//! read one snapshot of the source while writes run (the target equals one
//! consistent read), a query split by a column's values (NULLs included),
//! a failing part (or a key in two parts) leaving the target as it was, and the combinations that
//! cannot work refused before anything is written.

mod support;

use std::time::{Duration, Instant};

use sluice_testkit::{TestDb, TestMariaDb};
use support::{assert_exit, run, sluice};

fn copy(arguments: &[&str]) -> std::process::Output {
    let mut command = sluice();
    command.arg("copy").args(arguments).env_remove("MYSQL_PWD");
    run(&mut command, b"")
}

/// 100,000 accounts of balance 100: ten million in all, whatever transfers
/// between them run.
const ACCOUNTS: &str =
    "create table accounts (id int8 primary key, balance int8 not null, note text);
    insert into accounts select g, 100, repeat('x', 40) from generate_series(1, 100000) g;
    create table stop (now bool);";

/// Until a row appears in `stop`: moves 1 between two accounts (the updated
/// rows' new versions land on other pages) and opens account 100000 + i with
/// balance 0, committing each step. Every consistent read sees a total of ten
/// million and accounts numbered 1 to its count without a gap.
const WRITER: &str = "do $$
    declare i int8 := 0;
    begin
      loop
        i := i + 1;
        update accounts set balance = balance - 1 where id = (i * 7919) % 100000 + 1;
        update accounts set balance = balance + 1 where id = (i * 104729) % 100000 + 1;
        insert into accounts values (100000 + i, 0, 'opened');
        commit;
        exit when i >= 500000 or exists (select 1 from stop);
      end loop;
    end $$;";

fn count(db: &TestDb, sql: &str) -> i64 {
    db.query_text(sql).parse().unwrap()
}

#[test]
fn parts_read_one_snapshot_while_writes_run() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(ACCOUNTS);
    let (copied, before, after) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| source.execute(WRITER));
        let deadline = Instant::now() + Duration::from_secs(60);
        let before = loop {
            let rows = count(&source, "select count(*) from accounts");
            if rows > 100_200 || Instant::now() > deadline {
                break rows;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stderr = assert_exit(
            &copy(&[
                "--from",
                source.url(),
                "--table",
                "accounts",
                "--to",
                target.url(),
                "--create",
                "--jobs",
                "4",
                "--stats",
            ]),
            0,
        );
        let after = count(&source, "select count(*) from accounts");
        source.execute("insert into stop values (true)");
        writer.join().unwrap();
        (stderr, before, after)
    });
    let rows = count(&target, "select count(*) from accounts");
    assert!(
        before < rows && rows < after,
        "the writes ran during the copy: {before} rows before it, {rows} copied, {after} after"
    );
    assert_eq!(
        count(&target, "select sum(balance) from accounts"),
        10_000_000,
        "one consistent read: every transfer seen whole or not at all"
    );
    assert_eq!(
        count(&target, "select max(id) from accounts"),
        rows,
        "one consistent read: the accounts opened form a prefix"
    );
    assert!(copied.contains("rows: "), "{copied}");
    assert!(
        copied.contains("values: passed on in the source's binary form, unread"),
        "{copied}"
    );
}

#[test]
fn a_query_is_split_by_a_column_with_its_nulls_and_parameters() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(
        "create table s (id int8, kind text, n numeric);
         insert into s select g, case when g % 3 = 0 then 'a' else 'b' end, g / 7.0
           from generate_series(-500, 5000) g;
         insert into s values (null, 'a', 1), (null, 'b', 2);",
    );
    target.execute("create table t (id int8, kind text, n numeric);");
    let query = "select id, kind, n from s where kind = $1";
    assert_exit(
        &copy(&[
            "--from",
            source.url(),
            "--query",
            query,
            "--param",
            "a",
            "--to",
            target.url(),
            "--table",
            "t",
            "--jobs",
            "3",
            "--split-by",
            "id",
        ]),
        0,
    );
    let rows = "select count(*), count(id), sum(id), sum(n) from";
    assert_eq!(
        target.query_text(&format!("{rows} t")),
        source.query_text(&format!("{rows} s where kind = 'a'"))
    );
}

#[test]
fn a_failing_part_leaves_the_target_as_it_was() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(
        "create table s (id int8 primary key, n int8 not null);
         insert into s select g, g from generate_series(1, 30000) g;",
    );
    target
        .execute("create table t (id int8 primary key, n int8); insert into t values (29000, 0);");
    let before = target.query_text("select * from t");

    // A duplicate key in the last part: the others, done or not, roll back.
    let message = assert_exit(
        &copy(&[
            "--from",
            source.url(),
            "--table",
            "s",
            "--table",
            "t",
            "--to",
            target.url(),
            "--jobs",
            "3",
        ]),
        1,
    );
    assert!(message.contains("duplicate key"), "{message}");
    assert_eq!(target.query_text("select * from t"), before);

    // A key in two parts: the second part's row would wait on the first's
    // open transaction for ever; its lock wait gives up instead. (Without
    // the target's own key 29000, whose refusal would otherwise race the
    // wait, depending on which part writes key 1 first.)
    let message = assert_exit(
        &copy(&[
            "--from",
            source.url(),
            "--query",
            "select case when id = 25000 then 1 else id end as id, n from s where id <> 29000",
            "--to",
            target.url(),
            "--table",
            "t",
            "--jobs",
            "3",
            "--split-by",
            "n",
        ]),
        1,
    );
    assert!(message.contains("lock timeout"), "{message}");
    assert_eq!(target.query_text("select * from t"), before);

    // A part that fails at its source after rows went in: the table the copy
    // created is dropped again.
    let message = assert_exit(
        &copy(&[
            "--from",
            source.url(),
            "--query",
            "select id, 100 / (20000 - id) as n from s",
            "--to",
            target.url(),
            "--table",
            "fresh",
            "--create",
            "--jobs",
            "3",
            "--split-by",
            "id",
        ]),
        1,
    );
    assert!(message.contains("division by zero"), "{message}");
    assert_eq!(
        target.query_text("select to_regclass('fresh') is null"),
        "t"
    );
}

#[test]
fn columns_copy_only_those_whole_or_in_parts() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(
        "create table wide (id int8 primary key, amount numeric(12,2) not null, note text, payload jsonb);
         insert into wide select g, g / 100.0, 'n' || g, '{}' from generate_series(1, 20000) g;
         analyze wide;",
    );
    let expected = source.query_text("select count(*), sum(amount) from wide");
    // --create makes only the columns read, in their order, with the primary
    // key and NOT NULL that come with them.
    let output = copy(&[
        "--from",
        source.url(),
        "--table",
        "wide",
        "--to",
        target.url(),
        "--table",
        "narrow",
        "--create",
        "--columns",
        "amount,id",
        "--jobs",
        "2",
    ]);
    assert_exit(&output, 0);
    assert_eq!(
        target.query_text("select count(*), sum(amount) from narrow"),
        expected
    );
    assert_eq!(
        target.query_text(
            "select string_agg(column_name || ':' || is_nullable, ',' order by ordinal_position) \
             from information_schema.columns where table_schema = current_schema() and table_name = 'narrow'"
        ),
        "amount:NO,id:NO"
    );
    assert_eq!(
        count(&target, "select count(*) from pg_constraint where contype = 'p' and conrelid = 'narrow'::regclass"),
        1
    );
    // Into an existing table: the target's other columns take their defaults.
    target.execute("create table existing (id int8 primary key, amount numeric(12,2), note text default 'none')");
    let output = copy(&[
        "--from",
        source.url(),
        "--table",
        "wide",
        "--to",
        target.url(),
        "--table",
        "existing",
        "--columns",
        "id,amount",
    ]);
    assert_exit(&output, 0);
    assert_eq!(
        target.query_text("select count(*), sum(amount) from existing"),
        expected
    );
    assert_eq!(
        count(&target, "select count(*) from existing where note = 'none'"),
        20_000
    );
    // A query selects its own columns.
    let output = copy(&[
        "--from",
        source.url(),
        "--query",
        "select id from wide",
        "--to",
        target.url(),
        "--table",
        "existing",
        "--columns",
        "id",
    ]);
    let message = assert_exit(&output, 2);
    assert!(
        message.contains("cannot be used with '--columns"),
        "{message}"
    );
}

#[test]
fn combinations_that_cannot_work_are_refused_before_anything_is_written() {
    let source = TestDb::new();
    let target = TestDb::new();
    source.execute(
        "create table s (id int8, n text); insert into s values (1, 'a');
         create view v as select * from s;",
    );
    target.execute("create table t (id int8, n text); insert into t values (9, 'kept');");
    let to = ["--to", target.url(), "--table", "t"];
    let cases: [(&[&str], i32, &str); 5] = [
        (
            &["--table", "s", "--jobs", "2", "--truncate"],
            2,
            "--truncate empties the table",
        ),
        (
            &["--query", "select * from s", "--jobs", "2"],
            2,
            "--jobs needs --split-by",
        ),
        (
            &["--table", "s", "--split-by", "id"],
            2,
            "give --jobs 2 or more",
        ),
        (&["--table", "s", "--jobs", "0"], 2, "give 1 or more"),
        (&["--table", "v", "--jobs", "2"], 2, "is not a plain table"),
    ];
    for (arguments, code, expected) in cases {
        let mut all = vec!["--from", source.url()];
        all.extend_from_slice(arguments);
        all.extend_from_slice(&to);
        let message = assert_exit(&copy(&all), code);
        assert!(message.contains(expected), "{arguments:?}: {message}");
    }
    let mariadb = TestMariaDb::new();
    mariadb.execute("create table s (id bigint, n text); insert into s values (1, 'a');");
    let message = assert_exit(
        &copy(&[
            "--from",
            mariadb.url(),
            "--table",
            "s",
            "--to",
            target.url(),
            "--table",
            "t",
            "--jobs",
            "2",
        ]),
        2,
    );
    assert!(message.contains("reading in parallel parts"), "{message}");
    assert_eq!(target.query_text("select * from t"), "9|kept");
}
