//! What the lab runs and what it found: its options, the experiments, one
//! measurement per cell (experiment, variant, RTT) and the results of a run.
//! Every other module reads these; this one reads none of them.

use std::time::Duration;

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
    /// only; `None` elsewhere, or when the server would not say): see [`crate::wal`].
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
