//! A Python with pinned packages: pyarrow and DuckDB, the reference readers
//! that tests of sluice's Arrow and Parquet output check it against, and
//! psycopg 3 and SQLAlchemy 2, the real clients whose round trips the proxy's
//! tests watch.
//!
//! The virtual environment is made once per machine and build directory, in
//! `<target dir>/test-venv-<hash of the requirements>` (the target dir found
//! from the test binary's own path, so `CARGO_TARGET_DIR` is honoured), with
//! `python3 -m venv` and `pip install` from PyPI. Test processes running at
//! the same time take turns through an exclusive `flock` on a lock file
//! beside it, and a marker file written last tells a complete environment
//! from one a killed process left half made (which is made again). Changing
//! [`REQUIREMENTS`] makes a new directory.
//!
//! Nothing is skipped: without `python3` or its `venv` module, or when pip
//! fails, the tests panic saying what to install (Debian/Ubuntu:
//! `apt-get install python3-venv`).

use std::fs::{self, File};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::thread;

/// What the environment holds, pinned so every machine reads alike.
pub const REQUIREMENTS: &[&str] = &[
    "pyarrow==21.0.0",
    "duckdb==1.4.1",
    "psycopg[binary]==3.3.9",
    "SQLAlchemy==2.1.9",
];

/// Written into the environment once everything is installed.
const READY_MARKER: &str = ".sluice-ready";

static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The environment's `python`, with [`REQUIREMENTS`] importable; made on
/// first use (see the module docs).
///
/// # Panics
///
/// If the environment cannot be made.
pub fn python_oracle() -> &'static Path {
    match PYTHON.get_or_init(prepare) {
        Ok(python) => python,
        Err(message) => panic!(
            "sluice-testkit: no Python with {}: {message}",
            REQUIREMENTS.join(", ")
        ),
    }
}

/// Runs `script` (Python source, given as `-c`) with `args` after it and
/// `stdin` on its standard input, and returns what it printed.
///
/// # Panics
///
/// If the environment cannot be made, or the script fails (with its stderr).
pub fn run_python(script: &str, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    crate::process::stdout_of_success(python_output(script, args, stdin), "the Python script")
}

/// Like [`run_python`], but returns the whole outcome, failures included, for
/// tests that expect a reader to refuse something.
///
/// # Panics
///
/// If the environment cannot be made or Python cannot be started.
pub fn python_output(script: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(python_oracle())
        .arg("-c")
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("sluice-testkit: cannot start Python: {error}"));
    let mut input = child.stdin.take().expect("piped stdin");
    let stdin = stdin.to_vec();
    // Written from another thread, so a large output cannot deadlock against it.
    let writer = thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let output = child
        .wait_with_output()
        .unwrap_or_else(|error| panic!("sluice-testkit: waiting for Python failed: {error}"));
    let _ = writer.join();
    output
}

/// The build's target directory: the test binary is `<target>/<profile>/deps/<name>`.
fn target_dir() -> Result<PathBuf, String> {
    let executable =
        std::env::current_exe().map_err(|e| format!("cannot find the test binary: {e}"))?;
    executable
        .ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{} is not inside a target directory", executable.display()))
}

/// FNV-1a, a hash that stays the same across Rust releases (the directory
/// name must).
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Makes the environment unless a complete one is there, holding the lock.
fn prepare() -> Result<PathBuf, String> {
    let name = format!("test-venv-{:016x}", stable_hash(&REQUIREMENTS.join(" ")));
    let directory = target_dir()?.join(name);
    let lock_path = directory.with_extension("lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    // SAFETY: flock on a descriptor this function owns; the lock is released
    // when `lock` is closed at the end of the function.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(format!(
            "cannot lock {}: {}",
            lock_path.display(),
            std::io::Error::last_os_error()
        ));
    }
    let python = directory.join("bin").join("python");
    if !directory.join(READY_MARKER).exists() {
        make_environment(&directory)?;
    }
    drop(lock);
    Ok(python)
}

/// A fresh environment in `directory` with [`REQUIREMENTS`] installed.
fn make_environment(directory: &Path) -> Result<(), String> {
    if directory.exists() {
        // Left half made by a process that was killed.
        fs::remove_dir_all(directory)
            .map_err(|e| format!("cannot remove {}: {e}", directory.display()))?;
    }
    let venv = Command::new("python3")
        .args(["-m", "venv"])
        .arg(directory)
        .output()
        .map_err(|e| {
            format!(
                "cannot run python3 ({e}): install Python 3 and its venv module \
                 (Debian/Ubuntu: apt-get install python3-venv)"
            )
        })?;
    check(
        &venv,
        "python3 -m venv (Debian/Ubuntu: apt-get install python3-venv)",
    )?;
    let pip = Command::new(directory.join("bin").join("pip"))
        .args(["install", "--disable-pip-version-check", "-q"])
        .args(REQUIREMENTS)
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    check(&pip, &format!("pip install {}", REQUIREMENTS.join(" ")))?;
    fs::write(directory.join(READY_MARKER), REQUIREMENTS.join("\n"))
        .map_err(|e| format!("cannot write to {}: {e}", directory.display()))
}

fn check(output: &Output, what: &str) -> Result<(), String> {
    match output.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{what} failed with {}:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_reads_an_arrow_stream_it_wrote_itself() {
        // pyarrow and duckdb import, and a script gets its arguments and input.
        let script = "import sys, duckdb, pyarrow as pa\n\
            data = sys.stdin.buffer.read()\n\
            table = pa.ipc.open_stream(data).read_all()\n\
            print(sys.argv[1], table.num_rows, duckdb.sql('select 40 + 2').fetchone()[0])";
        let stream = run_python(
            "import sys, pyarrow as pa\n\
             table = pa.table({'a': [1, 2, 3]})\n\
             sink = pa.BufferOutputStream()\n\
             with pa.ipc.new_stream(sink, table.schema) as writer: writer.write_table(table)\n\
             sys.stdout.buffer.write(sink.getvalue().to_pybytes())",
            &[],
            b"",
        );
        let printed = run_python(script, &["rows"], &stream);
        assert_eq!(String::from_utf8(printed).unwrap(), "rows 3 42\n");
        let failed = python_output("raise SystemExit(3)", &[], b"");
        assert_eq!(failed.status.code(), Some(3));
    }

    #[test]
    fn the_directory_name_follows_the_requirements() {
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_ne!(
            stable_hash("pyarrow==21.0.0"),
            stable_hash("pyarrow==21.0.1")
        );
    }
}
