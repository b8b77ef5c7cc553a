//! `sluice call`'s engine on a real MariaDB: one statement for many parameter
//! sets, by bulk execution and pipelined, in single and each mode, with the
//! round trips counted at the socket and every outcome in input order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sluice_core::calls::{CallOutcome, ParamSet, ParamSource, PipelineSummary, Transaction};
use sluice_core::database::BoxFuture;
use sluice_core::{Error, ErrorKind, Meter};
use sluice_mariadb::calls::PreparedCalls;
use sluice_mariadb::{Config, Connection};
use sluice_testkit::TestMariaDb;

/// Parameter sets made as they are asked for, counting how many were read.
struct Sets {
    sets: Box<dyn Iterator<Item = ParamSet> + Send>,
    read: Arc<AtomicU64>,
}

impl ParamSource for Sets {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        let next = self.sets.next();
        if next.is_some() {
            self.read.fetch_add(1, Ordering::Relaxed);
        }
        Box::pin(async move { Ok(next) })
    }
}

/// A call's outcome, owned.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Done {
        rows: Vec<Vec<Option<String>>>,
        affected: Option<u64>,
    },
    Failed {
        sqlstate: String,
        error: Option<u32>,
    },
    Invalid(String),
    RolledBack,
}

fn done(affected: Option<u64>) -> Seen {
    Seen::Done {
        rows: Vec::new(),
        affected,
    }
}

fn duplicate_key() -> Seen {
    Seen::Failed {
        sqlstate: "23000".into(),
        error: Some(1062),
    }
}

/// How a run goes.
#[derive(Clone, Copy)]
struct How {
    mode: Transaction,
    bulk: bool,
    window_bytes: usize,
}

const SINGLE_BULK: How = How {
    mode: Transaction::Single,
    bulk: true,
    window_bytes: 1 << 20,
};

const EACH_BULK: How = How {
    mode: Transaction::Each,
    ..SINGLE_BULK
};

const SINGLE_PIPELINED: How = How {
    bulk: false,
    ..SINGLE_BULK
};

const EACH_PIPELINED: How = How {
    mode: Transaction::Each,
    bulk: false,
    ..SINGLE_BULK
};

/// What a run reported.
struct Ran {
    outcomes: Vec<(u64, Seen)>,
    summary: PipelineSummary,
    /// Round trips of the prepare and the run.
    round_trips: u64,
    /// Most sets read but not yet reported, at any report.
    most_unreported: u64,
    used_bulk: bool,
}

async fn connect(db: &TestMariaDb) -> (Connection, Meter) {
    let meter = Meter::new();
    let config: Config = db.url().parse().unwrap();
    (Connection::connect(&config, &meter).await.unwrap(), meter)
}

/// Runs `sql` for `sets` (line numbers from 1) as `how` says.
async fn run(
    db: &TestMariaDb,
    sql: &str,
    sets: impl Iterator<Item = Result<Vec<Option<String>>, String>> + Send + 'static,
    how: How,
) -> Ran {
    let (mut connection, meter) = connect(db).await;
    let before = meter.snapshot();
    let calls = PreparedCalls::prepare(&mut connection, sql, Default::default())
        .await
        .unwrap();
    let calls = if how.bulk {
        calls
    } else {
        calls.without_bulk()
    };
    let used_bulk = calls.uses_bulk();
    let read = Arc::new(AtomicU64::new(0));
    let mut source = Sets {
        sets: Box::new(
            sets.zip(1..)
                .map(|(values, line)| ParamSet { line, values }),
        ),
        read: read.clone(),
    };
    let mut outcomes = Vec::new();
    let mut most_unreported = 0;
    let mut report = |line: u64, outcome: CallOutcome<'_>| -> Result<(), Error> {
        most_unreported = most_unreported.max(read.load(Ordering::Relaxed) - outcomes.len() as u64);
        outcomes.push((line, seen(outcome)));
        Ok(())
    };
    let summary = calls
        .run(&mut source, how.mode, how.window_bytes, &mut report)
        .await
        .unwrap();
    let round_trips = (meter.snapshot() - before).round_trips;
    connection.close().await;
    Ran {
        outcomes,
        summary,
        round_trips,
        most_unreported,
        used_bulk,
    }
}

fn seen(outcome: CallOutcome<'_>) -> Seen {
    match outcome {
        CallOutcome::Done { rows, affected } => Seen::Done {
            rows: rows
                .rows()
                .map(|row| {
                    (0..row.len())
                        .map(|index| {
                            row.get(index)
                                .map(|value| String::from_utf8_lossy(value).into_owned())
                        })
                        .collect()
                })
                .collect(),
            affected,
        },
        CallOutcome::Failed(db) => Seen::Failed {
            sqlstate: db.code.clone(),
            error: db.vendor_code,
        },
        CallOutcome::Invalid(reason) => Seen::Invalid(reason.to_owned()),
        CallOutcome::RolledBack => Seen::RolledBack,
    }
}

/// `[id, "name id"]` for `ids`.
fn people(
    ids: impl Iterator<Item = u64> + Send + 'static,
) -> impl Iterator<Item = Result<Vec<Option<String>>, String>> + Send {
    ids.map(|id| Ok(vec![Some(id.to_string()), Some(format!("name {id}"))]))
}

const PEOPLE: &str = "create table people (id int primary key, name varchar(40))";
const INSERT: &str = "insert into people (id, name) values (?, ?)";

fn assert_all_done(ran: &Ran, calls: u64, affected: Option<u64>) {
    assert_eq!(ran.outcomes.len() as u64, calls);
    for (index, (line, outcome)) in ran.outcomes.iter().enumerate() {
        assert_eq!(*line, index as u64 + 1, "in input order");
        assert_eq!(*outcome, done(affected), "line {line}");
    }
}

#[tokio::test]
async fn ten_thousand_inserts_in_single_mode_take_three_round_trips_in_one_bulk() {
    let db = TestMariaDb::new();
    db.execute(PEOPLE);
    let ran = run(&db, INSERT, people(1..=10_000), SINGLE_BULK).await;
    assert!(ran.used_bulk);
    // A bulk of 10,000 sets has no per-set counts (its total is 10,000).
    assert_all_done(&ran, 10_000, None);
    assert_eq!(
        ran.summary,
        PipelineSummary {
            calls: 10_000,
            succeeded: 10_000,
            failed: 0
        }
    );
    // 1: COM_STMT_PREPARE. 2: SET autocommit = 0, SAVEPOINT and one
    // COM_STMT_BULK_EXECUTE of all 10,000 sets (167,803 bytes, under the
    // 1 MiB window). 3: COM_STMT_CLOSE, COMMIT, SET autocommit back.
    assert_eq!(ran.round_trips, 3);
    assert_eq!(
        db.query_text("select count(*), sum(id), max(name) from people"),
        "10000\t50005000\tname 9999"
    );
}

#[tokio::test]
async fn ten_thousand_inserts_in_each_mode_take_three_round_trips_in_one_bulk() {
    let db = TestMariaDb::new();
    db.execute(PEOPLE);
    let ran = run(&db, INSERT, people(1..=10_000), EACH_BULK).await;
    assert_all_done(&ran, 10_000, None);
    assert_eq!(ran.summary.succeeded, 10_000);
    // 1: prepare. 2: SET autocommit = 1, START TRANSACTION and the bulk.
    // 3: its COMMIT (with the statement's close and autocommit put back),
    // after which the calls are reported done.
    assert_eq!(ran.round_trips, 3);
    assert_eq!(db.query_text("select count(*) from people"), "10000");
}

#[tokio::test]
async fn ten_thousand_inserts_pipelined_take_a_round_trip_per_64_kib() {
    let db = TestMariaDb::new();
    db.execute(PEOPLE);
    let ran = run(&db, INSERT, people(1..=10_000), SINGLE_PIPELINED).await;
    assert!(!ran.used_bulk);
    assert_all_done(&ran, 10_000, Some(1));
    assert_eq!(ran.summary.succeeded, 10_000);
    // Each COM_STMT_EXECUTE is 4 (header) + 10 (command, id, flags,
    // iterations) + 1 (null bitmap) + 1 + 4 (types) + the two values with
    // their lengths: 29 to 37 bytes, 347,788 for all 10,000, in 6 rounds of
    // 64 KiB. So 1 (prepare) + 6 + 1 (COMMIT).
    assert_eq!(ran.round_trips, 8);
    assert_eq!(db.query_text("select count(*) from people"), "10000");

    let db = TestMariaDb::new();
    db.execute(PEOPLE);
    let ran = run(&db, INSERT, people(1..=10_000), EACH_PIPELINED).await;
    assert_all_done(&ran, 10_000, Some(1));
    // No transaction to end (autocommit is put back with the session's next
    // command): 1 + 6.
    assert_eq!(ran.round_trips, 7);
    assert_eq!(db.query_text("select count(*) from people"), "10000");
}

/// 100 sets, line 50 repeating line 10's key.
fn with_a_duplicate_at_line_50() -> impl Iterator<Item = Result<Vec<Option<String>>, String>> + Send
{
    people((1..=100).map(|id| if id == 50 { 10 } else { id }))
}

#[tokio::test]
async fn a_duplicate_key_in_single_mode_commits_nothing_and_is_blamed_on_its_line() {
    for how in [SINGLE_BULK, SINGLE_PIPELINED] {
        let db = TestMariaDb::new();
        db.execute(PEOPLE);
        let ran = run(&db, INSERT, with_a_duplicate_at_line_50(), how).await;
        let expected: Vec<(u64, Seen)> = (1..=100)
            .map(|line| {
                let outcome = match line {
                    ..50 => done(Some(1)),
                    50 => duplicate_key(),
                    _ => Seen::RolledBack,
                };
                (line, outcome)
            })
            .collect();
        // The bulk failed; undone to its savepoint, its sets ran one by one
        // (so each has its own count), and the 50th was refused.
        assert_eq!(ran.outcomes, expected, "bulk: {}", how.bulk);
        // As PostgreSQL's pipeline says: every call failed or was rolled back.
        assert_eq!(
            ran.summary,
            PipelineSummary {
                calls: 100,
                succeeded: 0,
                failed: 100
            }
        );
        assert_eq!(db.query_text("select count(*) from people"), "0");
    }
}

#[tokio::test]
async fn a_duplicate_key_in_each_mode_fails_its_own_call_only() {
    for how in [EACH_BULK, EACH_PIPELINED] {
        let db = TestMariaDb::new();
        db.execute(PEOPLE);
        let ran = run(&db, INSERT, with_a_duplicate_at_line_50(), how).await;
        for (line, outcome) in &ran.outcomes {
            let expected = if *line == 50 {
                duplicate_key()
            } else {
                done(Some(1))
            };
            assert_eq!(*outcome, expected, "line {line}, bulk: {}", how.bulk);
        }
        assert_eq!(ran.outcomes.len(), 100);
        assert_eq!(
            ran.summary,
            PipelineSummary {
                calls: 100,
                succeeded: 99,
                failed: 1
            }
        );
        assert_eq!(
            db.query_text("select count(*), sum(id) from people"),
            "99\t5000"
        );
    }
}

#[tokio::test]
async fn a_bulk_update_failing_halfway_is_undone_before_its_sets_run_again() {
    // MariaDB runs a bulk UPDATE once per set and keeps the sets before a
    // failing one: run again without undoing them, row 1 would be raised
    // twice (and, in single mode, be blamed for the check it then breaks).
    let db = TestMariaDb::new();
    db.execute("create table counters (id int primary key, n int not null, check (n < 5))");
    let update = "update counters set n = n + 1 where id = ?";
    let ids = || {
        ["1", "2", "3", "4"]
            .map(|id| Ok(vec![Some(id.to_owned())]))
            .into_iter()
    };
    let check_failed = Seen::Failed {
        sqlstate: "23000".into(),
        error: Some(4025),
    };

    db.execute("insert into counters values (1, 3), (2, 0), (3, 4), (4, 0)");
    let ran = run(&db, update, ids(), EACH_BULK).await;
    assert_eq!(
        ran.outcomes,
        [
            (1, done(Some(1))),
            (2, done(Some(1))),
            (3, check_failed.clone()),
            (4, done(Some(1)))
        ]
    );
    assert_eq!(
        db.query_text("select group_concat(n order by id) from counters"),
        "4,1,4,1"
    );
    // 1: prepare. 2: START TRANSACTION, the bulk. 3: ROLLBACK, 4 executes.
    assert_eq!(ran.round_trips, 3);

    db.execute("delete from counters; insert into counters values (1, 3), (2, 0), (3, 4), (4, 0)");
    let ran = run(&db, update, ids(), SINGLE_BULK).await;
    assert_eq!(
        ran.outcomes,
        [
            (1, done(Some(1))),
            (2, done(Some(1))),
            (3, check_failed),
            (4, Seen::RolledBack)
        ]
    );
    assert_eq!(
        db.query_text("select group_concat(n order by id) from counters"),
        "3,0,4,0"
    );
}

#[tokio::test]
async fn invalid_lines_fail_their_own_calls() {
    let sets = || {
        vec![
            Ok(vec![Some("1".to_owned()), Some("a".to_owned())]),
            Err("invalid JSON at column 1".to_owned()),
            Ok(vec![Some("3".to_owned())]),
            Ok(vec![Some("4".to_owned()), Some("d".to_owned())]),
        ]
        .into_iter()
    };
    let wrong_count = "the statement has 2 parameters but the line has 1 values";
    for how in [EACH_BULK, EACH_PIPELINED] {
        let db = TestMariaDb::new();
        db.execute(PEOPLE);
        let ran = run(&db, INSERT, sets(), how).await;
        // In a bulk of two sets of 2 rows affected, each set's count is unknown.
        let each = if how.bulk { None } else { Some(1) };
        assert_eq!(
            ran.outcomes,
            [
                (1, done(each)),
                (2, Seen::Invalid("invalid JSON at column 1".into())),
                (3, Seen::Invalid(wrong_count.into())),
                (4, done(each))
            ],
            "bulk: {}",
            how.bulk
        );
        assert_eq!(
            ran.summary,
            PipelineSummary {
                calls: 4,
                succeeded: 2,
                failed: 2
            }
        );
        assert_eq!(
            db.query_text("select group_concat(id order by id) from people"),
            "1,4"
        );
    }
    for how in [SINGLE_BULK, SINGLE_PIPELINED] {
        let db = TestMariaDb::new();
        db.execute(PEOPLE);
        let ran = run(&db, INSERT, sets(), how).await;
        // Input is read no further than the invalid line; nothing commits.
        assert_eq!(
            ran.outcomes,
            [
                (1, done(Some(1))),
                (2, Seen::Invalid("invalid JSON at column 1".into()))
            ],
            "bulk: {}",
            how.bulk
        );
        assert_eq!(
            ran.summary,
            PipelineSummary {
                calls: 2,
                succeeded: 0,
                failed: 2
            }
        );
        assert_eq!(db.query_text("select count(*) from people"), "0");
    }
}

#[tokio::test]
async fn a_select_returns_each_calls_rows() {
    let db = TestMariaDb::new();
    db.execute(PEOPLE);
    db.execute("insert into people values (1, 'a'), (2, null), (3, 'c')");
    let sql = "select id, name, ? * 2 as twice from people where id <= ? order by id";
    let sets = [["1", "2"], ["2", "0"], ["3.5", "3"]]
        .map(|set| Ok(set.map(|value| Some(value.to_owned())).to_vec()))
        .into_iter();
    let ran = run(&db, sql, sets, SINGLE_BULK).await;
    assert!(!ran.used_bulk, "rows cannot come from a bulk");
    let row = |values: [Option<&str>; 3]| values.map(|value| value.map(str::to_owned)).to_vec();
    assert_eq!(
        ran.outcomes,
        [
            (
                1,
                Seen::Done {
                    rows: vec![
                        row([Some("1"), Some("a"), Some("2")]),
                        row([Some("2"), None, Some("2")])
                    ],
                    affected: None
                }
            ),
            (
                2,
                Seen::Done {
                    rows: Vec::new(),
                    affected: None
                }
            ),
            (
                3,
                Seen::Done {
                    rows: vec![
                        row([Some("1"), Some("a"), Some("7")]),
                        row([Some("2"), None, Some("7")]),
                        row([Some("3"), Some("c"), Some("7")])
                    ],
                    affected: None
                }
            ),
        ]
    );
    // Prepare, the three executes, COMMIT.
    assert_eq!(ran.round_trips, 3);
}

#[tokio::test]
async fn null_parameters_are_sent_as_null() {
    for how in [EACH_BULK, EACH_PIPELINED] {
        let db = TestMariaDb::new();
        db.execute("create table notes (id int primary key, note text, score int)");
        let sets = vec![
            Ok(vec![Some("1".to_owned()), None, Some("7".to_owned())]),
            Ok(vec![Some("2".to_owned()), Some("".to_owned()), None]),
            Ok(vec![Some("3".to_owned()), None, None]),
        ]
        .into_iter();
        let ran = run(&db, "insert into notes values (?, ?, ?)", sets, how).await;
        assert_eq!(ran.summary.succeeded, 3, "bulk: {}", how.bulk);
        assert_eq!(
            db.query_text(
                "select id, note is null, note = '', score is null from notes order by id"
            ),
            "1\t1\tNULL\t0\n2\t0\t1\t1\n3\t1\tNULL\t1"
        );
    }
}

#[tokio::test]
async fn a_window_of_a_few_hundred_bytes_completes_ten_thousand_calls() {
    for how in [
        How {
            window_bytes: 300,
            ..SINGLE_BULK
        },
        How {
            window_bytes: 300,
            ..EACH_PIPELINED
        },
    ] {
        let db = TestMariaDb::new();
        db.execute(PEOPLE);
        let ran = run(&db, INSERT, people(1..=10_000), how).await;
        assert_eq!(ran.summary.succeeded, 10_000, "bulk: {}", how.bulk);
        assert_eq!(db.query_text("select count(*) from people"), "10000");
        // A bulk of 300 bytes holds up to 26 sets (11 bytes for the
        // smallest), a round of pipelined calls 10: never more than a
        // round's sets are held, whatever the input's size.
        assert!(
            ran.most_unreported <= 27,
            "{} sets unreported",
            ran.most_unreported
        );
        assert!(ran.round_trips > 500, "{} round trips", ran.round_trips);
    }
}

#[tokio::test]
async fn a_procedure_call_falls_back_from_bulk_to_pipelined_executes() {
    let db = TestMariaDb::new();
    db.execute(PEOPLE);
    db.execute(
        "create procedure add_person(in i int, in n varchar(40)) insert into people values (i, n)",
    );
    let ran = run(&db, "call add_person(?, ?)", people(1..=1000), EACH_BULK).await;
    // MariaDB cannot bulk-execute CALL (error 1295): the first bulk's sets
    // run again one by one, and the rest go pipelined.
    assert_all_done(&ran, 1000, Some(1));
    assert_eq!(db.query_text("select count(*) from people"), "1000");
}

#[tokio::test]
async fn returning_is_refused_because_mariadb_prepares_it_without_columns() {
    let db = TestMariaDb::new();
    db.execute(PEOPLE);
    let (mut connection, _meter) = connect(&db).await;
    let refused = PreparedCalls::prepare(
        &mut connection,
        "insert into people values (?, ?) returning id",
        Default::default(),
    )
    .await
    .err()
    .expect("refused");
    assert_eq!(refused.kind(), ErrorKind::Unsupported);
    assert!(refused.to_string().contains("MDEV-27013"), "{refused}");
    // The session goes on.
    let calls = PreparedCalls::prepare(&mut connection, INSERT, Default::default())
        .await
        .unwrap();
    assert_eq!(calls.parameters(), 2);
}

#[tokio::test]
async fn each_mode_commits_where_autocommit_was_off_and_puts_it_back() {
    let db = TestMariaDb::new();
    db.execute(PEOPLE);
    for bulk in [true, false] {
        db.execute("delete from people");
        let (mut connection, _meter) = connect(&db).await;
        connection.simple_query("SET autocommit = 0").await.unwrap();
        let calls = PreparedCalls::prepare(&mut connection, INSERT, Default::default())
            .await
            .unwrap();
        let calls = if bulk { calls } else { calls.without_bulk() };
        let mut source = Sets {
            sets: Box::new(
                people(1..=3)
                    .zip(1..)
                    .map(|(values, line)| ParamSet { line, values }),
            ),
            read: Arc::new(AtomicU64::new(0)),
        };
        let mut report = |_: u64, _: CallOutcome<'_>| -> Result<(), Error> { Ok(()) };
        let summary = calls
            .run(&mut source, Transaction::Each, 1 << 20, &mut report)
            .await
            .unwrap();
        assert_eq!(summary.succeeded, 3);
        // Seen from another session: committed.
        assert_eq!(
            db.query_text("select count(*) from people"),
            "3",
            "bulk: {bulk}"
        );
        let autocommit = connection
            .simple_query("select @@autocommit")
            .await
            .unwrap();
        assert_eq!(autocommit.rows, [[Some(b"0".to_vec())]], "bulk: {bulk}");
        connection.simple_query("rollback").await.unwrap();
        connection.close().await;
    }
}

#[tokio::test]
async fn answers_far_larger_than_their_round_are_read_without_stalling() {
    // 300 calls in one round of a few KB, answered by 90 MB of rows: the
    // server blocks on its answers long before the client reads them, and
    // the round must still be written whole (it fits in the socket buffers).
    let db = TestMariaDb::new();
    let sets = (0..300).map(|_| Ok(vec![Some("300000".to_owned())]));
    let ran = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        run(&db, "select repeat('x', ?) as filler", sets, EACH_PIPELINED),
    )
    .await
    .expect("no stall");
    assert_eq!(ran.summary.succeeded, 300);
    for (_, outcome) in &ran.outcomes {
        let Seen::Done { rows, .. } = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(rows[0][0].as_ref().map(String::len), Some(300_000));
    }
    // Prepare and one round.
    assert_eq!(ran.round_trips, 2);
}
