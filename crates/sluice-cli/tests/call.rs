//! End-to-end tests of `sluice call`.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use sluice_testkit::TestDb;

fn call(arguments: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("call")
        .args(arguments)
        .env_remove("SLUICE_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn results_come_back_one_line_per_input_line_in_order() {
    let db = TestDb::new();
    db.execute(
        "create table accounts (id int primary key, balance int check (balance >= 0));
                insert into accounts values (1, 100), (2, 100), (3, 100);",
    );
    let output = call(
        &[
            "--db",
            db.url(),
            "--sql",
            "update accounts set balance = balance - $2 where id = $1 returning id, balance",
            "--param-names",
            "id,amount",
            "--stats",
        ],
        b"[1, 10]\n\n{\"id\": 2, \"amount\": 20}\n[3, 30]\n",
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "{\"line\":1,\"rows\":[{\"id\":1,\"balance\":90}]}\n\
         {\"line\":3,\"rows\":[{\"id\":2,\"balance\":80}]}\n\
         {\"line\":4,\"rows\":[{\"id\":3,\"balance\":70}]}\n"
    );
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("calls: 3\nsucceeded: 3\n"));
}

#[test]
fn a_failure_in_single_mode_exits_1_and_commits_nothing() {
    let db = TestDb::new();
    db.execute(
        "create table accounts (id int primary key, balance int check (balance >= 0));
                insert into accounts values (1, 100), (2, 100);",
    );
    let output = call(
        &[
            "--db",
            db.url(),
            "--sql",
            "update accounts set balance = balance - $2 where id = $1",
        ],
        b"[1, 10]\n[2, 500]\n",
    );
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("{\"line\":2,\"error\":{\"code\":\"23514\""),
        "{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("line 2"),
        "nothing committed is said"
    );
    assert_eq!(db.query_text("select sum(balance) from accounts"), "200");
}
