//! `sluice import`: NDJSON, CSV or an Arrow IPC stream from a file or standard
//! input into a table.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use sluice_core::connect::{ImportRequest, Session};
use sluice_core::load::{
    ImportInput, ImportOptions, ImportSummary, Method, OnConflict, OnError, RejectSink, TableInfo,
    INSERT_ROWS,
};
use sluice_core::{Decoder, Error, ErrorKind, Meter, Progress, Rejected};
use sluice_formats::{CsvHeader, ExpectedNames, HeaderMismatch, InputFormat, InputOptions};
use tokio::io::AsyncRead;

use crate::console::err_line;
use crate::exit::exit_code;
use crate::interrupt::Interrupt;
use crate::machine;
use crate::report::{error_text, import_message, row_line, row_reason, ProgressLine, Stats};
use crate::vocabulary::{word, WriteDatabase};
use crate::wait::WaitArgs;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CopyFormatName {
    Binary,
    Text,
}

/// Arguments of `sluice import`.
#[derive(Args)]
pub struct ImportArgs {
    #[command(flatten)]
    database: WriteDatabase,

    /// The table to load: a table's name, not SQL (table or schema.table, each
    /// part bare or quoted as the database quotes names).
    #[arg(long)]
    table: String,

    /// Input file; `-` or nothing reads standard input.
    #[arg(value_name = "FILE")]
    input: Option<PathBuf>,

    /// Input format: ndjson, csv or arrow (an Arrow IPC stream, its fields
    /// naming the columns). Default: csv for a file ending in .csv, arrow for
    /// .arrows, ndjson otherwise.
    #[arg(long, value_name = "ndjson|csv|arrow", value_parser = parse_input_format)]
    format: Option<InputFormat>,

    /// The columns to fill, comma-separated. NDJSON default: the keys of the first
    /// record. CSV: the file's columns in order (a header line must name exactly
    /// these); default: the header line, or all the table's columns without one.
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,

    /// CSV: whether line 1 is a header, as COPY's HEADER option. true (default):
    /// it names the columns (and must name --columns, when given). false: there is
    /// no header, line 1 is data. match: it must name the table's columns (or
    /// --columns) in order.
    #[arg(long, value_name = "true|false|match", value_parser = parse_header)]
    header: Option<CsvHeader>,

    /// abort: any bad record rolls everything back (default). skip: commit the good
    /// rows and report each bad one.
    #[arg(long, value_parser = word::<OnError>(), default_value_t = OnError::default())]
    on_error: OnError,

    /// With --on-error skip, write rejected records here as NDJSON
    /// ({"line", "column", "error", "record"}) instead of to standard error.
    #[arg(long, value_name = "FILE")]
    reject_file: Option<PathBuf>,

    /// error: a duplicate key fails the import (default). ignore: keep existing rows.
    /// update: overwrite them (needs --key).
    #[arg(long, value_parser = word::<OnConflict>(), default_value_t = OnConflict::default())]
    on_conflict: OnConflict,

    /// Key columns for --on-conflict, comma-separated.
    #[arg(long, value_delimiter = ',')]
    key: Vec<String>,

    /// copy (default): COPY FROM STDIN. insert: multi-row INSERT statements of
    /// --insert-rows rows, one round trip each (to measure what COPY saves).
    #[arg(long, value_parser = word::<Method>(), default_value_t = Method::default())]
    method: Method,

    /// binary (default): COPY's binary format when sluice has a binary form for
    /// every column's type (else text), sparing the server its text parsers.
    /// text: every value parsed by the server, which also reads date and time
    /// spellings other than ISO 8601 and timestamps without a UTC offset.
    #[arg(long, value_enum, default_value = "binary")]
    copy_format: CopyFormatName,

    /// Rows per INSERT statement with --method insert.
    #[arg(long, value_name = "N", default_value_t = INSERT_ROWS)]
    insert_rows: usize,

    /// NDJSON: skip keys that name no column instead of rejecting the record.
    #[arg(long)]
    ignore_unknown: bool,

    /// Longest line (NDJSON) or record (CSV) accepted, in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    max_line_bytes: usize,

    /// Check everything against the table and roll back: nothing is kept.
    #[arg(long)]
    dry_run: bool,

    #[command(flatten)]
    wait: WaitArgs,

    /// Print records, rows, round trips, time and peak memory to standard error.
    #[arg(long)]
    stats: bool,
}

fn parse_header(text: &str) -> Result<CsvHeader, String> {
    text.parse()
}

fn parse_input_format(text: &str) -> Result<InputFormat, String> {
    text.parse()
}

/// What an import reads and how, beyond its input and its rejects.
struct Load<'a, M> {
    table: &'a TableInfo,
    /// Makes a fresh decoder (once more if the input is read again).
    make: M,
    /// The input's file, if it is one (it can then be read again).
    path: Option<&'a Path>,
    options: &'a ImportOptions,
    progress: &'a Progress,
}

/// Imports with a fresh decoder from `load.make`. When the database refuses the
/// load without naming a row (foreign keys are checked after the last row) and
/// the input is a file, reads it again to find the line, so the error can name it.
async fn load<D: Decoder + 'static>(
    session: &mut dyn Session,
    load: Load<'_, impl Fn() -> Result<D, Error>>,
    reader: &mut (dyn AsyncRead + Unpin + Send),
    rejects: &mut RejectSink<'_>,
) -> Result<ImportSummary, Error> {
    let Load {
        table,
        make,
        path,
        options,
        progress,
    } = load;
    let mut decoder = make()?;
    let mut input = ImportInput::new(&mut decoder, reader, progress);
    let request = ImportRequest {
        table,
        rows: &mut input,
        options,
        rejects,
    };
    let error = match session.import(request).await {
        Ok(summary) => return Ok(summary),
        Err(error) => error,
    };
    let locatable = error.kind() == ErrorKind::Database
        && error.as_row_error().is_none()
        && options.on_error == OnError::Abort
        && options.method == Method::Copy;
    let Some(path) = path.filter(|_| locatable) else {
        return Err(error);
    };
    let Ok(mut again) = tokio::fs::File::open(path).await else {
        return Err(error);
    };
    let mut decoder = make()?;
    let mut no_rejects = |_: &Rejected| Ok(());
    // Reading the input again is no progress of the import's.
    let unseen = Progress::new();
    let mut input = ImportInput::new(&mut decoder, &mut again, &unseen);
    let request = ImportRequest {
        table,
        rows: &mut input,
        options,
        rejects: &mut no_rejects,
    };
    match session.locate_refused_row(request).await {
        Ok(Some(row)) => Err(error.at_row(row)),
        _ => Err(error),
    }
}

/// Runs the import and returns the process exit code.
pub async fn run(arguments: ImportArgs) -> u8 {
    let interrupt =
        Interrupt::install_saying("the import was cancelled on the server; nothing was committed");
    match run_import(&arguments, &interrupt).await {
        Ok(()) => 0,
        // The server reports the cancel as an error; it is the user's Ctrl-C.
        Err(_) if interrupt.happened() => exit_code(&interrupt.wait_for_cancel().await),
        Err(error) if machine::enabled() => {
            machine::print_error(&error, &explained(&arguments, &error), "");
            exit_code(&error)
        }
        Err(error) => {
            err_line!("sluice: {}", explained(&arguments, &error));
            exit_code(&error)
        }
    }
}

/// [`message`], saying how the input was read when line 1 did not read as
/// NDJSON that nobody asked for (CSV piped in without --format is the usual
/// cause).
fn explained(arguments: &ImportArgs, error: &Error) -> String {
    let text = message(error);
    let defaulted = arguments.format.is_none() && input_format(arguments) == InputFormat::Ndjson;
    match error.as_row_error() {
        Some(row) if defaulted && row.line == 1 && row.fault.is_none() => format!(
            "{text} (input is read as NDJSON without --format or a .csv or .arrows file name: \
             say --format csv for CSV)"
        ),
        _ => text,
    }
}

/// The format asked for, else the one the file's name says, else NDJSON.
fn input_format(arguments: &ImportArgs) -> InputFormat {
    arguments.format.unwrap_or_else(|| {
        input_path(arguments).map_or(InputFormat::Ndjson, |path| InputFormat::for_path(path))
    })
}

/// The input file, `None` for standard input.
fn input_path(arguments: &ImportArgs) -> Option<&PathBuf> {
    arguments
        .input
        .as_ref()
        .filter(|path| path.as_os_str() != "-")
}

/// The error line, in this command's terms: a CSV header that does not match
/// is told against the option that set what it had to hold.
fn message(error: &Error) -> String {
    let Some(mismatch) = HeaderMismatch::of(error) else {
        return import_message(error).unwrap_or_else(|| error_text(error));
    };
    let (expected, label, hint) = match mismatch.expected_from {
        ExpectedNames::Columns => (
            "--columns",
            "--columns",
            "if line 1 is data, not a header, say --header false",
        ),
        ExpectedNames::Table => (
            "the table's columns (--header match)",
            "table",
            "--header true fills only the columns the header names",
        ),
    };
    format!(
        "line 1: the CSV header does not match {expected}: {} (header: {}; {label}: {}); {hint}",
        mismatch.difference(),
        HeaderMismatch::list(&mismatch.found),
        HeaderMismatch::list(&mismatch.expected),
    )
}

async fn run_import(arguments: &ImportArgs, interrupt: &Interrupt) -> Result<(), Error> {
    let started = Instant::now();
    let target = sluice_drivers::all().open(&arguments.database.url)?;
    let path = input_path(arguments);
    let format = input_format(arguments);
    format.check(&input_options(arguments, Vec::new(), false))?;
    let (mut reader, total_bytes): (Box<dyn AsyncRead + Unpin + Send>, Option<u64>) = match path {
        Some(path) => {
            let file = tokio::fs::File::open(path).await.map_err(|error| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot read {}: {error}", path.display()),
                )
            })?;
            let size = file.metadata().await.ok().map(|metadata| metadata.len());
            (Box::new(file), size)
        }
        None => (Box::new(tokio::io::stdin()), None),
    };
    if arguments.reject_file.is_some() && arguments.on_error != OnError::Skip {
        return Err(Error::config("--reject-file goes with --on-error skip"));
    }
    let options = ImportOptions {
        on_error: arguments.on_error,
        on_conflict: arguments.on_conflict,
        key: arguments.key.clone(),
        method: arguments.method.with_insert_rows(arguments.insert_rows),
        dry_run: arguments.dry_run,
        binary_copy: arguments.copy_format == CopyFormatName::Binary,
        ..ImportOptions::default()
    };
    options.check()?;
    let keep_records = options.on_error == OnError::Skip;

    let mut reject_file = match &arguments.reject_file {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|error| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot write {}: {error}", path.display()),
                )
            })?,
        )),
        None => None,
    };
    let mut write_reject = |rejected: &Rejected| -> Result<(), Error> {
        match reject_file.as_mut() {
            Some(file) => {
                let line = serde_json::json!({
                    "line": rejected.error.line,
                    "column": rejected.error.column,
                    "error": row_reason(&rejected.error),
                    "record": String::from_utf8_lossy(&rejected.record),
                });
                writeln!(file, "{line}").map_err(Error::output)
            }
            None => {
                err_line!("sluice: rejected {}", row_line(&rejected.error));
                Ok(())
            }
        }
    };

    let meter = Meter::new();
    let mut session = target.connect(&meter).await?;
    interrupt.arm(session.canceller());
    arguments.wait.apply(&mut *session)?;
    let connected = meter.snapshot();
    let encryption = session.encryption();
    let facts = session.facts();
    let table = session.describe_table(&arguments.table).await?;
    let progress = Arc::new(Progress::new());
    let progress_line = ProgressLine::start(progress.clone(), total_bytes);
    let path = path.map(PathBuf::as_path);
    let input_options = input_options(arguments, table.defaulted.clone(), keep_records);
    let make = || format.decoder(table.columns.clone(), &input_options);
    let job = Load {
        table: &table,
        make,
        path,
        options: &options,
        progress: &progress,
    };
    let result: Result<ImportSummary, Error> =
        load(&mut *session, job, &mut *reader, &mut write_reject).await;
    for notice in session.take_notices() {
        err_line!("sluice: note: {notice}");
    }
    progress_line.finish();
    if let Some(mut file) = reject_file {
        file.flush().map_err(Error::output)?;
    }
    let summary = result?;
    session.close().await;
    if summary.rejected > 0 {
        err_line!(
            "sluice: {} of {} records imported, {} rejected",
            summary.accepted,
            summary.records,
            summary.rejected
        );
    }
    if arguments.stats {
        Stats {
            figures: vec![
                ("records", summary.records),
                ("accepted", summary.accepted),
                ("rejected", summary.rejected),
                ("rows written", summary.written),
                ("input bytes", progress.bytes()),
            ],
            part_rows: Vec::new(),
            rows: summary.accepted,
            connect: connected,
            operation: meter.snapshot() - connected,
            elapsed: started.elapsed(),
            encryption,
            facts,
        }
        .print();
    }
    Ok(())
}

/// The decoder's settings from the command line.
fn input_options(
    arguments: &ImportArgs,
    defaulted: Vec<String>,
    keep_records: bool,
) -> InputOptions {
    InputOptions {
        columns: arguments.columns.clone(),
        defaulted,
        header: arguments.header,
        ignore_unknown: arguments.ignore_unknown,
        max_record_bytes: arguments.max_line_bytes,
        keep_records,
    }
}
