//! `sluice export`: one query, streamed to a file or standard output.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use sluice_core::connect::ExportOptions;
use sluice_core::{pump, Error, ErrorKind, Meter, Progress};
use sluice_formats::{BytesEncoding, Format, JsonOptions};

use crate::interrupt::Interrupt;
use crate::output::{BlockingWriter, StagedFile};
use crate::report::{exit_code, print_error, ProgressLine, Stats};

/// Arguments of `sluice export`.
#[derive(Args)]
pub struct ExportArgs {
    /// Database URL, e.g. postgres://user:password@host:5432/database
    /// (libpq key=value strings and PG* environment variables work too), or
    /// sqlite:///path/to/file.db.
    #[arg(long, env = "SLUICE_DB")]
    db: String,

    /// The SQL to run; `$1`, `$2`, … are bound from --param values in order.
    #[arg(long)]
    query: String,

    /// A value for the next `$n` parameter, as text the server converts to the
    /// parameter's type. Repeat for each parameter.
    #[arg(long = "param", value_name = "VALUE")]
    params: Vec<String>,

    /// Output format.
    #[arg(long, default_value = "ndjson", value_parser = parse_format)]
    format: Format,

    /// Write to this file instead of standard output. The rows go to a temporary
    /// file beside it, renamed to FILE once the export has succeeded: a failed
    /// export removes it and leaves an existing FILE untouched.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,

    /// When the export fails, keep what was written as FILE.partial instead of
    /// removing it.
    #[arg(long, requires = "output")]
    keep_partial: bool,

    /// Fetch this many rows per round trip through a portal. By default the whole
    /// result streams from one execute and TCP flow control paces the server
    /// (fewest round trips).
    #[arg(long, value_name = "N")]
    fetch_size: Option<u32>,

    /// How bytea values appear in JSON: base64 (default) or hex (PostgreSQL's \x… text).
    #[arg(long, default_value = "base64", value_parser = parse_bytes_encoding)]
    bytea: BytesEncoding,

    /// Large objects: `oid` keeps the number; `inline` reads every `oid` column as a
    /// large object and writes its bytes in its place (base64 in JSON, hex in CSV),
    /// fetched by the same query.
    #[arg(long, default_value = "oid", value_parser = ["oid", "inline"])]
    lob: String,

    /// Print rows, bytes, round trips, time and peak memory to standard error.
    #[arg(long)]
    stats: bool,
}

fn parse_format(text: &str) -> Result<Format, String> {
    text.parse()
}

fn parse_bytes_encoding(text: &str) -> Result<BytesEncoding, String> {
    match text {
        "base64" => Ok(BytesEncoding::Base64),
        "hex" => Ok(BytesEncoding::Hex),
        other => Err(format!(
            "unknown bytea encoding {other:?}: expected base64 or hex"
        )),
    }
}

/// Runs the export and returns the process exit code.
pub async fn run(arguments: ExportArgs) -> u8 {
    let interrupt = Interrupt::install();
    let mut staged = None;
    let result = export(&arguments, &interrupt, &mut staged).await;
    let Err(error) = result else {
        return 0;
    };
    let note = staged.and_then(|staged| staged.abandon(arguments.keep_partial));
    print_error(&error, &arguments.query, note.as_deref());
    exit_code(&error)
}

fn cannot_write(path: &Path, error: std::io::Error) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot write {}: {error}", path.display()),
    )
    .with_source(error)
}

/// Opens the output; a staged file is also handed to the Ctrl-C handler, which
/// removes it (or keeps it, with --keep-partial) before exiting.
fn open_output(
    arguments: &ExportArgs,
    interrupt: &Interrupt,
) -> Result<(BlockingWriter, Option<Arc<StagedFile>>), Error> {
    let Some(path) = &arguments.output else {
        return Ok((BlockingWriter::stdout().map_err(Error::output)?, None));
    };
    let (writer, staged) =
        BlockingWriter::create(path).map_err(|error| cannot_write(path, error))?;
    if let Some(staged) = &staged {
        let staged = staged.clone();
        let keep = arguments.keep_partial;
        interrupt.on_interrupt(move || staged.abandon(keep));
    }
    Ok((writer, staged))
}

/// Exports; `staged` receives the output file as soon as there is one, for the
/// caller to abandon on failure. Success commits it.
async fn export(
    arguments: &ExportArgs,
    interrupt: &Interrupt,
    staged: &mut Option<Arc<StagedFile>>,
) -> Result<(), Error> {
    let started = Instant::now();
    let target = sluice_drivers::all().open(&arguments.db)?;
    let (mut writer, output_file) = open_output(arguments, interrupt)?;
    staged.clone_from(&output_file);

    let meter = Meter::new();
    let session = target.connect(&meter).await?;
    let connected = meter.snapshot();
    let encryption = session.encryption();
    let facts = session.facts();
    let cancel = session.canceller();
    interrupt.arm(cancel.clone());

    let options = ExportOptions {
        params: arguments.params.iter().cloned().map(Some).collect(),
        fetch_size: arguments.fetch_size,
        inline_large_objects: arguments.lob == "inline",
    };
    let mut stream = session.export(arguments.query.clone(), options).await?;
    let mut encoder = arguments.format.encoder(JsonOptions {
        bytes: arguments.bytea,
    });
    let progress = Arc::new(Progress::new());
    let progress_line = ProgressLine::start(progress.clone(), None);
    let result = pump(&mut stream, &mut encoder, &mut writer, &progress).await;
    progress_line.finish();
    let summary = match result {
        Err(_) if interrupt.happened() => {
            // The server reports the cancel as an error; it is the user's Ctrl-C.
            return Err(interrupt.wait_for_cancel().await);
        }
        Ok(summary) => summary,
        Err(error) if error.kind() == ErrorKind::OutputClosed && output_file.is_none() => {
            // The reader has all it wanted (`| head`): stop the server's work and
            // leave quietly, as Unix tools do.
            let _ = cancel.cancel().await;
            drop(stream);
            return Ok(());
        }
        Err(error) => {
            if error.kind() != ErrorKind::Database {
                let _ = cancel.cancel().await;
            }
            return Err(error);
        }
    };
    stream.close().await;
    if let Some(file) = output_file {
        writer
            .sync()
            .and_then(|()| file.commit())
            .map_err(|error| cannot_write(file.target(), error))?;
    }
    if arguments.stats {
        Stats {
            figures: vec![("rows", summary.rows), ("output bytes", summary.bytes)],
            rows: summary.rows,
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
