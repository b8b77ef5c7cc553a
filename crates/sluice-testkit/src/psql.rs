//! The `psql` client, which the PostgreSQL helpers run to execute their SQL
//! (creating and dropping schemas, [`crate::TestDb::execute`] and the like):
//! how it is invoked, and what to say when it cannot be found.

use std::path::Path;
use std::process::Command;

use crate::process;

/// What to say when no `psql` binary can be found.
pub(crate) const PSQL_NOT_FOUND: &str = "psql (the PostgreSQL client) not found: install it \
     (Debian/Ubuntu: apt-get install postgresql-client) or put it on PATH";

/// Runs `psql -X -q -w -v ON_ERROR_STOP=1 <extra_args> -d <url> -f -` with `sql` on
/// its stdin. Returns its stdout, or a description of the failure (with stderr).
pub(crate) fn run_psql(
    psql: &Path,
    url: &str,
    pgoptions: Option<&str>,
    extra_args: &[&str],
    sql: &str,
) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new(psql);
    cmd.args(["-X", "-q", "-w", "-v", "ON_ERROR_STOP=1"])
        .args(extra_args)
        .args(["-d", url, "-f", "-"])
        .env("PGCLIENTENCODING", "UTF8");
    if let Some(options) = pgoptions {
        cmd.env("PGOPTIONS", options);
    }
    if std::env::var_os("PGCONNECT_TIMEOUT").is_none() {
        cmd.env("PGCONNECT_TIMEOUT", "10");
    }
    process::run_with_input(cmd, sql)
}
