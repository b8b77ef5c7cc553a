//! What an open connection costs the proxy in threads, counted from
//! `/proc/self/task` (the proxy runs in this process), and that a refused client
//! costs none.
//!
//! The proxy names its threads `sluice-proxy-…` (and threads inherit the name of
//! the thread starting them unless given one), so they are counted by name: the
//! threads of the test harness, the test kit and the client do not blur the
//! figure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use sluice_core::Meter;
use sluice_postgres::config::Target;
use sluice_postgres::{Config, Connection};
use sluice_proxy::{Proxy, Shaping};
use sluice_testkit::TestDb;

/// Live threads of the proxy in this process. Names are cut to 15 bytes by the
/// kernel; a thread that was just joined may still be listed for a moment as a
/// zombie, so the state is checked too.
fn proxy_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task lists this process's threads")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("stat")).ok())
        .filter(|stat| {
            // "tid (name) S …": the state follows the name's closing parenthesis.
            let Some((head, rest)) = stat.rsplit_once(") ") else {
                return false;
            };
            let name = head.split_once(" (").map_or("", |(_, name)| name);
            let live = !matches!(rest.chars().next(), Some('Z' | 'X'));
            live && name.starts_with("sluice-proxy")
        })
        .count()
}

/// Polls until the count of the proxy's threads is `expected`, or the deadline
/// passes; returns the last count.
fn proxy_threads_settle_at(expected: usize) -> usize {
    let mut count = 0;
    sluice_testkit::eventually(Duration::from_secs(10), || {
        count = proxy_threads();
        count == expected
    });
    count
}

/// A client asking for SSL, told "no": the proxy now waits for its startup
/// message.
fn waiting_refused_client(proxy: std::net::SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(proxy).unwrap();
    stream.write_all(&[0, 0, 0, 8, 4, 210, 22, 47]).unwrap();
    let mut answer = [0u8; 1];
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"N");
    stream
}

/// Opens `clients` idle connections through a proxy with `shaping` and a limit
/// of as many, and three more it refuses; returns how many threads the proxy
/// runs for the connections.
async fn threads_for(db: &TestDb, shaping: Shaping, clients: usize) -> usize {
    let mut config: Config = db.url().parse().unwrap();
    let Target::Tcp(host, port) = config.targets[0].clone() else {
        panic!("the test server is reached over TCP");
    };
    let proxy = Proxy::new("127.0.0.1:0", &format!("{host}:{port}"), shaping)
        .max_connections(clients)
        .start()
        .unwrap();
    config.targets = vec![Target::Tcp("127.0.0.1".into(), proxy.address().port())];
    assert_eq!(proxy_threads_settle_at(1), 1, "the acceptor alone");
    let mut connections = Vec::new();
    for _ in 0..clients {
        let mut connection = Connection::connect(&config, &Meter::new()).await.unwrap();
        // Bytes went both ways through every one of the connection's threads.
        connection.simple_query("select 1").await.unwrap();
        connections.push(connection);
    }
    let started = proxy_threads() - 1;
    let refused: Vec<_> = (0..3)
        .map(|_| waiting_refused_client(proxy.address()))
        .collect();
    assert_eq!(
        proxy_threads(),
        started + 1,
        "refused clients cost no thread"
    );
    drop(refused);
    for connection in connections {
        connection.close().await;
    }
    assert_eq!(
        proxy_threads_settle_at(1),
        1,
        "the connections' threads end with them"
    );
    started
}

#[tokio::test]
async fn open_connections_cost_two_threads_or_four_with_shaping_refused_ones_none() {
    let db = TestDb::new();
    const CLIENTS: usize = 6;
    let plain = threads_for(&db, Shaping::default(), CLIENTS).await;
    let delayed = threads_for(
        &db,
        Shaping {
            rtt: Duration::from_millis(1),
            ..Shaping::default()
        },
        CLIENTS,
    )
    .await;
    eprintln!(
        "threads per connection: {} without shaping, {} with a delay",
        plain as f64 / CLIENTS as f64,
        delayed as f64 / CLIENTS as f64
    );
    // The figures README.md's `sluice proxy` section states.
    assert!(
        plain <= 2 * CLIENTS,
        "{plain} threads for {CLIENTS} connections without shaping"
    );
    assert!(
        delayed <= 4 * CLIENTS,
        "{delayed} threads for {CLIENTS} connections with a delay"
    );
}
