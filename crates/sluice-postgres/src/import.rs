//! Bulk import: decoded rows into a table, atomically, with errors tied to input lines.
//!
//! Strategies, chosen by [`ImportOptions`]:
//!
//! - **COPY, abort on error** (default): one `COPY … FROM STDIN` for the whole
//!   input, so the whole load is one statement: any bad record or refused row
//!   fails it and nothing is committed. A constant handful of round trips.
//! - **COPY, skip bad rows**: one transaction; rows go in chunks, each under a
//!   savepoint. A chunk the server refuses is rolled back to its savepoint, the
//!   refused row (named by the server, or found by halving the chunk when the
//!   server cannot say, as for foreign keys checked at the end) is rejected, and
//!   the rest is sent again. Good rows commit together at the end.
//! - **Upsert** (`on_conflict` ignore/update): rows are copied into a temporary
//!   staging table, then moved with `INSERT … SELECT … ON CONFLICT`; when a key
//!   repeats within the input, its last record wins.
//! - **INSERT batches** (`Method::Insert`): multi-row `INSERT` statements of N rows,
//!   one round trip each, inside one transaction: the seed's experiment, kept to
//!   measure what COPY saves.

use std::fmt::Write as _;

use postgres_protocol::escape::escape_identifier;
use sluice_core::{Column, Decoded, Decoder, Error, ErrorKind, Kind, Progress, Rejected, RowError};
use tokio::io::AsyncRead;

pub use sluice_core::load::{
    ImportFault, ImportOptions, ImportSummary, Method, OnConflict, OnError, RejectSink, TableInfo,
};
use sluice_core::load::{ImportInput, LineMap, Opening};

use crate::copy_in::error_position;
use crate::types;
use crate::Connection;

/// Reads the table's columns and their kinds from the catalog.
pub async fn describe_table(connection: &mut Connection, table: &str) -> Result<TableInfo, Error> {
    let rows = connection
        .query_rows(
            "select c.oid::regclass::text, a.attname::text, a.atttypid::int8, \
                    (a.atthasdef or a.attidentity <> '')::text \
             from pg_catalog.pg_class c join pg_catalog.pg_attribute a on a.attrelid = c.oid \
             where c.oid = to_regclass($1) and a.attnum > 0 and not a.attisdropped \
               and a.attgenerated = '' order by a.attnum",
            &[Some(table)],
        )
        .await?;
    if rows.is_empty() {
        return Err(Error::config(format!("table {table:?} does not exist")));
    }
    let bad = || Error::protocol("unexpected row from the table catalog query");
    let mut name = String::new();
    let mut raw = Vec::new();
    let mut defaulted = Vec::new();
    for row in rows {
        name = row.first().cloned().flatten().ok_or_else(bad)?;
        let column = row.get(1).cloned().flatten().ok_or_else(bad)?;
        let oid: u32 = row
            .get(2)
            .cloned()
            .flatten()
            .and_then(|oid| oid.parse::<i64>().ok())
            .ok_or_else(bad)? as u32;
        if row.get(3).cloned().flatten().as_deref() == Some("true") {
            defaulted.push(column.clone());
        }
        raw.push((column, oid));
    }
    let oids: Vec<u32> = raw.iter().map(|(_, oid)| *oid).collect();
    let catalog = types::resolve(connection, &oids).await;
    // resolve() runs inside an exchange; end it whatever happened.
    let catalog = connection.end_exchange(catalog).await?;
    Ok(TableInfo {
        name,
        defaulted,
        columns: types::schema_of(&raw, &catalog).columns,
    })
}

/// Ties a database error to the input line of the row it names.
fn at_line(error: Error, line_of: impl Fn(u64) -> Option<u64>) -> Error {
    let Some((row, column)) = error_position(&error) else {
        return error;
    };
    let Some(line) = line_of(row) else {
        return error;
    };
    let row_error = reason_of(&error, line, column);
    error.at_row(row_error)
}

fn reason_of(error: &Error, line: u64, column: Option<String>) -> RowError {
    let (reason, column) = match error.as_db_error() {
        Some(db) => {
            let mut reason = db.message.clone();
            if let Some(detail) = &db.detail {
                let _ = write!(reason, " ({detail})");
            }
            (reason, column.or_else(|| db.column.clone()))
        }
        None => (error.to_string(), column),
    };
    RowError::new(line, column, reason)
}

fn column_list(columns: &[Column]) -> String {
    columns
        .iter()
        .map(|column| escape_identifier(&column.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Imports everything `reader` holds into `table`. See the module docs for the
/// strategies; `rejects` receives bad records in skip mode.
pub async fn import<D, R>(
    connection: &mut Connection,
    table: &TableInfo,
    decoder: &mut D,
    reader: &mut R,
    options: &ImportOptions,
    rejects: &mut RejectSink<'_>,
    progress: &Progress,
) -> Result<ImportSummary, Error>
where
    D: Decoder + ?Sized,
    R: AsyncRead + Unpin + Send + ?Sized,
{
    options.check_for(table)?;
    let mut input = ImportInput::new(decoder, reader, progress);
    let mut decoded = Decoded::default();
    let (columns, more) = match input.open(&mut decoded, options.on_error, rejects).await? {
        Opening::Columns { columns, more } => (columns, more),
        Opening::Empty(summary) => return Ok(summary),
    };
    let plan = Plan::new(table, &columns, options);
    let mut summary = match options.method {
        Method::Insert { batch_size } => {
            insert_batches(
                connection,
                &plan,
                &mut input,
                &mut decoded,
                more,
                batch_size.max(1),
            )
            .await?
        }
        Method::Copy => match options.on_error {
            OnError::Abort => copy_abort(connection, &plan, &mut input, &mut decoded, more).await?,
            OnError::Skip => {
                copy_skip(
                    connection,
                    &plan,
                    &mut input,
                    &mut decoded,
                    more,
                    options,
                    rejects,
                )
                .await?
            }
        },
    };
    summary.records = input.decoder.records_seen();
    summary.rejected = summary.records - summary.accepted;
    Ok(summary)
}

/// Finds the first input row the table refuses, for errors the server reports
/// without a row (foreign keys are checked after the last row of a COPY): the
/// input, read again from the start, goes in savepoint-guarded chunks, halved
/// until the refused row stands alone, inside a transaction that is rolled back.
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
    sluice_core::load::locate_refused_row(options, async |options, rejects| {
        import(
            connection, table, decoder, reader, options, rejects, &progress,
        )
        .await
    })
    .await
}

/// The statements of one import.
struct Plan {
    table: String,
    columns: Vec<Column>,
    kinds: Vec<Kind>,
    /// Set for upserts: the `INSERT … SELECT … ON CONFLICT` from the staging table.
    upsert: Option<String>,
    /// Roll back instead of committing.
    dry_run: bool,
}

const STAGE: &str = "sluice_import_stage";

impl Plan {
    fn new(table: &TableInfo, columns: &[Column], options: &ImportOptions) -> Plan {
        let list = column_list(columns);
        let conflict = |select: &str| -> String {
            let keys = options
                .key
                .iter()
                .map(|key| escape_identifier(key))
                .collect::<Vec<_>>()
                .join(", ");
            let target = if keys.is_empty() {
                String::new()
            } else {
                format!(" ({keys})")
            };
            let action = match options.on_conflict {
                OnConflict::Update => {
                    let updates: Vec<String> = columns
                        .iter()
                        .filter(|column| !options.key.contains(&column.name))
                        .map(|column| {
                            let name = escape_identifier(&column.name);
                            format!("{name} = excluded.{name}")
                        })
                        .collect();
                    if updates.is_empty() {
                        "do nothing".to_owned()
                    } else {
                        format!("do update set {}", updates.join(", "))
                    }
                }
                _ => "do nothing".to_owned(),
            };
            format!(
                "insert into {} ({list}) {select} on conflict{target} {action}",
                table.name
            )
        };
        let upsert = match options.on_conflict {
            OnConflict::Error => None,
            OnConflict::Ignore => Some(conflict(&format!("select {list} from {STAGE}"))),
            OnConflict::Update => {
                let keys = options
                    .key
                    .iter()
                    .map(|key| escape_identifier(key))
                    .collect::<Vec<_>>()
                    .join(", ");
                // The last record of a repeated key wins: a fresh staging table
                // holds rows in the order they were copied.
                Some(conflict(&format!(
                    "select distinct on ({keys}) {list} from {STAGE} order by {keys}, ctid desc"
                )))
            }
        };
        Plan {
            table: table.name.clone(),
            kinds: columns.iter().map(|column| column.kind.clone()).collect(),
            columns: columns.to_vec(),
            upsert,
            dry_run: options.dry_run,
        }
    }

    /// Whether the import runs in an explicit transaction (rather than being one COPY).
    fn in_transaction(&self) -> bool {
        self.upsert.is_some() || self.dry_run
    }

    /// How the transaction ends when all went well.
    fn end(&self) -> &'static str {
        if self.dry_run {
            "rollback"
        } else {
            "commit"
        }
    }

    fn copy_statement(&self) -> String {
        let target = if self.upsert.is_some() {
            STAGE
        } else {
            &self.table
        };
        format!("copy {target} ({}) from stdin", column_list(&self.columns))
    }

    fn stage_statement(&self) -> String {
        format!(
            "create temporary table {STAGE} (like {} including defaults) on commit drop",
            self.table
        )
    }
}

/// Runs SQL that returns no rows and reports the server's error.
async fn execute(connection: &mut Connection, sql: &str) -> Result<u64, Error> {
    connection.simple_command(sql).await
}

/// Rolls back, keeping the error that caused it.
async fn rollback(connection: &mut Connection, error: Error) -> Error {
    let _ = execute(connection, "rollback").await;
    error
}

async fn copy_abort<D: Decoder + ?Sized, R: AsyncRead + Unpin + Send + ?Sized>(
    connection: &mut Connection,
    plan: &Plan,
    input: &mut ImportInput<'_, D, R>,
    decoded: &mut Decoded,
    mut more: bool,
) -> Result<ImportSummary, Error> {
    let mut summary = ImportSummary::default();
    match plan.upsert {
        Some(_) => execute(connection, &format!("begin; {}", plan.stage_statement())).await?,
        None if plan.dry_run => execute(connection, "begin").await?,
        None => 0,
    };
    let mut lines = LineMap::default();
    let mut copy = match connection
        .copy_in(&plan.copy_statement(), &plan.kinds)
        .await
    {
        Ok(copy) => copy,
        Err(error) => {
            if plan.in_transaction() {
                return Err(rollback(connection, error).await);
            }
            return Err(error);
        }
    };
    let outcome: Result<(), Error> = async {
        loop {
            if let Some(first) = decoded.rejected.first() {
                return Err(Error::bad_row(first.error.clone()));
            }
            lines.extend(&decoded.lines);
            let rows = decoded.batch.num_rows();
            copy.write_rows(&decoded.batch, 0..rows)
                .await
                .map_err(|error| at_line(error, |row| lines.line(row)))?;
            input.progress.add_rows(rows as u64);
            summary.accepted += rows as u64;
            decoded.clear();
            if !more {
                return Ok(());
            }
            more = input.next(decoded).await?;
        }
    }
    .await;
    match outcome {
        Ok(()) => {}
        Err(error) => {
            // A database error has already ended the COPY; anything else has not.
            if error.kind() != ErrorKind::Database {
                copy.fail(&error.to_string()).await.ok();
            }
            if plan.in_transaction() {
                return Err(rollback(connection, error).await);
            }
            return Err(error);
        }
    }
    let copied = copy
        .finish()
        .await
        .map_err(|error| at_line(error, |row| lines.line(row)));
    let copied = match copied {
        Ok(copied) => copied,
        Err(error) if plan.in_transaction() => return Err(rollback(connection, error).await),
        Err(error) => return Err(error),
    };
    summary.written = copied;
    if let Some(upsert) = &plan.upsert {
        match execute(connection, upsert).await {
            Ok(written) => summary.written = written,
            Err(error) => return Err(rollback(connection, error).await),
        }
    }
    if plan.in_transaction() {
        execute(connection, plan.end()).await?;
    }
    Ok(summary)
}

async fn copy_skip<D: Decoder + ?Sized, R: AsyncRead + Unpin + Send + ?Sized>(
    connection: &mut Connection,
    plan: &Plan,
    input: &mut ImportInput<'_, D, R>,
    decoded: &mut Decoded,
    mut more: bool,
    options: &ImportOptions,
    rejects: &mut RejectSink<'_>,
) -> Result<ImportSummary, Error> {
    let mut summary = ImportSummary::default();
    let begin = match plan.upsert {
        Some(_) => format!("begin; {}", plan.stage_statement()),
        None => "begin".to_owned(),
    };
    execute(connection, &begin).await?;
    let result: Result<(), Error> = async {
        loop {
            for rejected in decoded.rejected.drain(..) {
                rejects(&rejected)?;
            }
            if decoded.batch.num_rows() >= options.chunk_rows.max(1) || !more {
                let accepted = copy_chunk(connection, plan, decoded, rejects).await?;
                input.progress.add_rows(accepted);
                summary.accepted += accepted;
                decoded.clear();
            }
            if !more {
                return Ok(());
            }
            more = input.next(decoded).await?;
        }
    }
    .await;
    if let Err(error) = result {
        return Err(rollback(connection, error).await);
    }
    summary.written = summary.accepted;
    if let Some(upsert) = &plan.upsert {
        match execute(connection, upsert).await {
            Ok(written) => summary.written = written,
            Err(error) => return Err(rollback(connection, error).await),
        }
    }
    execute(connection, plan.end()).await?;
    Ok(summary)
}

/// Copies the rows of `decoded` under savepoints, rejecting each row the server
/// refuses, and returns how many went in.
async fn copy_chunk(
    connection: &mut Connection,
    plan: &Plan,
    decoded: &Decoded,
    rejects: &mut RejectSink<'_>,
) -> Result<u64, Error> {
    let mut accepted = 0;
    let mut pending: Vec<Vec<usize>> = vec![(0..decoded.batch.num_rows()).collect()];
    while let Some(segment) = pending.pop() {
        if segment.is_empty() {
            continue;
        }
        execute(connection, "savepoint sluice_chunk").await?;
        let attempt = async {
            let mut copy = connection
                .copy_in(&plan.copy_statement(), &plan.kinds)
                .await?;
            copy.write_rows(&decoded.batch, segment.iter().copied())
                .await?;
            copy.finish().await
        }
        .await;
        match attempt {
            Ok(_) => {
                execute(connection, "release savepoint sluice_chunk").await?;
                accepted += segment.len() as u64;
            }
            Err(error) if error.kind() == ErrorKind::Database => {
                execute(connection, "rollback to savepoint sluice_chunk").await?;
                let position = error_position(&error);
                let refused = match &position {
                    Some((row, _)) if *row >= 1 && (*row as usize) <= segment.len() => {
                        Some(*row as usize - 1)
                    }
                    _ if segment.len() == 1 => Some(0),
                    _ => None,
                };
                match refused {
                    Some(index) => {
                        let row = segment[index];
                        let column = position.and_then(|(_, column)| column);
                        rejects(&Rejected {
                            error: reason_of(&error, decoded.lines[row], column),
                            record: decoded.records.get(row).cloned().unwrap_or_default(),
                        })?;
                        let mut rest = segment;
                        rest.remove(index);
                        pending.push(rest);
                    }
                    None => {
                        // The server cannot say which row (e.g. a foreign key checked
                        // at the end of the statement): halve until it is one row.
                        let half = segment.len() / 2;
                        pending.push(segment[half..].to_vec());
                        pending.push(segment[..half].to_vec());
                    }
                }
            }
            Err(error) => return Err(error),
        }
    }
    Ok(accepted)
}

async fn insert_batches<D: Decoder + ?Sized, R: AsyncRead + Unpin + Send + ?Sized>(
    connection: &mut Connection,
    plan: &Plan,
    input: &mut ImportInput<'_, D, R>,
    decoded: &mut Decoded,
    mut more: bool,
    batch_size: usize,
) -> Result<ImportSummary, Error> {
    const STATEMENT: &str = "sluice_insert";
    let mut summary = ImportSummary::default();
    execute(connection, "begin").await?;
    let mut prepared = false;
    let mut pending = Decoded::default();
    pending.batch.reset(plan.columns.len());
    let result: Result<(), Error> = async {
        loop {
            if let Some(first) = decoded.rejected.first() {
                return Err(Error::bad_row(first.error.clone()));
            }
            for index in 0..decoded.batch.num_rows() {
                pending.batch.push_row(&decoded.batch.row(index));
                pending.lines.push(decoded.lines[index]);
            }
            decoded.clear();
            while pending.batch.num_rows() >= batch_size || (!more && !pending.batch.is_empty()) {
                let rows = pending.batch.num_rows().min(batch_size);
                let name = if rows == batch_size { STATEMENT } else { "" };
                if name.is_empty() || !prepared {
                    let sql = insert_statement(plan, rows);
                    connection.encode_parse(name, &sql)?;
                    prepared |= !name.is_empty();
                }
                let written = insert_rows(connection, plan, name, &pending.batch, 0..rows)
                    .await
                    .map_err(|error| {
                        let first = pending.lines[0];
                        let last = pending.lines[rows - 1];
                        let mut row_error = reason_of(&error, first, None);
                        if last != first {
                            row_error.reason = format!(
                                "in the INSERT of lines {first}–{last}: {}",
                                row_error.reason
                            );
                        }
                        error.at_row(row_error)
                    })?;
                summary.accepted += rows as u64;
                summary.written += written;
                input.progress.add_rows(rows as u64);
                // Keep the rows after this statement's.
                let mut rest = Decoded::default();
                rest.batch.reset(plan.columns.len());
                for index in rows..pending.batch.num_rows() {
                    rest.batch.push_row(&pending.batch.row(index));
                    rest.lines.push(pending.lines[index]);
                }
                pending = rest;
            }
            if !more {
                return Ok(());
            }
            more = input.next(decoded).await?;
        }
    }
    .await;
    if let Err(error) = result {
        return Err(rollback(connection, error).await);
    }
    execute(connection, plan.end()).await?;
    Ok(summary)
}

fn insert_statement(plan: &Plan, rows: usize) -> String {
    let columns = plan.columns.len();
    let mut sql = format!(
        "insert into {} ({}) values ",
        plan.table,
        column_list(&plan.columns)
    );
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..columns {
            if column > 0 {
                sql.push_str(", ");
            }
            let _ = write!(sql, "${}", row * columns + column + 1);
        }
        sql.push(')');
    }
    if let Some(upsert) = &plan.upsert {
        // Reuse the upsert's conflict clause.
        if let Some(clause) = upsert.split(" on conflict").nth(1) {
            sql.push_str(" on conflict");
            sql.push_str(clause);
        }
    }
    sql
}

/// One INSERT: Bind (text values; `bytea` in binary, its canonical form), Execute,
/// Sync; one round trip.
async fn insert_rows(
    connection: &mut Connection,
    plan: &Plan,
    statement: &str,
    batch: &sluice_core::Batch,
    rows: std::ops::Range<usize>,
) -> Result<u64, Error> {
    let columns = plan.columns.len();
    let too_large = ImportFault::BatchTooLarge {
        rows: rows.len(),
        columns,
    };
    let formats: Vec<i16> = rows
        .clone()
        .flat_map(|_| {
            plan.kinds
                .iter()
                .map(|kind| i16::from(*kind == Kind::Bytes))
        })
        .collect();
    let values = rows.flat_map(|row| (0..columns).map(move |column| batch.row(row).get(column)));
    connection
        .encode_bind(statement, formats, values, [0])
        .map_err(|_| too_large.into_error())?;
    connection.encode_execute(0)?;
    connection.encode_sync();
    connection.send().await?;
    connection.command_result().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_do_not_fit_together_are_typed_faults() {
        let fault_of = |options: ImportOptions| {
            let error = options.check().unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Config);
            assert!(!error.to_string().contains("--"), "{error}");
            ImportFault::of(&error).cloned()
        };
        let update = ImportOptions {
            on_conflict: OnConflict::Update,
            ..ImportOptions::default()
        };
        assert_eq!(fault_of(update), Some(ImportFault::UpdateWithoutKey));
        let key_alone = ImportOptions {
            key: vec!["id".into()],
            ..ImportOptions::default()
        };
        assert_eq!(
            fault_of(key_alone),
            Some(ImportFault::KeyWithoutConflictAction)
        );
        let skip_insert = ImportOptions {
            on_error: OnError::Skip,
            method: Method::Insert { batch_size: 10 },
            ..ImportOptions::default()
        };
        assert_eq!(fault_of(skip_insert), Some(ImportFault::SkipWithInsert));
        let fine = ImportOptions {
            on_conflict: OnConflict::Ignore,
            key: vec!["id".into()],
            method: Method::Insert { batch_size: 10 },
            ..ImportOptions::default()
        };
        assert!(fine.check().is_ok());
    }
}
