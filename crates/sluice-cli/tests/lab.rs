//! `sluice lab` from the binary: a quick run end to end, and Ctrl-C in the middle
//! of creating the lab's large objects, after which nothing of the lab is left.
//! Each test runs the lab as a role of its own, so the large objects it owns can
//! be counted without counting other tests'. They run one at a time: the second
//! writes hundreds of thousands of large objects, WAL the first would count as its
//! inserts'.

mod support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use sluice_testkit::{wait_until, TestDb, TestRole};
use support::{assert_exit, run, sluice};

/// One lab at a time (a test that failed holding it leaves it usable).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A role that may create tables in the test's schema and large objects.
fn lab_role(db: &TestDb) -> TestRole {
    let role = db.create_role("lab");
    db.execute(&format!(
        "grant create on schema {} to {}",
        db.schema(),
        role.name
    ));
    role
}

fn lab_tables(db: &TestDb) -> String {
    db.query_text(&format!(
        "select count(*) from pg_tables where schemaname = '{}' \
         and tablename like 'sluice\\_lab\\_%'",
        db.schema()
    ))
}

fn large_objects_of(db: &TestDb, role: &TestRole) -> String {
    db.query_text(&format!(
        "select count(*) from pg_largeobject_metadata where lomowner = '{}'::regrole",
        role.name
    ))
}

#[test]
fn a_quick_lab_writes_its_report_and_leaves_nothing_behind() {
    let _serial = one_at_a_time();
    let db = TestDb::new();
    let role = lab_role(&db);
    let out = tempfile::tempdir().unwrap();
    let report = out.path().join("report");
    let output = run(
        sluice().args(["lab", "--db", &role.url, "--quick"]).args([
            "--output",
            report.to_str().unwrap(),
            "--rows",
            "2000",
            "--insert-rows",
            "200",
            "--lob-count",
            "20",
            "--lob-bytes",
            "1024",
            "--calls",
            "50",
        ]),
        b"",
    );
    assert_exit(&output, 0);
    let recommendations = String::from_utf8(output.stdout).unwrap();
    assert!(
        recommendations.lines().count() >= 4
            && recommendations.lines().all(|line| line.starts_with("- ")),
        "one recommendation a line:\n{recommendations}"
    );
    for file in ["index.html", "summary.md", "results.json"] {
        assert!(report.join(file).is_file(), "{file} written");
    }
    let charts = std::fs::read_dir(&report)
        .unwrap()
        .filter(|entry| {
            let name = entry.as_ref().unwrap().file_name();
            Path::new(&name)
                .extension()
                .is_some_and(|extension| extension == "svg")
        })
        .count();
    assert!(charts >= 4, "{charts} charts");
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.join("results.json")).unwrap()).unwrap();
    assert!(results.is_object(), "results.json is JSON");
    assert_wal_figures(&results, &report);
    assert_eq!(lab_tables(&db), "0");
    assert_eq!(large_objects_of(&db, &role), "0");
}

/// The WAL written per insert method is in every output, positive, and row by
/// row's per row exceeds COPY's. Both run in one transaction (no commit per row
/// for row by row), so the difference is the records: an INSERT logs one per row,
/// COPY one per page of rows. Row by row against batches logs the same records and
/// is not asserted.
fn assert_wal_figures(results: &serde_json::Value, report: &Path) {
    let methods = &results["wal"]["methods"];
    let per_row = |method: &str| {
        let figure = &methods[method];
        assert!(
            figure["wal_bytes"].as_u64().unwrap() > 0,
            "{method}: {figure}"
        );
        assert!(figure["rows"].as_u64().unwrap() > 0, "{method}: {figure}");
        figure["wal_bytes_per_row"].as_f64().unwrap()
    };
    for method in [
        "row-by-row",
        "batch 10",
        "batch 100",
        "batch 1000",
        "pipelined",
    ] {
        assert!(per_row(method) > 0.0);
    }
    assert!(
        per_row("row-by-row") > per_row("COPY"),
        "WAL per row: {methods}"
    );
    assert_eq!(methods["COPY"]["relative_to_copy"].as_f64(), Some(1.0));
    let summary = std::fs::read_to_string(report.join("summary.md")).unwrap();
    assert!(
        summary.contains("| method | rows | WAL bytes | WAL bytes per row | relative to COPY |")
    );
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("<th>WAL bytes per row</th>"));
}

/// A lab child process, killed if the test ends before it does.
struct Lab(Option<Child>);

impl Lab {
    fn interrupt(&self) {
        let pid = self.0.as_ref().expect("running").id();
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    }

    fn wait_with_output(mut self) -> std::process::Output {
        let child = self.0.take().expect("running");
        child.wait_with_output().unwrap()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn ctrl_c_while_large_objects_are_made_leaves_no_table_and_no_large_object() {
    let _serial = one_at_a_time();
    let db = TestDb::new();
    let role = lab_role(&db);
    let out = tempfile::tempdir().unwrap();
    // Enough large objects that creating them takes a while: Ctrl-C lands while
    // the statement making them runs.
    let lab = Lab(Some(
        sluice()
            .args([
                "lab",
                "--db",
                &role.url,
                "--quick",
                "--lob-count",
                "300000",
                "--lob-bytes",
                "32",
            ])
            .args(["--output", out.path().join("report").to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let making_large_objects = format!(
        "select count(*) from pg_stat_activity where usename = '{}' \
         and state = 'active' and query like 'insert into sluice\\_lab\\_%\\_lob %'",
        role.name
    );
    wait_until(
        "the lab to create its large objects",
        Duration::from_secs(60),
        || db.query_text(&making_large_objects) == "1",
    );
    lab.interrupt();
    let output = lab.wait_with_output();
    let stderr = assert_exit(&output, 130);
    assert!(stderr.contains("interrupted"), "{stderr}");
    // Whatever the server was still doing for the lab has ended by now.
    let sessions = format!(
        "select count(*) from pg_stat_activity where usename = '{}'",
        role.name
    );
    wait_until("the lab's sessions to end", Duration::from_secs(30), || {
        db.query_text(&sessions) == "0"
    });
    assert_eq!(lab_tables(&db), "0", "{stderr}");
    assert_eq!(large_objects_of(&db, &role), "0", "{stderr}");
}
