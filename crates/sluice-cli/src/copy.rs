//! `sluice copy`: the rows of a query or a table of one database into a
//! table of another (or of the same kind), streamed. The source's batches
//! become the target import's rows ([`SourceRows`]) with no file between them
//! and nothing held but a batch on each side; the target side is one unit of
//! work ([`Session::begin_load`]): created, emptied and filled together, so a
//! copy that fails leaves the target as it was. A copy stopped by Ctrl-C or
//! SIGTERM is a failure like any other: the target's unit is an
//! [`interrupt::Unit`], which the copy undoes itself (dropping a table it
//! created and committed) before it exits.

mod columns;
mod failure;
mod fill;
mod jobs;
mod plan;

use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use sluice_core::connect::{Export, ExportOptions, Session, Target};
use sluice_core::load::{
    ImportOptions, ImportSummary, OnConflict, TableInfo, TableSetup, TableSpec,
};
use sluice_core::split::SplitSource;
use sluice_core::{Encoding, Error, Meter, Progress, Schema};

use self::columns::spec_of;
use self::failure::{on, Failure};
use self::fill::fill;
use self::plan::Plan;
use crate::console::err_line;
use crate::exit::exit_code;
use crate::interrupt::{self, Interrupt, Unit};
use crate::parts::PartSessions;
use crate::report::{copy_message, CopyStats, ProgressLine, Side, SideStats};
use crate::vocabulary::{from_help, query_help, to_help, word};
use crate::wait::WaitArgs;

/// Arguments of `sluice copy`.
#[derive(Args)]
pub struct CopyArgs {
    #[arg(long, value_name = "URL", help = from_help())]
    from: String,

    #[arg(long, value_name = "SQL", help = query_help())]
    query: Option<String>,

    /// A value for the next query parameter, as text. Repeat for each.
    #[arg(long = "param", value_name = "VALUE", requires = "query")]
    params: Vec<String>,

    #[arg(long, value_name = "URL", help = to_help())]
    to: String,

    /// The source table, then the target table (optionally qualified). With
    /// --query, the one --table names the target; without, one --table names
    /// a table of that name on both sides.
    #[arg(long = "table", value_name = "TABLE", required = true)]
    tables: Vec<String>,

    /// Without --query: only these of the source table's columns,
    /// comma-separated (the target's others take their defaults; --create
    /// makes only these); the source reads no other, with --jobs too.
    // `conflicts_with` rather than `requires`: see `sluice export --columns`.
    #[arg(
        long,
        value_name = "COLUMNS",
        value_delimiter = ',',
        conflicts_with = "query"
    )]
    columns: Vec<String>,

    /// Create the target table from the source's columns (names, types by
    /// the type mappings in docs/src/types.md; NOT NULL and primary key from a source --table).
    #[arg(long)]
    create: bool,

    /// Empty the target table first, inside the copy's transaction.
    #[arg(long)]
    truncate: bool,

    /// error: a duplicate key fails the copy (default). ignore: keep existing
    /// rows. update: overwrite them (needs --key).
    #[arg(long, value_parser = word::<OnConflict>(), default_value_t = OnConflict::default())]
    on_conflict: OnConflict,

    /// Key columns for --on-conflict, comma-separated.
    #[arg(long, value_delimiter = ',')]
    key: Vec<String>,

    /// Copy in N parts at once, each with a connection to either side, all
    /// reading one snapshot of the source (PostgreSQL sources) and committed
    /// together once all succeed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    jobs: usize,

    /// With --jobs: the integer column whose value ranges make the parts
    /// (needed with --query; a --table is otherwise cut by its storage).
    #[arg(long, value_name = "COLUMN")]
    split_by: Option<String>,

    #[command(flatten)]
    wait: WaitArgs,

    /// Print rows, bytes, round trips of each side, time and peak memory to
    /// standard error.
    #[arg(long)]
    stats: bool,
}

impl CopyArgs {
    fn plan(&self) -> Result<Plan, Error> {
        let (source_table, target_table) = match (&self.query, self.tables.as_slice()) {
            (Some(_), [target]) => (None, target.clone()),
            (Some(_), _) => {
                return Err(Error::config(
                    "with --query, give one --table: the target table",
                ))
            }
            (None, [both]) => (Some(both.clone()), both.clone()),
            (None, [source, target]) => (Some(source.clone()), target.clone()),
            (None, _) => {
                return Err(Error::config(
                    "give --query or a source --table, then the target --table",
                ))
            }
        };
        let options = ImportOptions {
            on_conflict: self.on_conflict,
            key: self.key.clone(),
            // The binary COPY writer reads the spellings of the target
            // column's kind, and a copy's values are the source's kind's (a
            // date into a timestamp, a float into a numeric): text leaves
            // them to the target's parsers. Values in the source's own binary
            // form go in binary regardless.
            binary_copy: false,
            ..ImportOptions::default()
        };
        options.check()?;
        self.check_jobs()?;
        Ok(Plan {
            source_table,
            target_table,
            options,
            setup: TableSetup {
                create: None,
                empty: self.truncate,
                shared: false,
            },
            jobs: self.jobs,
            split_by: self.split_by.clone(),
            native: false,
        })
    }

    fn check_jobs(&self) -> Result<(), Error> {
        let problem = match (self.jobs, &self.query, &self.split_by) {
            (0, _, _) => "--jobs counts parts: give 1 or more",
            (1, _, Some(_)) => "--split-by cuts the rows into --jobs parts: give --jobs 2 or more",
            (1, _, None) => return Ok(()),
            (_, Some(_), None) => {
                "with --query, --jobs needs --split-by COLUMN: an integer column of the result"
            }
            _ if self.truncate => {
                "--truncate empties the table under a lock that would stop the other jobs \
                 writing until the copy commits: empty it first, or copy with --jobs 1"
            }
            _ => return Ok(()),
        };
        Err(Error::config(problem))
    }
}

/// Runs the copy and returns the process exit code.
pub async fn run(arguments: CopyArgs) -> u8 {
    let interrupt = Interrupt::install_saying(
        "the copy was cancelled on both servers; nothing was committed to the target",
    );
    match copy(&arguments, &interrupt).await {
        Ok(()) => 0,
        // The servers report the cancel as an error; it is the user's Ctrl-C.
        Err(_) if interrupt.happened() => {
            interrupt.wait_for_cancel().await;
            interrupt.exit_code()
        }
        Err(failure) => {
            err_line!("sluice: {}", copy_message(failure.side, &failure.error));
            exit_code(&failure.error)
        }
    }
}

/// A side's meter and what `--stats` tells of it.
struct Metered {
    meter: Meter,
    stats: SideStats,
}

impl Metered {
    /// The figures, with the traffic since connecting.
    fn finish(self) -> SideStats {
        SideStats {
            operation: self.meter.snapshot() - self.stats.connect,
            ..self.stats
        }
    }
}

async fn connect(
    target: &dyn Target,
    side: Side,
    wait: &WaitArgs,
) -> Result<(Box<dyn Session>, Metered), Failure> {
    // One meter per side: the jobs' further connections count on it too.
    let meter = Meter::new();
    let mut session = target.connect(&meter).await.map_err(on(side))?;
    wait.apply(&mut *session).map_err(on(side))?;
    let stats = SideStats {
        side,
        product: session.product(),
        connect: meter.snapshot(),
        operation: Default::default(),
        encryption: session.encryption(),
        facts: session.facts(),
    };
    Ok((session, Metered { meter, stats }))
}

async fn copy(arguments: &CopyArgs, interrupt: &Interrupt) -> Result<(), Failure> {
    let started = Instant::now();
    let mut plan = arguments.plan()?;
    let drivers = sluice_drivers::all();
    let source = drivers.open(&arguments.from).map_err(on(Side::Source))?;
    let target = drivers.open(&arguments.to).map_err(on(Side::Target))?;
    if target.read_only() {
        return Err(on(Side::Target)(Error::config(format!(
            "{} databases are read-only through sluice: the target must take writes",
            target.product()
        ))));
    }
    let (mut lead, target_meter) = connect(&*target, Side::Target, &arguments.wait).await?;
    interrupt.arm(lead.canceller());
    let (mut source_session, source_meter) =
        connect(&*source, Side::Source, &arguments.wait).await?;
    interrupt.arm(source_session.canceller());
    let described = describe_source(&mut *source_session, &plan).await?;
    plan.native = wants_native(
        &mut *lead,
        &*source_session,
        described.as_ref(),
        arguments,
        &plan,
    )
    .await;
    let progress = Arc::new(Progress::new());
    let native;
    // Open until the copy returns: a signal after the commit stops nothing.
    let unit;
    let summary = if plan.jobs > 1 {
        let sessions = PartSessions {
            source: &*source,
            meter: &source_meter.meter,
            wait: &arguments.wait,
            interrupt,
        };
        let (exports, spec) = jobs::open_parts(
            source_session,
            &sessions,
            split_source(described.as_ref(), arguments),
            &arguments.columns,
            &plan,
            described,
        )
        .await?;
        native = sends_native(exports[0].schema());
        if arguments.create {
            plan.setup.create = Some(spec);
        }
        unit = interrupt.begin_unit(abandoned(arguments.create))?;
        let meter = target_meter.meter.clone();
        let sessions = jobs::TargetSessions {
            target: &*target,
            meter: &meter,
            wait: &arguments.wait,
            interrupt,
        };
        jobs::load_parts(
            lead,
            &sessions,
            exports,
            Arc::new(plan),
            progress.clone(),
            &unit,
        )
        .await?
    } else {
        let mut target = lead;
        let (mut export, spec) = open_source(source_session, arguments, &plan, described).await?;
        native = sends_native(export.schema());
        if arguments.create {
            plan.setup.create = Some(spec);
        }
        unit = interrupt.begin_unit(abandoned(arguments.create))?;
        let progress_line = ProgressLine::start(progress.clone(), None);
        let result = transfer(&mut *target, &mut export, &plan, &progress, &unit).await;
        progress_line.finish();
        let summary = result?;
        export.close().await;
        target.close().await;
        summary
    };
    if arguments.stats {
        CopyStats {
            figures: vec![
                ("rows", summary.records),
                ("rows written", summary.written),
                ("source bytes", progress.bytes()),
            ],
            rows: summary.records,
            native,
            sides: [source_meter.finish(), target_meter.finish()],
            elapsed: started.elapsed(),
        }
        .print();
    }
    drop(unit);
    Ok(())
}

/// What a second Ctrl-C, exiting before the copy is undone, may leave: the
/// servers roll back what was not committed, but cannot drop a table
/// `--create` made and committed.
fn abandoned(create: bool) -> &'static str {
    match create {
        true => "a table the copy created may be left on the target, empty",
        false => "nothing was committed to the target",
    }
}

/// Whether the source hands over its values in its own binary form for the
/// target to take unread ([`sluice_core::Encoding::Native`]), which spares both
/// servers printing and parsing every value: only into a target that reads
/// the source's native values ([`Dialect::reads_native_values_of`]: one
/// product), and only when each column has the same type on both sides, by
/// construction with `--create`, else when the target table's columns have
/// the source table's types (one more round trip to the target, to describe
/// it). A query into an existing table goes as text: its columns' types are
/// known only once it runs. The source still decides per result, and sends
/// text when one of its columns has no portable binary form.
async fn wants_native(
    target: &mut dyn Session,
    source: &dyn Session,
    described: Option<&TableInfo>,
    arguments: &CopyArgs,
    plan: &Plan,
) -> bool {
    if !target.dialect().reads_native_values_of(source.dialect()) {
        return false;
    }
    if arguments.create {
        return true;
    }
    let Some(source_table) = described else {
        return false;
    };
    // A target that cannot be described fails the load with its own error.
    let Ok(target_table) = target.describe_table(&plan.target_table).await else {
        return false;
    };
    // Only the columns the copy reads must match.
    source_table
        .columns
        .iter()
        .filter(|column| arguments.columns.is_empty() || arguments.columns.contains(&column.name))
        .all(|column| {
            target_table
                .columns
                .iter()
                .any(|target| target.name == column.name && target.type_name == column.type_name)
        })
}

/// Whether the source sends its values in its own binary form: it may send
/// text though asked for them.
fn sends_native(schema: &Schema) -> bool {
    schema
        .columns
        .iter()
        .any(|column| column.encoding == Encoding::Native)
}

/// Starts the source's rows: the query, or every column of the (described)
/// table. Returns them with the table `--create` would make.
async fn open_source(
    session: Box<dyn Session>,
    arguments: &CopyArgs,
    plan: &Plan,
    described: Option<TableInfo>,
) -> Result<(Box<dyn Export>, TableSpec), Failure> {
    let sql = match (&described, &arguments.query) {
        (Some(table), _) => session
            .dialect()
            .projection(&select_all(table), &arguments.columns),
        (None, query) => query.clone().unwrap_or_default(),
    };
    let options = ExportOptions {
        params: arguments.params.iter().cloned().map(Some).collect(),
        native_values: plan.native,
        ..ExportOptions::default()
    };
    let dialect = session.dialect();
    let export = session
        .export(sql, options)
        .await
        .map_err(on(Side::Source))?;
    let spec = spec_of(export.schema(), described.as_ref(), dialect);
    Ok((export, spec))
}

/// What the parts of a `--jobs` copy split: the (described) table, or the
/// query with its parameters.
fn split_source(described: Option<&TableInfo>, arguments: &CopyArgs) -> SplitSource {
    match described {
        Some(table) => SplitSource::Table(table.name.clone()),
        None => SplitSource::Query {
            sql: arguments.query.clone().unwrap_or_default(),
            params: arguments.params.iter().cloned().map(Some).collect(),
        },
    }
}

/// The statement that reads every row of a described table.
fn select_all(table: &TableInfo) -> String {
    format!("select * from {}", table.name)
}

/// The source table's description, when the source is a table.
async fn describe_source(
    session: &mut dyn Session,
    plan: &Plan,
) -> Result<Option<TableInfo>, Failure> {
    match &plan.source_table {
        Some(table) => session
            .describe_table(table)
            .await
            .map(Some)
            .map_err(on(Side::Source)),
        None => Ok(None),
    }
}

/// The target's unit of work around the rows: begun (table created,
/// emptied), filled, then committed, or undone whatever failed or a signal
/// stopped.
async fn transfer(
    target: &mut dyn Session,
    export: &mut Box<dyn Export>,
    plan: &Plan,
    progress: &Progress,
    unit: &Unit,
) -> Result<ImportSummary, Failure> {
    let table = target
        .begin_load(&plan.target_table, &plan.setup)
        .await
        .map_err(on(Side::Target))?;
    let filled = match unit.stopped() {
        true => Err(Failure::from(interrupt::cancelled())),
        false => fill(target, &table, export, plan, progress).await,
    };
    if unit.end(filled.is_ok()).await {
        target.end_load(true).await.map_err(on(Side::Target))?;
        return filled;
    }
    let _ = target.end_load(false).await;
    filled.and(Err(Failure::from(interrupt::cancelled())))
}
