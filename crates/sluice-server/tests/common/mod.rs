//! Helpers shared by the HTTP tests: configuration for a test database, the app
//! over `oneshot`, a real listener, and a TCP proxy that can play a database
//! that is down, comes back, or dies mid-stream.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response};
use sluice_server::{app, AppState, Config};
use sluice_testkit::TestDb;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tower::ServiceExt;

/// A unique application_name, so pg_stat_activity can be filtered to one test.
pub fn application_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "sluice_test_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// `url` with an application_name added.
pub fn with_application_name(url: &str, name: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={name}")
}

/// A TOML string literal.
pub fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// Configuration text: one PostgreSQL database at `url` plus `rest`.
pub fn postgres_config(url: &str, pool: &str, rest: &str) -> Config {
    let text = format!("[databases.main]\nurl = {}\n{pool}\n{rest}", quoted(url));
    Config::parse(&text, "test.toml").unwrap_or_else(|error| panic!("{error}\n{text}"))
}

/// Sends one request through the router.
pub async fn oneshot(state: &AppState, request: Request<Body>) -> Response<Body> {
    app(state.clone()).oneshot(request).await.unwrap()
}

/// A GET request with optional headers.
pub fn get(uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::get(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::empty()).unwrap()
}

/// The whole body, or the error that ended it.
pub async fn body(response: Response<Body>) -> Result<Vec<u8>, String> {
    axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map(|bytes| bytes.to_vec())
        .map_err(|error| error.to_string())
}

/// A JSON body.
pub async fn json(response: Response<Body>) -> serde_json::Value {
    serde_json::from_slice(&body(response).await.unwrap()).unwrap()
}

/// The app on a real listener; the server stops when the returned sender fires
/// or is dropped.
pub async fn listen(
    state: AppState,
    grace: Duration,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        sluice_server::server::serve(
            state,
            listener,
            async move {
                let _ = stopped.await;
            },
            grace,
        )
        .await
        .unwrap();
    });
    (address, stop, task)
}

/// The PostgreSQL server behind a test database: host and port.
pub fn upstream(db: &TestDb) -> (String, u16) {
    let config: sluice_postgres::Config = db.url().parse().unwrap();
    match &config.targets[0] {
        sluice_postgres::config::Target::Tcp(host, port) => (host.clone(), *port),
        other => panic!("test databases are reached over TCP, not {other}"),
    }
}

/// `db.url()` pointing at `port` on 127.0.0.1 instead.
pub fn url_via(db: &TestDb, port: u16) -> String {
    let (host, upstream_port) = upstream(db);
    let original = db.url();
    let authority = format!("{host}:{upstream_port}");
    assert!(
        original.contains(&authority),
        "{original} should name {authority}"
    );
    original.replacen(&authority, &format!("127.0.0.1:{port}"), 1)
}

/// A free port on 127.0.0.1 (nothing listens on it once this returns).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A TCP proxy to the test database; dropping it (or [`Proxy::kill`]) closes every
/// proxied connection at once, as a database crash would.
pub struct Proxy {
    tasks: JoinSet<()>,
}

impl Proxy {
    /// Starts forwarding `127.0.0.1:port` to the database of `db`.
    pub async fn start(db: &TestDb, port: u16) -> Proxy {
        let (host, upstream_port) = upstream(db);
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    break;
                };
                let host = host.clone();
                connections.spawn(async move {
                    if let Ok(mut server) =
                        tokio::net::TcpStream::connect((host.as_str(), upstream_port)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Proxy { tasks }
    }

    /// Closes the listener and every connection.
    pub fn kill(mut self) {
        self.tasks.abort_all();
    }
}

/// Backends of `application` that are running a statement.
pub fn active_backends(db: &TestDb, application: &str) -> u64 {
    db.query_text(&format!(
        "select count(*) from pg_stat_activity where application_name = '{application}' and state <> 'idle'"
    ))
    .parse()
    .unwrap()
}

/// Backends of `application` in any state.
pub fn backends(db: &TestDb, application: &str) -> u64 {
    db.query_text(&format!(
        "select count(*) from pg_stat_activity where application_name = '{application}'"
    ))
    .parse()
    .unwrap()
}
