//! `sluice call`: one statement run for many parameter sets, pipelined.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use sluice_core::calls::{CallOutcome, Transaction};
use sluice_core::{Error, ErrorKind, Meter};
use sluice_formats::{CallLines, ParamLines, Signature};
use tokio::io::{AsyncBufRead, BufReader};

use crate::console::err_line;
use crate::exit::exit_code;
use crate::interrupt::Interrupt;
use crate::report::Stats;
use crate::vocabulary::{statement_help, WriteDatabase};
use crate::wait::WaitArgs;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransactionMode {
    Single,
    Each,
}

/// Arguments of `sluice call`.
#[derive(Args)]
pub struct CallArgs {
    #[command(flatten)]
    database: WriteDatabase,

    #[arg(long, value_name = "SQL", help = statement_help())]
    query: String,

    /// Parameter sets, one per line: a JSON array (`[1, "x"]`), an object whose
    /// keys are named by --param-names (or are `1`, `2`, …), or, for a statement
    /// with one parameter, a single value. Missing values are NULL. `-` or
    /// nothing reads standard input.
    #[arg(long = "params-file", value_name = "FILE")]
    params: Option<PathBuf>,

    /// Names of the parameters, in order, for parameter sets given as JSON objects, comma-separated.
    #[arg(long, value_delimiter = ',')]
    param_names: Vec<String>,

    /// single: all calls in one transaction, any failure rolls back everything
    /// (default). each: every call commits or fails on its own.
    #[arg(long, value_enum, default_value = "single")]
    transaction: TransactionMode,

    /// Bytes of requests sent but not yet answered, at most.
    #[arg(long, default_value_t = 1024 * 1024)]
    window_bytes: usize,

    /// Write results to this file instead of standard output.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,

    #[command(flatten)]
    wait: WaitArgs,

    /// Print calls, failures, round trips, time and peak memory to standard error.
    #[arg(long)]
    stats: bool,
}

/// Longest parameter-set line accepted; a longer one fails its call without
/// being held in memory.
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Runs the calls and returns the process exit code.
pub async fn run(arguments: CallArgs) -> u8 {
    let interrupt = Interrupt::install_saying(
        "the running statement was cancelled on the server; calls already committed stay",
    );
    match call(&arguments, &interrupt).await {
        Ok(code) => code,
        // The server reports the cancel as an error; it is the user's Ctrl-C.
        Err(_) if interrupt.happened() => exit_code(&interrupt.wait_for_cancel().await),
        Err(error) => {
            crate::report::print_error(&error, &arguments.query, None);
            exit_code(&error)
        }
    }
}

async fn call(arguments: &CallArgs, interrupt: &Interrupt) -> Result<u8, Error> {
    let started = Instant::now();
    let target = sluice_drivers::all().open(&arguments.database.url)?;
    let reader: Box<dyn AsyncBufRead + Unpin + Send> = match arguments
        .params
        .as_ref()
        .filter(|path| path.as_os_str() != "-")
    {
        Some(path) => Box::new(BufReader::with_capacity(
            256 * 1024,
            tokio::fs::File::open(path).await.map_err(|error| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot read {}: {error}", path.display()),
                )
            })?,
        )),
        None => Box::new(BufReader::with_capacity(256 * 1024, tokio::io::stdin())),
    };
    let mut output: Box<dyn std::io::Write + Send> = match &arguments.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|error| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot write {}: {error}", path.display()),
                )
            })?,
        )),
        None => Box::new(std::io::BufWriter::with_capacity(
            64 * 1024,
            std::io::stdout(),
        )),
    };
    let meter = Meter::new();
    let mut session = target.connect(&meter).await?;
    interrupt.arm(session.canceller());
    arguments.wait.apply(&mut *session)?;
    let connected = meter.snapshot();
    let encryption = session.encryption();
    let facts = session.facts();
    let spell = session.param_spelling();
    let pipeline = session.prepare_calls(&arguments.query).await?;
    let names = if arguments.param_names.is_empty() {
        (1..=pipeline.parameters()).map(|n| n.to_string()).collect()
    } else if arguments.param_names.len() == pipeline.parameters() {
        arguments.param_names.clone()
    } else {
        return Err(Error::new(
            ErrorKind::Config,
            format!(
                "--param-names gives {} names, but the statement takes {} parameters",
                arguments.param_names.len(),
                pipeline.parameters()
            ),
        ));
    };
    let mut lines = CallLines::new(pipeline.schema().clone());
    let mut failure: Option<(u64, String)> = None;
    let mut report = |line: u64, outcome: CallOutcome<'_>| -> Result<(), Error> {
        match &outcome {
            CallOutcome::Failed(db) => {
                failure
                    .get_or_insert((line, format!("{} {}: {}", db.severity, db.code, db.message)));
            }
            CallOutcome::Invalid(reason) => {
                failure.get_or_insert((line, (*reason).to_owned()));
            }
            CallOutcome::Done { .. } | CallOutcome::RolledBack => {}
        }
        output
            .write_all(lines.line(line, outcome)?)
            .map_err(Error::output)
    };
    let mut source = ParamLines::new(reader, Signature::untyped(names), spell, MAX_LINE_BYTES);
    let mode = match arguments.transaction {
        TransactionMode::Single => Transaction::Single,
        TransactionMode::Each => Transaction::Each,
    };
    let summary = pipeline
        .run(
            &mut source,
            mode,
            arguments.window_bytes.max(1),
            &mut report,
        )
        .await?;
    output.flush().map_err(Error::output)?;
    session.close().await;
    if interrupt.happened() {
        // The failed call is the user's Ctrl-C: `run` lets the handler say so.
        return Err(Error::new(ErrorKind::Cancelled, "interrupted"));
    }
    let mut code = 0;
    if summary.failed > 0 {
        match (mode, &failure) {
            (Transaction::Single, Some((line, reason))) => {
                err_line!("sluice: line {line}: {reason}; nothing was committed");
                code = if reason.starts_with("ERROR") || reason.starts_with("FATAL") {
                    crate::exit::DATABASE
                } else {
                    crate::exit::BAD_INPUT
                };
            }
            _ => err_line!(
                "sluice: {} of {} calls failed; the others were committed",
                summary.failed,
                summary.calls
            ),
        }
    }
    if arguments.stats {
        Stats {
            figures: vec![
                ("calls", summary.calls),
                ("succeeded", summary.succeeded),
                ("failed", summary.failed),
            ],
            part_rows: Vec::new(),
            rows: summary.calls,
            connect: connected,
            operation: meter.snapshot() - connected,
            elapsed: started.elapsed(),
            encryption,
            facts,
        }
        .print();
    }
    Ok(code)
}
