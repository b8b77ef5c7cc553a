//! `sluice export` from MariaDB through the binary: formats and `--stats`,
//! cursors, `| head` and Ctrl-C stopping the statement on the server, and the
//! exit codes of bad URLs, unreachable servers and refused logins.

mod support;

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use sluice_testkit::{eventually, TestMariaDb};
use support::{assert_exit, export, sluice};

/// Statements of other sessions whose text contains `marker`.
fn running(db: &TestMariaDb, marker: &str) -> usize {
    db.query_text(&format!(
        "select count(*) from information_schema.processlist \
         where info like '%{marker}%' and id <> connection_id()"
    ))
    .parse()
    .unwrap()
}

fn unique_marker() -> String {
    format!("marker_{}_{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(Instant::now().elapsed().as_nanos() as u64);
    hasher.finish() % 1_000_000
}

#[test]
fn rows_stream_in_every_format_with_their_round_trips() {
    let db = TestMariaDb::new();
    db.execute(
        "create table t (id int primary key, name varchar(20), paid timestamp(3) null, amount decimal(8,2));
         insert into t values (1, 'a,b', '2024-06-01 10:00:00.5', 12.50), (2, null, null, null);",
    );
    let output = export(db.url(), "select * from t order by id", &["--stats"]);
    let stderr = assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "{\"id\":1,\"name\":\"a,b\",\"paid\":\"2024-06-01T10:00:00.5+00:00\",\"amount\":12.50}\n\
         {\"id\":2,\"name\":null,\"paid\":null,\"amount\":null}\n"
    );
    assert!(stderr.contains("round trips for the query: 1"), "{stderr}");
    assert!(stderr.contains("round trips connecting: 2"), "{stderr}");

    let output = export(
        db.url(),
        "select * from t order by id",
        &["--format", "csv"],
    );
    assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "id,name,paid,amount\n1,\"a,b\",2024-06-01 10:00:00.5+00,12.50\n2,,,\n"
    );

    let output = export(
        db.url(),
        "select seq from seq_1_to_25000",
        &["--fetch-size", "10000", "--stats"],
    );
    let stderr = assert_exit(&output, 0);
    assert_eq!(
        output.stdout.iter().filter(|&&byte| byte == b'\n').count(),
        25000
    );
    assert!(stderr.contains("round trips for the query: 4"), "{stderr}");
}

#[test]
fn head_closing_the_pipe_stops_the_statement_on_the_server() {
    let db = TestMariaDb::new();
    let marker = unique_marker();
    // Rows, then a statement asleep for a minute: it sends nothing more, so
    // only sluice's KILL QUERY ends it within seconds.
    let sql = format!(
        "select seq, repeat('x', 100) as pad, if(seq = 5000, sleep(60), 0) as nap \
         from seq_1_to_10000 /* {marker} */"
    );
    let mut child = sluice()
        .args(["export", "--db", db.url(), "--query", &sql])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "sluice did not exit after its reader left"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(status.code().is_some(), "{status}");
    assert!(
        eventually(Duration::from_secs(10), || running(&db, &marker) == 0),
        "the statement is still running on the server"
    );
}

#[test]
fn ctrl_c_kills_the_statement_and_exits_130() {
    let db = TestMariaDb::new();
    let marker = unique_marker();
    let sql = format!("select sleep(60) as nap /* {marker} */");
    let mut child = sluice()
        .args(["export", "--db", db.url(), "--query", &sql])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(20), || running(&db, &marker) == 1),
        "the statement never showed up in the process list"
    );
    // SAFETY: kill(2) on our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no exit after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("cancelled"), "{stderr}");
    assert!(
        eventually(Duration::from_secs(10), || running(&db, &marker) == 0),
        "the statement is still running on the server"
    );
}

#[test]
fn bad_urls_unreachable_servers_and_refused_logins_have_their_exit_codes() {
    let db = TestMariaDb::new();
    let output = export("mariadb://u@h:99999/db", "select 1", &[]);
    let stderr = assert_exit(&output, 2);
    assert!(stderr.contains("port \"99999\""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let output = export(&format!("mariadb://u@127.0.0.1:{port}/db"), "select 1", &[]);
    let stderr = assert_exit(&output, 3);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");

    let user = format!("nobody_{}", rand_suffix());
    db.execute(&format!(
        "create user '{user}'@'%' identified by 'right'; create user '{user}'@'localhost' identified by 'right';"
    ));
    let address = db
        .url()
        .split('@')
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let output = export(
        &format!("mariadb://{user}:wrong@{address}/"),
        "select 1",
        &[],
    );
    let stderr = assert_exit(&output, 3);
    assert!(stderr.contains("Access denied"), "{stderr}");
    let output = export(
        &format!("mariadb://{user}:right@{address}/"),
        "select 1 as one",
        &[],
    );
    assert_exit(&output, 0);
    assert_eq!(output.stdout, b"{\"one\":1}\n");
    db.execute(&format!(
        "drop user '{user}'@'%'; drop user '{user}'@'localhost';"
    ));

    // A query error: the server's SQLSTATE and number, exit 1.
    let output = export(db.url(), "select * from no_such_table", &[]);
    let stderr = assert_exit(&output, 1);
    assert!(
        stderr.contains("42S02") && stderr.contains("1146"),
        "{stderr}"
    );
}

/// A relay to MariaDB that turns the client's first `COM_STMT_PREPARE` of a
/// statement holding `marker` into a `COM_QUERY` of `replacement`: the real
/// server then answers what the client takes for a prepare with whatever
/// `replacement` makes it send. The connection must be plain (no TLS) for its
/// packets to be read.
fn rewriting_relay(upstream: String, marker: &'static str, replacement: String) -> String {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let Ok(mut server) = TcpStream::connect(&upstream) else {
                return;
            };
            let (mut server_reader, mut client_writer) =
                (server.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut server_reader, &mut client_writer);
                let _ = client_writer.shutdown(std::net::Shutdown::Both);
            });
            let replacement = replacement.clone();
            std::thread::spawn(move || loop {
                let mut header = [0u8; 4];
                if client.read_exact(&mut header).is_err() {
                    let _ = server.shutdown(std::net::Shutdown::Both);
                    return;
                }
                let length = usize::from(header[0])
                    | usize::from(header[1]) << 8
                    | usize::from(header[2]) << 16;
                let mut payload = vec![0; length];
                if client.read_exact(&mut payload).is_err() {
                    return;
                }
                let marked = payload
                    .windows(marker.len())
                    .any(|w| w == marker.as_bytes());
                if payload.first() == Some(&0x16) && marked {
                    payload = [&[0x03], replacement.as_bytes()].concat();
                    let length = payload.len() as u32;
                    header[..3].copy_from_slice(&length.to_le_bytes()[..3]);
                }
                if server.write_all(&header).is_err() || server.write_all(&payload).is_err() {
                    return;
                }
            });
        }
    });
    address
}

#[test]
fn a_server_asking_for_a_local_file_in_answer_to_a_query_gets_none_and_exit_3() {
    let db = TestMariaDb::new();
    db.execute("create table probe (line text)");
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "not for the server\n").unwrap();
    let file = secret.path().display().to_string();
    let (before, upstream, after) = support::split_url(db.url());
    let separator = if after.contains('?') { '&' } else { '?' };
    let relay = rewriting_relay(
        upstream.to_owned(),
        "sluice_probe",
        format!("LOAD DATA LOCAL INFILE '{file}' INTO TABLE probe"),
    );
    let url = format!("{before}{relay}{after}{separator}ssl-mode=disabled");
    let output = export(&url, "select 1 as sluice_probe", &[]);
    let stderr = assert_exit(&output, 3);
    assert!(
        stderr.contains(&format!("the server asked for the local file {file:?}"))
            && stderr.contains("refused"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
    assert_eq!(db.query_text("select count(*) from probe"), "0");
}
