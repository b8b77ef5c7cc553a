//! # sluice-lab
//!
//! `sluice lab`: the seeds' round-trip experiments run against a real PostgreSQL,
//! through sluice's own latency-injecting proxy ([`sluice_proxy::Proxy`]) at a few
//! round-trip times, with a report a person can read:
//!
//! - [`experiments`]: export time and round trips by fetch size, inserts (row by
//!   row, multi-row batches, pipelined, COPY), large objects inline versus
//!   locator-style, many small calls in a loop versus pipelined;
//! - [`wal`]: the server-side cost of each insert method, in WAL bytes per row;
//! - [`advice`]: recommendations computed from the measurements (how much of the
//!   time is spent waiting on the network, and what to do instead);
//! - [`chart`]: one SVG line chart per figure, axes with units, a legend per RTT;
//! - [`report`]: the report folder: `index.html`, the SVGs, `summary.md` and
//!   `results.json`.
//!
//! Time is measured with [`std::time::Instant`] around each experiment; round
//! trips with sluice's [`sluice_core::Meter`] on the client's socket, cross-checked
//! by the proxy's own count. Experiments whose round trips grow with the row count
//! stop when their time budget is spent; the rest of their rows are extrapolated
//! (linearly for time, by the known trips per row for round trips), and marked so
//! everywhere they are shown.
#![warn(missing_docs)]

pub mod advice;
pub mod chart;
pub mod experiments;
pub mod report;
pub mod wal;

use std::time::Duration;

pub use experiments::{clean_up, run};
pub use report::{write_report, CHARTS};

/// What the lab runs; each field states its default ([`LabOptions::full`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LabOptions {
    /// Round-trip times injected by the proxy, one pass of every experiment each.
    /// Default: 0, 1 and 5 ms.
    pub rtts: Vec<Duration>,
    /// Rows exported per cell. Default: 100,000.
    pub export_rows: u64,
    /// Export the first `export_rows` rows of this table instead of a
    /// generated one: a table's name, read by
    /// [`sluice_core::connect::Dialect::table_name`], never SQL.
    /// Default: none (a generated `sluice_lab_*` table).
    pub table: Option<String>,
    /// Fetch sizes tried besides streaming. Default: 10, 100, 1000, 10000.
    pub fetch_sizes: Vec<u32>,
    /// Rows inserted per cell. Default: 10,000.
    pub insert_rows: u64,
    /// Rows per multi-row `INSERT` (1 is row by row). Default: 1, 10, 100, 1000.
    pub batch_sizes: Vec<u64>,
    /// Large objects read per cell. Default: 200.
    pub lob_count: u64,
    /// Bytes per large object. Default: 16 KiB.
    pub lob_bytes: u64,
    /// Small calls per cell. Default: 2,000.
    pub calls: u64,
    /// Time after which a cell whose round trips grow with its rows stops and is
    /// extrapolated. Default: 3 s.
    pub cell_budget: Duration,
}

impl LabOptions {
    /// The full lab: RTTs 0, 1 and 5 ms, 100,000 rows exported (about 1–2 minutes).
    pub fn full() -> LabOptions {
        LabOptions {
            rtts: vec![
                Duration::ZERO,
                Duration::from_millis(1),
                Duration::from_millis(5),
            ],
            export_rows: 100_000,
            table: None,
            fetch_sizes: vec![10, 100, 1000, 10_000],
            insert_rows: 10_000,
            batch_sizes: vec![1, 10, 100, 1000],
            lob_count: 200,
            lob_bytes: 16 * 1024,
            calls: 2000,
            cell_budget: Duration::from_secs(3),
        }
    }

    /// `--quick`: RTTs 0 and 1 ms, fewer rows, a shorter budget (well under a minute).
    pub fn quick() -> LabOptions {
        LabOptions {
            rtts: vec![Duration::ZERO, Duration::from_millis(1)],
            export_rows: 20_000,
            insert_rows: 2000,
            lob_count: 100,
            lob_bytes: 8 * 1024,
            calls: 500,
            cell_budget: Duration::from_millis(1000),
            ..LabOptions::full()
        }
    }
}

impl Default for LabOptions {
    fn default() -> LabOptions {
        LabOptions::full()
    }
}

/// One experiment family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Experiment {
    /// Export time and round trips by fetch size.
    Export,
    /// Insert time and round trips by method.
    Insert,
    /// Large objects inline versus locator-style.
    Lob,
    /// Many small calls: a loop versus pipelined.
    Calls,
}

impl Experiment {
    /// All of them, in report order.
    pub const ALL: [Experiment; 4] = [
        Experiment::Export,
        Experiment::Insert,
        Experiment::Lob,
        Experiment::Calls,
    ];

    /// A short identifier (file names, JSON).
    pub fn id(self) -> &'static str {
        match self {
            Experiment::Export => "export",
            Experiment::Insert => "insert",
            Experiment::Lob => "lob",
            Experiment::Calls => "calls",
        }
    }

    /// What one unit of work is called.
    pub fn unit(self) -> &'static str {
        match self {
            Experiment::Export | Experiment::Insert => "rows",
            Experiment::Lob => "objects",
            Experiment::Calls => "calls",
        }
    }
}

/// One cell: one variant of one experiment at one RTT.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The experiment.
    pub experiment: Experiment,
    /// The variant (`10`, `streaming`, `row-by-row`, `batch 100`, `pipelined`,
    /// `COPY`, `inline`, `locator`, `loop`).
    pub variant: String,
    /// The RTT the proxy added.
    pub rtt: Duration,
    /// Units (rows, objects, calls) the figures are for.
    pub units: u64,
    /// Units actually run; fewer than `units` when the budget ran out.
    pub measured_units: u64,
    /// Time for `units` (extrapolated when `measured_units < units`).
    pub time: Duration,
    /// Round trips for `units` (extrapolated likewise).
    pub round_trips: u64,
    /// Time actually measured.
    pub measured_time: Duration,
    /// Round trips actually counted by sluice's meter.
    pub measured_round_trips: u64,
    /// Round trips the proxy counted for the same work.
    pub proxy_round_trips: u64,
    /// WAL bytes the server wrote during the cell's `measured_units` (inserts
    /// only; `None` elsewhere, or when the server would not say): see [`wal`].
    pub wal_bytes: Option<u64>,
}

impl Measurement {
    /// Whether some of the figures are extrapolated.
    pub fn extrapolated(&self) -> bool {
        self.measured_units < self.units
    }

    /// Share of the time spent waiting on the network: round trips × `trip` (what
    /// one round trip costs on the path, see [`LabResults::trip_latency`]) over the
    /// time, at most 1.
    pub fn waiting_fraction(&self, trip: Duration) -> f64 {
        let time = self.time.as_secs_f64();
        if time <= 0.0 {
            return 0.0;
        }
        let waiting = self.round_trips as f64 * trip.as_secs_f64();
        (waiting / time).min(1.0)
    }

    /// Time in milliseconds.
    pub fn time_ms(&self) -> f64 {
        self.time.as_secs_f64() * 1e3
    }
}

/// Latency of `select 1` through the proxy at one injected RTT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathLatency {
    /// The RTT the proxy added.
    pub injected: Duration,
    /// Median time of a `select 1` through it.
    pub select1: Duration,
}

/// Everything one lab run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct LabResults {
    /// The server's version string.
    pub server_version: String,
    /// The server address the proxy forwarded to.
    pub upstream: String,
    /// Median time of a `select 1` straight to the server: the real path's RTT
    /// (plus the server's few microseconds).
    pub real_rtt: Duration,
    /// Median time of a `select 1` through the proxy at each RTT.
    pub latencies: Vec<PathLatency>,
    /// What the export read (`a generated table …` or `table …`).
    pub export_source: String,
    /// What was run.
    pub options: LabOptions,
    /// Every cell, in the order run.
    pub measurements: Vec<Measurement>,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// Why the WAL position could not be read, when it could not (the first
    /// refusal; the insert cells then have no [`Measurement::wal_bytes`]).
    pub wal_error: Option<String>,
}

impl LabResults {
    /// The cell of `experiment`/`variant` at `rtt`, if it ran.
    pub fn get(
        &self,
        experiment: Experiment,
        variant: &str,
        rtt: Duration,
    ) -> Option<&Measurement> {
        self.measurements
            .iter()
            .find(|m| m.experiment == experiment && m.variant == variant && m.rtt == rtt)
    }

    /// The variants of `experiment`, in the order run.
    pub fn variants(&self, experiment: Experiment) -> Vec<String> {
        let mut variants: Vec<String> = Vec::new();
        for m in self
            .measurements
            .iter()
            .filter(|m| m.experiment == experiment)
        {
            if !variants.contains(&m.variant) {
                variants.push(m.variant.clone());
            }
        }
        variants
    }

    /// What one round trip costs through the proxy at `rtt`: the median `select 1`
    /// measured there (injected RTT + the proxy's own + the real path's), or the
    /// injected plus the real path's RTT when it was not measured.
    pub fn trip_latency(&self, rtt: Duration) -> Duration {
        self.latencies
            .iter()
            .find(|l| l.injected == rtt)
            .map_or(rtt + self.real_rtt, |l| l.select1)
    }

    /// [`Measurement::waiting_fraction`] at the cell's own RTT.
    pub fn waiting(&self, m: &Measurement) -> f64 {
        m.waiting_fraction(self.trip_latency(m.rtt))
    }

    /// Recommendations for this network, computed from the measurements.
    pub fn recommendations(&self) -> Vec<String> {
        advice::recommendations(self)
    }
}

/// A duration in milliseconds for people: `0.04 ms`, `5 ms`, `1.23 s`.
pub fn human_duration(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1e3;
    if ms >= 100_000.0 {
        format!("{:.0} s", ms / 1e3)
    } else if ms >= 10_000.0 {
        format!("{:.1} s", ms / 1e3)
    } else if ms >= 1000.0 {
        let text = format!("{:.2}", ms / 1e3);
        format!("{} s", text.trim_end_matches('0').trim_end_matches('.'))
    } else if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else if ms >= 0.995 || ms == 0.0 {
        let text = format!("{ms:.2}");
        format!("{} ms", text.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{ms:.3} ms")
    }
}

/// An RTT as a series name: `0 ms RTT`, `5 ms RTT`.
pub fn rtt_label(rtt: Duration) -> String {
    format!("{} RTT", human_duration(rtt))
}

/// A count with thousands separators: `100,000`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let head = match digits.len() % 3 {
        0 => 3.min(digits.len()),
        n => n,
    };
    let mut out = digits[..head].to_owned();
    for group in digits.as_bytes()[head..].chunks(3) {
        out.push(',');
        out.extend(group.iter().map(|&b| b as char));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(12), "12");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(human_duration(Duration::ZERO), "0 ms");
        assert_eq!(human_duration(Duration::from_millis(5)), "5 ms");
        assert_eq!(human_duration(Duration::from_micros(1500)), "1.5 ms");
        assert_eq!(human_duration(Duration::from_micros(42)), "0.042 ms");
        assert_eq!(human_duration(Duration::from_millis(2500)), "2.5 s");
        assert_eq!(human_duration(Duration::from_millis(3000)), "3 s");
        assert_eq!(human_duration(Duration::from_millis(53_281)), "53.3 s");
        assert_eq!(rtt_label(Duration::from_millis(1)), "1 ms RTT");
    }

    #[test]
    fn waiting_is_trips_times_rtt_over_time() {
        let m = Measurement {
            experiment: Experiment::Export,
            variant: "10".into(),
            rtt: Duration::from_millis(5),
            units: 1000,
            measured_units: 1000,
            time: Duration::from_millis(1000),
            round_trips: 100,
            measured_time: Duration::from_millis(1000),
            measured_round_trips: 100,
            proxy_round_trips: 100,
            wal_bytes: None,
        };
        assert!((m.waiting_fraction(Duration::from_millis(5)) - 0.5).abs() < 1e-9);
        assert!(!m.extrapolated());
    }
}
