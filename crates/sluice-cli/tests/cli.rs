//! End-to-end tests of the `sluice` binary against a real PostgreSQL server.
//!
//! Every test runs the compiled binary as a child process and gets its own schema
//! from `sluice_testkit::TestDb`. Queries that the tests look for in
//! `pg_stat_activity` carry a unique marker comment, so tests running in parallel
//! (in this process or in others sharing the server) cannot see each other's work.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use sluice_testkit::{eventually, TestDb};

mod support;
use support::sluice;

/// Upper bound for commands that should finish quickly; only there so a hang fails
/// the test instead of blocking the run forever.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// A child process that is killed (and reaped) if the test ends before it does.
struct Guarded(Child);

impl Guarded {
    fn spawn(command: &mut Command) -> Guarded {
        Guarded(command.spawn().expect("could not start the child process"))
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Waits up to `timeout` for the child to exit.
    fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.0.try_wait().expect("try_wait failed") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Reads a pipe to its end on another thread.
fn read_all_in_background(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// Runs `command` to completion (at most [`COMMAND_TIMEOUT`]), capturing its output.
fn run(command: &mut Command) -> Output {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = Guarded::spawn(command);
    let stdout = read_all_in_background(child.0.stdout.take().expect("piped stdout"));
    let stderr = read_all_in_background(child.0.stderr.take().expect("piped stderr"));
    let status = child
        .wait_timeout(COMMAND_TIMEOUT)
        .unwrap_or_else(|| panic!("sluice did not finish within {COMMAND_TIMEOUT:?}"));
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// `sluice export --db <url> --query <sql> <extra…>`, run to completion.
fn export(url: &str, sql: &str, extra: &[&str]) -> Output {
    run(sluice()
        .args(["export", "--db", url, "--query", sql])
        .args(extra))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts the run succeeded and printed nothing on standard error.
fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "sluice failed with {}; stderr:\n{}",
        output.status,
        text(&output.stderr)
    );
    assert!(
        output.stderr.is_empty(),
        "unexpected stderr:\n{}",
        text(&output.stderr)
    );
}

/// Asserts the exit code and that stderr shows no panic, and returns stderr.
fn assert_exit_code(output: &Output, code: i32) -> String {
    let stderr = text(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(code),
        "wrong exit status {}; stderr:\n{stderr}",
        output.status
    );
    assert_no_panic(&stderr);
    stderr
}

fn assert_no_panic(stderr: &str) {
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "sluice panicked; stderr:\n{stderr}"
    );
}

/// A string no other test (or test process) uses, for tagging SQL text.
fn unique_marker() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    if let Ok(now) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    format!("marker-{}-{:016x}", std::process::id(), hasher.finish())
}

/// How many sessions of sluice (other than the asking one) show SQL containing `marker`
/// (with `only_active`, running it).
fn sluice_sessions_with(db: &TestDb, marker: &str, only_active: bool) -> u64 {
    // Running, not waiting for the client: after Parse/Describe a backend
    // shows `active` while it waits (`ClientRead`) for Bind/Execute. A Ctrl-C
    // sent then keeps the statement from running at all (the driver's
    // `CancelAsked`, tested on its own in sluice-postgres's hostile_server.rs);
    // these tests are of cancelling a statement that runs.
    let state = if only_active {
        " and state = 'active' and wait_event is distinct from 'ClientRead'"
    } else {
        ""
    };
    let count = db.query_text(&format!(
        "select count(*) from pg_stat_activity where application_name = 'sluice' \
         and query like '%{marker}%' and pid <> pg_backend_pid(){state}"
    ));
    count
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("unexpected count {count:?}"))
}

/// Parses `--stats` output: one `key: value` per line.
fn stats(stderr: &str) -> HashMap<String, String> {
    stderr
        .lines()
        .filter_map(|line| line.split_once(": "))
        .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
        .collect()
}

fn stat_number(stats: &HashMap<String, String>, key: &str) -> u64 {
    let value = stats
        .get(key)
        .unwrap_or_else(|| panic!("no {key:?} in the stats: {stats:?}"));
    value
        .parse()
        .unwrap_or_else(|_| panic!("{key:?} is not a number: {value:?}"))
}

/// Runs `sql` with `--stats --output <file>` and returns the parsed stats.
fn export_with_stats(
    db: &TestDb,
    sql: &str,
    output: &Path,
    extra: &[&str],
) -> HashMap<String, String> {
    let path = output.to_str().expect("UTF-8 temp path");
    let mut arguments = vec!["--stats", "--output", path];
    arguments.extend_from_slice(extra);
    let result = export(db.url(), sql, &arguments);
    let stderr = assert_exit_code(&result, 0);
    assert!(
        result.stdout.is_empty(),
        "stdout should be empty with --output"
    );
    stats(&stderr)
}

// ---------------------------------------------------------------------------
// Cancellation
// ---------------------------------------------------------------------------

#[test]
fn head_closes_the_pipe_and_the_query_is_cancelled() {
    let db = TestDb::new();
    let marker = unique_marker();
    // Half a megabyte of rows, then a backend asleep for a minute: it sends nothing
    // more, so it would not notice a closed connection by itself. Only sluice's
    // cancel request can end it within seconds.
    let sql = format!(
        "select g, repeat('x', 100), case when g = 5000 then pg_sleep(60) end as nap \
         from generate_series(1, 10000) g /* {marker} */"
    );
    let mut sluice = Guarded::spawn(
        sluice()
            .args(["export", "--db", db.url(), "--query", &sql])
            .args(["--format", "ndjson"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let sluice_stdout = sluice.0.stdout.take().expect("piped stdout");
    let sluice_stderr = read_all_in_background(sluice.0.stderr.take().expect("piped stderr"));
    // The Command (and with it this process's copy of the pipe's read end) is dropped
    // at the end of the statement: head is then the pipe's only reader.
    let mut head = Guarded::spawn(
        Command::new("head")
            .args(["-n", "3"])
            .stdin(Stdio::from(sluice_stdout))
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let head_stdout = read_all_in_background(head.0.stdout.take().expect("piped stdout"));

    let head_status = head
        .wait_timeout(Duration::from_secs(120))
        .expect("head did not get 3 lines within 120 s");
    assert!(head_status.success(), "head failed: {head_status}");
    let lines = text(&head_stdout.join().expect("head stdout reader"));
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 3, "head printed {lines:?}");
    for (index, line) in lines.iter().enumerate() {
        let row: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("line {line:?} is not JSON: {error}"));
        assert_eq!(row["g"], serde_json::json!(index + 1), "line {line:?}");
    }

    let status = sluice
        .wait_timeout(Duration::from_secs(10))
        .expect("sluice did not exit within 10 s of head closing the pipe");
    let stderr = text(&sluice_stderr.join().expect("stderr reader"));
    assert_no_panic(&stderr);
    assert_eq!(
        status.code(),
        Some(0),
        "sluice exited with {status}; stderr:\n{stderr}"
    );
    assert!(
        stderr.is_empty(),
        "sluice should leave quietly; stderr:\n{stderr}"
    );

    assert!(
        eventually(Duration::from_secs(5), || sluice_sessions_with(
            &db, &marker, false
        ) == 0),
        "the query is still in pg_stat_activity 5 s after sluice exited"
    );
}

#[test]
fn ctrl_c_cancels_the_query() {
    let db = TestDb::new();
    let marker = unique_marker();
    let sql = format!("select pg_sleep(30) /* {marker} */");
    let directory = tempfile::tempdir().expect("temp dir");
    let output_path = directory.path().join("out.ndjson");
    let mut sluice = Guarded::spawn(
        sluice()
            .args(["export", "--db", db.url(), "--query", &sql, "--output"])
            .arg(&output_path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let sluice_stderr = read_all_in_background(sluice.0.stderr.take().expect("piped stderr"));

    assert!(
        eventually(Duration::from_secs(20), || sluice_sessions_with(
            &db, &marker, true
        ) == 1),
        "the query never showed up as active in pg_stat_activity"
    );
    let pid = libc::pid_t::try_from(sluice.pid()).expect("pid fits pid_t");
    // SAFETY: plain kill(2) on our own, not yet reaped child.
    let sent = unsafe { libc::kill(pid, libc::SIGINT) };
    assert_eq!(sent, 0, "kill failed: {}", std::io::Error::last_os_error());

    let status = sluice
        .wait_timeout(Duration::from_secs(10))
        .expect("sluice did not exit within 10 s of SIGINT");
    let stderr = text(&sluice_stderr.join().expect("stderr reader"));
    assert_no_panic(&stderr);
    assert_eq!(
        status.code(),
        Some(130),
        "sluice exited with {status}; stderr:\n{stderr}"
    );
    // The incomplete output is removed before exiting, and the line says so.
    assert_eq!(
        stderr,
        format!(
            "sluice: interrupted; the query was cancelled; the output was incomplete and \
             has been removed ({} not written)\n",
            output_path.display()
        )
    );
    assert_eq!(directory_listing(directory.path()), Vec::<String>::new());

    assert!(
        eventually(Duration::from_secs(5), || sluice_sessions_with(
            &db, &marker, false
        ) == 0),
        "the query is still in pg_stat_activity 5 s after sluice exited"
    );
}

/// The names in `directory`, sorted (hidden ones too: temporary files are).
/// Ctrl-C during `--output-dir`: the staged directory of parts is removed
/// before sluice exits, and no directory appears under the name given.
#[test]
fn ctrl_c_leaves_no_directory_of_parts() {
    let db = TestDb::new();
    let marker = unique_marker();
    let sql = format!("select pg_sleep(30) /* {marker} */");
    let directory = tempfile::tempdir().expect("temp dir");
    let parts = directory.path().join("parts");
    let parts_arg = parts.to_str().expect("a UTF-8 path");
    let (code, stderr) = interrupted(
        &db,
        &marker,
        &[
            "export",
            "--db",
            db.url(),
            "--query",
            &sql,
            "--output-dir",
            parts_arg,
        ],
        Stdio::null(),
    );
    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "sluice: interrupted; the query was cancelled; the output was incomplete and \
             has been removed ({parts_arg} not written)\n"
        )
    );
    assert_eq!(directory_listing(directory.path()), Vec::<String>::new());
}

fn directory_listing(directory: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(directory)
        .expect("read the directory")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

// ---------------------------------------------------------------------------
// Output files: complete or absent
// ---------------------------------------------------------------------------

/// Exports rows 1 to 100,000 of `g` to `output`, the server pausing at row 50,000;
/// once rows have reached the temporary file and the server is in the pause, the
/// backend is terminated. Returns the exit status and stderr.
fn export_killed_mid_way(db: &TestDb, output: &Path, extra: &[&str]) -> (ExitStatus, String) {
    let marker = unique_marker();
    let sql = format!(
        "select g, case when g = 50000 then pg_sleep(60) end as pause \
         from generate_series(1, 100000) g /* {marker} */"
    );
    let mut sluice = Guarded::spawn(
        sluice()
            .args(["export", "--db", db.url(), "--query", &sql, "--output"])
            .arg(output)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let stderr = read_all_in_background(sluice.0.stderr.take().expect("piped stderr"));
    let directory = output.parent().expect("a directory");
    let temporary_has_rows = || {
        std::fs::read_dir(directory)
            .expect("read the directory")
            .any(|entry| {
                let entry = entry.expect("entry");
                entry.file_name().to_string_lossy().ends_with(".tmp")
                    && entry.metadata().is_ok_and(|metadata| metadata.len() > 0)
            })
    };
    let pausing = || {
        db.query_text(&format!(
            "select count(*) from pg_stat_activity where query like '%{marker}%' \
             and wait_event = 'PgSleep' and pid <> pg_backend_pid()"
        )) == "1"
    };
    assert!(
        eventually(Duration::from_secs(60), || pausing()
            && temporary_has_rows()),
        "the export never paused with rows written"
    );
    db.execute(&format!(
        "select pg_terminate_backend(pid) from pg_stat_activity \
         where query like '%{marker}%' and pid <> pg_backend_pid()"
    ));
    let status = sluice
        .wait_timeout(COMMAND_TIMEOUT)
        .expect("sluice did not exit after its backend was terminated");
    let stderr = text(&stderr.join().expect("stderr reader"));
    assert_no_panic(&stderr);
    (status, stderr)
}

#[test]
fn an_export_that_fails_mid_way_leaves_no_file_that_looks_complete() {
    let db = TestDb::new();
    for format in ["ndjson", "csv"] {
        let directory = tempfile::tempdir().expect("temp dir");
        let file = directory.path().join(format!("out.{format}"));
        std::fs::write(&file, "previous\n").unwrap();

        let (status, stderr) = export_killed_mid_way(&db, &file, &["--format", format]);
        assert_eq!(status.code(), Some(3), "{format}: {stderr}");
        assert!(
            stderr.starts_with("sluice: FATAL 57P01: terminating connection"),
            "{stderr}"
        );
        assert!(
            stderr.ends_with(&format!(
                "; the output was incomplete and has been removed ({} not written)\n",
                file.display()
            )),
            "{stderr}"
        );
        // The previous file is untouched and no temporary file is left behind.
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "previous\n");
        assert_eq!(
            directory_listing(directory.path()),
            [format!("out.{format}")]
        );

        let (status, stderr) =
            export_killed_mid_way(&db, &file, &["--format", format, "--keep-partial"]);
        assert_eq!(status.code(), Some(3), "{format}: {stderr}");
        let partial = directory.path().join(format!("out.{format}.partial"));
        assert!(
            stderr.ends_with(&format!(
                "; the output was incomplete and is kept as {} ({} not written)\n",
                partial.display(),
                file.display()
            )),
            "{stderr}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "previous\n");
        assert_eq!(
            directory_listing(directory.path()),
            [format!("out.{format}"), format!("out.{format}.partial")]
        );
        assert_whole_rows(format, &std::fs::read_to_string(&partial).unwrap());
    }
}

/// Asserts `text` is rows 1, 2, … of the export, each whole (after the CSV header).
fn assert_whole_rows(format: &str, text: &str) {
    assert!(
        text.ends_with('\n'),
        "the last row is cut: {:?}",
        &text[text.len().saturating_sub(80)..]
    );
    let mut lines = text.lines();
    if format == "csv" {
        assert_eq!(lines.next(), Some("g,pause"));
    }
    let mut count = 0;
    for (index, line) in lines.enumerate() {
        let expected = match format {
            "csv" => format!("{},", index + 1),
            _ => format!("{{\"g\":{},\"pause\":null}}", index + 1),
        };
        assert_eq!(line, expected);
        count += 1;
    }
    assert!((1..50_000).contains(&count), "{count} rows");
}

#[test]
fn a_successful_export_replaces_the_file_whole_with_a_new_file_s_permissions() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().expect("temp dir");
    let file = directory.path().join("out.ndjson");
    std::fs::write(&file, "previous\n").unwrap();
    // What a newly created file gets here: 0666 less the umask.
    let fresh = directory.path().join("fresh");
    std::fs::File::create(&fresh).unwrap();
    let mode = |path: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    };
    let output = export(
        db.url(),
        "select g from generate_series(1, 3) g",
        &["--output", file.to_str().unwrap()],
    );
    assert_success(&output);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "{\"g\":1}\n{\"g\":2}\n{\"g\":3}\n"
    );
    assert_eq!(mode(&file), mode(&fresh));
    assert_eq!(directory_listing(directory.path()), ["fresh", "out.ndjson"]);

    // Through a symbolic link, the file it points to is replaced; the link stays.
    let link = directory.path().join("link.ndjson");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let output = export(
        db.url(),
        "select 7 as g",
        &["--output", link.to_str().unwrap()],
    );
    assert_success(&output);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{\"g\":7}\n");

    // A device is written directly; it cannot be renamed over.
    let output = export(db.url(), "select 1 as g", &["--output", "/dev/null"]);
    assert_success(&output);

    // A missing directory is an I/O error naming the file, as before.
    let missing = directory.path().join("missing").join("out.ndjson");
    let output = export(
        db.url(),
        "select 1 as g",
        &["--output", missing.to_str().unwrap()],
    );
    let stderr = assert_exit_code(&output, 4);
    assert!(
        stderr.starts_with(&format!(
            "sluice: cannot write {}: No such file or directory",
            missing.display()
        )),
        "{stderr}"
    );
    let output = export(db.url(), "select 1 as g", &["--keep-partial"]);
    assert_exit_code(&output, 2);
}

// ---------------------------------------------------------------------------
// Exit codes and messages
// ---------------------------------------------------------------------------

#[test]
fn bad_sql_exits_1_with_sqlstate_and_a_caret() {
    let db = TestDb::new();
    let output = export(db.url(), "selec 1", &[]);
    let stderr = assert_exit_code(&output, 1);
    assert!(stderr.contains("42601"), "no SQLSTATE in stderr:\n{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    let caret = lines
        .iter()
        .position(|line| line.trim() == "^")
        .unwrap_or_else(|| panic!("no caret line in stderr:\n{stderr}"));
    assert!(
        caret > 0,
        "the caret line has no SQL line above it:\n{stderr}"
    );
    let sql_line = lines[caret - 1];
    let column = lines[caret].find('^').expect("caret");
    // The server reports position 1: the caret sits under the "s" of "selec".
    assert_eq!(
        sql_line.find("selec 1"),
        Some(column),
        "the caret is not under the error position:\n{stderr}"
    );
    assert!(output.stdout.is_empty(), "stdout: {}", text(&output.stdout));
}

#[test]
fn unreachable_server_exits_3_with_one_line() {
    let output = export("postgres://postgres@127.0.0.1:1/x", "select 1", &[]);
    let stderr = assert_exit_code(&output, 3);
    assert_eq!(stderr.lines().count(), 1, "expected one line:\n{stderr}");
    assert!(
        stderr.contains("could not connect"),
        "unexpected message:\n{stderr}"
    );
}

#[test]
fn unknown_role_exits_3_and_names_the_role() {
    let db = TestDb::new();
    assert!(
        db.url().contains("postgres@"),
        "unexpected URL {}",
        db.url()
    );
    let url = db.url().replacen("postgres@", "no_such_role_xyz@", 1);
    let output = export(&url, "select 1", &[]);
    let stderr = assert_exit_code(&output, 3);
    assert!(
        stderr.contains("no_such_role_xyz"),
        "the role is not named:\n{stderr}"
    );
}

#[test]
fn parameter_count_mismatch_exits_2() {
    let db = TestDb::new();
    let output = export(db.url(), "select $1::int", &[]);
    let stderr = assert_exit_code(&output, 2);
    assert!(
        stderr.starts_with("sluice: "),
        "unexpected message:\n{stderr}"
    );
    assert!(output.stdout.is_empty(), "stdout: {}", text(&output.stdout));
}

#[test]
fn invalid_url_exits_2() {
    let output = export("postgres://a@b:notaport/c", "select 1", &[]);
    let stderr = assert_exit_code(&output, 2);
    assert!(
        stderr.starts_with("sluice: "),
        "unexpected message:\n{stderr}"
    );
}

// ---------------------------------------------------------------------------
// --stats
// ---------------------------------------------------------------------------

#[test]
fn stats_report_round_trips_and_rows() {
    let db = TestDb::new();
    let directory = tempfile::tempdir().expect("temp dir");
    let file = directory.path().join("out.ndjson");

    let small = export_with_stats(&db, "select g from generate_series(1, 10000) g", &file, &[]);
    assert_eq!(stat_number(&small, "rows"), 10_000, "{small:?}");
    let small_trips = stat_number(&small, "round trips for the query");
    assert!(small_trips <= 3, "too many round trips: {small:?}");

    let written = std::fs::read_to_string(&file).expect("read the output file");
    let lines: Vec<&str> = written.lines().collect();
    assert_eq!(lines.len(), 10_000);
    for (index, line) in lines.iter().enumerate() {
        let row: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("line {line:?} is not JSON: {error}"));
        assert_eq!(row["g"], serde_json::json!(index + 1), "line {line:?}");
    }

    let large = export_with_stats(
        &db,
        "select g from generate_series(1, 100000) g",
        &file,
        &[],
    );
    assert_eq!(stat_number(&large, "rows"), 100_000, "{large:?}");
    assert_eq!(
        stat_number(&large, "round trips for the query"),
        small_trips,
        "round trips should not grow with the row count: {small:?} vs {large:?}"
    );

    let fetched = export_with_stats(
        &db,
        "select g from generate_series(1, 10000) g",
        &file,
        &["--fetch-size", "1000"],
    );
    assert_eq!(stat_number(&fetched, "rows"), 10_000, "{fetched:?}");
    let fetched_trips = stat_number(&fetched, "round trips for the query");
    assert!(
        (10..=10_000u64.div_ceil(1000) + 3).contains(&fetched_trips),
        "unexpected round trips with --fetch-size 1000: {fetched:?}"
    );
    let written = std::fs::read_to_string(&file).expect("read the output file");
    assert_eq!(written.lines().count(), 10_000);
}

// ---------------------------------------------------------------------------
// Output formats and parameters
// ---------------------------------------------------------------------------

#[test]
fn json_of_an_empty_result_is_an_empty_array() {
    let db = TestDb::new();
    let output = export(db.url(), "select 1 as a where false", &["--format", "json"]);
    assert_success(&output);
    let value: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {:?}", text(&output.stdout)));
    assert_eq!(value, serde_json::json!([]));
}

#[test]
fn csv_has_a_header_and_quotes_like_copy() {
    let db = TestDb::new();
    let output = export(db.url(), "select 1 as a, 'x,y' as b", &["--format", "csv"]);
    assert_success(&output);
    assert_eq!(
        output.stdout,
        b"a,b\n1,\"x,y\"\n",
        "got {:?}",
        text(&output.stdout)
    );
}

/// Runs an NDJSON export to standard output and parses its single row.
fn single_row(db: &TestDb, sql: &str, extra: &[&str]) -> serde_json::Value {
    let output = export(db.url(), sql, extra);
    assert_success(&output);
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout: {stdout:?}");
    serde_json::from_str(lines[0]).expect("JSON row")
}

#[test]
fn params_bind_in_order() {
    let db = TestDb::new();
    assert_eq!(
        single_row(
            &db,
            "select $1::int + $2::int as s",
            &["--param", "2", "--param", "3"]
        ),
        serde_json::json!({"s": 5})
    );
    // A non-commutative use shows which value went to which parameter.
    assert_eq!(
        single_row(
            &db,
            "select $1::int - $2::int as d, $2::text as second",
            &["--param", "2", "--param", "3"]
        ),
        serde_json::json!({"d": -1, "second": "3"})
    );
}

// ---------------------------------------------------------------------------
// Closed standard streams
// ---------------------------------------------------------------------------

/// Runs sluice with standard output and standard error both on a pipe nobody
/// reads, and `stdin` on standard input; returns the exit status.
fn run_with_closed_output(arguments: &[&str], stdin: &[u8]) -> ExitStatus {
    use std::io::Write;
    let pipe = sluice_testkit::closed_pipe();
    let mut child = Guarded::spawn(
        sluice()
            .args(arguments)
            .stdin(Stdio::piped())
            .stdout(Stdio::from(pipe.try_clone().expect("dup")))
            .stderr(Stdio::from(pipe)),
    );
    let mut input = child.0.stdin.take().expect("piped stdin");
    input.write_all(stdin).expect("write stdin");
    drop(input);
    child
        .wait_timeout(COMMAND_TIMEOUT)
        .unwrap_or_else(|| panic!("sluice did not finish within {COMMAND_TIMEOUT:?}"))
}

#[test]
fn closed_stdout_and_stderr_never_panic() {
    let db = TestDb::new();
    db.execute("create table items (id int primary key, label text)");
    let directory = tempfile::tempdir().expect("temp dir");
    let file = directory.path().join("out.ndjson");
    let file = file.to_str().expect("UTF-8 temp path");
    let url = db.url();
    let query = "select g as id from generate_series(1, 3) g";
    // (arguments, standard input, expected exit code)
    let cases: [(Vec<&str>, &[u8], i32); 7] = [
        // --stats after the rows went to a file.
        (
            vec![
                "export", "--db", url, "--query", query, "--stats", "-o", file,
            ],
            b"",
            0,
        ),
        // --stats after the rows went to the closed standard output.
        (
            vec!["export", "--db", url, "--query", query, "--stats"],
            b"",
            0,
        ),
        // An error line and the caret under the SQL.
        (vec!["export", "--db", url, "--query", "selec 1"], b"", 1),
        (
            vec![
                "export",
                "--db",
                "postgres://a@b:notaport/c",
                "--query",
                query,
            ],
            b"",
            2,
        ),
        (
            vec![
                "import", "--db", url, "--table", "items", "--format", "csv", "--stats",
            ],
            b"id,label\n1,a\n2,b\n",
            0,
        ),
        // A rejected record and the summary line, then --stats.
        (
            vec![
                "import",
                "--db",
                url,
                "--table",
                "items",
                "--format",
                "csv",
                "--on-error",
                "skip",
                "--stats",
            ],
            b"id,label\n3,c\nx,d\n",
            0,
        ),
        (
            vec![
                "call",
                "--db",
                url,
                "--query",
                "select $1::int",
                "--output",
                file,
                "--stats",
            ],
            b"[1]\n",
            0,
        ),
    ];
    for (arguments, stdin, expected) in cases {
        let status = run_with_closed_output(&arguments, stdin);
        assert_eq!(
            status.code(),
            Some(expected),
            "{arguments:?} ended with {status}"
        );
    }
    assert_eq!(
        db.query_text("select string_agg(id::text, ',' order by id) from items"),
        "1,2,3"
    );
}

/// Runs `arguments` until `marker`'s statement is active on `db`, sends
/// SIGINT, and returns sluice's exit code and standard error once the
/// statement is gone from the server.
fn interrupted(
    db: &TestDb,
    marker: &str,
    arguments: &[&str],
    stdin: Stdio,
) -> (Option<i32>, String) {
    let mut sluice = Guarded::spawn(
        sluice()
            .args(arguments)
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let sluice_stderr = read_all_in_background(sluice.0.stderr.take().expect("piped stderr"));
    assert!(
        eventually(Duration::from_secs(20), || sluice_sessions_with(
            db, marker, true
        ) >= 1),
        "the statement never showed up as active in pg_stat_activity"
    );
    let pid = libc::pid_t::try_from(sluice.pid()).expect("pid fits pid_t");
    // SAFETY: plain kill(2) on our own, not yet reaped child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let status = sluice
        .wait_timeout(Duration::from_secs(10))
        .expect("sluice did not exit within 10 s of SIGINT");
    let stderr = text(&sluice_stderr.join().expect("stderr reader"));
    assert_no_panic(&stderr);
    // Cancelled on the server, not left to run until it notices the socket
    // (the statements sleep 30 s or more; 10 s leaves room for a loaded
    // machine running the suite in parallel, where 2 s once fell short).
    assert!(
        eventually(Duration::from_secs(10), || sluice_sessions_with(
            db, marker, true
        ) == 0),
        "the statement still runs on the server after SIGINT"
    );
    (status.code(), stderr)
}

#[test]
fn ctrl_c_cancels_an_import_and_commits_nothing() {
    let db = TestDb::new();
    let marker = unique_marker();
    // Each row takes 10 ms on the server, so the COPY is still running.
    let table = format!("slow_{}", marker.replace('-', "_"));
    db.execute(&format!(
        "create table {table} (n int);
         create function nap() returns trigger language plpgsql as
           $$ begin perform pg_sleep(0.01); return new; end $$;
         create trigger nap before insert on {table} for each row execute function nap();"
    ));
    let input = directory_file(
        "rows.ndjson",
        &(1..=5000)
            .map(|n| format!("{{\"n\":{n}}}\n"))
            .collect::<String>(),
    );
    let (code, stderr) = interrupted(
        &db,
        &table,
        &[
            "import",
            "--db",
            db.url(),
            "--table",
            &table,
            input.path.to_str().unwrap(),
        ],
        Stdio::null(),
    );
    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(
        stderr,
        "sluice: interrupted; the import was cancelled on the server; nothing was committed\n"
    );
    assert_eq!(
        db.query_text(&format!("select count(*) from {table}"))
            .trim(),
        "0"
    );
}

#[test]
fn ctrl_c_cancels_a_copy_on_both_sides() {
    let db = TestDb::new();
    let marker = unique_marker();
    db.execute("create table target (n int)");
    let query = format!(
        "select n from generate_series(1, 3) n where pg_sleep(30) is not null /* {marker} */"
    );
    let (code, stderr) = interrupted(
        &db,
        &marker,
        &[
            "copy",
            "--from",
            db.url(),
            "--query",
            &query,
            "--to",
            db.url(),
            "--table",
            "target",
        ],
        Stdio::null(),
    );
    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(
        stderr,
        "sluice: interrupted; the copy was cancelled on both servers; nothing was committed to the target\n"
    );
    assert_eq!(db.query_text("select count(*) from target").trim(), "0");
}

#[test]
fn ctrl_c_cancels_a_call() {
    let db = TestDb::new();
    let marker = unique_marker();
    let sql = format!("select pg_sleep($1::float8) /* {marker} */");
    let params = directory_file("params.ndjson", "[30]\n");
    let (code, stderr) = interrupted(
        &db,
        &marker,
        &[
            "call",
            "--db",
            db.url(),
            "--query",
            &sql,
            "--params-file",
            params.path.to_str().unwrap(),
        ],
        Stdio::null(),
    );
    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(
        stderr,
        "sluice: interrupted; the running statement was cancelled on the server; calls already committed stay\n"
    );
}

/// A file holding `contents` in a directory of its own, removed on drop.
struct DirectoryFile {
    _directory: tempfile::TempDir,
    path: std::path::PathBuf,
}

fn directory_file(name: &str, contents: &str) -> DirectoryFile {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join(name);
    std::fs::write(&path, contents).unwrap();
    DirectoryFile {
        _directory: directory,
        path,
    }
}

#[test]
fn the_version_names_the_commit_and_the_build_date() {
    let output = sluice().arg("--version").output().unwrap();
    assert!(output.status.success());
    let line = text(&output.stdout);
    // sluice 0.1.0 (0123456789ab 2026-11-27)
    let (version, rest) = line
        .trim_end()
        .strip_prefix("sluice ")
        .and_then(|rest| rest.split_once(" ("))
        .unwrap_or_else(|| panic!("{line:?}"));
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    let (commit, date) = rest.trim_end_matches(')').split_once(' ').unwrap();
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{line:?}"
    );
    assert_eq!(date.len(), 10, "{line:?}");
    assert!(date.starts_with("20"), "{line:?}");

    let output = sluice().args(["version", "--json"]).output().unwrap();
    assert!(output.status.success());
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(report["commit"], commit);
    assert_eq!(
        report["databases"],
        serde_json::json!(["PostgreSQL", "MariaDB", "SQLite"])
    );
    assert_eq!(
        report["formats"],
        serde_json::json!(["ndjson", "json", "csv", "arrow", "arrow-file", "parquet"])
    );
}

#[test]
fn completions_and_man_pages_come_from_the_flag_definitions() {
    for shell in ["bash", "zsh", "fish"] {
        let output = sluice().args(["completions", shell]).output().unwrap();
        assert!(output.status.success(), "{shell}");
        let script = text(&output.stdout);
        assert!(
            script.contains("export") && script.contains("--query"),
            "{shell}"
        );
    }
    let directory = tempfile::tempdir().unwrap();
    let output = sluice().arg("man").arg(directory.path()).output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut pages: Vec<String> = std::fs::read_dir(directory.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    for page in [
        "sluice.1",
        "sluice-export.1",
        "sluice-serve.1",
        "sluice-copy.1",
    ] {
        assert!(pages.iter().any(|name| name == page), "{pages:?}");
    }
    assert!(
        !pages.iter().any(|name| name == "sluice-man.1"),
        "{pages:?}"
    );
    let export = std::fs::read_to_string(directory.path().join("sluice-export.1")).unwrap();
    assert!(export.contains("\\-\\-query"), "{export}");
}

#[test]
fn import_and_copy_errors_say_which_flag_would_help() {
    let db = TestDb::new();
    db.execute("create table items (id int primary key, name text)");
    let import = |stdin: &[u8], extra: &[&str]| {
        let mut command = sluice();
        command
            .args(["import", "--db", db.url(), "--table", "items"])
            .args(extra);
        support::run(&mut command, stdin)
    };
    // A CSV file without a header: its first record is read as one.
    let stderr = assert_exit_code(&import(b"1,tea\n2,cake\n", &["--format", "csv"]), 2);
    assert!(
        stderr.contains("names a column \"1\"")
            && stderr.contains("if line 1 is data, not a header, say --header false"),
        "{stderr}"
    );
    // CSV piped in without --format is read as NDJSON, and the error says so.
    let stderr = assert_exit_code(&import(b"id,name\n1,tea\n", &[]), 5);
    assert!(
        stderr.contains("line 1")
            && stderr.contains("read as NDJSON")
            && stderr.contains("--format csv"),
        "{stderr}"
    );
    // A copy into a table that holds the same keys names --truncate and --on-conflict.
    db.execute("insert into items values (1, 'tea')");
    let output = sluice()
        .args([
            "copy",
            "--from",
            db.url(),
            "--to",
            db.url(),
            "--table",
            "items",
        ])
        .output()
        .unwrap();
    let stderr = assert_exit_code(&output, 1);
    assert!(
        stderr.contains("--truncate") && stderr.contains("--on-conflict"),
        "{stderr}"
    );
}

#[test]
fn old_flag_spellings_work_with_a_note() {
    let db = TestDb::new();
    db.execute("create table notes (n int)");
    let mut command = sluice();
    command.args([
        "call",
        "--db",
        db.url(),
        "--sql",
        "insert into notes values ($1)",
        "--params",
        "-",
    ]);
    let output = support::run(&mut command, b"[1]\n[2]\n");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("sluice: call --sql is now --query")
            && stderr.contains("sluice: call --params is now --params-file"),
        "{stderr}"
    );
    assert_eq!(db.query_text("select count(*) from notes").trim(), "2");
}

#[test]
fn import_batch_rows_is_now_insert_rows() {
    let db = TestDb::new();
    db.execute("create table counted (n int)");
    let import = |flags: &[&str]| {
        let mut command = sluice();
        command
            .args(["import", "--db", db.url(), "--table", "counted"])
            .args(["--method", "insert", "--stats"])
            .args(flags);
        let output = support::run(&mut command, b"{\"n\": 1}\n{\"n\": 2}\n{\"n\": 3}\n");
        assert!(output.status.success(), "{}", text(&output.stderr));
        let stderr = text(&output.stderr);
        let trips = stat_number(&stats(&stderr), "round trips for the query");
        (stderr, trips)
    };
    // Three rows in INSERTs of 1,000 (the default) take one statement, of 2 two.
    let (_, one_statement) = import(&[]);
    let (stderr, two_statements) = import(&["--insert-rows", "2"]);
    assert!(!stderr.contains("is now"), "{stderr}");
    assert!(two_statements > one_statement, "{stderr}");
    for old in ["--batch-rows", "--batch-size"] {
        let (stderr, trips) = import(&[old, "2"]);
        assert!(
            stderr.contains(&format!("sluice: import {old} is now --insert-rows")),
            "{stderr}"
        );
        assert_eq!(trips, two_statements, "{stderr}");
    }
    assert_eq!(db.query_text("select count(*) from counted").trim(), "12");
}
