//! `sluice serve --demo`: a SQLite file holding the seed's `payment_events`, made
//! on first start and reused afterwards, and a configuration of named queries over
//! it. No database server is needed; the file goes to the user's data directory.
//!
//! The data is generated, deterministic (a hash of the row id, so every machine
//! gets the same rows) and shaped like the benchmark's PostgreSQL table: skewed
//! statuses, log-uniform amounts, descriptions needing CSV quoting and JSON
//! escaping, ~2% NULL descriptions, JSON payloads. Column types are declared so
//! sluice renders each value as PostgreSQL would (see `sluice_sqlite::kind`):
//!
//! | column | declared | stored as | rendered as |
//! |---|---|---|---|
//! | `id`, `account_id` | `INTEGER`, `BIGINT` | integer | number |
//! | `amount` | `DECIMAL TEXT` | text, e.g. `12.30` (TEXT affinity keeps the digits) | exact decimal number |
//! | `currency`, `status`, `description` | `CHAR(3)`, `TEXT` | text | string |
//! | `created_at` | `TIMESTAMPTZ` | UTC text `2024-01-01 00:00:30.5+00` | `2024-01-01T00:00:30.5+00:00` |
//! | `payload` | `JSONB` | JSON text | embedded JSON |

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use chrono::{NaiveDate, TimeDelta};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use sluice_formats::param_type::canonical_time;
use sluice_gateway::config::{Config, ConfigError};

/// Rows in the demo table.
pub const DEMO_ROWS: u64 = 1_000_000;
/// Bump when the generator changes, so old files are rebuilt.
const DEMO_VERSION: i64 = 1;

/// A failure preparing the demo file.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// SQLite failed.
    #[error("demo database {path}: {source}")]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: rusqlite::Error,
    },
    /// The file system failed.
    #[error("demo database {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// What [`ensure`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Prepared {
    /// The file was there with the right data.
    Reused,
    /// The file was (re)built, in this many seconds.
    Created(f64),
}

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

/// Makes sure `path` holds the demo table with `rows` rows: reuses it when it
/// does, otherwise builds it in a temporary file (with a progress bar when
/// standard error is a terminal) and renames it into place, so an interrupted
/// build is never mistaken for a finished one.
pub fn ensure(path: &Path, rows: u64) -> Result<Prepared, DemoError> {
    let sqlite = |source| DemoError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let io = |source| DemoError::Io {
        path: path.to_owned(),
        source,
    };
    if is_current(path, rows) {
        return Ok(Prepared::Reused);
    }
    let started = Instant::now();
    if let Some(directory) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(directory).map_err(io)?;
    }
    let partial = path.with_extension("sqlite.partial");
    match std::fs::remove_file(&partial) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(io(error)),
        _ => {}
    }
    let mut connection = rusqlite::Connection::open(&partial).map_err(sqlite)?;
    // A scratch file until renamed: no journal, no syncs.
    connection
        .execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
             CREATE TABLE payment_events (
                 id          INTEGER PRIMARY KEY,
                 account_id  BIGINT NOT NULL,
                 amount      DECIMAL TEXT NOT NULL,
                 currency    CHAR(3) NOT NULL,
                 status      TEXT NOT NULL,
                 created_at  TIMESTAMPTZ NOT NULL,
                 description TEXT,
                 payload     JSONB NOT NULL
             );
             CREATE TABLE sluice_demo (version INTEGER NOT NULL, rows INTEGER NOT NULL);",
        )
        .map_err(sqlite)?;
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(Some(rows), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "creating the demo database {bar:40} {human_pos}/{human_len} rows ({eta} left)",
            )
            .expect("static progress template"),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let transaction = connection.transaction().map_err(sqlite)?;
    {
        let mut insert = transaction
            .prepare("INSERT INTO payment_events VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
            .map_err(sqlite)?;
        let start = NaiveDate::from_ymd_opt(2024, 1, 1)
            .and_then(|date| date.and_hms_opt(0, 0, 0))
            .expect("a valid date");
        for id in 1..=rows {
            let row = DemoRow::generate(id, start);
            insert
                .execute(rusqlite::params![
                    id as i64,
                    row.account_id,
                    row.amount,
                    row.currency,
                    row.status,
                    row.created_at,
                    row.description,
                    row.payload
                ])
                .map_err(sqlite)?;
            if id % 10_000 == 0 {
                bar.set_position(id);
            }
        }
    }
    transaction
        .execute(
            "INSERT INTO sluice_demo VALUES (?1, ?2)",
            rusqlite::params![DEMO_VERSION, rows as i64],
        )
        .map_err(sqlite)?;
    transaction
        .execute_batch(
            "CREATE INDEX payment_events_account ON payment_events (account_id);
             CREATE INDEX payment_events_created ON payment_events (created_at);",
        )
        .map_err(sqlite)?;
    transaction.commit().map_err(sqlite)?;
    connection.execute_batch("ANALYZE").map_err(sqlite)?;
    drop(connection);
    bar.finish_and_clear();
    std::fs::rename(&partial, path).map_err(io)?;
    Ok(Prepared::Created(started.elapsed().as_secs_f64()))
}

fn is_current(path: &Path, rows: u64) -> bool {
    let Ok(connection) =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return false;
    };
    connection
        .query_row("SELECT version, rows FROM sluice_demo", [], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
        })
        .is_ok_and(|found| found == (DEMO_VERSION, rows as i64))
}

/// SplitMix64: a fast, well-mixed hash of (row, stream), so rows are reproducible.
fn hash(id: u64, stream: u64) -> u64 {
    let mut z = id
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(stream.wrapping_mul(0xbf58_476d_1ce4_e5b9));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct DemoRow {
    account_id: i64,
    amount: String,
    currency: &'static str,
    status: &'static str,
    created_at: String,
    description: Option<String>,
    payload: String,
}

impl DemoRow {
    fn generate(id: u64, start: chrono::NaiveDateTime) -> DemoRow {
        let h = |stream| hash(id, stream);
        let pick =
            |stream, items: &[&'static str]| items[(h(stream) % items.len() as u64) as usize];
        let unit = (h(2) % 1_000_000) as f64 / 1_000_000.0;
        let cents = (((unit * 11.5).exp() - 0.99) * 100.0).round().max(1.0) as u64;
        let status = match h(4) % 100 {
            0..=71 => "settled",
            72..=86 => "pending",
            87..=95 => "failed",
            _ => "refunded",
        };
        let moment = start
            + TimeDelta::seconds(id as i64 * 30)
            + TimeDelta::microseconds((h(5) % 30_000_000) as i64);
        let description = (h(6) % 50 != 0).then(|| match h(7) % 5 {
            0 => format!(
                "Order #{} – {}",
                100_000 + h(8) % 900_000,
                pick(
                    9,
                    &[
                        "Acme, Inc.",
                        "Blue Bottle Café",
                        "O'Reilly Media",
                        "Smith & Sons",
                        "Nordström AB",
                        "\"Best\" Widgets Ltd"
                    ]
                )
            ),
            1 => format!(
                "Refund for \"{}\", ref {:X}",
                pick(
                    8,
                    &[
                        "Pro plan",
                        "Gift card",
                        "Shoes, size 42",
                        "12\" pizza",
                        "Annual licence"
                    ]
                ),
                h(9) % 16_777_216
            ),
            2 => format!(
                "Subscription, {} plan ({}), seat {}",
                pick(8, &["basic", "team", "enterprise"]),
                pick(9, &["monthly", "yearly"]),
                1 + h(10) % 250
            ),
            3 => format!(
                "Transfer to acct {}, memo: \"{}\"",
                1 + h(8) % 50_000,
                pick(
                    9,
                    &[
                        "rent",
                        "thanks!",
                        "split, dinner",
                        "loan – part 2",
                        "it's for the trip"
                    ]
                )
            ),
            _ => format!(
                "Card payment at {}, {}",
                pick(
                    8,
                    &[
                        "Joe's Diner",
                        "Café de Flore",
                        "SuperMart #12",
                        "\"The Pub\""
                    ]
                ),
                pick(
                    9,
                    &["London", "New York, NY", "Zürich", "São Paulo", "Kraków"]
                )
            ),
        });
        let error_code = if status == "failed" {
            format!(
                "\"{}\"",
                pick(5, &["card_declined", "insufficient_funds", "expired_card"])
            )
        } else {
            "null".into()
        };
        let payload = format!(
            r#"{{"card": {{"brand": "{}", "last4": "{:04}"}}, "source": "{}", "attempt": {}, "three_ds": {}, "error_code": {}, "risk_score": {}}}"#,
            pick(10, &["visa", "mastercard", "amex"]),
            h(2) % 10_000,
            pick(8, &["api", "web", "mobile", "batch"]),
            1 + h(9) % 3,
            h(3) % 3 == 0,
            error_code,
            (h(10) % 1000) as f64 / 1000.0,
        );
        DemoRow {
            account_id: (1 + h(1) % 50_000) as i64,
            amount: format!("{}.{:02}", cents / 100, cents % 100),
            currency: pick(
                3,
                &[
                    "USD", "USD", "USD", "EUR", "EUR", "GBP", "JPY", "CAD", "AUD", "CHF", "SEK",
                    "BRL",
                ],
            ),
            status,
            created_at: canonical_time(moment, "+00"),
            description,
            payload,
        }
    }
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
    fn rows_are_deterministic_and_well_formed() {
        let start = NaiveDate::from_ymd_opt(2024, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap();
        for id in 1..2000 {
            let row = DemoRow::generate(id, start);
            assert_eq!(row.amount, DemoRow::generate(id, start).amount);
            let (whole, cents) = row.amount.split_once('.').unwrap();
            assert!(
                whole.parse::<u64>().is_ok() && cents.len() == 2,
                "{}",
                row.amount
            );
            serde_json::from_str::<serde_json::Value>(&row.payload).unwrap();
            assert!(row.created_at.ends_with("+00"), "{}", row.created_at);
        }
    }

    #[test]
    fn the_demo_configuration_is_valid() {
        let config = config(Path::new("/tmp/x \"quoted\".sqlite")).unwrap();
        assert_eq!(config.queries.len(), 3);
    }
}
