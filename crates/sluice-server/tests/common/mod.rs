//! Helpers shared by the HTTP tests: configuration for a test database, the app
//! over `oneshot`, a real listener, a TCP proxy that can play a database that is
//! down, comes back, or dies mid-stream, and [`wait_until`], the one way these
//! tests wait for something to happen.

#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, Response};
use sluice_gateway::{AppState, Config};
use sluice_server::app;
use sluice_testkit::TestDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How long a test waits for a condition before it fails: generous, so that a
/// loaded machine makes a passing test slower, never a failing one. Promises
/// about time are asserted on their own, with the time [`wait_until`] returns.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How often a condition is checked again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Checks `probe` until it yields a value and returns that value; panics naming
/// `what` (the condition awaited) once `deadline` has passed without one.
pub async fn wait_for<T, Probe>(
    deadline: Duration,
    what: &str,
    mut probe: impl FnMut() -> Probe,
) -> T
where
    Probe: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            started.elapsed() < deadline,
            "waited {deadline:?} for {what}"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Checks `condition` until it holds and returns how long that took; panics
/// naming `what` once `deadline` has passed without it.
pub async fn wait_until<Check>(
    deadline: Duration,
    what: &str,
    mut condition: impl FnMut() -> Check,
) -> Duration
where
    Check: Future<Output = bool>,
{
    let started = Instant::now();
    wait_for(deadline, what, || {
        let check = condition();
        async move { check.await.then_some(()) }
    })
    .await;
    started.elapsed()
}

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

/// The `/metrics` text.
pub async fn metrics(state: &AppState) -> String {
    String::from_utf8(
        body(oneshot(state, get("/metrics", &[])).await)
            .await
            .unwrap(),
    )
    .unwrap()
}

/// Waits until `/metrics` has a line starting with `prefix`, and returns it.
/// Requests are counted when they end, so this also waits for a request to end.
pub async fn metric_line(state: &AppState, prefix: &str) -> String {
    wait_for(
        PATIENCE,
        &format!("a metrics line starting with {prefix}"),
        move || async move {
            metrics(state)
                .await
                .lines()
                .find(|line| line.starts_with(prefix))
                .map(str::to_owned)
        },
    )
    .await
}

/// Waits until a request of `route` for `name` has ended, and returns its
/// `sluice_http_requests_total` line (with its status and outcome).
pub async fn ended_request(state: &AppState, route: &str, name: &str) -> String {
    metric_line(
        state,
        &format!("sluice_http_requests_total{{route=\"{route}\",query=\"{name}\""),
    )
    .await
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
    listen_with_tls(state, None, grace).await
}

/// [`listen`], serving HTTPS with `tls`.
pub async fn listen_with_tls(
    state: AppState,
    tls: Option<sluice_gateway::ServerTls>,
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
        sluice_server::serve(
            state,
            listener,
            tls,
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

/// A TCP proxy to the test database; [`Proxy::kill`] (or, without waiting,
/// dropping it) closes every proxied connection at once, as a database crash would.
pub struct Proxy {
    stop: CancellationToken,
    tasks: JoinSet<()>,
}

impl Proxy {
    /// Starts forwarding `127.0.0.1:port` to the database of `db`.
    pub async fn start(db: &TestDb, port: u16) -> Proxy {
        let (host, upstream_port) = upstream(db);
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        tasks.spawn(forward(listener, (host, upstream_port), stop.clone()));
        Proxy { stop, tasks }
    }

    /// Closes the listener and every connection, and returns once they are closed.
    pub async fn kill(mut self) {
        self.stop.cancel();
        while let Some(result) = self.tasks.join_next().await {
            result.unwrap();
        }
    }
}

/// Forwards each connection accepted on `listener` to `upstream` until `stop`;
/// ends once the listener and every connection are closed.
async fn forward(listener: TcpListener, upstream: (String, u16), stop: CancellationToken) {
    let mut connections = JoinSet::new();
    loop {
        let mut client = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => client,
                Err(_) => break,
            },
        };
        let upstream = upstream.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                tokio::select! {
                    () = stop.cancelled() => {}
                    _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                }
            }
        });
    }
    drop(listener);
    // A failed accept ends the proxy as a kill does.
    stop.cancel();
    while connections.join_next().await.is_some() {}
}

/// The sessions one application (one test's app, by its application_name) has
/// on the test database, watched from a session of the test's own. Each look is
/// one query on that session, not a psql start-up (which takes hundreds of
/// milliseconds on a loaded machine), so what a wait measures is the server.
pub struct Sessions {
    application: String,
    watcher: tokio::sync::Mutex<sluice_postgres::Connection>,
}

impl Sessions {
    /// Connects the watching session.
    pub async fn watch(db: &TestDb, application: &str) -> Sessions {
        let config: sluice_postgres::Config = db.url().parse().unwrap();
        let connection = sluice_postgres::Connection::connect(&config, &sluice_core::Meter::new())
            .await
            .unwrap();
        Sessions {
            application: application.to_owned(),
            watcher: tokio::sync::Mutex::new(connection),
        }
    }

    /// The value of the first column of the one row `sql` returns (NULL as "").
    pub async fn value(&self, sql: &str) -> String {
        let rows = self
            .watcher
            .lock()
            .await
            .simple_query(sql)
            .await
            .unwrap_or_else(|error| panic!("{error}\n{sql}"));
        assert_eq!(rows.len(), 1, "{sql}");
        rows[0][0].clone().unwrap_or_default()
    }

    /// How many of the sessions match `condition` (SQL on `pg_stat_activity`).
    pub async fn count(&self, condition: &str) -> u64 {
        self.value(&format!(
            "select count(*) from pg_stat_activity \
             where application_name = '{}' and ({condition})",
            self.application
        ))
        .await
        .parse()
        .unwrap()
    }

    /// Sessions in any state.
    pub async fn all(&self) -> u64 {
        self.count("true").await
    }

    /// Sessions running a statement.
    pub async fn active(&self) -> u64 {
        self.count("state <> 'idle'").await
    }

    /// Sessions whose open transaction has written something (it holds a
    /// transaction id).
    pub async fn writing(&self) -> u64 {
        self.count("backend_xid is not null").await
    }

    /// What the running statements wait for (empty while one is working).
    pub async fn wait_event(&self) -> String {
        self.value(&format!(
            "select coalesce(string_agg(coalesce(wait_event, ''), ','), '') \
             from pg_stat_activity where application_name = '{}' and state = 'active'",
            self.application
        ))
        .await
    }

    /// Rows of the COPY statements the sessions have under way.
    pub async fn copying(&self) -> u64 {
        self.value(&format!(
            "select coalesce(sum(copy.tuples_processed), 0) from pg_stat_progress_copy copy \
             join pg_stat_activity activity on activity.pid = copy.pid \
             where activity.application_name = '{}'",
            self.application
        ))
        .await
        .parse()
        .unwrap()
    }
}

/// Sends `GET path` with the extra header lines `headers` (each ending in
/// CRLF), reads until the response is a 200 with at least `want` body bytes,
/// and returns the open socket with what it read.
pub async fn start_reading(
    address: SocketAddr,
    path: &str,
    headers: &str,
    want: usize,
) -> (TcpStream, Vec<u8>) {
    let mut socket = TcpStream::connect(address).await.unwrap();
    socket
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n").as_bytes())
        .await
        .unwrap();
    let mut received = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = socket.read(&mut buffer).await.unwrap();
        assert!(
            read > 0,
            "the server closed: {}",
            String::from_utf8_lossy(&received)
        );
        received.extend_from_slice(&buffer[..read]);
        if let Some(end) = received.windows(4).position(|window| window == b"\r\n\r\n") {
            assert!(
                received.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&received[..end])
            );
            if received.len() - end - 4 >= want {
                return (socket, received);
            }
        }
    }
}

/// Waits until none of `sessions` is running a statement; the time it took.
pub async fn wait_until_idle(sessions: &Sessions) -> Duration {
    wait_until(
        PATIENCE,
        "no statement of the app to be running",
        move || async move { sessions.active().await == 0 },
    )
    .await
}
