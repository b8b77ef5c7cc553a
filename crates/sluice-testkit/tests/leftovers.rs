//! The test kit leaves nothing in the temporary directory, private keys least
//! of all, even where no destructor runs: a test file that keeps its server
//! and certificates in a `static` for all its tests never drops them.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use sluice_testkit::{eventually, TestCertificates};

const CHILD: &str = "child_makes_certificates_and_never_drops_them";

/// Run by the test below in a process of its own: certificates that nothing
/// drops, as a `static OnceLock` holds them; prints their directory.
#[test]
#[ignore = "run as a child process by certificates_nothing_drops_are_gone_with_their_process"]
fn child_makes_certificates_and_never_drops_them() {
    let certificates = TestCertificates::generate(&["localhost"]);
    let key = certificates.server().key;
    assert!(key.is_file());
    println!("certificates in {}", key.parent().unwrap().display());
    std::mem::forget(certificates);
}

#[test]
fn certificates_nothing_drops_are_gone_with_their_process() {
    let temporary = tempfile::tempdir().unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            CHILD,
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TMPDIR", temporary.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the child failed: {stdout}");
    let directory: PathBuf = stdout
        .lines()
        .find_map(|line| {
            line.split_once("certificates in ")
                .map(|(_, path)| path.trim())
        })
        .unwrap_or_else(|| panic!("the child said where its certificates are: {stdout}"))
        .into();
    assert!(directory.starts_with(temporary.path()));
    let gone = eventually(Duration::from_secs(20), || !directory.exists());
    assert!(gone, "{} outlived its process", directory.display());
    let left: Vec<_> = std::fs::read_dir(temporary.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn certificates_are_removed_when_dropped() {
    let certificates = TestCertificates::generate(&["localhost"]);
    let directory = certificates.ca().parent().unwrap().to_path_buf();
    assert!(directory.is_dir());
    drop(certificates);
    assert!(!directory.exists());
}
