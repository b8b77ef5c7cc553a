//! `sluice copy --jobs N`: the source read in N parts that share one snapshot
//! ([`sluice_core::split`]), each part loaded into the target by a session of
//! its own, all committed together once every part has succeeded.
//!
//! Consistency: every part reads the snapshot the coordinating source session
//! exported, so the parts together are one read of the source at one moment,
//! whatever writes run meanwhile. The coordinator is closed once every part
//! has joined the snapshot (from then on the parts hold it).
//!
//! Atomicity ("commit after all succeed"): a lead target session begins the
//! unit (creating the table, committed at once so that the jobs see it) and
//! loads nothing; each job's session loads its part in a transaction of its
//! own and keeps it open. When every job has succeeded, the jobs commit, then
//! the lead. When one fails, the others are stopped, every job's transaction
//! is rolled back and the lead drops the table it created: the target is as
//! it was. A signal is such a failure: every session of both sides is armed,
//! so that its statement is cancelled and the jobs fail ([`Unit`]). One
//! window remains: a connection lost *between* two of the final commits
//! leaves the parts already committed in place, and the error says so.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::stream::{FuturesUnordered, StreamExt};
use sluice_core::connect::{Export, ExportOptions, Session, Target};
use sluice_core::load::{ImportSummary, TableInfo, TableSetup, TableSpec};
use sluice_core::split::{SplitRequest, SplitSource};
use sluice_core::{Error, ErrorKind, Meter, Progress};
use tokio::task::JoinHandle;

use super::columns::spec_of;
use super::failure::{on, Failure};
use super::fill::fill;
use super::plan::Plan;
use crate::interrupt::{self, Interrupt, Unit};
use crate::parts::{self, PartSessions};
use crate::report::{ProgressLine, Side};
use crate::wait::WaitArgs;

/// The parts' exports of `source` (reading only `columns` of a table, all
/// when empty), started in the snapshot, and the table `--create` would make
/// of the source.
pub(super) async fn open_parts(
    coordinator: Box<dyn Session>,
    sessions: &PartSessions<'_>,
    source: SplitSource,
    columns: &[String],
    plan: &Plan,
    described: Option<TableInfo>,
) -> Result<(Vec<Box<dyn Export>>, TableSpec), Failure> {
    let request = SplitRequest {
        source,
        parts: plan.jobs,
        split_by: plan.split_by.clone(),
    };
    let options = ExportOptions {
        native_values: plan.native,
        ..ExportOptions::default()
    };
    let dialect = coordinator.dialect();
    let exports = parts::open_parts(coordinator, sessions, &request, columns, &options)
        .await
        .map_err(on(Side::Source))?;
    let spec = spec_of(exports[0].schema(), described.as_ref(), dialect);
    Ok((exports, spec))
}

/// Where the jobs' target sessions come from, and how they are set up.
pub(super) struct TargetSessions<'a> {
    /// The target database.
    pub target: &'a dyn Target,
    /// Counts every job's round trips.
    pub meter: &'a Meter,
    /// The connection's waits and timeouts.
    pub wait: &'a WaitArgs,
    /// Learns each job's canceller, for Ctrl-C and SIGTERM.
    pub interrupt: &'a Interrupt,
}

/// Loads each export into the target on a session of its own and commits
/// them all, or none. `lead` begins and ends the unit.
pub(super) async fn load_parts(
    mut lead: Box<dyn Session>,
    sessions: &TargetSessions<'_>,
    exports: Vec<Box<dyn Export>>,
    plan: Arc<Plan>,
    progress: Arc<Progress>,
    unit: &Unit,
) -> Result<ImportSummary, Failure> {
    let setup = TableSetup {
        shared: true,
        ..plan.setup.clone()
    };
    let table = lead
        .begin_load(&plan.target_table, &setup)
        .await
        .map_err(on(Side::Target))?;
    let joined = join_jobs(sessions, exports.len(), &plan.target_table).await;
    let outcome = match joined {
        Ok(jobs) if !unit.stopped() => {
            let running = Arc::new(AtomicUsize::new(jobs.len()));
            let line = ProgressLine::start_jobs(progress.clone(), running.clone(), jobs.len());
            let outcome = run_jobs(jobs, exports, &table, plan, progress, running, unit).await;
            line.finish();
            outcome
        }
        Ok(jobs) => {
            unit.end(false).await;
            end_all(jobs, false).await;
            Err(Failure::from(interrupt::cancelled()))
        }
        Err(error) => {
            unit.end(false).await;
            Err(on(Side::Target)(error))
        }
    };
    let _ = lead
        .end_load(outcome.is_ok())
        .await
        .map_err(on(Side::Target));
    lead.close().await;
    outcome
}

/// A target session per job, armed and with its unit begun.
async fn join_jobs(
    sessions: &TargetSessions<'_>,
    jobs: usize,
    table: &str,
) -> Result<Vec<Box<dyn Session>>, Error> {
    let setup = TableSetup {
        shared: true,
        ..TableSetup::default()
    };
    let mut joined = Vec::with_capacity(jobs);
    for _ in 0..jobs {
        let mut session = sessions.target.connect(sessions.meter).await?;
        sessions.wait.apply(&mut *session)?;
        sessions.interrupt.arm(session.canceller());
        session.begin_load(table, &setup).await?;
        joined.push(session);
    }
    Ok(joined)
}

type Job = JoinHandle<(Box<dyn Session>, Result<ImportSummary, Failure>)>;

/// Runs the jobs at once; on the first failure stops the rest (their
/// sessions dropped: the server rolls their transactions back). Then commits
/// every job's unit, or undoes them (a signal stopped them, too).
async fn run_jobs(
    sessions: Vec<Box<dyn Session>>,
    exports: Vec<Box<dyn Export>>,
    table: &TableInfo,
    plan: Arc<Plan>,
    progress: Arc<Progress>,
    running: Arc<AtomicUsize>,
    unit: &Unit,
) -> Result<ImportSummary, Failure> {
    let handles: Vec<Job> = sessions
        .into_iter()
        .zip(exports)
        .map(|(session, export)| {
            let job = job(
                session,
                export,
                table.clone(),
                plan.clone(),
                progress.clone(),
            );
            let running = running.clone();
            tokio::spawn(async move {
                let done = job.await;
                running.fetch_sub(1, Ordering::Relaxed);
                done
            })
        })
        .collect();
    let aborters: Vec<_> = handles.iter().map(JoinHandle::abort_handle).collect();
    let mut running: FuturesUnordered<Job> = handles.into_iter().collect();
    let mut finished = Vec::new();
    let mut total = ImportSummary::default();
    let mut failure = None;
    while let Some(joined) = running.next().await {
        let (session, result) = match joined {
            Ok(done) => done,
            Err(_) if failure.is_some() => continue,
            Err(error) => {
                failure = Some(Failure::from(Error::new(
                    ErrorKind::Io,
                    format!("a copy job stopped: {error}"),
                )));
                aborters.iter().for_each(|job| job.abort());
                continue;
            }
        };
        match result {
            Ok(summary) => add(&mut total, &summary),
            Err(error) if failure.is_none() => {
                failure = Some(error);
                aborters.iter().for_each(|job| job.abort());
            }
            Err(_) => {}
        }
        finished.push(session);
    }
    if unit.end(failure.is_none()).await {
        return commit_all(finished).await.map(|()| total);
    }
    end_all(finished, false).await;
    Err(failure.unwrap_or_else(|| Failure::from(interrupt::cancelled())))
}

/// One job: its part loaded into its session's unit, left open.
async fn job(
    mut session: Box<dyn Session>,
    mut export: Box<dyn Export>,
    table: TableInfo,
    plan: Arc<Plan>,
    progress: Arc<Progress>,
) -> (Box<dyn Session>, Result<ImportSummary, Failure>) {
    let result = fill(&mut *session, &table, &mut export, &plan, &progress).await;
    if result.is_ok() {
        export.close().await;
    }
    (session, result)
}

fn add(total: &mut ImportSummary, part: &ImportSummary) {
    total.records += part.records;
    total.written += part.written;
}

/// Commits every job's unit; a failure part-way says how many had committed.
async fn commit_all(sessions: Vec<Box<dyn Session>>) -> Result<(), Failure> {
    let count = sessions.len();
    let mut sessions = sessions.into_iter();
    for (committed, mut session) in sessions.by_ref().enumerate() {
        if let Err(error) = session.end_load(true).await {
            end_all(sessions.collect(), false).await;
            let error = match committed {
                0 => error,
                _ => Error::new(
                    error.kind(),
                    format!(
                        "{committed} of the copy's {count} parts were committed before this failure: {error}"
                    ),
                ),
            };
            return Err(on(Side::Target)(error));
        }
        session.close().await;
    }
    Ok(())
}

/// Ends every session's unit (`commit` or undo) and closes it.
async fn end_all(sessions: Vec<Box<dyn Session>>, commit: bool) {
    for mut session in sessions {
        let _ = session.end_load(commit).await;
        session.close().await;
    }
}
