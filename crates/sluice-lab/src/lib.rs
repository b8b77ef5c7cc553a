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
mod figures;
mod model;
pub mod report;
pub mod wal;

pub use advice::recommendations;
pub use experiments::{clean_up, run};
pub use figures::{human_duration, rtt_label, thousands};
pub use model::{Experiment, LabOptions, LabResults, Measurement, PathLatency};
pub use report::{write_report, CHARTS};
