//! Bulk import into MariaDB and MySQL: decoded rows into a table, atomically,
//! with errors tied to input lines.
//!
//! Rows travel by `LOAD DATA LOCAL INFILE`, fed from the decoders as a stream
//! (no temporary file): the server asks for the "file" and sluice sends the
//! rows as they are decoded, in tab-separated text. Everything runs in one
//! transaction, so a bad record commits nothing.
//!
//! **The trap this avoids.** With `LOCAL`, the server cannot stop the client
//! mid-file, so it treats every error as `IGNORE` would: a value that does not
//! fit becomes a warning and a stored 0, a duplicate key a warning and a
//! dropped row. A loader that only looks at the statement's success loses data
//! silently. sluice reads the warning count of every load; any warning that is
//! not expected (duplicates when conflicts are ignored) rolls the transaction
//! back and becomes the import's error, tied to its input line through the
//! server's "at row N".
//!
//! Strategies, chosen by [`ImportOptions`]:
//! - **abort on error** (default): one `LOAD DATA` for the whole input;
//! - **skip bad rows**: chunks under savepoints; a refused chunk is rolled back
//!   to its savepoint, the rows its warnings name are rejected (or, when no row
//!   is named, the chunk is halved until the refused row stands alone) and the
//!   rest is sent again;
//! - **conflicts** ignored with `IGNORE`; updated through a temporary staging
//!   table (`REPLACE` into it, so the last record of a key wins) and one
//!   `INSERT … SELECT … ON DUPLICATE KEY UPDATE`;
//! - **INSERT batches** (`Method::Insert`, or the server refusing `LOCAL
//!   INFILE`): prepared multi-row `INSERT`s; on the fallback path several are
//!   sent back to back before their answers are read, each sized to stay under
//!   `max_allowed_packet`.
//!
//! Rows come from a [`RowFeed`]: decoded input, or another database's result
//! (`sluice copy`). Inside a copy's unit of work (`crate::ddl::begin_load`)
//! an import joins the transaction already open ([`Scope::Caller`]): it
//! starts, commits and rolls back nothing itself.
//!
//! This file chooses the strategy and holds the import's transaction; each
//! operation has a file of its own: `plan` (the statements and conversions,
//! chosen once), `values` (a value as `LOAD DATA`'s text or an `INSERT`'s
//! parameter), `load_data` (`LOAD DATA LOCAL INFILE`), `insert` (`INSERT`
//! batches), `skip` (chunks under savepoints) and `warnings` (what the server
//! says about refused rows). Describing the table is `crate::describe`'s.

use sluice_core::load::{
    ImportInput, ImportOptions, ImportSummary, Method, OnConflict, OnError, Opening, RejectSink,
    RowFeed, Scope, TableInfo,
};
use sluice_core::{Decoded, Decoder, Error, Progress, RowError};
use tokio::io::AsyncRead;

use crate::connection::Connection;

mod insert;
mod load_data;
mod plan;
mod skip;
mod values;
mod warnings;

pub use crate::describe::describe_table;
use insert::insert_all;
use load_data::load_all;
use plan::{Plan, STAGE};
use skip::{load_skipping, Path};

/// Imports the rows of `rows` into `table`, in `scope`'s transaction: an
/// input's records decoded as they arrive (`sluice_core::load::ImportInput`),
/// or another database's result (`SourceRows`). See the module docs for the
/// strategies; `rejects` receives bad records in skip mode.
pub async fn import_rows(
    connection: &mut Connection,
    table: &TableInfo,
    rows: &mut dyn RowFeed,
    options: &ImportOptions,
    rejects: &mut RejectSink<'_>,
    scope: Scope,
) -> Result<ImportSummary, Error> {
    let mut decoded = Decoded::default();
    let (columns, more) =
        match sluice_core::load::open(rows, &mut decoded, table, options, rejects).await? {
            Opening::Columns { columns, more } => (columns, more),
            Opening::Empty(summary) => return Ok(summary),
        };
    let plan = Plan::new(table, &columns, options, scope);
    begin(connection, &plan);
    let outcome = async {
        let summary = send_rows(
            connection,
            &plan,
            rows,
            &mut decoded,
            more,
            options,
            rejects,
        );
        let summary = summary.await?;
        upsert(connection, &plan, summary).await
    }
    .await;
    let mut summary = match outcome {
        Ok(summary) => summary,
        Err(error) if scope == Scope::Own => {
            let _ = connection.simple_query("ROLLBACK").await;
            return Err(error);
        }
        Err(error) => return Err(error),
    };
    if scope == Scope::Own {
        connection.simple_query(plan.end()).await?;
    }
    if plan.on_conflict == OnConflict::Update {
        // A temporary table's DROP commits nothing, inside a caller's transaction too.
        connection
            .simple_query(&format!("DROP TEMPORARY TABLE IF EXISTS {STAGE}"))
            .await?;
    }
    summary.records = rows.records_seen();
    summary.rejected = summary.records - summary.accepted;
    Ok(summary)
}

/// Sends every row the way the options and the server allow.
async fn send_rows(
    connection: &mut Connection,
    plan: &Plan,
    rows: &mut dyn RowFeed,
    decoded: &mut Decoded,
    more: bool,
    options: &ImportOptions,
    rejects: &mut RejectSink<'_>,
) -> Result<ImportSummary, Error> {
    let load = connection.server().local_infile;
    if options.method == Method::Copy && !load {
        connection.notices.push(
            "the server refuses LOAD DATA LOCAL INFILE (local_infile is OFF): \
             rows go as multi-row INSERTs sized to its max_allowed_packet"
                .to_owned(),
        );
    }
    match (options.method, options.on_error) {
        (Method::Copy, OnError::Abort) if load => {
            load_all(connection, plan, rows, decoded, more).await
        }
        (Method::Copy, OnError::Skip) => {
            let path = if load { Path::Load } else { Path::Insert };
            let input = (rows, decoded, more);
            load_skipping(connection, plan, input, options, rejects, path).await
        }
        (Method::Copy, OnError::Abort) => {
            insert_all(connection, plan, rows, decoded, more, None).await
        }
        (Method::Insert { rows: batch_size }, _) => {
            let batch_size = Some(batch_size.max(1));
            insert_all(connection, plan, rows, decoded, more, batch_size).await
        }
    }
}

/// For updates on conflict: moves the staged rows into the table.
async fn upsert(
    connection: &mut Connection,
    plan: &Plan,
    mut summary: ImportSummary,
) -> Result<ImportSummary, Error> {
    if plan.on_conflict == OnConflict::Update {
        let result = connection.simple_query(&plan.upsert_statement()).await?;
        summary.written = upserted(result.affected_rows, &result.info);
    }
    Ok(summary)
}

/// Rows an `INSERT … ON DUPLICATE KEY UPDATE` added or changed: the server
/// counts 1 per row inserted and 2 per row updated (0 when it was already
/// so), and its info says how many rows met an existing key.
fn upserted(affected_rows: u64, info: &str) -> u64 {
    let number_after = |label: &str| -> Option<u64> {
        let (_, after) = info.split_once(label)?;
        after.split_whitespace().next()?.parse().ok()
    };
    match (number_after("Records:"), number_after("Duplicates:")) {
        (Some(records), Some(duplicates)) => {
            let inserted = records.saturating_sub(duplicates);
            inserted + affected_rows.saturating_sub(inserted) / 2
        }
        _ => affected_rows,
    }
}

/// Finds the first input row the table refuses, for errors the server reports
/// without a row (a duplicate key): the input, read again, goes in
/// savepoint-guarded chunks, halved until the refused row stands alone, in a
/// transaction rolled back at the end.
pub async fn locate_refused_row<D, R>(
    connection: &mut Connection,
    table: &TableInfo,
    decoder: &mut D,
    reader: &mut R,
    options: &ImportOptions,
) -> Result<Option<RowError>, Error>
where
    D: Decoder + ?Sized,
    R: AsyncRead + Unpin + Send + ?Sized,
{
    let progress = Progress::new();
    let mut input = ImportInput::new(decoder, reader, &progress);
    locate_in_rows(connection, table, &mut input, options).await
}

/// [`locate_refused_row`] over any rows.
pub(crate) async fn locate_in_rows(
    connection: &mut Connection,
    table: &TableInfo,
    rows: &mut dyn RowFeed,
    options: &ImportOptions,
) -> Result<Option<RowError>, Error> {
    sluice_core::load::locate_refused_row(options, async |options, rejects| {
        import_rows(connection, table, rows, options, rejects, Scope::Own).await
    })
    .await
}

/// Strict mode for the INSERT path, one transaction (unless the caller's is
/// open), and the staging table for updates, queued to travel with the first
/// statement that sends rows.
fn begin(connection: &mut Connection, plan: &Plan) {
    connection.queue_setting(
        "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@sql_mode, ''), 'STRICT_ALL_TABLES')",
    );
    if plan.on_conflict == OnConflict::Update {
        connection.queue_setting(&format!("DROP TEMPORARY TABLE IF EXISTS {STAGE}"));
        connection.queue_setting(&format!(
            "CREATE TEMPORARY TABLE {STAGE} LIKE {}",
            plan.table
        ));
    }
    if plan.scope == Scope::Own {
        // Travels with the first load or INSERT.
        connection.queue_setting("START TRANSACTION");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upserts_count_rows_added_or_changed() {
        // 3 inserted, 2 updated, 5 already so.
        assert_eq!(
            upserted(3 + 2 * 2, "Records: 10  Duplicates: 7  Warnings: 0"),
            5
        );
        assert_eq!(upserted(4, ""), 4);
    }
}
