//! The demo's database (`sluice serve --demo`): a SQLite file holding
//! generated `payment_events`, made on first start and reused afterwards. It
//! is the one SQLite file sluice writes (everything else here only reads), so
//! it is made here, where SQLite is, and read back through the driver like
//! any other file.
//!
//! The data is generated, deterministic (a hash of the row id, so every machine
//! gets the same rows) and shaped like the benchmark's PostgreSQL table: skewed
//! statuses, log-uniform amounts, descriptions needing CSV quoting and JSON
//! escaping, ~2% NULL descriptions, JSON payloads. Column types are declared so
//! sluice renders each value as PostgreSQL would (see [`crate::kind`]):
//!
//! | column | declared | stored as | rendered as |
//! |---|---|---|---|
//! | `id`, `account_id` | `INTEGER`, `BIGINT` | integer | number |
//! | `amount` | `DECIMAL TEXT` | text, e.g. `12.30` (TEXT affinity keeps the digits) | exact decimal number |
//! | `currency`, `status`, `description` | `CHAR(3)`, `TEXT` | text | string |
//! | `created_at` | `TIMESTAMPTZ` | UTC text `2024-01-01 00:00:30.5+00` | `2024-01-01T00:00:30.5+00:00` |
//! | `payload` | `JSONB` | JSON text | embedded JSON |

use std::path::{Path, PathBuf};
use std::time::Instant;

use sluice_core::canonical::write_timestamp;

/// Bump when the generator changes, so old files are rebuilt.
const DEMO_VERSION: i64 = 1;
/// 2024-01-01 00:00 UTC in microseconds since 1970: the time of row 0.
const FIRST_EVENT_MICROS: i64 = 1_704_067_200_000_000;

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

/// Makes sure `path` holds the demo table with `rows` rows: reuses it when it
/// does, otherwise builds it in a temporary file and renames it into place, so
/// an interrupted build is never mistaken for a finished one. While building,
/// `progress` is told how many rows are written: 0 before the first, then
/// every 10,000.
pub fn ensure(
    path: &Path,
    rows: u64,
    mut progress: impl FnMut(u64),
) -> Result<Prepared, DemoError> {
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
    progress(0);
    let transaction = connection.transaction().map_err(sqlite)?;
    {
        let mut insert = transaction
            .prepare("INSERT INTO payment_events VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
            .map_err(sqlite)?;
        for id in 1..=rows {
            let row = DemoRow::generate(id);
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
                progress(id);
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
    /// Row `id`: the same on every machine.
    fn generate(id: u64) -> DemoRow {
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
        // Every 30 seconds from 2024-01-01 00:00 UTC, plus up to 30 more.
        let micros = FIRST_EVENT_MICROS + id as i64 * 30_000_000 + (h(5) % 30_000_000) as i64;
        let mut created_at = Vec::new();
        write_timestamp(i128::from(micros) * 1000, Some(0), &mut created_at)
            .expect("a 2024 timestamp");
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
            created_at: String::from_utf8(created_at).expect("ASCII"),
            description,
            payload,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_deterministic_and_well_formed() {
        for id in 1..2000 {
            let row = DemoRow::generate(id);
            assert_eq!(row.amount, DemoRow::generate(id).amount);
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
}
