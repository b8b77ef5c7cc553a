//! The one clap definition of the commands and their flags: `main` parses
//! the command line with it, `about` makes the completion scripts and man
//! pages of it, and `reference` the book's command page.

use clap::{Parser, Subcommand};

use crate::cpus::usable_cpus;
use crate::{about, call, copy, export, import, lab, proxy, serve};

/// `sluice`'s arguments: one of the commands.
#[derive(Parser)]
#[command(name = "sluice", version = about::VERSION, about = "Stream SQL query results in constant memory, round trips counted", long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands, each with its arguments.
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run a query and stream its rows as NDJSON, JSON, CSV, Arrow or Parquet.
    Export(export::ExportArgs),
    /// Load NDJSON, CSV or an Arrow stream into a table, atomically.
    Import(import::ImportArgs),
    /// Copy a query's or a table's rows into a table of another database, atomically.
    Copy(copy::CopyArgs),
    /// Run one statement for many parameter sets, pipelined: many calls, one trip.
    Call(call::CallArgs),
    /// Forward PostgreSQL traffic with added latency, counting round trips per statement.
    Proxy(proxy::ProxyArgs),
    /// Serve named queries over HTTP as streams (--demo: a built-in SQLite database).
    Serve(serve::ServeArgs),
    /// Measure round trips against your database at a few RTTs and write a report.
    Lab(lab::LabArgs),
    /// Print the version, the commit and the build date (--json: also the
    /// databases and formats built in).
    Version(about::VersionArgs),
    /// Print a shell completion script: `sluice completions bash > /etc/bash_completion.d/sluice`.
    Completions(about::CompletionsArgs),
    /// Write the man pages into a directory (for packaging).
    #[command(hide = true)]
    Man(about::ManArgs),
}

impl Command {
    /// Worker threads for the command's runtime: the gateway, the proxy and a
    /// copy's parallel jobs serve many streams at once and get the machine;
    /// the commands that move one stream keep two (the stream, and signals
    /// and the progress line beside it).
    pub(crate) fn worker_threads(&self) -> usize {
        match self {
            Command::Serve(arguments) => serve::worker_threads(arguments),
            Command::Proxy(_) | Command::Copy(_) => usable_cpus().max(2),
            _ => 2,
        }
    }
}
