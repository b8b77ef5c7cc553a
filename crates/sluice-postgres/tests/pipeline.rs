//! Pipelined calls against a real PostgreSQL: round trips, order, transactions.

use sluice_core::database::BoxFuture;
use sluice_core::{Error, Meter, MeterSnapshot};
use sluice_postgres::{
    CallOutcome, Config, Connection, ParamSet, ParamSource, Pipeline, Transaction,
};
use sluice_testkit::TestDb;

struct Sets(std::vec::IntoIter<ParamSet>);

impl ParamSource for Sets {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        Box::pin(std::future::ready(Ok(self.0.next())))
    }
}

fn sets(values: Vec<Result<Vec<Option<String>>, String>>) -> Sets {
    Sets(
        values
            .into_iter()
            .enumerate()
            .map(|(index, values)| ParamSet {
                line: index as u64 + 1,
                values,
            })
            .collect::<Vec<_>>()
            .into_iter(),
    )
}

/// What was reported for each line, in report order.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Done(Vec<String>, Option<u64>),
    Failed(String),
    Invalid,
    RolledBack,
}

async fn run(
    db: &TestDb,
    sql: &str,
    mut source: Sets,
    mode: Transaction,
    window: usize,
) -> (
    Vec<(u64, Seen)>,
    sluice_postgres::PipelineSummary,
    MeterSnapshot,
) {
    let config: Config = db.url().parse().unwrap();
    let meter = Meter::new();
    let mut connection = Connection::connect(&config, &meter).await.unwrap();
    let before = meter.snapshot();
    let pipeline = Pipeline::prepare(&mut connection, sql).await.unwrap();
    let mut seen = Vec::new();
    let mut report = |line: u64, outcome: CallOutcome<'_>| -> Result<(), Error> {
        seen.push((
            line,
            match outcome {
                CallOutcome::Done { rows, affected } => Seen::Done(
                    rows.rows()
                        .map(|row| {
                            String::from_utf8_lossy(row.get(0).unwrap_or(b"NULL")).into_owned()
                        })
                        .collect(),
                    affected,
                ),
                CallOutcome::Failed(db) => Seen::Failed(db.code.clone()),
                CallOutcome::Invalid(_) => Seen::Invalid,
                CallOutcome::RolledBack => Seen::RolledBack,
            },
        ));
        Ok(())
    };
    let summary = pipeline
        .run(&mut source, mode, window, &mut report)
        .await
        .unwrap();
    let trips = meter.snapshot() - before;
    // The session is idle and usable afterwards.
    assert_eq!(
        connection.simple_query("select 1").await.unwrap(),
        [[Some("1".to_string())]]
    );
    assert_eq!(summary.succeeded + summary.failed, summary.calls);
    (seen, summary, trips)
}

fn numbers(count: usize) -> Sets {
    sets((1..=count).map(|n| Ok(vec![Some(n.to_string())])).collect())
}

#[tokio::test]
async fn ten_thousand_calls_cost_a_handful_of_round_trips_and_a_loop_costs_one_each() {
    let db = TestDb::new();
    let (seen, summary, trips) = run(
        &db,
        "select $1::int * 2",
        numbers(10_000),
        Transaction::Single,
        1 << 20,
    )
    .await;
    assert_eq!(summary.succeeded, 10_000);
    assert!(trips.round_trips <= 20, "{trips:?}");
    assert_eq!(seen.len(), 10_000);
    for (index, (line, outcome)) in seen.iter().enumerate() {
        assert_eq!(*line, index as u64 + 1, "results in input order");
        assert_eq!(
            *outcome,
            Seen::Done(vec![(2 * (index + 1)).to_string()], Some(1))
        );
    }
    // A window of one byte leaves one call in flight at a time: a plain loop.
    let (_, _, trips) = run(
        &db,
        "select $1::int * 2",
        numbers(2_000),
        Transaction::Each,
        1,
    )
    .await;
    assert!(trips.round_trips >= 2_000, "{trips:?}");
}

#[tokio::test]
async fn single_mode_commits_nothing_when_one_call_fails() {
    let db = TestDb::new();
    db.execute(
        "create table accounts (id int primary key, balance int check (balance >= 0));
                insert into accounts select g, 100 from generate_series(1, 100) g;",
    );
    let mut values: Vec<Result<Vec<Option<String>>, String>> = (1..=100)
        .map(|id| Ok(vec![Some(id.to_string()), Some("10".into())]))
        .collect();
    values[41] = Ok(vec![Some("42".into()), Some("1000".into())]);
    let (seen, summary, _) = run(
        &db,
        "update accounts set balance = balance - $2 where id = $1",
        sets(values),
        Transaction::Single,
        1 << 20,
    )
    .await;
    assert_eq!(summary.succeeded, 0);
    assert_eq!(summary.failed, summary.calls);
    let failed: Vec<u64> = seen
        .iter()
        .filter(|(_, outcome)| matches!(outcome, Seen::Failed(_)))
        .map(|(line, _)| *line)
        .collect();
    assert_eq!(failed, [42]);
    assert_eq!(
        seen.iter().find(|(line, _)| *line == 42).unwrap().1,
        Seen::Failed("23514".into())
    );
    assert_eq!(db.query_text("select sum(balance) from accounts"), "10000");
}

#[tokio::test]
async fn each_mode_commits_the_others_and_reports_every_line_in_order() {
    let db = TestDb::new();
    db.execute(
        "create table accounts (id int primary key, balance int check (balance >= 0));
                insert into accounts select g, 100 from generate_series(1, 10) g;",
    );
    let values = vec![
        Ok(vec![Some("1".into()), Some("10".into())]),
        Ok(vec![Some("2".into()), Some("1000".into())]),
        Err("invalid JSON".into()),
        Ok(vec![Some("3".into())]),
        Ok(vec![Some("4".into()), Some("not a number".into())]),
        Ok(vec![Some("5".into()), Some("50".into())]),
    ];
    let (seen, summary, _) = run(
        &db,
        "update accounts set balance = balance - $2 where id = $1",
        sets(values),
        Transaction::Each,
        1 << 20,
    )
    .await;
    assert_eq!(
        seen,
        [
            (1, Seen::Done(vec![], Some(1))),
            (2, Seen::Failed("23514".into())),
            (3, Seen::Invalid),
            (4, Seen::Invalid),
            (5, Seen::Failed("22P02".into())),
            (6, Seen::Done(vec![], Some(1))),
        ]
    );
    assert_eq!(
        (summary.calls, summary.succeeded, summary.failed),
        (6, 2, 4)
    );
    assert_eq!(
        db.query_text(
            "select string_agg(balance::text, ',' order by id) from accounts where id <= 5"
        ),
        "90,100,100,100,50"
    );
}

#[tokio::test]
async fn an_invalid_line_in_single_mode_rolls_everything_back() {
    let db = TestDb::new();
    db.execute("create table log (n int)");
    let values = vec![
        Ok(vec![Some("1".into())]),
        Ok(vec![Some("2".into())]),
        Err("bad".into()),
    ];
    let (seen, summary, _) = run(
        &db,
        "insert into log values ($1)",
        sets(values),
        Transaction::Single,
        1 << 20,
    )
    .await;
    assert_eq!(summary.succeeded, 0);
    assert_eq!(seen.last().unwrap(), &(3, Seen::Invalid));
    assert_eq!(db.query_text("select count(*) from log"), "0");
}

/// Hands over the next set only once the previous result came back: a client
/// that waits for each answer, as an interactive one does.
struct Interactive {
    sent: u64,
    total: u64,
    answered: std::sync::Arc<std::sync::atomic::AtomicU64>,
    notify: std::sync::Arc<tokio::sync::Notify>,
}

impl ParamSource for Interactive {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        Box::pin(self.next_set())
    }
}

impl Interactive {
    async fn next_set(&mut self) -> Result<Option<ParamSet>, Error> {
        if self.sent == self.total {
            return Ok(None);
        }
        while self.answered.load(std::sync::atomic::Ordering::SeqCst) < self.sent {
            self.notify.notified().await;
        }
        self.sent += 1;
        Ok(Some(ParamSet {
            line: self.sent,
            values: Ok(vec![Some(self.sent.to_string())]),
        }))
    }
}

#[tokio::test]
async fn a_client_waiting_for_each_answer_does_not_stall_the_pipeline() {
    for mode in [Transaction::Each, Transaction::Single] {
        interactive(mode).await;
    }
}

async fn interactive(mode: Transaction) {
    let db = TestDb::new();
    let config: Config = db.url().parse().unwrap();
    let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let pipeline = Pipeline::prepare(&mut connection, "select $1::int")
        .await
        .unwrap();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let notify = std::sync::Arc::new(tokio::sync::Notify::new());
    let mut source = Interactive {
        sent: 0,
        total: 50,
        answered: answered.clone(),
        notify: notify.clone(),
    };
    let mut report = |_line: u64, _outcome: CallOutcome<'_>| -> Result<(), Error> {
        answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        notify.notify_one();
        Ok(())
    };
    let summary = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        pipeline.run(&mut source, mode, 1 << 20, &mut report),
    )
    .await
    .expect("the pipeline must not wait for a full window")
    .unwrap();
    assert_eq!(summary.succeeded, 50);
}

/// An invalid line, then input that takes its time: nothing is in flight, so
/// the pipeline must go back to waiting for input, not for the server.
struct SlowAfterInvalid {
    step: u32,
}

impl ParamSource for SlowAfterInvalid {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        Box::pin(async move {
            self.step += 1;
            match self.step {
                1 => Ok(Some(ParamSet {
                    line: 1,
                    values: Err("not a parameter set".into()),
                })),
                2 => {
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                    Ok(Some(ParamSet {
                        line: 2,
                        values: Ok(vec![Some("7".into())]),
                    }))
                }
                _ => Ok(None),
            }
        })
    }
}

#[tokio::test]
async fn an_invalid_line_before_slow_input_does_not_wait_for_the_server() {
    let db = TestDb::new();
    let config: Config = db.url().parse().unwrap();
    let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let pipeline = Pipeline::prepare(&mut connection, "select $1::int")
        .await
        .unwrap();
    let mut lines = Vec::new();
    let mut report = |line: u64, _outcome: CallOutcome<'_>| -> Result<(), Error> {
        lines.push(line);
        Ok(())
    };
    let summary = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        pipeline.run(
            &mut SlowAfterInvalid { step: 0 },
            Transaction::Each,
            1 << 20,
            &mut report,
        ),
    )
    .await
    .expect("the pipeline waited for an answer to nothing")
    .unwrap();
    assert_eq!((summary.succeeded, summary.failed), (1, 1));
    assert_eq!(lines, [1, 2]);
}
