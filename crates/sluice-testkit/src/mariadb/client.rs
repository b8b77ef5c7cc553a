//! Running SQL with the `mariadb` command-line client, the oracle the MariaDB
//! helpers use (as `psql` is for PostgreSQL).

use std::path::Path;
use std::process::Command;

use super::url::{Endpoint, Target};
use crate::process;

/// Runs `mariadb --batch --skip-column-names <extra_args>` against `endpoint` with
/// `sql` on its standard input (so it may hold several statements; the client stops
/// at the first error). Returns its stdout, or a description of the failure with
/// its stderr.
///
/// `--no-defaults` keeps option files (`~/.my.cnf`, `/etc/mysql`) from changing
/// what a URL means; the character set is given because the client otherwise
/// guesses it from the locale (latin1 without one) and mangles UTF-8 text. The
/// password goes through `MYSQL_PWD`, never the command line (`ps` shows that).
pub(crate) fn run(
    client: &Path,
    endpoint: &Endpoint,
    extra_args: &[&str],
    sql: &str,
) -> Result<Vec<u8>, String> {
    process::run_with_input(command(client, endpoint, extra_args), sql)
}

/// The client's command line for `endpoint`, as [`run`] runs it.
pub(crate) fn command(client: &Path, endpoint: &Endpoint, extra_args: &[&str]) -> Command {
    let mut cmd = Command::new(client);
    cmd.args(["--no-defaults", "--default-character-set=utf8mb4"])
        .args(["--batch", "--skip-column-names", "--connect-timeout=10"])
        // A statement waiting on a metadata lock a session of the test holds
        // (whose task may run on the thread the client blocks) fails, naming
        // its SQL, instead of waiting the server's default year.
        .arg("--init-command=SET SESSION lock_wait_timeout = 120")
        .args(extra_args)
        .args(target_args(&endpoint.target));
    if let Some(user) = &endpoint.user {
        cmd.arg(format!("--user={user}"));
    }
    if let Some(database) = &endpoint.database {
        cmd.arg(format!("--database={database}"));
    }
    match &endpoint.password {
        Some(password) => cmd.env("MYSQL_PWD", password),
        None => cmd.env_remove("MYSQL_PWD"),
    };
    cmd
}

/// The client's options for `target`. The protocol is always given: the client
/// would otherwise take `localhost` to mean its default socket.
fn target_args(target: &Target) -> Vec<String> {
    match target {
        Target::Tcp(host, port) => vec![
            "--protocol=TCP".into(),
            format!("--host={host}"),
            format!("--port={port}"),
        ],
        Target::Socket(path) => vec!["--protocol=SOCKET".into(), format!("--socket={path}")],
    }
}
