//! 32 slow clients reading a large named query at the same time: the README's
//! "memory is bounded by configuration, not by the result or the client".
//!
//! Each client reads the start of its body, then pauses until the server is held
//! back on every connection at once (the kernel holds at least
//! [`HELD_BACK_BYTES`] for each client and the server has stopped writing), then
//! reads the rest throttled. Each body is several times what the sockets between
//! server and client hold, so the server must wait for its clients rather than
//! finish: had it read on from PostgreSQL and kept the rows, its memory would
//! hold what the sockets cannot, 32 times. Its peak RSS may grow above what it
//! was idle by no more than [`GROWTH_LIMIT_PER_CLIENT`] a client, and every
//! body must be byte for byte PostgreSQL's own
//! `COPY … CSV HEADER` of the query.

mod support;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_testkit::TestDb;
use support::server::{quoted, write_config, Server};

const CLIENTS: usize = 32;
/// About 70 bytes of CSV a row: some 10 MB a body, several times the 3 to 4 MiB
/// the kernel buffers between the server and one loopback client.
const ROWS: u64 = 140_000;
/// Each client reads this much at a time, then pauses for [`READ_PAUSE`].
const READ_BYTES: usize = 64 * 1024;
const READ_PAUSE: Duration = Duration::from_millis(10);
/// Bytes queued in the kernel for a client that is not reading and show that it
/// holds the server back (the server's send buffer alone is larger).
const HELD_BACK_BYTES: u64 = 1 << 20;
/// What the server's peak resident memory may grow by, a client, above its
/// idle peak: a fifth of a body, so a server that held bodies (or a few
/// megabytes of one) fails, whatever the size of its own code. Measured on
/// 2026-11-26: about 1.4 MiB a client (a read buffer, a batch, an output piece
/// and HTTP buffers), on an idle peak of 18 MiB.
const GROWTH_LIMIT_PER_CLIENT: u64 = 2 << 20;

fn query_sql() -> String {
    format!(
        "select g as id, md5(g::text) as hash, g * 1.5 as amount, 'row ' || g as label, \
         g % 7 = 0 as flag, date '2024-01-01' + (g % 365) as day \
         from generate_series(1, {ROWS}) g"
    )
}

/// Bytes queued in the kernel from the server on `port` to each client (by the
/// client's port): unread by the client plus not yet acknowledged. From
/// `/proc/net/tcp`, whose ports are hexadecimal.
fn queued_per_client(port: u16) -> HashMap<u16, u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port_of =
        |address: &str| u16::from_str_radix(address.rsplit(':').next().unwrap(), 16).unwrap();
    let hex = |text: &str| u64::from_str_radix(text, 16).unwrap();
    let mut queued = HashMap::new();
    for row in table.lines().skip(1) {
        let fields: Vec<&str> = row.split_whitespace().collect();
        let (local, remote) = (port_of(fields[1]), port_of(fields[2]));
        let (transmit, receive) = fields[4].split_once(':').unwrap();
        // Established connections only (state 01), not the listening socket.
        if fields[3] != "01" {
            continue;
        }
        if local == port {
            *queued.entry(remote).or_default() += hex(transmit);
        } else if remote == port {
            *queued.entry(local).or_default() += hex(receive);
        }
    }
    queued
}

/// Polls until every one of `clients` connections to `server` has at least
/// [`HELD_BACK_BYTES`] queued and nothing more has been queued for any of them
/// across three polls (the server waits for its clients); returns the smallest
/// and the largest queue.
fn wait_until_held_back(server: SocketAddr, clients: usize) -> (u64, u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut last, mut unchanged) = (HashMap::new(), 0);
    loop {
        let queued = queued_per_client(server.port());
        let held_back = queued.values().filter(|&&bytes| bytes >= HELD_BACK_BYTES);
        if held_back.count() == clients && queued == last {
            unchanged += 1;
            if unchanged == 3 {
                let smallest = queued.values().copied().min().unwrap();
                return (smallest, queued.values().copied().max().unwrap());
            }
        } else {
            unchanged = 0;
        }
        assert!(
            Instant::now() < deadline,
            "the server never waited for all {clients} clients: {queued:?}"
        );
        last = queued;
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reads a body: its start, then (once `resume` says so) the rest, `READ_BYTES`
/// at a time with a pause after each, comparing it with `expected` as it arrives
/// (the test must not hold 32 bodies). `started` is told once the stream began.
async fn read_slowly(
    url: String,
    expected: Arc<Vec<u8>>,
    started: tokio::sync::mpsc::Sender<()>,
    mut resume: tokio::sync::watch::Receiver<bool>,
) {
    let response = reqwest::get(url).await.unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut offset = 0;
    let mut read_since_pause = 0;
    while let Some(chunk) = futures_util::StreamExt::next(&mut stream).await {
        let chunk = chunk.expect("the stream completes");
        let end = offset + chunk.len();
        assert!(
            end <= expected.len() && chunk[..] == expected[offset..end],
            "the body differs from COPY's CSV within bytes {offset}..{end}"
        );
        if offset == 0 {
            started.send(()).await.unwrap();
            resume.wait_for(|resume| *resume).await.unwrap();
        }
        offset = end;
        read_since_pause += chunk.len();
        if read_since_pause >= READ_BYTES {
            read_since_pause = 0;
            tokio::time::sleep(READ_PAUSE).await;
        }
    }
    assert_eq!(offset, expected.len(), "the body ended early");
}

#[test]
fn thirty_two_slow_readers_get_complete_bodies_in_bounded_server_memory() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(
        &directory,
        &format!(
            "[databases.main]\nurl = {}\npool_size = {CLIENTS}\n[queries.rows]\nsql = {}\n",
            quoted(db.url()),
            quoted(&query_sql())
        ),
    );
    // The oracle: PostgreSQL's own CSV of the same query.
    let expected = Arc::new(db.psql_bytes(&format!(
        "copy ({}) to stdout with (format csv, header)",
        query_sql()
    )));
    let server = Server::start(&["--config", &path]);
    let address = server.address;
    let idle = server.peak_rss();
    let begun = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (started, mut streaming) = tokio::sync::mpsc::channel(CLIENTS);
    let (resume, resumed) = tokio::sync::watch::channel(false);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            runtime.spawn(read_slowly(
                format!("http://{address}/queries/rows?format=csv"),
                expected.clone(),
                started.clone(),
                resumed.clone(),
            ))
        })
        .collect();
    for _ in 0..CLIENTS {
        runtime.block_on(streaming.recv()).unwrap();
    }
    let (smallest, largest) = wait_until_held_back(address, CLIENTS);
    let held_back = begun.elapsed();
    let peak_held_back = server.peak_rss();
    resume.send(true).unwrap();
    for client in clients {
        runtime.block_on(client).unwrap();
    }
    let peak = server.peak_rss();
    let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
    eprintln!(
        "{CLIENTS} clients x {} bytes: all held back after {held_back:.1?} with {smallest} to \
         {largest} bytes queued each; done in {:.1?}; server peak RSS {:.1} MiB idle, \
         {:.1} MiB once all were held back, {:.1} MiB in all",
        expected.len(),
        begun.elapsed(),
        mib(idle),
        mib(peak_held_back),
        mib(peak)
    );
    let limit = idle + GROWTH_LIMIT_PER_CLIENT * CLIENTS as u64;
    assert!(
        peak < limit,
        "server peak RSS {peak} bytes, limit {limit} (idle {idle} + {GROWTH_LIMIT_PER_CLIENT} a client)"
    );
}
