//! `sluice lab`: the seeds' round-trip experiments against the user's database,
//! through the built-in proxy at a few RTTs, written up as a report folder.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use sluice_core::{parse_duration, Error, ErrorKind};
use sluice_lab::LabOptions;

use crate::console::{err_line, out_line};
use crate::exit::exit_code;

/// Arguments of `sluice lab`.
#[derive(Args)]
pub struct LabArgs {
    /// Database URL, e.g. postgres://user:password@host:5432/database (must be TCP:
    /// the lab puts its proxy between sluice and this server).
    #[arg(long, env = "SLUICE_DB", hide_env_values = true)]
    db: String,

    /// Report folder (index.html, one SVG per chart, summary.md, results.json).
    #[arg(
        long,
        short = 'o',
        value_name = "DIRECTORY",
        default_value = "sluice-lab-report"
    )]
    output: PathBuf,

    /// Fewer rows, RTTs 0 and 1 ms, a shorter budget: under a minute.
    #[arg(long)]
    quick: bool,

    /// RTTs to inject, comma-separated, e.g. 0,1ms,5ms [default: 0,1ms,5ms; --quick: 0,1ms].
    #[arg(long, value_delimiter = ',', value_parser = parse_duration)]
    rtt: Vec<Duration>,

    /// Rows exported per fetch size [default: 100000; --quick: 20000].
    #[arg(long)]
    rows: Option<u64>,

    /// Export the first --rows rows of this table (a table's name, not SQL)
    /// instead of generated rows.
    #[arg(long)]
    table: Option<String>,

    /// Rows inserted per method [default: 10000; --quick: 2000].
    #[arg(long)]
    insert_rows: Option<u64>,

    /// Large objects read per style [default: 200; --quick: 100].
    #[arg(long)]
    lob_count: Option<u64>,

    /// Bytes per large object [default: 16384; --quick: 8192].
    #[arg(long)]
    lob_bytes: Option<u64>,

    /// Small calls per style [default: 2000; --quick: 500].
    #[arg(long)]
    calls: Option<u64>,

    /// Time after which a cell whose round trips grow with its rows stops, the rest
    /// being extrapolated [default: 3s; --quick: 1s].
    #[arg(long, value_parser = parse_duration)]
    budget: Option<Duration>,
}

impl LabArgs {
    fn options(&self) -> LabOptions {
        let mut options = if self.quick {
            LabOptions::quick()
        } else {
            LabOptions::full()
        };
        if !self.rtt.is_empty() {
            options.rtts = self.rtt.clone();
        }
        if let Some(rows) = self.rows {
            options.export_rows = rows;
        }
        options.table = self.table.clone();
        if let Some(rows) = self.insert_rows {
            options.insert_rows = rows;
        }
        if let Some(count) = self.lob_count {
            options.lob_count = count;
        }
        if let Some(bytes) = self.lob_bytes {
            options.lob_bytes = bytes;
        }
        if let Some(calls) = self.calls {
            options.calls = calls;
        }
        if let Some(budget) = self.budget {
            options.cell_budget = budget;
        }
        options
    }
}

/// Runs the lab and returns the process exit code.
pub async fn run(arguments: LabArgs) -> u8 {
    match lab(&arguments).await {
        Ok(()) => 0,
        Err(error) => {
            err_line!("sluice: {error}");
            exit_code(&error)
        }
    }
}

async fn lab(arguments: &LabArgs) -> Result<(), Error> {
    let options = arguments.options();
    let mut progress = |line: &str| err_line!("sluice lab: {line}");
    let results = tokio::select! {
        results = sluice_lab::run(&arguments.db, &options, &mut progress) => results?,
        _ = tokio::signal::ctrl_c() => {
            err_line!("sluice lab: interrupted; dropping the lab's tables");
            if let Err(error) = sluice_lab::clean_up(&arguments.db).await {
                err_line!("sluice: cleaning up failed: {error}");
            }
            return Err(Error::new(ErrorKind::Cancelled, "interrupted"));
        }
    };
    sluice_lab::write_report(&results, &arguments.output).map_err(|error| {
        Error::new(
            ErrorKind::Io,
            format!(
                "cannot write the report to {}: {error}",
                arguments.output.display()
            ),
        )
    })?;
    for line in sluice_lab::recommendations(&results) {
        out_line!("- {line}");
    }
    err_line!(
        "sluice lab: report written to {} (took {})",
        arguments.output.join("index.html").display(),
        sluice_lab::human_duration(results.elapsed)
    );
    Ok(())
}
