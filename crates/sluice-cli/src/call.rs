//! `sluice call`: one statement run for many parameter sets, pipelined.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use serde_json::Value;
use sluice_core::calls::{CallOutcome, ParamSet, ParamSource, Transaction};
use sluice_core::database::BoxFuture;
use sluice_core::{Encoder, Error, ErrorKind, Meter};
use sluice_formats::{JsonEncoder, JsonOptions};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};

use crate::console::err_line;
use crate::report::{exit_code, Stats};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransactionMode {
    Single,
    Each,
}

/// Arguments of `sluice call`.
#[derive(Args)]
pub struct CallArgs {
    /// Database URL, e.g. postgres://user:password@host:5432/database.
    #[arg(long, env = "SLUICE_DB")]
    db: String,

    /// The statement, with parameters `$1`, `$2`, …
    #[arg(long)]
    sql: String,

    /// Parameter sets, one per line: a JSON array (`[1, "x"]`), an object whose
    /// keys are named by --param-names (or are `1`, `2`, …), or a single value.
    /// `-` or nothing reads standard input.
    #[arg(long, value_name = "FILE")]
    params: Option<PathBuf>,

    /// Names of $1, $2, … for parameter sets given as JSON objects, comma-separated.
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

    /// Print calls, failures, round trips, time and peak memory to standard error.
    #[arg(long)]
    stats: bool,
}

/// Parameter sets read from NDJSON lines.
struct LineSource<R> {
    reader: R,
    names: Vec<String>,
    line: u64,
    buffer: Vec<u8>,
}

fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

impl<R: AsyncBufRead + Unpin + Send> LineSource<R> {
    fn parse(&self, line: &[u8]) -> Result<Vec<Option<String>>, String> {
        let value: Value =
            serde_json::from_slice(line).map_err(|error| format!("invalid JSON: {error}"))?;
        Ok(match value {
            Value::Array(items) => items.iter().map(text_of).collect(),
            Value::Object(mut object) => {
                let names: Vec<String> = if self.names.is_empty() {
                    (1..=object.len()).map(|n| n.to_string()).collect()
                } else {
                    self.names.clone()
                };
                let values = names
                    .iter()
                    .map(|name| {
                        object
                            .remove(name)
                            .or_else(|| object.remove(&format!("${name}")))
                            .map(|value| text_of(&value))
                            .unwrap_or(None)
                    })
                    .collect();
                if let Some(unknown) = object.keys().next() {
                    return Err(format!("unknown parameter name {unknown:?}"));
                }
                values
            }
            scalar => vec![text_of(&scalar)],
        })
    }
}

impl<R: AsyncBufRead + Unpin + Send> ParamSource for LineSource<R> {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        Box::pin(self.next_set())
    }
}

impl<R: AsyncBufRead + Unpin + Send> LineSource<R> {
    async fn next_set(&mut self) -> Result<Option<ParamSet>, Error> {
        loop {
            self.buffer.clear();
            let read = self
                .reader
                .read_until(b'\n', &mut self.buffer)
                .await
                .map_err(|error| {
                    Error::new(
                        ErrorKind::Io,
                        format!("reading the parameters failed: {error}"),
                    )
                })?;
            if read == 0 {
                return Ok(None);
            }
            self.line += 1;
            let line = self.buffer.trim_ascii();
            if line.is_empty() {
                continue;
            }
            return Ok(Some(ParamSet {
                line: self.line,
                values: self.parse(line),
            }));
        }
    }
}

/// Runs the calls and returns the process exit code.
pub async fn run(arguments: CallArgs) -> u8 {
    match call(&arguments).await {
        Ok(code) => code,
        Err(error) => {
            crate::report::print_error(&error, &arguments.sql, None);
            exit_code(&error)
        }
    }
}

async fn call(arguments: &CallArgs) -> Result<u8, Error> {
    let started = Instant::now();
    let target = sluice_drivers::all().open(&arguments.db)?;
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
    let connected = meter.snapshot();
    let pipeline = session.prepare_calls(&arguments.sql).await?;
    let schema = pipeline.schema().clone();
    let mut encoder = JsonEncoder::array(JsonOptions::default());
    let mut failure: Option<(u64, String)> = None;
    // Result lines are written by hand so the rows keep their column order.
    let mut line_json = Vec::with_capacity(1024);
    let mut report = |line: u64, outcome: CallOutcome<'_>| -> Result<(), Error> {
        line_json.clear();
        line_json.extend_from_slice(format!("{{\"line\":{line},").as_bytes());
        match outcome {
            CallOutcome::Done { rows, .. } if !schema.is_empty() => {
                line_json.extend_from_slice(b"\"rows\":");
                encoder.begin(&schema, &mut line_json)?;
                encoder.encode(rows, &mut line_json)?;
                encoder.finish(&mut line_json)?;
                // The array encoder puts each row on its own line; this is one line.
                line_json.retain(|&byte| byte != b'\n');
            }
            CallOutcome::Done { affected, .. } => {
                let affected = affected.map_or("null".to_owned(), |count| count.to_string());
                line_json.extend_from_slice(format!("\"affected\":{affected}").as_bytes());
            }
            CallOutcome::Failed(db) => {
                failure
                    .get_or_insert((line, format!("{} {}: {}", db.severity, db.code, db.message)));
                let mut error = serde_json::Map::new();
                error.insert("code".into(), db.code.clone().into());
                error.insert("message".into(), db.message.clone().into());
                if let Some(detail) = &db.detail {
                    error.insert("detail".into(), detail.clone().into());
                }
                line_json
                    .extend_from_slice(format!("\"error\":{}", Value::Object(error)).as_bytes());
            }
            CallOutcome::Invalid(reason) => {
                failure.get_or_insert((line, reason.to_owned()));
                line_json.extend_from_slice(
                    format!("\"error\":{}", serde_json::json!({ "message": reason })).as_bytes(),
                );
            }
            CallOutcome::RolledBack => line_json.extend_from_slice(b"\"rolled_back\":true"),
        }
        line_json.extend_from_slice(b"}\n");
        output.write_all(&line_json).map_err(Error::output)
    };
    let mut source = LineSource {
        reader,
        names: arguments.param_names.clone(),
        line: 0,
        buffer: Vec::new(),
    };
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
            rows: summary.calls,
            connect: connected,
            operation: meter.snapshot() - connected,
            elapsed: started.elapsed(),
        }
        .print();
    }
    Ok(code)
}
