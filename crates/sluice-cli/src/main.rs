//! `sluice`: stream SQL results out of databases in constant memory, with the
//! round trips counted. This binary is a thin shell over the library crates: it
//! parses arguments, wires a source to an encoder and an output, and turns errors
//! into one clear line and an exit code.
// A print that panics on a closed pipe must not come back: see `console`.
#![deny(clippy::print_stdout, clippy::print_stderr)]
// The doc comments of the argument structs are clap's help texts, read in a
// terminal (`[default: …]`, `cut[:TRIGGER]`), not links for rustdoc.
#![allow(rustdoc::broken_intra_doc_links)]

mod about;
mod call;
mod console;
mod copy;
mod export;
mod import;
mod interrupt;
mod lab;
mod machine;
mod output;
mod parts;
mod proxy;
#[cfg(test)]
mod reference;
mod report;
mod serve;
mod vocabulary;
mod wait;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::console::err_line;

/// Exit codes, documented in docs/src/errors.md.
pub mod exit {
    /// The database reported an error for the statement.
    pub const DATABASE: u8 = 1;
    /// Invalid arguments or connection settings.
    pub const USAGE: u8 = 2;
    /// The database could not be reached, refused the login, or went away.
    pub const CONNECTION: u8 = 3;
    /// Reading input or writing output failed.
    pub const IO: u8 = 4;
    /// The input holds a bad record (import, aborting on the first error).
    pub const BAD_INPUT: u8 = 5;
    /// `sluice proxy --fail-on`: the traffic showed a pattern of a listed kind.
    pub const FINDINGS: u8 = 6;
    /// Interrupted by Ctrl-C (128 + SIGINT).
    pub const INTERRUPTED: u8 = 130;
    /// Stopped by SIGTERM (128 + SIGTERM).
    pub const TERMINATED: u8 = 143;

    /// Every exit code and what it means to a user: the book's table of exit
    /// codes is made from this (a test keeps docs/src/errors.md current).
    pub const MEANINGS: [(u8, &str); 9] = [
        (
            0,
            "success, or the reader closed the output early (`| head`)",
        ),
        (
            DATABASE,
            "the database reported an error for the statement (bad SQL, wrong parameter type, \
             division by zero mid-stream, a row the table refuses on import, …)",
        ),
        (
            USAGE,
            "invalid arguments or connection settings (unparseable URL, wrong number of \
             `--param` values), or a command the database cannot serve (`sluice import` into a \
             SQLite file, `--jobs` above 1 on MariaDB)",
        ),
        (
            CONNECTION,
            "the server could not be reached, refused the login, broke the protocol (e.g. asked \
             for a local file sluice did not offer), or went away (including a session it ended \
             with a `FATAL` error, e.g. `pg_terminate_backend` or a shutdown, a connection cut or \
             reset mid-way, and a server silent for longer than `--timeout`)",
        ),
        (
            IO,
            "reading or writing a file failed (including an input cut off mid-way)",
        ),
        (
            BAD_INPUT,
            "import: the input holds a bad record (malformed JSON, unknown key, invalid UTF-8, \
             line too long) and `--on-error` is `abort`, or its CSV header does not name the \
             columns it must (`--columns`, `--header match`)",
        ),
        (
            FINDINGS,
            "`sluice proxy --fail-on`: the traffic showed a finding of a listed kind ([Findings \
             as data](proxy.md#findings-as-data-and---fail-on))",
        ),
        (
            INTERRUPTED,
            "interrupted with Ctrl-C (the query was cancelled)",
        ),
        (
            TERMINATED,
            "stopped with SIGTERM, which `export`, `import`, `copy` and `call` take as Ctrl-C \
             (the query was cancelled)",
        ),
    ];
}

#[derive(Parser)]
#[command(name = "sluice", version = about::VERSION, about = "Stream SQL query results in constant memory, round trips counted", long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
    fn worker_threads(&self) -> usize {
        match self {
            Command::Serve(arguments) => serve::worker_threads(arguments),
            Command::Proxy(_) | Command::Copy(_) => usable_cpus().max(2),
            _ => 2,
        }
    }
}

/// The CPUs this process may use. The standard library reads the scheduler's
/// affinity mask and the cgroup CPU quota (v1 and v2), so a container limited
/// to 2 CPUs on a 64-core host counts 2.
pub fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}

fn main() -> ExitCode {
    let arguments = vocabulary::modernise(std::env::args_os().collect());
    let code = match Cli::parse_from(arguments).command {
        // The commands about the binary itself need no runtime.
        Command::Version(arguments) => about::version(&arguments),
        Command::Completions(arguments) => about::completions(&arguments),
        Command::Man(arguments) => about::man(&arguments),
        command => run(command),
    };
    ExitCode::from(code)
}

/// Runs a command that works on databases, in a runtime sized for it.
fn run(command: Command) -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(command.worker_threads())
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            err_line!("sluice: could not start the async runtime: {error}");
            return exit::IO;
        }
    };
    let code = runtime.block_on(async {
        match command {
            Command::Export(arguments) => export::run(arguments).await,
            Command::Import(arguments) => import::run(arguments).await,
            Command::Copy(arguments) => copy::run(arguments).await,
            Command::Call(arguments) => call::run(arguments).await,
            Command::Proxy(arguments) => proxy::run(arguments).await,
            Command::Serve(arguments) => serve::run(arguments).await,
            Command::Lab(arguments) => lab::run(arguments).await,
            Command::Version(arguments) => about::version(&arguments),
            Command::Completions(arguments) => about::completions(&arguments),
            Command::Man(arguments) => about::man(&arguments),
        }
    });
    // Do not wait for a cancel request or progress task still in flight.
    runtime.shutdown_background();
    code
}
