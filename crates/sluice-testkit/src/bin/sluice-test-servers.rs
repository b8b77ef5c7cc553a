//! `sluice-test-servers`: starts the test kit's ephemeral PostgreSQL cluster
//! and MariaDB server once, prints their URLs as shell `export` lines on
//! standard output, and keeps them running until it is killed or its standard
//! input closes.
//!
//! Why: every test binary otherwise starts a pair of its own (`initdb`,
//! `mariadb-install-db` and two server starts, seconds each), and `cargo test`
//! runs its ~50 binaries one after another. CI starts one pair with this and
//! runs the same `cargo test --workspace` against it through
//! `SLUICE_TEST_PG_URL` and `SLUICE_TEST_MARIADB_URL`; each test still gets a
//! schema or database of its own. The servers stop with this process (see the
//! crate docs on their lifetime).

use std::io::{Read, Write};

fn main() {
    let postgres = sluice_testkit::server_url();
    let mariadb = sluice_testkit::mariadb_server_url();
    let mut stdout = std::io::stdout().lock();
    let printed = writeln!(stdout, "export SLUICE_TEST_PG_URL='{postgres}'")
        .and_then(|()| writeln!(stdout, "export SLUICE_TEST_MARIADB_URL='{mariadb}'"))
        .and_then(|()| stdout.flush());
    if let Err(error) = printed {
        eprintln!("sluice-test-servers: cannot write the URLs: {error}");
        std::process::exit(1);
    }
    drop(stdout);
    // Until standard input ends (or the process is killed): the servers live
    // as long as this process does.
    let mut sink = Vec::new();
    let _ = std::io::stdin().lock().read_to_end(&mut sink);
}
