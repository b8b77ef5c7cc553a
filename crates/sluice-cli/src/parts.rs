//! The parts of a split read (`--jobs`), shared by `sluice export` and
//! `sluice copy`: a coordinating session splits the read in a snapshot it
//! exports ([`sluice_core::split`]), each part is an export on a session of
//! its own that joins the snapshot, and the coordinator is closed once every
//! part has joined (from then on the parts hold the snapshot).

use sluice_core::connect::{Export, ExportOptions, Session, Target};
use sluice_core::split::SplitRequest;
use sluice_core::{Error, Meter};

use crate::interrupt::Interrupt;
use crate::wait::WaitArgs;

/// Where the parts' sessions come from, and how they are set up.
pub struct PartSessions<'a> {
    /// The database the read splits.
    pub source: &'a dyn Target,
    /// Counts every part's round trips.
    pub meter: &'a Meter,
    /// The connection's waits and timeouts.
    pub wait: &'a WaitArgs,
    /// Learns each part's canceller, for Ctrl-C and SIGTERM.
    pub interrupt: &'a Interrupt,
}

/// Splits `request` on `coordinator` and starts each part's export, with
/// `options` and the part's own statement and parameters, in the split's
/// snapshot, reading only `columns` (all when empty).
pub async fn open_parts(
    mut coordinator: Box<dyn Session>,
    sessions: &PartSessions<'_>,
    request: &SplitRequest,
    columns: &[String],
    options: &ExportOptions,
) -> Result<Vec<Box<dyn Export>>, Error> {
    let dialect = coordinator.dialect();
    let split = coordinator
        .split_read(request)
        .await?
        .narrowed(columns, dialect);
    let mut exports = Vec::with_capacity(split.parts.len());
    for part in split.parts {
        let mut session = sessions.source.connect(sessions.meter).await?;
        sessions.wait.apply(&mut *session)?;
        sessions.interrupt.arm(session.canceller());
        let options = ExportOptions {
            params: part.params,
            snapshot: Some(split.snapshot.clone()),
            ..options.clone()
        };
        exports.push(session.export(part.sql, options).await?);
    }
    // Every part has joined the snapshot: the coordinator may let it go.
    coordinator.close().await;
    Ok(exports)
}
