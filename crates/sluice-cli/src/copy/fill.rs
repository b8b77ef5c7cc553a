//! Filling the target's unit from the source's export: the columns matched,
//! the rows imported, and an error told as the source's or the target's,
//! whichever side it came from. The single copy fills one unit, `--jobs`
//! one per part.

use sluice_core::connect::{Export, ImportRequest, Session};
use sluice_core::database::BoxFuture;
use sluice_core::load::{ImportSummary, SourceRows, TableInfo};
use sluice_core::{Batch, Chunk, DynSource, Error, Progress, Rejected, Schema};

use super::columns;
use super::failure::{on, Failure};
use super::plan::Plan;
use crate::report::Side;

/// Matches the columns and imports the source's rows into the table.
pub(super) async fn fill(
    target: &mut dyn Session,
    table: &TableInfo,
    export: &mut Box<dyn Export>,
    plan: &Plan,
    progress: &Progress,
) -> Result<ImportSummary, Failure> {
    let mapping = columns::map(export.schema(), table)?;
    plan.options.check_for(table).map_err(on(Side::Target))?;
    let mut source = Watched {
        inner: &mut **export,
        failed: false,
    };
    let mut rows = SourceRows::new(&mut source, mapping.columns, mapping.fills, progress);
    // Every bad row aborts the copy: none is skipped.
    let mut rejects = |_: &Rejected| Ok(());
    let request = ImportRequest {
        table,
        rows: &mut rows,
        options: &plan.options,
        rejects: &mut rejects,
    };
    let result = target.import(request).await;
    let side = if source.failed {
        Side::Source
    } else {
        Side::Target
    };
    result.map_err(on(side))
}

/// A source that remembers whether it failed, so that an import's error can
/// be told apart from the source's (both come out of the import).
struct Watched<'a> {
    inner: &'a mut dyn DynSource,
    failed: bool,
}

impl DynSource for Watched<'_> {
    fn schema(&self) -> &Schema {
        self.inner.schema()
    }

    fn next_batch(&mut self) -> BoxFuture<'_, Result<Option<&Batch>, Error>> {
        Box::pin(async move {
            let batch = self.inner.next_batch().await;
            self.failed |= batch.is_err();
            batch
        })
    }

    fn next_chunk(&mut self) -> BoxFuture<'_, Result<Option<Chunk<'_>>, Error>> {
        Box::pin(async move {
            let chunk = self.inner.next_chunk().await;
            self.failed |= chunk.is_err();
            chunk
        })
    }
}
