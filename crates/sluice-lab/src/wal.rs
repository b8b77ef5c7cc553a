//! The server-side cost of each insert method: the WAL (write-ahead log) bytes the
//! server wrote for it, read as the difference of the WAL insert position before
//! and after the method's inserts on the method's own connection (seed 002's
//! redo-size experiment), and the per-method figures the report shows.
//!
//! It is a measurement, not an exact count: WAL that other sessions (or the
//! server's own background work) write meanwhile is counted too. Each method runs
//! once per RTT; that noise only ever adds, so the figure kept for a method is its
//! smallest per-row one.

use sluice_core::{Error, ErrorKind};
use sluice_postgres::Connection;

use crate::{Experiment, LabResults, Measurement};

/// What the report says about where the figures come from and how exact they are.
pub const NOTE: &str = "WAL bytes: the difference of `pg_current_wal_insert_lsn()` \
    read on the method's connection before and after its inserts (outside the timed part), \
    for the rows actually inserted; the smallest per-row figure over the RTTs is shown. \
    WAL written meanwhile by other sessions on the same server is counted too: a \
    measurement, not an exact count.";

/// The WAL figure of one insert method.
#[derive(Debug, Clone, PartialEq)]
pub struct WalFigure {
    /// The insert method (`row-by-row`, `batch 100`, `pipelined`, `COPY`).
    pub variant: String,
    /// Rows inserted while it was measured.
    pub rows: u64,
    /// WAL bytes the server wrote meanwhile.
    pub bytes: u64,
    /// This method's bytes per row over COPY's, when COPY was measured.
    pub relative_to_copy: Option<f64>,
}

impl WalFigure {
    /// WAL bytes per row inserted.
    pub fn per_row(&self) -> f64 {
        self.bytes as f64 / self.rows.max(1) as f64
    }
}

/// The current WAL insert position, as text (`0/1A2B3C4`).
///
/// The insert position rather than `pg_current_wal_lsn()` (the write position):
/// the write position lags until WAL is written out (with `synchronous_commit =
/// off`, or while the WAL writer is behind), which would move bytes between
/// methods; the insert position counts the records as they are made.
pub(crate) async fn position(connection: &mut Connection) -> Result<String, Error> {
    let rows = connection
        .query_rows("select pg_current_wal_insert_lsn()::text", &[])
        .await?;
    first_value(rows)
}

/// WAL bytes written since `before` (a [`position`]).
pub(crate) async fn since(connection: &mut Connection, before: &str) -> Result<u64, Error> {
    let rows = connection
        .query_rows(
            "select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::int8",
            &[Some(before)],
        )
        .await?;
    let text = first_value(rows)?;
    // A negative difference cannot happen on one server; read it as nothing.
    Ok(text.parse::<i64>().map_or(0, |bytes| bytes.max(0) as u64))
}

fn first_value(rows: Vec<Vec<Option<String>>>) -> Result<String, Error> {
    rows.into_iter()
        .next()
        .and_then(|row| row.into_iter().next().flatten())
        .ok_or_else(|| Error::new(ErrorKind::Database, "no WAL position returned"))
}

/// The per-row figure of `m`, when it was measured.
fn per_row(m: &Measurement) -> Option<f64> {
    let bytes = m.wal_bytes?;
    (m.measured_units > 0).then(|| bytes as f64 / m.measured_units as f64)
}

/// One figure per insert method that was measured, in the order run: the cell
/// with the smallest WAL per row (the least noise from other sessions).
pub fn by_method(results: &LabResults) -> Vec<WalFigure> {
    let mut figures: Vec<WalFigure> = results
        .variants(Experiment::Insert)
        .into_iter()
        .filter_map(|variant| {
            let best = results
                .measurements
                .iter()
                .filter(|m| m.experiment == Experiment::Insert && m.variant == variant)
                .filter(|m| per_row(m).is_some())
                .min_by(|a, b| per_row(a).partial_cmp(&per_row(b)).expect("finite"))?;
            Some(WalFigure {
                variant,
                rows: best.measured_units,
                bytes: best.wal_bytes.unwrap_or(0),
                relative_to_copy: None,
            })
        })
        .collect();
    let copy = figures
        .iter()
        .find(|f| f.variant == "COPY")
        .map(WalFigure::per_row);
    if let Some(copy) = copy.filter(|&copy| copy > 0.0) {
        for figure in &mut figures {
            figure.relative_to_copy = Some(figure.per_row() / copy);
        }
    }
    figures
}

/// Why no figure is shown, when none is: the server's refusal, or that the lab
/// ran no insert.
pub fn unavailable(results: &LabResults) -> Option<String> {
    if !by_method(results).is_empty() {
        return None;
    }
    Some(match &results.wal_error {
        Some(error) => {
            format!("unavailable: the server refused to report its WAL position ({error})")
        }
        None => "unavailable: no insert was measured".to_owned(),
    })
}

/// `1.23×`, `12×`.
pub fn times(factor: f64) -> String {
    if factor >= 10.0 {
        format!("{factor:.0}×")
    } else {
        format!("{factor:.2}×")
    }
}

/// The table's rows: method, rows, WAL bytes, WAL bytes per row, relative to COPY.
pub fn table_rows(results: &LabResults) -> Vec<[String; 5]> {
    by_method(results)
        .iter()
        .map(|f| {
            [
                f.variant.clone(),
                crate::thousands(f.rows),
                crate::thousands(f.bytes),
                format!("{:.1}", f.per_row()),
                f.relative_to_copy.map_or("–".to_owned(), times),
            ]
        })
        .collect()
}

/// The table's header.
pub const TABLE_HEADER: [&str; 5] = [
    "method",
    "rows",
    "WAL bytes",
    "WAL bytes per row",
    "relative to COPY",
];

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::LabOptions;

    fn insert(variant: &str, rtt_ms: u64, rows: u64, wal_bytes: Option<u64>) -> Measurement {
        Measurement {
            experiment: Experiment::Insert,
            variant: variant.into(),
            rtt: Duration::from_millis(rtt_ms),
            units: rows,
            measured_units: rows,
            time: Duration::from_millis(10),
            round_trips: 2,
            measured_time: Duration::from_millis(10),
            measured_round_trips: 2,
            proxy_round_trips: 2,
            wal_bytes,
        }
    }

    fn results(measurements: Vec<Measurement>, wal_error: Option<String>) -> LabResults {
        LabResults {
            server_version: "15".into(),
            upstream: "127.0.0.1:5432".into(),
            real_rtt: Duration::from_micros(100),
            latencies: Vec::new(),
            export_source: "generated".into(),
            options: LabOptions::quick(),
            measurements,
            elapsed: Duration::from_secs(1),
            wal_error,
        }
    }

    #[test]
    fn each_method_keeps_its_least_noisy_figure_relative_to_copy() {
        let results = results(
            vec![
                insert("row-by-row", 0, 100, Some(9000)),
                insert("COPY", 0, 100, Some(4000)),
                // Other sessions wrote meanwhile at 0 ms: the 1 ms figure is kept.
                insert("row-by-row", 1, 50, Some(4000)),
                insert("COPY", 1, 100, Some(5000)),
            ],
            None,
        );
        let figures = by_method(&results);
        assert_eq!(figures.len(), 2);
        assert_eq!((figures[0].rows, figures[0].bytes), (50, 4000));
        assert_eq!(figures[0].per_row(), 80.0);
        assert_eq!(figures[0].relative_to_copy, Some(2.0));
        assert_eq!(figures[1].relative_to_copy, Some(1.0));
        assert_eq!(unavailable(&results), None);
        assert_eq!(
            table_rows(&results)[0],
            ["row-by-row", "50", "4,000", "80.0", "2.00×"].map(String::from)
        );
        let advice = crate::advice::recommendations(&results);
        assert!(
            advice.iter().any(|line| line.starts_with(
                "Server side: row by row writes 80 bytes of WAL per row, 2.00× the 40 of COPY (measured:"
            )),
            "{advice:#?}"
        );
    }

    #[test]
    fn a_refused_wal_position_is_reported_unavailable_everywhere() {
        let refusal = "ERROR 42501: permission denied for function pg_current_wal_insert_lsn";
        let results = results(
            vec![
                insert("row-by-row", 0, 100, None),
                insert("COPY", 0, 100, None),
            ],
            Some(refusal.into()),
        );
        assert!(by_method(&results).is_empty());
        let reason = unavailable(&results).unwrap();
        assert!(
            reason.starts_with("unavailable") && reason.contains("42501"),
            "{reason}"
        );
        assert!(crate::report::markdown(&results).contains(&reason));
        assert!(crate::report::html(&results).contains("WAL bytes per row: unavailable"));
        let json = crate::report::json(&results);
        assert_eq!(json["wal"]["unavailable"], reason.as_str());
        assert!(!crate::advice::recommendations(&results)
            .iter()
            .any(|line| line.starts_with("Server side")));
    }
}
