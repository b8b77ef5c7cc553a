//! The proxy between sluice and a real PostgreSQL: counts agree with sluice's own
//! meter, delays are what was asked, patterns are named, broken connections end.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use sluice_core::{pump, Meter, Progress};
use sluice_postgres::config::Target;
use sluice_postgres::{Config, Connection, QueryOptions, QueryStream};
use sluice_proxy::{Finding, Proxy, ProxyHandle, Shaping};
use sluice_testkit::TestDb;

/// A proxy in front of the test server, and a config that goes through it.
fn through_proxy(db: &TestDb, shaping: Shaping) -> (ProxyHandle, Config) {
    let mut config: Config = db.url().parse().unwrap();
    let Target::Tcp(host, port) = config.targets[0].clone() else {
        panic!("the test server is reached over TCP");
    };
    let proxy = Proxy::new("127.0.0.1:0", &format!("{host}:{port}"), shaping)
        .start()
        .unwrap();
    config.targets = vec![Target::Tcp("127.0.0.1".into(), proxy.address().port())];
    (proxy, config)
}

async fn export(config: &Config, sql: &str, fetch_size: Option<u32>) -> u64 {
    let meter = Meter::new();
    let connection = Connection::connect(config, &meter).await.unwrap();
    let mut stream = QueryStream::start(
        connection,
        sql,
        QueryOptions {
            params: Vec::new(),
            fetch_size,
            lob_inline: false,
        },
    )
    .await
    .unwrap();
    let mut encoder = sluice_formats::Format::Ndjson.encoder(Default::default());
    let mut sink = tokio::io::sink();
    pump(&mut stream, &mut encoder, &mut sink, &Progress::new())
        .await
        .unwrap();
    stream.into_connection().unwrap().close().await;
    meter.snapshot().round_trips
}

/// Waits until the proxy has seen `connections` connections end (their threads
/// observe the close a moment after the client).
fn settle() {
    std::thread::sleep(Duration::from_millis(100));
}

#[tokio::test]
async fn the_proxy_counts_the_round_trips_sluice_counts() {
    let db = TestDb::new();
    let (proxy, config) = through_proxy(&db, Shaping::default());
    for fetch_size in [None, Some(100)] {
        proxy.reset();
        let ours = export(
            &config,
            "select g, 'x' from generate_series(1, 5000) g",
            fetch_size,
        )
        .await;
        settle();
        let report = proxy.report();
        assert_eq!(report.connections.len(), 1);
        assert_eq!(report.round_trips(), ours, "fetch size {fetch_size:?}");
        let rows: u64 = report.statements().iter().map(|s| s.rows).sum();
        assert_eq!(rows, 5000);
    }
}

#[tokio::test]
async fn injected_delay_is_what_was_asked() {
    let db = TestDb::new();
    async fn median_query_time(config: &Config) -> Duration {
        let mut connection = Connection::connect(config, &Meter::new()).await.unwrap();
        let mut times = Vec::new();
        for _ in 0..40 {
            let start = Instant::now();
            connection.simple_query("select 1").await.unwrap();
            times.push(start.elapsed());
        }
        times.sort();
        times[times.len() / 2]
    }
    let (_plain, plain_config) = through_proxy(&db, Shaping::default());
    let base = median_query_time(&plain_config).await;
    for rtt in [Duration::from_millis(1), Duration::from_millis(4)] {
        let (_proxy, config) = through_proxy(
            &db,
            Shaping {
                rtt,
                ..Shaping::default()
            },
        );
        let added = median_query_time(&config).await.saturating_sub(base);
        let error = (added.as_secs_f64() - rtt.as_secs_f64()).abs() / rtt.as_secs_f64();
        assert!(
            error <= 0.2,
            "asked {rtt:?}, measured {added:?} added (base {base:?})"
        );
    }
}

#[tokio::test]
async fn a_row_by_row_loop_is_named_and_copy_is_not() {
    let db = TestDb::new();
    db.execute("create table t (n int)");
    let (proxy, config) = through_proxy(&db, Shaping::default());
    let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    for n in 0..150 {
        connection
            .query_rows("insert into t values ($1::int)", &[Some(&n.to_string())])
            .await
            .unwrap();
    }
    connection.close().await;
    settle();
    let findings = proxy
        .report()
        .findings()
        .into_iter()
        .map(|(_, f)| f.clone())
        .collect::<Vec<_>>();
    assert!(
        matches!(
            &findings[..],
            [Finding::RowByRow {
                executions: 150,
                ..
            }]
        ),
        "{findings:?}"
    );

    proxy.reset();
    let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let mut copy = connection
        .copy_in("copy t (n) from stdin", &[sluice_core::Kind::Integer])
        .await
        .unwrap();
    let mut batch = sluice_core::Batch::new(1);
    for n in 0..10_000 {
        batch.push_value(n.to_string().as_bytes());
    }
    copy.write_rows(&batch, 0..10_000).await.unwrap();
    copy.finish().await.unwrap();
    connection.close().await;
    settle();
    assert!(
        proxy.report().findings().is_empty(),
        "{:?}",
        proxy.report().findings()
    );

    proxy.reset();
    export(
        &config,
        "select g from generate_series(1, 3000) g",
        Some(10),
    )
    .await;
    settle();
    let findings = proxy
        .report()
        .findings()
        .into_iter()
        .map(|(_, f)| f.clone())
        .collect::<Vec<_>>();
    assert!(
        matches!(
            &findings[..],
            [Finding::SmallFetches { fetch_size: 10, .. }]
        ),
        "{findings:?}"
    );
}

#[tokio::test]
async fn broken_connections_end_cleanly_on_both_sides() {
    let db = TestDb::new();
    let (proxy, config) = through_proxy(&db, Shaping::default());
    // A client that sends half a startup message and hangs up.
    let mut client = TcpStream::connect(proxy.address()).unwrap();
    client.write_all(&[0, 0, 0, 40, 0, 3]).unwrap();
    drop(client);
    // A server that goes away mid-result: the client sees an error, not a hang.
    let connection = Connection::connect(&config, &Meter::new()).await.unwrap();
    let pid = connection.process_id();
    let mut stream = QueryStream::start(
        connection,
        "select g, repeat('x', 100) from generate_series(1, 50000000) g",
        QueryOptions::default(),
    )
    .await
    .unwrap();
    use sluice_core::BatchSource;
    assert!(stream.next_batch().await.unwrap().is_some());
    db.execute(&format!("select pg_terminate_backend({pid})"));
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match stream.next_batch().await {
                Ok(Some(_)) => continue,
                Ok(None) => return false,
                Err(_) => return true,
            }
        }
    })
    .await
    .expect("the client must not hang");
    assert!(ended, "a terminated query must end in an error");
    // Parallel connections keep their own bytes.
    let (a, b) = tokio::join!(
        export(
            &config,
            "select 'a' || g from generate_series(1, 20000) g",
            None
        ),
        export(
            &config,
            "select 'b' || g from generate_series(1, 20000) g",
            None
        ),
    );
    assert_eq!(a, b);
    // A raw client reading the server's answer to garbage gets an orderly close.
    let mut raw = TcpStream::connect(proxy.address()).unwrap();
    raw.write_all(&[0, 0, 0, 8, 0, 0, 0, 0]).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = Vec::new();
    let _ = raw.read_to_end(&mut answer);
    assert!(!answer.is_empty(), "the server's refusal comes through");
}
