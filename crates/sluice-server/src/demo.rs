//! `sluice serve --demo`: a SQLite file holding generated `payment_events`,
//! made on first start and reused afterwards, and a configuration of named
//! queries over it. No database server is needed; the file goes to the user's
//! data directory. The file and its rows are the SQLite crate's, reached
//! through the drivers registry ([`sluice_drivers::demo`]); the server opens
//! it as any configured database, through its driver.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use sluice_gateway::config::{Config, ConfigError};

pub use sluice_drivers::demo::{DemoError, Prepared};

/// Rows in the demo table.
pub const DEMO_ROWS: u64 = 1_000_000;

/// `$XDG_DATA_HOME/sluice/demo.sqlite`, else `~/.local/share/sluice/demo.sqlite`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|value| !value.is_empty())
                .map(|home| PathBuf::from(home).join(".local/share"))
        })?;
    Some(base.join("sluice").join("demo.sqlite"))
}

/// Makes sure `path` holds the demo table with `rows` rows
/// ([`sluice_drivers::demo::ensure`]), with a progress bar while it is built
/// when standard error is a terminal.
pub fn ensure(path: &Path, rows: u64) -> Result<Prepared, DemoError> {
    let mut bar = None;
    let prepared = sluice_drivers::demo::ensure(path, rows, |written| {
        bar.get_or_insert_with(|| progress_bar(rows))
            .set_position(written)
    });
    if let (Ok(_), Some(bar)) = (&prepared, bar) {
        bar.finish_and_clear();
    }
    prepared
}

fn progress_bar(rows: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(rows), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "creating the demo database {bar:40} {human_pos}/{human_len} rows ({eta} left)",
        )
        .expect("static progress template"),
    );
    bar
}

/// The demo's named queries over the file at `path`, in the same TOML a user
/// would write (and checked by the same code).
pub fn config(path: &Path) -> Result<Config, ConfigError> {
    let path = toml::Value::String(path.display().to_string()).to_string();
    let text = format!(
        r#"
[server]
shutdown_grace = "10s"

[databases.demo]
url = {path}
pool_size = 64
pool_wait = "5s"

[queries.payment_events]
description = "Payment events in id order, optionally only one status and from a moment on"
sql = """
select * from payment_events
where (?1 is null or status = ?1) and (?2 is null or created_at >= ?2)
order by id"""
params = [
  {{ name = "status", type = "text", description = "settled, pending, failed or refunded" }},
  {{ name = "since", type = "timestamptz", description = "e.g. 2024-06-01T00:00:00Z" }},
]

[queries.account_payments]
description = "The payment events of one account"
sql = "select * from payment_events where account_id = ?1 order by id"
params = [{{ name = "account_id", type = "bigint", required = true }}]

[queries.daily_totals]
description = "Number and total amount of payments per day and currency"
sql = """
select substr(created_at, 1, 10) as day, currency, count(*) as payments,
       round(sum(amount), 2) as total
from payment_events
where (?1 is null or created_at >= ?1)
group by 1, 2 order by 1, 2"""
params = [{{ name = "since", type = "timestamptz" }}]
statement_timeout = "60s"
"#
    );
    Config::parse(&text, "(demo configuration)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_configuration_is_valid() {
        let config = config(Path::new("/tmp/x \"quoted\".sqlite")).unwrap();
        assert_eq!(config.queries.len(), 3);
    }
}
