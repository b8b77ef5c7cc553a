//! What the CLI tells a person on standard error: errors in one line (with a caret
//! under the offending SQL), import faults told by the flag that changes them,
//! `--stats` figures, and a live progress line.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use sluice_core::load::ImportFault;
use sluice_core::{
    peak_rss_bytes, DbCause, Error, ErrorKind, MeterSnapshot, Progress, RowError, RowFault, Stalled,
};
use sluice_formats::InputFault;

use crate::console::err_line;
use crate::machine;
use crate::position::line_and_column;

/// An error's words, with the flag that set the limit when a server was given
/// up for staying silent (the library names no flag).
pub fn error_text(error: &Error) -> String {
    match Stalled::of(error) {
        Some(stalled) => format!(
            "{error} (--timeout {})",
            humantime::format_duration(stalled.after)
        ),
        None => error.to_string(),
    }
}

/// Prints `error` as one line, `note` (what became of the output) after it; when
/// the database points into the SQL, the line of SQL follows with a caret under
/// the position.
pub fn print_error(error: &Error, sql: &str, note: Option<&str>) {
    if error.kind() == ErrorKind::Cancelled {
        // Already reported by the interrupt handler.
        return;
    }
    let text = error_text(error);
    match note {
        Some(note) => err_line!("sluice: {text}; {note}"),
        None => err_line!("sluice: {text}"),
    }
    let Some(position) = error.as_db_error().and_then(|db| db.position) else {
        return;
    };
    let Some((line, column)) = line_and_column(sql, position) else {
        return;
    };
    if let Some(text) = sql.split('\n').nth(line - 1) {
        err_line!("  {}", text.trim_end_matches('\r'));
        err_line!("  {}^", " ".repeat(column - 1));
    }
}

/// An import error in this command's terms, when a setting is at fault (the
/// libraries name no flag): `None` when the library's words stand as they are.
pub fn import_message(error: &Error) -> Option<String> {
    if let Some(fault) = InputFault::of(error) {
        return Some(input_fault(*fault, error));
    }
    if let Some(fault) = ImportFault::of(error) {
        return Some(import_fault(fault));
    }
    error
        .as_row_error()
        .filter(|row| row.fault.is_some())
        .map(row_line)
}

fn input_fault(fault: InputFault, error: &Error) -> String {
    let words = match fault {
        InputFault::UnknownHeaderColumn => {
            // The only fault whose own words (the column's name) are kept.
            return format!(
                "line 1: {error}; if line 1 is data, not a header, say --header false \
                 (and --columns to name the columns in order)"
            );
        }
        InputFault::HeaderForNdjson => {
            "--header goes with CSV input; this input is read as NDJSON (say --format csv)"
        }
        InputFault::IgnoreUnknownForCsv => {
            "--ignore-unknown goes with NDJSON input; this input is read as CSV (say --format ndjson)"
        }
    };
    words.to_owned()
}

fn import_fault(fault: &ImportFault) -> String {
    match fault {
        ImportFault::UpdateWithoutKey => "--on-conflict update needs --key".into(),
        ImportFault::KeyWithoutConflictAction => {
            "--key goes with --on-conflict ignore or --on-conflict update".into()
        }
        ImportFault::UnknownKeyColumn { name } => {
            format!("--key names {name:?}, which the table does not have")
        }
        ImportFault::SkipWithInsert => {
            "--on-error skip works with --method copy (INSERT batches abort on the first error)"
                .into()
        }
        ImportFault::BatchTooLarge { rows, columns } => format!(
            "too many parameters in one INSERT ({rows} rows of {columns} columns): lower --insert-rows"
        ),
        other => other.to_string(),
    }
}

/// Why a record was refused, with the flag that would let it through, if one would.
pub fn row_reason(row: &RowError) -> String {
    let hint = match row.fault {
        Some(RowFault::UnknownColumn) => "use --ignore-unknown to skip unknown keys",
        Some(RowFault::NotListed) => "--columns",
        Some(RowFault::DefaultedNotSet) => "name it with --columns",
        _ => return row.reason.clone(),
    };
    format!("{} ({hint})", row.reason)
}

/// A refused record as one line: `line 3, column x: why (what would let it through)`.
pub fn row_line(row: &RowError) -> String {
    RowError {
        reason: row_reason(row),
        ..row.clone()
    }
    .to_string()
}

fn mebibytes(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Everything `--stats` prints: the operation's own figures, then round trips,
/// wire bytes, time and peak memory, as `key: value` lines.
pub struct Stats {
    /// The operation's own figures (rows, bytes, …), in order.
    pub figures: Vec<(&'static str, u64)>,
    /// Rows of each part of a split read (`--jobs`), in part order; empty
    /// for one read.
    pub part_rows: Vec<u64>,
    /// Rows for the rate.
    pub rows: u64,
    /// Traffic of connecting.
    pub connect: MeterSnapshot,
    /// Traffic of the operation itself.
    pub operation: MeterSnapshot,
    /// Wall time since the command started.
    pub elapsed: Duration,
    /// The connection's encryption (`None`: not encrypted).
    pub encryption: Option<String>,
    /// What the session says of its server and the paths it took.
    pub facts: Vec<(&'static str, String)>,
}

impl Stats {
    /// Prints the figures to standard error.
    pub fn print(&self) {
        let total = self.connect + self.operation;
        if machine::enabled() {
            machine::print_stats(
                &self.figures,
                &self.part_rows,
                (self.connect.round_trips, self.operation.round_trips),
                (total.bytes_sent, total.bytes_received),
                self.elapsed,
            );
            return;
        }
        for (key, value) in &self.figures {
            err_line!("{key}: {value}");
        }
        for (part, rows) in self.part_rows.iter().enumerate() {
            err_line!("part {} rows: {rows}", part + 1);
        }
        err_line!("round trips: {}", total.round_trips);
        err_line!("round trips connecting: {}", self.connect.round_trips);
        err_line!("round trips for the query: {}", self.operation.round_trips);
        err_line!("wire bytes sent: {}", total.bytes_sent);
        err_line!("wire bytes received: {}", total.bytes_received);
        err_line!(
            "encryption: {}",
            self.encryption.as_deref().unwrap_or("none")
        );
        for (label, value) in &self.facts {
            err_line!("{label}: {value}");
        }
        print_time_and_memory(self.elapsed, self.rows);
    }
}

/// The side of a copy an error or a figure belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The database the rows are read from (`--from`).
    Source,
    /// The database the rows are written to (`--to`).
    Target,
}

impl Side {
    /// The side's name as messages and `--stats` print it.
    pub fn name(self) -> &'static str {
        match self {
            Side::Source => "source",
            Side::Target => "target",
        }
    }

    /// The flag that names the side's database.
    fn flag(self) -> &'static str {
        match self {
            Side::Source => "--from",
            Side::Target => "--to",
        }
    }
}

/// A copy's error as one line: prefixed by the side it came from (`source`,
/// `target`; nothing for the copy's own, such as columns that do not match),
/// a refused row told as `row N, column c` of the source's result, and a
/// setting at fault told by its flag.
pub fn copy_message(side: Option<Side>, error: &Error) -> String {
    let mut text = match (ImportFault::of(error), error.as_row_error()) {
        (Some(fault), _) => import_fault(fault),
        (None, Some(row)) => copy_row_line(row),
        (None, None) => error_text(error),
    };
    if let Some(hint) = copy_hint(error) {
        text.push_str(hint);
    }
    match side {
        Some(side) if unreachable(error) => format!(
            "{} ({}): {text}; nothing was written",
            side.name(),
            side.flag()
        ),
        Some(side) => format!("{}: {text}", side.name()),
        None => text,
    }
}

/// What to do about a target that already holds the table or its rows: the
/// flags a library error cannot name. A unique violation is the driver's
/// [`DbCause::DuplicateKey`]; a table that already exists is `42P07`
/// (PostgreSQL) or `42S01` (MariaDB).
fn copy_hint(error: &Error) -> Option<&'static str> {
    let code = error.code()?;
    let duplicate_key = error
        .as_db_error()
        .is_some_and(|db| db.cause == DbCause::DuplicateKey);
    if duplicate_key {
        return Some(
            "; the target already holds rows with these keys: --truncate empties it first, \
             --on-conflict ignore|update keeps or overwrites them",
        );
    }
    matches!(code, "42P07" | "42S01").then_some(
        "; the target table exists already: leave out --create to copy into it \
         (with --truncate to empty it first)",
    )
}

/// Whether the error says the database could not be reached or let in.
fn unreachable(error: &Error) -> bool {
    matches!(error.kind(), ErrorKind::Connect | ErrorKind::Authentication)
}

/// A refused row of a copy: its position in the source's result and its column.
fn copy_row_line(row: &RowError) -> String {
    match &row.column {
        Some(column) => format!("source row {}, column {column}: {}", row.line, row.reason),
        None => format!("source row {}: {}", row.line, row.reason),
    }
}

/// What `--stats` tells of one side of a copy.
pub struct SideStats {
    /// Which side.
    pub side: Side,
    /// The database's product name.
    pub product: &'static str,
    /// Traffic of connecting.
    pub connect: MeterSnapshot,
    /// Traffic of the copy itself.
    pub operation: MeterSnapshot,
    /// The connection's encryption (`None`: not encrypted).
    pub encryption: Option<String>,
    /// What the session says of its server and the paths it took.
    pub facts: Vec<(&'static str, String)>,
}

impl SideStats {
    fn print(&self) {
        let side = self.side.name();
        let total = self.connect + self.operation;
        err_line!("{side}: {}", self.product);
        err_line!("{side} round trips: {}", total.round_trips);
        err_line!(
            "{side} round trips connecting: {}",
            self.connect.round_trips
        );
        err_line!(
            "{side} round trips for the copy: {}",
            self.operation.round_trips
        );
        err_line!("{side} wire bytes sent: {}", total.bytes_sent);
        err_line!("{side} wire bytes received: {}", total.bytes_received);
        err_line!(
            "{side} encryption: {}",
            self.encryption.as_deref().unwrap_or("none")
        );
        for (label, value) in &self.facts {
            err_line!("{side} {label}: {value}");
        }
    }
}

/// Everything `sluice copy --stats` prints: the copy's figures, then each
/// side's round trips and wire bytes, time and peak memory.
pub struct CopyStats {
    /// The copy's own figures (rows, bytes, …), in order.
    pub figures: Vec<(&'static str, u64)>,
    /// Rows for the rate.
    pub rows: u64,
    /// Whether values went in the source's own binary form, unread.
    pub native: bool,
    /// The source's figures, then the target's.
    pub sides: [SideStats; 2],
    /// Wall time since the command started.
    pub elapsed: Duration,
}

impl CopyStats {
    /// Prints the figures to standard error.
    pub fn print(&self) {
        for (key, value) in &self.figures {
            err_line!("{key}: {value}");
        }
        match self.native {
            true => err_line!("values: passed on in the source's binary form, unread"),
            false => err_line!("values: as text"),
        }
        for side in &self.sides {
            side.print();
        }
        print_time_and_memory(self.elapsed, self.rows);
    }
}

/// The `elapsed` and `peak memory` lines every `--stats` ends with.
fn print_time_and_memory(elapsed: Duration, rows: u64) {
    let seconds = elapsed.as_secs_f64();
    let rate = if seconds > 0.0 {
        rows as f64 / seconds
    } else {
        0.0
    };
    err_line!("elapsed: {seconds:.3} s ({rate:.0} rows/s)");
    match peak_rss_bytes() {
        Some(bytes) => err_line!("peak memory: {}", mebibytes(bytes)),
        None => err_line!("peak memory: unknown"),
    }
}

/// A live "rows, rows/s, bytes" line on standard error while it is a terminal;
/// nothing otherwise, so logs and pipes stay clean.
pub struct ProgressLine {
    bar: Option<ProgressBar>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ProgressLine {
    /// Starts the line if standard error is a terminal. With `total_bytes` (an
    /// input file's size) it shows a bar of the bytes read.
    pub fn start(progress: Arc<Progress>, total_bytes: Option<u64>) -> ProgressLine {
        ProgressLine::start_with(progress, total_bytes, None)
    }

    /// [`ProgressLine::start`] for work done by `jobs` parts at once, of which
    /// `running` are still at it: the line says how many.
    pub fn start_jobs(
        progress: Arc<Progress>,
        running: Arc<AtomicUsize>,
        jobs: usize,
    ) -> ProgressLine {
        ProgressLine::start_with(progress, None, Some((running, jobs)))
    }

    fn start_with(
        progress: Arc<Progress>,
        total_bytes: Option<u64>,
        jobs: Option<(Arc<AtomicUsize>, usize)>,
    ) -> ProgressLine {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return ProgressLine {
                bar: None,
                task: None,
            };
        }
        let bar = match total_bytes {
            Some(total) => {
                let bar = ProgressBar::new(total);
                bar.set_style(
                    ProgressStyle::with_template("{bar:30} {percent:>3}% {msg}")
                        .expect("static progress template"),
                );
                bar
            }
            None => {
                let bar = ProgressBar::new_spinner();
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {msg}")
                        .expect("static progress template"),
                );
                bar
            }
        };
        let shown = bar.clone();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            loop {
                let rows = progress.rows();
                let seconds = started.elapsed().as_secs_f64().max(0.001);
                let running = match &jobs {
                    Some((running, jobs)) => {
                        format!(
                            "{} of {jobs} jobs running, ",
                            running.load(Ordering::Relaxed)
                        )
                    }
                    None => String::new(),
                };
                shown.set_message(format!(
                    "{running}{rows} rows, {:.0} rows/s, {}",
                    rows as f64 / seconds,
                    indicatif::HumanBytes(progress.bytes())
                ));
                if total_bytes.is_some() {
                    shown.set_position(progress.bytes());
                } else {
                    shown.tick();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        ProgressLine {
            bar: Some(bar),
            task: Some(task),
        }
    }

    /// Removes the line.
    pub fn finish(self) {
        if let Some(task) = self.task {
            task.abort();
        }
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_told_by_this_command_s_flags() {
        let row = RowError {
            fault: Some(RowFault::UnknownColumn),
            ..RowError::new(3, Some("colour".into()), "the table has no such column")
        };
        let error = Error::bad_row(row.clone());
        assert_eq!(
            import_message(&error).as_deref(),
            Some(
                "line 3, column colour: the table has no such column \
                 (use --ignore-unknown to skip unknown keys)"
            )
        );
        let plain = RowError::new(4, None, "invalid JSON");
        assert_eq!(row_reason(&plain), "invalid JSON");
        assert_eq!(import_message(&Error::bad_row(plain)), None);
        assert_eq!(import_message(&Error::config("no such table")), None);
    }
}
