//! `POST /queries/{name}/batch` against a client that sends a large body but does
//! not read the response: the README says "a client that stops reading stops the
//! pipeline". The calls insert rows, so the calls PostgreSQL executed are counted
//! in the table; while the client is stalled that count must stop, below a bound
//! made of the documented window (256 KiB of calls in flight) and channel (four
//! chunks of result lines) plus what the sockets hold; once the client reads,
//! every call runs and every result line arrives, in order.

mod support;

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sluice_testkit::TestDb;
use support::server::{quoted, write_config, Server};

const TOKEN: &str = "writer-token-0123456789abcdef";

/// Calls in the body: far more than can be in flight or buffered.
const CALLS: u64 = 3_000;
/// Characters of each call's `pad` parameter: a call costs more than this much
/// of the window.
const PAD_BYTES: u64 = 4_096;
/// Characters each call returns: its result line is longer than this.
const RESULT_BYTES: u64 = 16_384;

/// The README's window of calls in flight (`WINDOW_BYTES` in `sluice-server`'s `batch.rs`).
const WINDOW_BYTES: u64 = 256 * 1024;
/// The README's channel of chunks between the pipeline and the response
/// (`CHANNEL_CHUNKS` in `sluice-server`'s `batch.rs`).
const CHANNEL_CHUNKS: u64 = 4;
/// hyper takes another chunk of the body while it holds less than this
/// (its default `max_buf_size`, which sluice keeps).
const HYPER_BUFFER_BYTES: u64 = 8192 + 4096 * 100;

/// The most calls that can have run while the client reads nothing, given the
/// bytes the two sockets hold (`kernel_bytes`).
///
/// The pipeline sends another call while fewer than [`WINDOW_BYTES`] are
/// unanswered, so at most `window_calls` are in flight. It hands the result
/// lines gathered so far to the channel each time it reads the next parameter
/// set, and it reads one only after sending the previous one, so a chunk holds
/// the answers to at most the calls in flight plus one. Once the client stalls,
/// the result lines of every call that ran are in the kernel's socket buffers,
/// in hyper's write buffer (less than [`HYPER_BUFFER_BYTES`] plus the chunk that
/// crossed it), in the channel, in the chunk waiting to enter it, or gathered
/// for the next chunk (the calls that were in flight).
fn stalled_calls_at_most(kernel_bytes: u64) -> u64 {
    let window_calls = WINDOW_BYTES / PAD_BYTES + 1;
    let chunk_lines = window_calls + 1;
    let in_sluice = (CHANNEL_CHUNKS + 3) * chunk_lines + HYPER_BUFFER_BYTES / RESULT_BYTES + 1;
    let in_kernel = kernel_bytes / RESULT_BYTES + 1;
    in_sluice + in_kernel
}

/// `[n, "xxx…"]`: the n-th call's parameter set.
fn call_line(n: u64) -> String {
    format!("[{n}, \"{}\"]\n", "x".repeat(PAD_BYTES as usize))
}

/// The result line the n-th call must produce.
fn result_line(n: u64) -> String {
    format!(
        "{{\"line\":{n},\"rows\":[{{\"n\":{n},\"echo\":\"{}\"}}]}}",
        "r".repeat(RESULT_BYTES as usize)
    )
}

/// Bytes queued on the loopback connection from `server` to the client's port
/// `client`: unread by the client plus unacknowledged from the server (from
/// `/proc/net/tcp`, whose ports are hexadecimal).
fn kernel_queued_bytes(server: SocketAddr, client: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port =
        |address: &str| u16::from_str_radix(address.rsplit(':').next().unwrap(), 16).unwrap();
    let mut total = 0;
    for row in table.lines().skip(1) {
        let fields: Vec<&str> = row.split_whitespace().collect();
        let (local, remote) = (port(fields[1]), port(fields[2]));
        let (transmit, receive) = fields[4].split_once(':').unwrap();
        let hex = |text: &str| u64::from_str_radix(text, 16).unwrap();
        if local == client && remote == server.port() {
            total += hex(receive);
        } else if local == server.port() && remote == client {
            total += hex(transmit);
        }
    }
    total
}

/// Rows the calls inserted, and the states of the server's sessions.
fn progress(db: &TestDb, application: &str) -> (u64, String) {
    let text = db.query_text(&format!(
        "select (select count(*) from calls), \
         (select coalesce(string_agg(distinct state, ','), '') from pg_stat_activity \
          where application_name = '{application}')"
    ));
    let (count, states) = text.split_once('|').unwrap();
    (count.parse().unwrap(), states.to_owned())
}

/// Polls until the calls stop: the same count and the same queued bytes for a
/// whole second with the server's sessions idle. Returns both.
fn wait_until_stalled(
    db: &TestDb,
    application: &str,
    server: SocketAddr,
    client: u16,
) -> (u64, u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = None;
    let mut since = Instant::now();
    loop {
        let (count, state) = progress(db, application);
        let queued = kernel_queued_bytes(server, client);
        let now = (count, queued);
        if state != "idle" || last != Some(now) {
            last = Some(now);
            since = Instant::now();
        } else if since.elapsed() >= Duration::from_secs(1) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the calls never stopped: {count} of {CALLS} ran, session {state:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads a chunked HTTP/1.1 response's head (asserting 200) and hands each
/// complete body line to `line`; returns the number of lines.
fn read_response(socket: TcpStream, mut line: impl FnMut(u64, &[u8])) -> u64 {
    let mut reader = BufReader::with_capacity(1 << 16, socket);
    let mut head = String::new();
    reader.read_line(&mut head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut chunked = false;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        if header.trim_end().is_empty() {
            break;
        }
        chunked |= header
            .to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked");
    }
    assert!(chunked, "the results are streamed");
    let (mut pending, mut lines) = (Vec::new(), 0);
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).unwrap();
        let size = usize::from_str_radix(size.trim_end().split(';').next().unwrap(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size:?}"));
        let start = pending.len();
        pending.resize(start + size + 2, 0);
        reader.read_exact(&mut pending[start..]).unwrap();
        assert_eq!(pending.split_off(start + size), b"\r\n");
        if size == 0 {
            assert!(pending.is_empty(), "an unfinished last line");
            return lines;
        }
        while let Some(end) = pending.iter().position(|&byte| byte == b'\n') {
            lines += 1;
            line(lines, &pending[..end]);
            pending.drain(..=end);
        }
    }
}

#[test]
fn a_client_that_stops_reading_stops_the_batch_pipeline() {
    let db = TestDb::new();
    db.execute("create table calls (n int primary key, pad text not null)");
    let application = format!("sluice_batch_{}", std::process::id());
    let separator = if db.url().contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}application_name={application}", db.url());
    let directory = tempfile::tempdir().unwrap();
    let path = write_config(
        &directory,
        &format!(
            "[databases.main]\nurl = {}\npool_size = 1\n\
             [queries.record]\n\
             sql = \"insert into calls (n, pad) values ($1, $2) returning n, repeat('r', {RESULT_BYTES}) as echo\"\n\
             params = [{{ name = \"n\", type = \"int\", required = true }}, {{ name = \"pad\", type = \"text\", required = true }}]\n\
             [[tokens]]\nname = \"writer\"\ntoken = {}\nqueries = [\"*\"]\nscopes = [\"write\"]\n",
            quoted(&url),
            quoted(TOKEN)
        ),
    );
    let server = Server::start(&["--config", &path]);
    let socket = TcpStream::connect(server.address).unwrap();
    let client_port = socket.local_addr().unwrap().port();
    let body_bytes: u64 = (1..=CALLS).map(|n| call_line(n).len() as u64).sum();
    let mut upload = BufWriter::new(socket.try_clone().unwrap());
    write!(
        upload,
        "POST /queries/record/batch?transaction=each HTTP/1.1\r\nHost: localhost\r\n\
         Authorization: Bearer {TOKEN}\r\nContent-Type: application/x-ndjson\r\n\
         Content-Length: {body_bytes}\r\n\r\n"
    )
    .unwrap();
    // The body goes on its own thread: the server stops reading it once stalled.
    let uploader = std::thread::spawn(move || {
        for n in 1..=CALLS {
            upload.write_all(call_line(n).as_bytes()).unwrap();
        }
        upload.flush().unwrap();
    });

    let (ran, kernel_bytes) = wait_until_stalled(&db, &application, server.address, client_port);
    let bound = stalled_calls_at_most(kernel_bytes);
    eprintln!(
        "stalled after {ran} of {CALLS} calls (bound {bound}; {kernel_bytes} bytes in the sockets)"
    );
    assert!(ran > 0, "no call ran");
    assert!(
        ran <= bound,
        "{ran} calls ran while the client read nothing; at most {bound} may"
    );

    // The client reads: everything runs, and every result arrives in order.
    let lines = read_response(socket, |number, line| {
        assert_eq!(
            line,
            result_line(number).as_bytes(),
            "line {number}: {}",
            String::from_utf8_lossy(&line[..line.len().min(80)])
        );
    });
    uploader.join().unwrap();
    assert_eq!(lines, CALLS);
    assert_eq!(
        db.query_text("select count(*), sum(n), min(length(pad)) from calls"),
        format!("{CALLS}|{}|{PAD_BYTES}", CALLS * (CALLS + 1) / 2)
    );
}
