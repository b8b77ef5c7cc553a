//! `sluice export` from MariaDB through the binary: formats and `--stats`,
//! cursors, `| head` and Ctrl-C stopping the statement on the server, and the
//! exit codes of bad URLs, unreachable servers and refused logins.

mod support;

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use sluice_testkit::TestMariaDb;
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

fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
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
