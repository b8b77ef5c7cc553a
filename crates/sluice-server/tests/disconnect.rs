//! Clients that read slowly or leave, through a real listener and real sockets.

mod common;

use std::time::{Duration, Instant};

use common::*;
use sluice_gateway::AppState;
use sluice_testkit::TestDb;
use tokio::io::AsyncReadExt;

const QUERIES: &str = r#"
[queries.big]
sql = "select g as id, repeat('x', 200) as pad from (select generate_series(1, 20000000) as g) s"

[queries.stall]
sql = "select g as id, case when g = 20000 then pg_sleep(120) end as nap from generate_series(1, 30000) g"

[queries.count]
sql = "select count(*) as n from generate_series(1, $1::int)"
params = [{ name = "n", type = "int", required = true }]
"#;

/// A test database, the app's sessions on it, and the app.
async fn setup(pool: &str) -> (TestDb, Sessions, AppState) {
    let db = TestDb::new();
    let application = application_name();
    let config = postgres_config(
        &with_application_name(db.url(), &application),
        pool,
        QUERIES,
    );
    let sessions = Sessions::watch(&db, &application).await;
    (db, sessions, AppState::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_holds_the_database_back_instead_of_filling_memory() {
    let (_db, sessions, state) = setup("pool_size = 2").await;
    let (address, stop, _task) = listen(state, Duration::from_secs(5)).await;
    let mut socket = start_reading(address, "/queries/big", "", 1).await.0;
    // The client stops reading: socket buffers fill, then the server stops
    // encoding, then PostgreSQL blocks writing to sluice.
    let sessions = &sessions;
    wait_until(
        PATIENCE,
        "the backend to be held back, waiting to write to sluice (ClientWrite)",
        move || async move { sessions.wait_event().await == "ClientWrite" },
    )
    .await;
    // It stays held back, and the server's memory does not grow with the result.
    // Nothing is awaited here: the half second is the window in which a server
    // that buffered the result would grow (it reads far faster than that).
    let rss_before = sluice_core::peak_rss_bytes().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_after = sluice_core::peak_rss_bytes().unwrap();
    assert!(
        rss_after < rss_before + 16 * 1024 * 1024,
        "{rss_before} -> {rss_after}"
    );
    assert_eq!(
        sessions.wait_event().await,
        "ClientWrite",
        "still held back"
    );
    let mut buffer = vec![0u8; 64 * 1024];
    let read = socket.read(&mut buffer).await.unwrap();
    assert!(read > 0);
    drop(socket);
    let took = wait_until_idle(sessions).await;
    assert!(
        took < Duration::from_secs(2),
        "cancelled only {took:?} after the client left"
    );
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_while_the_database_works_cancels_it_within_a_second() {
    let (_db, sessions, state) = setup("pool_size = 2").await;
    let (address, stop, _task) = listen(state.clone(), Duration::from_secs(5)).await;
    // 20,000 rows arrive, then the backend sleeps for two minutes: the client
    // leaves while nothing is being written to it.
    let socket = start_reading(address, "/queries/stall", "", 1).await.0;
    let sessions = &sessions;
    wait_until(
        PATIENCE,
        "the query to reach its two-minute pg_sleep",
        move || async move { sessions.wait_event().await == "PgSleep" },
    )
    .await;
    assert_eq!(sessions.active().await, 1, "the query is running");
    drop(socket);
    let took = wait_until_idle(sessions).await;
    eprintln!("cancelled {took:?} after the client left");
    assert!(
        took < Duration::from_secs(1),
        "cancelled only {took:?} after the client left"
    );
    let response = reqwest::get(format!("http://{address}/queries/count?n=10"))
        .await
        .unwrap();
    assert_eq!(response.text().await.unwrap(), "{\"n\":10}\n");
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_aborted_requests_leave_nothing_running_and_the_pool_serving() {
    const ABORTS: usize = 1000;
    let (_db, sessions, state) = setup("pool_size = 4\npool_wait = \"5s\"").await;
    let (address, stop, _task) = listen(state.clone(), Duration::from_secs(5)).await;
    let started = Instant::now();
    // Four clients at a time, each leaving after its first chunk.
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..4 {
        clients.spawn(async move {
            for _ in (client..ABORTS).step_by(4) {
                let socket = start_reading(address, "/queries/big", "", 1).await.0;
                drop(socket);
            }
        });
    }
    while let Some(result) = clients.join_next().await {
        result.unwrap();
    }
    let aborting = started.elapsed();
    let sessions = &sessions;
    let settled = wait_until_idle(sessions).await;
    eprintln!("{ABORTS} aborted requests in {aborting:?}; nothing running {settled:?} later");
    assert!(
        settled < Duration::from_secs(1),
        "queries still ran {settled:?} after the last client left"
    );
    // Abandoned sessions were discarded, not leaked: at most the pool remains
    // once their backends have exited.
    wait_until(
        PATIENCE,
        "at most the pool's 4 sessions to remain",
        move || async move { sessions.all().await <= 4 },
    )
    .await;
    for _ in 0..8 {
        let response = reqwest::get(format!("http://{address}/queries/count?n=100000"))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), "{\"n\":100000}\n");
    }
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_shutdown_deadline_running_streams_are_aborted_and_cancelled() {
    let (_db, sessions, state) = setup("pool_size = 2").await;
    let (address, stop, task) = listen(state, Duration::from_millis(300)).await;
    let response = reqwest::get(format!("http://{address}/queries/stall"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    assert!(futures_util::StreamExt::next(&mut stream)
        .await
        .unwrap()
        .is_ok());
    let _ = stop.send(());
    let started = Instant::now();
    let outcome = loop {
        match futures_util::StreamExt::next(&mut stream).await {
            Some(Ok(_)) => continue,
            Some(Err(error)) => break Err(error),
            None => break Ok(()),
        }
    };
    assert!(
        outcome.is_err(),
        "a stream cut by shutdown must not end cleanly"
    );
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    let took = wait_until_idle(&sessions).await;
    assert!(
        took < Duration::from_secs(1),
        "cancelled only {took:?} after the shutdown deadline"
    );
}
