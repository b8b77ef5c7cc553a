//! `sluice export`: one query (or one table), streamed to a file or standard
//! output; with `--jobs N`, read in N parts of one snapshot at once
//! ([`crate::parts`]) and written as one output ([`Interleaved`]).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use sluice_core::connect::{Canceller, Export, ExportOptions, LargeObjects};
use sluice_core::interleave::Interleaved;
use sluice_core::split::{SplitRequest, SplitSource};
use sluice_core::{
    pump, Batch, BatchSource, Chunk, Error, ErrorKind, Meter, Progress, PumpSummary, Schema,
};
use sluice_formats::{
    BytesEncoding, ColumnarOptions, Format, JsonOptions, OutputOptions, ParquetCompression,
};
use tokio::task::JoinSet;

use crate::exit::exit_code;
use crate::interrupt::Interrupt;
use crate::machine;
use crate::output::{BlockingWriter, StagedDirectory, StagedFile};
use crate::parts::{open_parts, PartSessions};
use crate::report::{error_text, print_error, ProgressLine, Stats};
use crate::vocabulary::{query_help, word, ReadDatabase};
use crate::wait::WaitArgs;

/// Arguments of `sluice export`.
#[derive(Args)]
pub struct ExportArgs {
    #[command(flatten)]
    database: ReadDatabase,

    #[arg(long, value_name = "SQL", help = query_help(), required_unless_present = "table")]
    query: Option<String>,

    /// Every row of this table instead of --query: a table's name, not SQL
    /// (table or schema.table, each part bare or quoted as the database quotes
    /// names); with --jobs, cut into ranges of its storage.
    #[arg(long, value_name = "TABLE", conflicts_with = "query")]
    table: Option<String>,

    /// With --table: only these of its columns, comma-separated, in this order;
    /// the database reads no other (with --jobs too).
    // `conflicts_with` rather than `requires = "table"`, which clap does not
    // enforce between two arguments that conflict with each other.
    #[arg(
        long,
        value_name = "COLUMNS",
        value_delimiter = ',',
        conflicts_with = "query"
    )]
    columns: Vec<String>,

    /// Read in N parts at once, each on a connection of its own, all in one
    /// snapshot (PostgreSQL): the output holds every row once, the parts'
    /// batches interleaved (rows keep no order; --jobs 1 keeps the query's).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: u16,

    /// With --jobs and --query: the integer column whose value ranges make the
    /// parts (a --table is cut by its storage unless this names a column).
    #[arg(long, value_name = "COLUMN", requires = "jobs")]
    split_by: Option<String>,

    /// A value for the next parameter, as text the server converts to the
    /// parameter's type. Repeat for each parameter.
    #[arg(long = "param", value_name = "VALUE", requires = "query")]
    params: Vec<String>,

    /// Output format: ndjson, json, csv, arrow (Arrow IPC stream), arrow-file
    /// (Arrow IPC file) or parquet (needs --output).
    #[arg(long, default_value = "ndjson", value_parser = parse_format)]
    format: Format,

    /// Write to this file instead of standard output. The rows go to a temporary
    /// file beside it, renamed to FILE once the export has succeeded: a failed
    /// export removes it and leaves an existing FILE untouched.
    #[arg(long, short = 'o', conflicts_with = "output_dir")]
    output: Option<PathBuf>,

    /// Write one file per part (part-00000.parquet, …) into this new or empty
    /// directory, for engines that read a directory of parts: with --jobs N,
    /// N files written at once. The files go to a temporary directory beside
    /// DIR, renamed to DIR once every part has succeeded.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,

    /// When the export fails, keep what was written as FILE.partial (or
    /// DIR.partial) instead of removing it.
    #[arg(long)]
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
    #[arg(long, value_parser = word::<LargeObjects>(), default_value_t = LargeObjects::default())]
    lob: LargeObjects,

    /// Arrow and Parquet: rows per record batch (a batch is also cut at 8 MiB
    /// of values). Default: 32768.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    batch_rows: Option<u32>,

    /// Arrow and Parquet: write `numeric` columns declared without precision
    /// and scale as Decimal128(38, S) instead of their exact text; a value
    /// that would need rounding or more digits is an error.
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(i8).range(0..=38))]
    numeric_scale: Option<i8>,

    /// Parquet: the most rows per row group. The writer holds one row group
    /// in memory, so memory grows with it (a group is also closed at 128 MiB
    /// encoded). Default: 262144.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    row_group_rows: Option<u32>,

    /// Parquet: the compression codec, zstd (default), snappy, lz4 or none.
    #[arg(long, value_name = "CODEC", value_parser = parse_compression)]
    compression: Option<ParquetCompression>,

    /// Print rows, bytes, round trips, time and peak memory to standard error.
    #[arg(long)]
    stats: bool,

    #[command(flatten)]
    wait: WaitArgs,
}

fn parse_compression(text: &str) -> Result<ParquetCompression, String> {
    text.parse()
}

impl ExportArgs {
    /// The statement the export runs: the query, or every row of the table
    /// (its --columns), the names quoted as the URL's database quotes them. A
    /// --table that is no table's name (the one grammar of names, never SQL)
    /// is refused.
    fn statement(&self) -> Result<String, Error> {
        match (&self.query, &self.table) {
            (Some(query), _) => Ok(query.clone()),
            (None, Some(table)) => {
                let dialect = sluice_drivers::all().open(&self.database.url)?.dialect();
                let every_column = format!("select * from {}", dialect.table_name(table)?);
                Ok(dialect.projection(&every_column, &self.columns))
            }
            (None, None) => Ok(String::new()),
        }
    }

    /// What `--jobs` splits: the table by its storage (or `--split-by`), or
    /// the query by `--split-by`.
    fn split_request(&self) -> Result<SplitRequest, Error> {
        let source =
            match (&self.table, &self.query) {
                (Some(table), _) => SplitSource::Table(table.clone()),
                (None, Some(query)) if self.split_by.is_some() => SplitSource::Query {
                    sql: query.clone(),
                    params: self.params.iter().cloned().map(Some).collect(),
                },
                _ => return Err(Error::config(
                    "--jobs with --query needs --split-by COLUMN, an integer column whose value \
                     ranges make the parts (or export a --table, cut by its storage)",
                )),
            };
        Ok(SplitRequest {
            source,
            parts: usize::from(self.jobs),
            split_by: self.split_by.clone(),
        })
    }

    /// The encoder settings the flags give, once they are checked to fit the
    /// format and the output.
    fn output_options(&self) -> Result<OutputOptions, Error> {
        self.check_format_flags()?;
        let defaults = ColumnarOptions::default();
        let columnar = ColumnarOptions {
            batch_rows: self
                .batch_rows
                .map_or(defaults.batch_rows, |rows| rows as usize),
            numeric_scale: self.numeric_scale,
            row_group_rows: self
                .row_group_rows
                .map_or(defaults.row_group_rows, |rows| rows as usize),
            compression: self.compression.unwrap_or_default(),
            ..defaults
        };
        Ok(OutputOptions {
            json: JsonOptions { bytes: self.bytea },
            columnar,
        })
    }

    /// Refuses flags of another format, Parquet without `--output`, and
    /// binary output to a terminal.
    fn check_format_flags(&self) -> Result<(), Error> {
        if self.split_by.is_some() && self.jobs == 1 {
            return Err(Error::config("--split-by goes with --jobs N (N above 1)"));
        }
        let parquet_only = self.row_group_rows.is_some() || self.compression.is_some();
        if parquet_only && self.format != Format::Parquet {
            return Err(Error::config(
                "--row-group-rows and --compression go with --format parquet",
            ));
        }
        let columnar_only = self.batch_rows.is_some() || self.numeric_scale.is_some();
        if columnar_only && !self.format.is_binary() {
            return Err(Error::config(
                "--batch-rows and --numeric-scale go with --format arrow, arrow-file or parquet",
            ));
        }
        let to_files = self.output.is_some() || self.output_dir.is_some();
        if self.keep_partial && !to_files {
            return Err(Error::config(
                "--keep-partial goes with --output FILE or --output-dir DIR",
            ));
        }
        if self.format == Format::Parquet && !to_files {
            return Err(Error::config(
                "--format parquet needs --output FILE: a Parquet file is read from its footer, \
                 written last, so it goes to a file rather than a pipe",
            ));
        }
        if self.format.is_binary() && !to_files && std::io::stdout().is_terminal() {
            return Err(Error::config(
                "Arrow output is binary: redirect standard output to a file or a pipe, or use --output FILE",
            ));
        }
        Ok(())
    }
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

/// What became of the output when the export failed.
enum Written {
    /// Nothing was streamed yet.
    Nothing,
    /// Rows (or a format's opening) went to standard output, or to a file
    /// that is not staged (a FIFO, a device): what is there is cut short.
    Unstaged,
    /// The output file, staged until the export succeeds.
    Staged(Arc<StagedFile>),
    /// The directory of parts, staged until every part succeeds.
    Directory(Arc<StagedDirectory>),
}

/// Runs the export and returns the process exit code.
pub async fn run(arguments: ExportArgs) -> u8 {
    let interrupt = Interrupt::install();
    let mut written = Written::Nothing;
    let result = export(&arguments, &interrupt, &mut written).await;
    let Err(error) = result else {
        return 0;
    };
    // The server reports the cancel as an error; it is the user's Ctrl-C.
    let error = match interrupt.happened() {
        true => interrupt.wait_for_cancel().await,
        false => error,
    };
    let note = match written {
        Written::Nothing => None,
        Written::Unstaged => Some("the output is incomplete".to_owned()),
        Written::Staged(staged) => staged.abandon(arguments.keep_partial),
        Written::Directory(staged) => staged.abandon(arguments.keep_partial),
    };
    // Only a database's error points into the statement, and then it ran.
    let statement = arguments.statement().unwrap_or_default();
    if machine::enabled() {
        let text = error_text(&error);
        let message = note.map_or(text.clone(), |note| format!("{text}; {note}"));
        machine::print_error(&error, &message, &statement);
    } else {
        print_error(&error, &statement, note.as_deref());
    }
    exit_code(&error)
}

fn cannot_write(path: &Path, error: std::io::Error) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot write {}: {error}", path.display()),
    )
    .with_source(error)
}

/// Stages `--output-dir`; like a staged file, the Ctrl-C handler abandons it.
fn open_directory(
    directory: &Path,
    keep_partial: bool,
    interrupt: &Interrupt,
) -> Result<Arc<StagedDirectory>, Error> {
    let staged = Arc::new(
        StagedDirectory::create(directory).map_err(|error| cannot_write(directory, error))?,
    );
    let abandoned = staged.clone();
    interrupt.on_interrupt(move || abandoned.abandon(keep_partial));
    Ok(staged)
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

/// Exports; `written` learns of the output file (or directory) as soon as
/// there is one (for the caller to abandon on failure; success commits it),
/// and of rows streamed anywhere else.
async fn export(
    arguments: &ExportArgs,
    interrupt: &Interrupt,
    written: &mut Written,
) -> Result<(), Error> {
    let started = Instant::now();
    let output_options = arguments.output_options()?;
    let target = sluice_drivers::all().open(&arguments.database.url)?;
    // Before anything connects: a --table that names no table stops here.
    let statement = arguments.statement()?;
    let directory = match &arguments.output_dir {
        Some(directory) => {
            let staged = open_directory(directory, arguments.keep_partial, interrupt)?;
            *written = Written::Directory(staged.clone());
            Some(staged)
        }
        None => None,
    };

    let meter = Meter::new();
    let mut session = target.connect(&meter).await?;
    arguments.wait.apply(&mut *session)?;
    let connected = meter.snapshot();
    let encryption = session.encryption();
    let facts = session.facts();
    let cancel = session.canceller();
    interrupt.arm(cancel.clone());

    let options = ExportOptions {
        params: arguments.params.iter().cloned().map(Some).collect(),
        fetch_size: arguments.fetch_size,
        inline_large_objects: arguments.lob == LargeObjects::Inline,
        binary_values: arguments.format.reads_binary_values(),
        ..ExportOptions::default()
    };
    let parts = if arguments.jobs > 1 {
        let sessions = PartSessions {
            source: &*target,
            meter: &meter,
            wait: &arguments.wait,
            interrupt,
        };
        let request = arguments.split_request()?;
        open_parts(session, &sessions, &request, &arguments.columns, &options).await?
    } else {
        vec![session.export(statement, options).await?]
    };
    let progress = Arc::new(Progress::new());
    let written_out = match directory {
        Some(directory) => {
            let files = PartFiles {
                arguments,
                directory: &directory,
                progress: &progress,
            };
            files.write(parts, output_options).await?
        }
        None => {
            let output = Output {
                arguments,
                interrupt,
                cancel: &cancel,
                progress: &progress,
            };
            match output.write(parts, output_options, written).await? {
                Some(written_out) => written_out,
                // The reader of standard output stopped reading.
                None => return Ok(()),
            }
        }
    };
    if arguments.stats {
        Stats {
            figures: vec![
                ("rows", written_out.summary.rows),
                ("output bytes", written_out.summary.bytes),
            ],
            part_rows: written_out.part_rows,
            rows: written_out.summary.rows,
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

/// What an export wrote.
struct WrittenOut {
    summary: PumpSummary,
    /// Rows from each part (empty for one query).
    part_rows: Vec<u64>,
}

/// Writing to one output: standard output or `--output FILE`.
struct Output<'a> {
    arguments: &'a ExportArgs,
    interrupt: &'a Interrupt,
    cancel: &'a Arc<dyn Canceller>,
    progress: &'a Arc<Progress>,
}

impl Output<'_> {
    /// Writes every part's rows to the one output, the parts' batches
    /// interleaved; `None` when standard output's reader stopped reading.
    async fn write(
        self,
        mut parts: Vec<Box<dyn Export>>,
        output_options: OutputOptions,
        written: &mut Written,
    ) -> Result<Option<WrittenOut>, Error> {
        let arguments = self.arguments;
        let (mut writer, output_file) = open_output(arguments, self.interrupt)?;
        match &output_file {
            Some(file) => *written = Written::Staged(file.clone()),
            None => *written = Written::Unstaged,
        }
        let (mut stream, progress_line) = if arguments.jobs > 1 {
            let parts = Interleaved::start(parts);
            let line = ProgressLine::start_jobs(
                self.progress.clone(),
                parts.running(),
                usize::from(arguments.jobs),
            );
            (Rows::Parts(parts), line)
        } else {
            let one = parts.pop().expect("one query");
            (
                Rows::One(one),
                ProgressLine::start(self.progress.clone(), None),
            )
        };
        let mut encoder = arguments.format.encoder(output_options);
        let result = pump(&mut stream, &mut encoder, &mut writer, self.progress).await;
        progress_line.finish();
        let summary = match result {
            Ok(summary) => summary,
            // After Ctrl-C every error is the interrupt's (see `run`).
            Err(error) if self.interrupt.happened() => return Err(error),
            Err(error) if error.kind() == ErrorKind::OutputClosed && output_file.is_none() => {
                // The reader has all it wanted (`| head`): stop the server's work and
                // leave quietly, as Unix tools do.
                stream.cancel(self.cancel).await;
                return Ok(None);
            }
            Err(error) => {
                if error.kind() != ErrorKind::Database {
                    stream.cancel(self.cancel).await;
                }
                return Err(error);
            }
        };
        let part_rows = stream.rows_per_part();
        stream.close().await;
        if let Some(file) = output_file {
            writer
                .sync()
                .and_then(|()| file.commit())
                .map_err(|error| cannot_write(file.target(), error))?;
        }
        Ok(Some(WrittenOut { summary, part_rows }))
    }
}

/// Writing to `--output-dir`: a file per part.
struct PartFiles<'a> {
    arguments: &'a ExportArgs,
    directory: &'a StagedDirectory,
    progress: &'a Arc<Progress>,
}

impl PartFiles<'_> {
    /// Writes each part to a file of its own, all at once, and renames the
    /// directory into place once every part has succeeded. The first part to
    /// fail stops the others (dropping a part ends its server session's
    /// query).
    async fn write(
        self,
        parts: Vec<Box<dyn Export>>,
        output_options: OutputOptions,
    ) -> Result<WrittenOut, Error> {
        let count = parts.len();
        let running = Arc::new(AtomicUsize::new(count));
        let progress_line = ProgressLine::start_jobs(self.progress.clone(), running.clone(), count);
        let mut tasks = JoinSet::new();
        let extension = self.arguments.format.file_extension();
        for (index, part) in parts.into_iter().enumerate() {
            let path = self
                .directory
                .part_path(index, extension)
                .ok_or_else(|| Error::new(ErrorKind::Io, "the output directory was abandoned"))?;
            let file = PartFile {
                path,
                format: self.arguments.format,
                options: output_options,
                progress: self.progress.clone(),
                running: running.clone(),
            };
            tasks.spawn(async move { (index, file.write(part).await) });
        }
        let mut summary = PumpSummary::default();
        let mut part_rows = vec![0; count];
        let mut exports = Vec::with_capacity(count);
        let result = loop {
            let Some(joined) = tasks.join_next().await else {
                break Ok(());
            };
            // A part's task ends only by returning or by a panic, a bug to pass on.
            let (index, written) =
                joined.unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()));
            match written {
                Ok((part, export)) => {
                    summary.rows += part.rows;
                    summary.bytes += part.bytes;
                    part_rows[index] = part.rows;
                    exports.push(export);
                }
                Err(error) => break Err(error),
            }
        };
        progress_line.finish();
        // On failure the other parts are dropped with their tasks, which are
        // waited for so that none writes into the directory once it is removed.
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        result?;
        for export in exports {
            export.close().await;
        }
        self.directory
            .commit()
            .map_err(|error| cannot_write(self.directory.target(), error))?;
        Ok(WrittenOut { summary, part_rows })
    }
}

/// One part's file of `--output-dir`.
struct PartFile {
    path: PathBuf,
    format: Format,
    options: OutputOptions,
    progress: Arc<Progress>,
    /// Parts still writing, for the progress line.
    running: Arc<AtomicUsize>,
}

impl PartFile {
    /// Writes `part` to the file and syncs it; gives the export back, read
    /// to its end, for its session to be closed.
    async fn write(
        self,
        mut part: Box<dyn Export>,
    ) -> Result<(PumpSummary, Box<dyn Export>), Error> {
        let mut writer = BlockingWriter::new_file(&self.path)
            .map_err(|error| cannot_write(&self.path, error))?;
        let mut encoder = self.format.encoder(self.options);
        let summary = pump(&mut part, &mut encoder, &mut writer, &self.progress).await;
        self.running.fetch_sub(1, Ordering::Relaxed);
        let summary = summary?;
        writer
            .sync()
            .map_err(|error| cannot_write(&self.path, error))?;
        Ok((summary, part))
    }
}

/// What the export reads: one query, or the parts of a split read.
enum Rows {
    One(Box<dyn Export>),
    Parts(Interleaved),
}

impl Rows {
    /// After the last row: ends the sessions cleanly.
    async fn close(self) {
        match self {
            Rows::One(export) => export.close().await,
            Rows::Parts(parts) => parts.close().await,
        }
    }

    /// Stops the server's work: the query is cancelled, or the parts'
    /// sessions are dropped (each server session ends its query when its
    /// connection closes).
    async fn cancel(self, canceller: &std::sync::Arc<dyn Canceller>) {
        if let Rows::One(_) = self {
            let _ = canceller.cancel().await;
        }
    }

    /// Rows from each part (none for one query).
    fn rows_per_part(&self) -> Vec<u64> {
        match self {
            Rows::One(_) => Vec::new(),
            Rows::Parts(parts) => parts.rows_per_part().to_vec(),
        }
    }
}

impl BatchSource for Rows {
    fn schema(&self) -> &Schema {
        match self {
            Rows::One(export) => export.schema(),
            Rows::Parts(parts) => parts.schema(),
        }
    }

    async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
        match self {
            Rows::One(export) => export.next_batch().await,
            Rows::Parts(parts) => parts.next_batch().await,
        }
    }

    async fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        match self {
            Rows::One(export) => export.next_chunk().await,
            Rows::Parts(parts) => parts.next_chunk().await,
        }
    }
}
