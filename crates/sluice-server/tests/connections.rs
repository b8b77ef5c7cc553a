//! Connections as the server handles them, over real sockets: a body cut by an
//! error resets the connection (HTTP/1.0 and 1.1, raw and with curl), and the
//! header-read and keep-alive timeouts close connections that send nothing useful.

mod common;

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use sluice_gateway::AppState;
use sluice_testkit::TestDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const QUERIES: &str = r#"
[queries.divide]
sql = "select g as id, 1 / (g - $1::int) as inverse from generate_series(1, 1000000) g"
params = [{ name = "zero_at", type = "int", required = true }]
"#;

/// A server with `[server]` settings `server`; the database stays alive with it.
async fn start(server: &str) -> (TestDb, SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let db = TestDb::new();
    let config = postgres_config(
        db.url(),
        "pool_size = 4",
        &format!("{QUERIES}\n[server]\n{server}\n"),
    );
    let (address, stop, _task) = listen(AppState::new(config), Duration::from_secs(5)).await;
    (db, address, stop)
}

/// How a connection ended, seen from the client.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    /// Read returned 0: the server closed cleanly (FIN).
    Closed,
    /// The server reset the connection (RST).
    Reset,
}

/// Reads until the server ends the connection (at most `limit`): what arrived
/// and how it ended.
async fn read_to_end(socket: &mut TcpStream, limit: Duration) -> (Vec<u8>, Ending) {
    let mut received = Vec::new();
    let mut buffer = vec![0u8; 256 * 1024];
    let started = Instant::now();
    loop {
        let left = limit
            .checked_sub(started.elapsed())
            .unwrap_or_else(|| panic!("the server kept the connection open for {limit:?}"));
        let read = tokio::time::timeout(left, socket.read(&mut buffer))
            .await
            .unwrap_or_else(|_| panic!("the server kept the connection open for {limit:?}"));
        match read {
            Ok(0) => return (received, Ending::Closed),
            Ok(read) => received.extend_from_slice(&buffer[..read]),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => {
                return (received, Ending::Reset)
            }
            Err(error) => panic!("reading failed: {error}"),
        }
    }
}

/// One response on a kept-alive connection: its head and its body (the
/// response must have a `Content-Length`).
async fn read_response(socket: &mut TcpStream) -> (String, Vec<u8>) {
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        if let Some(end) = received.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8(received[..end].to_vec()).unwrap();
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().unwrap())
                })
                .expect("a Content-Length");
            if received.len() >= end + 4 + length {
                return (head, received[end + 4..end + 4 + length].to_vec());
            }
        }
        let read = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buffer))
            .await
            .expect("a response within 10 s")
            .unwrap();
        assert!(read > 0, "closed mid-response");
        received.extend_from_slice(&buffer[..read]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_mid_stream_resets_the_connection_for_http_1_0_and_1_1() {
    let (_db, address, stop) = start("").await;
    for version in ["HTTP/1.0", "HTTP/1.1"] {
        let mut socket = TcpStream::connect(address).await.unwrap();
        socket
            .write_all(
                format!("GET /queries/divide?zero_at=500000 {version}\r\nHost: localhost\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
        let (received, ending) = read_to_end(&mut socket, Duration::from_secs(60)).await;
        assert!(
            received.starts_with(b"HTTP/1.") && received[..12].ends_with(b" 200"),
            "{version}: {}",
            String::from_utf8_lossy(&received[..received.len().min(200)])
        );
        // Without chunked encoding (HTTP/1.0) a clean close would look like the
        // end of the body: the connection must be reset instead.
        assert_eq!(
            ending,
            Ending::Reset,
            "{version}: the connection was closed cleanly after {} bytes",
            received.len()
        );
    }
    // A result that completes still ends cleanly.
    let mut socket = TcpStream::connect(address).await.unwrap();
    socket
        .write_all(b"GET /queries/divide?zero_at=-1 HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    let (received, ending) = read_to_end(&mut socket, Duration::from_secs(60)).await;
    assert_eq!(ending, Ending::Closed);
    let body_start = received
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap()
        + 4;
    let rows = received[body_start..]
        .iter()
        .filter(|&&byte| byte == b'\n')
        .count();
    assert_eq!(rows, 1_000_000);
    let _ = stop.send(());
}

/// Runs curl with `arguments`: its exit code and its stdout.
async fn curl(arguments: Vec<String>) -> (i32, String) {
    tokio::task::spawn_blocking(move || {
        let output = std::process::Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code} %{size_download}",
            ])
            .args(&arguments)
            .output()
            .expect("curl is installed");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_sees_a_failure_mid_stream_as_an_error_over_http_1_0_and_1_1() {
    let (_db, address, stop) = start("").await;
    let failing = format!("http://{address}/queries/divide?zero_at=500000");
    for version in ["--http1.0", "--http1.1"] {
        let (code, written) = curl(vec![version.into(), failing.clone()]).await;
        // 56: "connection reset by peer" (18 would be a partial transfer).
        assert!(
            code == 56 || code == 18,
            "{version}: curl exited {code} after {written}"
        );
        assert!(written.starts_with("200 "), "{version}: {written}");
    }
    // The same request without the failure succeeds, so the check above can fail.
    let (code, written) = curl(vec![
        "--http1.0".into(),
        format!("http://{address}/queries/divide?zero_at=-1"),
    ])
    .await;
    assert_eq!(code, 0, "{written}");
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_request_heads_are_closed_after_the_header_read_timeout() {
    const CONNECTIONS: usize = 200;
    let (_db, address, stop) =
        start("header_read_timeout = \"1s\"\nkeep_alive_timeout = \"60s\"").await;
    let mut sockets = Vec::new();
    for index in 0..CONNECTIONS {
        let mut socket = TcpStream::connect(address).await.unwrap();
        // Some send nothing at all, the others stop inside the head.
        if index % 4 != 0 {
            socket
                .write_all(b"GET /openapi.json HTTP/1.1\r\nHost: te")
                .await
                .unwrap();
        }
        sockets.push(socket);
    }
    // The server closes every one of them; none stays open waiting.
    let mut reader = tokio::task::JoinSet::new();
    for mut socket in sockets {
        reader.spawn(async move { read_to_end(&mut socket, Duration::from_secs(30)).await });
    }
    while let Some(result) = reader.join_next().await {
        let (received, _) = result.unwrap();
        assert!(
            received.is_empty(),
            "{}",
            String::from_utf8_lossy(&received)
        );
    }
    let metrics = reqwest::get(format!("http://{address}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let closed: f64 = metrics
        .lines()
        .find_map(|line| {
            line.strip_prefix("sluice_http_connection_timeouts_total{timeout=\"header_read\"} ")
        })
        .expect("the timeouts are counted")
        .parse()
        .unwrap();
    assert!(closed >= CONNECTIONS as f64, "{closed}");
    // A client that sends its head in pieces, each within the limit, is served.
    // The pauses are the slow client being played, not a wait for the server: the
    // whole head takes 0.3 s of the 1 s allowed.
    let mut socket = TcpStream::connect(address).await.unwrap();
    for piece in [
        "GET /openapi.json HT",
        "TP/1.1\r\nHost: localhost\r\n",
        "\r\n",
    ] {
        socket.write_all(piece.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (head, _) = read_response(&mut socket).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_kept_alive_connection_is_closed_after_the_keep_alive_timeout() {
    let (_db, address, stop) =
        start("header_read_timeout = \"500ms\"\nkeep_alive_timeout = \"3s\"").await;
    let mut socket = TcpStream::connect(address).await.unwrap();
    let request = b"GET /openapi.json HTTP/1.1\r\nHost: localhost\r\n\r\n";
    socket.write_all(request).await.unwrap();
    let (head, _) = read_response(&mut socket).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Idle for longer than the header-read timeout, shorter than keep-alive:
    // the connection is still there for the next request. The idle time is what
    // is tested, with at least a second of margin on either side.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    socket.write_all(request).await.unwrap();
    let (head, _) = read_response(&mut socket).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Then, idle for good, it is closed.
    let started = Instant::now();
    let (received, ending) = read_to_end(&mut socket, Duration::from_secs(30)).await;
    assert!(received.is_empty());
    assert_eq!(ending, Ending::Closed);
    eprintln!("closed {:?} after the last response", started.elapsed());
    let _ = stop.send(());
}

#[test]
fn the_timeouts_are_checked_when_the_configuration_is_read() {
    let text = |server: &str| {
        format!("[server]\n{server}\n[databases.main]\nurl = \"postgres://u@localhost/db\"\n")
    };
    let config = sluice_gateway::Config::parse(&text(""), "t.toml").unwrap();
    assert_eq!(config.header_read_timeout, Duration::from_secs(10));
    assert_eq!(config.keep_alive_timeout, Duration::from_secs(60));
    let config = sluice_gateway::Config::parse(
        &text("header_read_timeout = \"2s\"\nkeep_alive_timeout = \"5m\""),
        "t.toml",
    )
    .unwrap();
    assert_eq!(config.header_read_timeout, Duration::from_secs(2));
    assert_eq!(config.keep_alive_timeout, Duration::from_secs(300));
    for bad in [
        "header_read_timeout = \"soon\"",
        "keep_alive_timeout = \"0s\"",
    ] {
        let error = sluice_gateway::Config::parse(&text(bad), "t.toml").unwrap_err();
        let key = bad.split(' ').next().unwrap();
        assert_eq!(error.key, format!("server.{key}"), "{error}");
        assert_eq!(error.line, 2, "{error}");
    }
}
