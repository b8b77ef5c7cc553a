//! Running the `sluice` binary from tests: a clean environment, input streamed from
//! a generator, output counted rather than held, and the child's own peak memory
//! (from `wait4`, so other tests in this process do not count); [`server`] runs
//! `sluice serve` for the gateway tests, [`proxy`] and [`relay`] stand between
//! a command and its database.

#![allow(dead_code)] // each test file uses a different part of this module

pub mod proxy;
pub mod relay;
pub mod server;

use std::io::{BufWriter, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::thread;

/// A database URL split around its `host:port`: what comes before it, the
/// address, and the rest, so a test can point the URL at a stand-in.
pub fn split_url(url: &str) -> (&str, &str, &str) {
    let (scheme, rest) = url.split_once("://").unwrap();
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let before = &url[..scheme.len() + 3 + authority.len() - host_port.len()];
    let after = &rest[authority_end..];
    (before, host_port, after)
}

/// `sluice export --db URL --query QUERY EXTRA…`, run to its end (no MariaDB
/// password from the environment: the URL says what to log in with).
pub fn export(url: &str, query: &str, extra: &[&str]) -> std::process::Output {
    let mut command = sluice();
    command
        .args(["export", "--db", url, "--query", query])
        .args(extra)
        .env_remove("MYSQL_PWD");
    run(&mut command, b"")
}

/// The rows of an NDJSON export of `n` = 1, 2, 3…, cut short or not: asserts
/// each line is a whole row and they come in order from 1, and returns how
/// many there are.
pub fn rows_in_order(stdout: &[u8]) -> usize {
    let stdout = std::str::from_utf8(stdout).unwrap();
    let rows: Vec<u64> = stdout
        .lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line).expect("whole rows")["n"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(rows.iter().copied().eq(1..=rows.len() as u64));
    rows.len()
}

/// A `sluice` command with a clean environment for the variables it reads.
pub fn sluice() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .env_remove("SLUICE_DB")
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdin(Stdio::null());
    command
}

/// Writes a run's standard input (on its own thread, while the output is read).
pub type Feed = Box<dyn FnOnce(&mut dyn Write) + Send>;

/// What a measured run produced.
#[derive(Debug)]
pub struct Measured {
    /// How the child exited (from `wait4`).
    pub status: ExitStatus,
    /// Bytes written to standard output.
    pub stdout_bytes: u64,
    /// Lines written to standard output.
    pub stdout_lines: u64,
    /// Everything written to standard error.
    pub stderr: String,
    /// The child's peak resident set size in KiB.
    pub peak_rss_kib: i64,
}

impl Measured {
    /// Panics with stderr unless the run exited 0.
    pub fn assert_success(&self) -> &Measured {
        assert!(
            self.status.success(),
            "sluice failed with {}; stderr:\n{}",
            self.status,
            self.stderr
        );
        self
    }
}

/// Runs `command`, feeding its standard input from `feed` on another thread (none
/// when `feed` is `None`), counting its output as it streams, and returns the
/// measures once it has exited.
// The child is reaped by wait4 below, which std's Child::wait cannot do while also
// returning the child's resource usage.
#[allow(clippy::zombie_processes)]
pub fn run_measured(command: &mut Command, feed: Option<Feed>) -> Measured {
    if feed.is_some() {
        command.stdin(Stdio::piped());
    }
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("could not start sluice");
    let feeder = feed.map(|feed| {
        let stdin = child.stdin.take().expect("piped stdin");
        thread::spawn(move || write_input(stdin, feed))
    });
    let mut stderr_pipe = child.stderr.take().expect("piped stderr");
    let stderr_reader = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let (stdout_bytes, stdout_lines) = count_output(child.stdout.take().expect("piped stdout"));
    let (status, peak_rss_kib) = wait_with_usage(child.id());
    if let Some(feeder) = feeder {
        feeder.join().expect("the input generator panicked");
    }
    Measured {
        status,
        stdout_bytes,
        stdout_lines,
        stderr: stderr_reader.join().expect("stderr reader"),
        peak_rss_kib,
    }
}

fn write_input(stdin: ChildStdin, feed: Feed) {
    let mut writer = BufWriter::with_capacity(1 << 16, stdin);
    feed(&mut writer);
    // The child may have stopped reading (an error): that is its exit status's story.
    let _ = writer.flush();
}

fn count_output(mut stdout: impl Read) -> (u64, u64) {
    let mut buffer = vec![0u8; 1 << 16];
    let (mut bytes, mut lines) = (0u64, 0u64);
    loop {
        let read = stdout.read(&mut buffer).expect("reading sluice's output");
        if read == 0 {
            return (bytes, lines);
        }
        bytes += read as u64;
        lines += memchr_count(&buffer[..read]);
    }
}

fn memchr_count(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&byte| byte == b'\n').count() as u64
}

/// Waits for child `pid` and returns its exit status and peak RSS in KiB.
fn wait_with_usage(pid: u32) -> (ExitStatus, i64) {
    let mut status = 0;
    // SAFETY: rusage is plain data filled in by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, which std has not reaped.
    let waited = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid as libc::pid_t, "wait4 failed");
    (ExitStatus::from_raw(status), usage.ru_maxrss)
}

/// Upper bound for commands that should finish quickly; only there so that a hang
/// fails the test instead of blocking the run forever.
pub const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs `command` to completion with `stdin` as its input, capturing its output;
/// kills it and panics if it runs longer than [`COMMAND_TIMEOUT`].
pub fn run(command: &mut Command, stdin: &[u8]) -> std::process::Output {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("could not start sluice");
    let mut input = child.stdin.take().expect("piped stdin");
    let stdin = stdin.to_vec();
    // sluice may exit before reading everything (an error): not the test's concern.
    let writer = thread::spawn(move || drop(input.write_all(&stdin)));
    let (finished, waiting) = std::sync::mpsc::channel();
    let pid = child.id();
    let watchdog = thread::spawn(move || {
        if waiting.recv_timeout(COMMAND_TIMEOUT).is_err() {
            // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    });
    let output = child.wait_with_output().expect("waiting for sluice");
    let _ = finished.send(());
    let _ = watchdog.join();
    let _ = writer.join();
    assert!(
        output.status.signal() != Some(libc::SIGKILL),
        "sluice did not finish within {COMMAND_TIMEOUT:?}"
    );
    output
}

/// Standard error of a finished run, with the check that nothing panicked.
pub fn stderr_of(output: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !text.contains("panicked") && !text.contains("RUST_BACKTRACE"),
        "sluice panicked:\n{text}"
    );
    text
}

/// Asserts the exit code (printing stderr when it differs) and returns stderr.
pub fn assert_exit(output: &std::process::Output, code: i32) -> String {
    let stderr = stderr_of(output);
    assert_eq!(
        output.status.code(),
        Some(code),
        "exit status {}; stderr:\n{stderr}",
        output.status
    );
    stderr
}

/// The SHA-256 (hex) of `prefix`, then `pattern` repeated `times` times, then
/// `suffix`: the oracle for outputs too large to hold, computed without holding
/// them either.
pub fn repeated_sha256(prefix: &str, pattern: &[u8], times: usize, suffix: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(prefix.as_bytes());
    let block: Vec<u8> = pattern.repeat(65536);
    let mut left = times;
    while left > 0 {
        let now = left.min(65536);
        hash.update(&block[..now * pattern.len()]);
        left -= now;
    }
    hash.update(suffix.as_bytes());
    format!("{:x}", hash.finalize())
}

/// SQL creating `huge (id int, b bytea)` with one 900 MB value of `'x'`, stored
/// uncompressed (`storage external`), in one transaction: a table created and
/// filled in it skips the WAL where `wal_level` is minimal (the test kit's own
/// cluster). Exported as JSON, the value is 300 M groups of `"eHh4"`.
pub const HUGE_BYTEA_SQL: &str = "begin;
     create table huge (id int, b bytea);
     alter table huge alter b set storage external;
     insert into huge values (1, convert_to(repeat('x', 900000000), 'UTF8'));
     commit;";
