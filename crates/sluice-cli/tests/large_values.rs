//! Values too large to hold: a 900 MB `bytea` and a 1.5 GB large object export
//! with the process's peak memory under 128 MB and every byte right.

use std::io::Read;
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};
use sluice_testkit::TestDb;
use support::{repeated_sha256, HUGE_BYTEA_SQL};

mod support;

/// Peak resident memory allowed for the export, whatever the value's size.
const RSS_LIMIT_KB: i64 = 128 * 1024;

/// Runs `sluice export`, hashing its output as it streams; returns the hash and
/// the child's peak RSS in KB (from wait4, so it is the child's own figure).
// The child is reaped by wait4 below, which std's Child::wait cannot do while
// also returning the child's resource usage.
#[allow(clippy::zombie_processes)]
fn export_hashed(arguments: &[&str]) -> (String, i64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("export")
        .args(arguments)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut hash = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = stdout.read(&mut buffer).unwrap();
        if read == 0 {
            break;
        }
        hash.update(&buffer[..read]);
    }
    let mut status = 0;
    // SAFETY: rusage is plain data filled in by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, which std has not reaped.
    let waited = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(waited, child.id() as libc::pid_t);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "export failed: {status}"
    );
    (format!("{:x}", hash.finalize()), usage.ru_maxrss)
}

#[test]
fn huge_bytea_and_large_object_export_in_bounded_memory() {
    let db = TestDb::new();
    db.execute(HUGE_BYTEA_SQL);
    db.execute(
        "create table documents (id int, body oid);
         insert into documents values (1, lo_from_bytea(0, convert_to(repeat('y', 750000000), 'UTF8')));
         select lo_put(body, 750000000, convert_to(repeat('y', 750000000), 'UTF8')) from documents;",
    );
    // 900 MB of 'x' is 300 M groups of three bytes, each "eHh4" in base64.
    let (hash, rss) = export_hashed(&["--db", db.url(), "--query", "select id, b from huge"]);
    assert_eq!(
        hash,
        repeated_sha256("{\"id\":1,\"b\":\"", b"eHh4", 300_000_000, "\"}\n")
    );
    assert!(rss < RSS_LIMIT_KB, "peak RSS {rss} KB for a 900 MB value");

    // 1.5 GB of 'y': 500 M groups, "eXl5" each. Beyond bytea's 1 GB limit, so it
    // can only come through in pieces.
    let (hash, rss) = export_hashed(&[
        "--db",
        db.url(),
        "--query",
        "select id, body from documents",
        "--lob",
        "inline",
    ]);
    assert_eq!(
        hash,
        repeated_sha256("{\"id\":1,\"body\":\"", b"eXl5", 500_000_000, "\"}\n")
    );
    assert!(
        rss < RSS_LIMIT_KB,
        "peak RSS {rss} KB for a 1.5 GB large object"
    );
}
