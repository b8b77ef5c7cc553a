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
//!
//! Rows come from a [`RowFeed`]: decoded input, or another database's result
//! (`sluice copy`). Inside a copy's unit of work (`crate::ddl::begin_load`)
//! an import joins the transaction already open ([`Scope::Caller`]): it begins,
//! commits and rolls back nothing itself.

use std::fmt::Write as _;

use postgres_protocol::escape::escape_identifier;
use sluice_core::{
    Column, Decoded, Decoder, Encoding, Error, ErrorKind, Kind, Progress, Rejected, RowError,
};
use tokio::io::AsyncRead;

use sluice_core::load::{
    ImportFault, ImportInput, ImportOptions, ImportSummary, LineMap, Method, OnConflict, OnError,
    Opening, RejectSink, RowFeed, Scope, TableInfo,
};

use crate::binary_encode::{encoder_for_column, native_encoder, SessionSettings, ValueEncoder};
use crate::copy_in::{error_position, CopyIn};
use crate::copy_in_binary::CopyInBinary;
use crate::dialect::POSTGRESQL;
use crate::types;
use crate::Connection;

/// The catalog query of [`describe_table`]: per writable column, its name,
/// type, whether it has a default, whether it is `NOT NULL`, its type as DDL
/// spells it, its place in the primary key (0: not in it), and its type
/// modifier (`numeric(p,s)`'s digits, `varchar(n)`'s length). The catalog
/// needs no privilege on the table.
const DESCRIBE_QUERY: &str = "select c.oid::regclass::text, a.attname::text, a.atttypid::int8, \
        (a.atthasdef or a.attidentity <> '')::text, a.attnotnull::text, \
        format_type(a.atttypid, a.atttypmod), \
        coalesce((select k.ord from pg_catalog.pg_index i, \
                  unnest(i.indkey) with ordinality k(attnum, ord) \
                  where i.indrelid = c.oid and i.indisprimary and k.attnum = a.attnum), 0)::text, \
        a.atttypmod::text \
 from pg_catalog.pg_class c join pg_catalog.pg_attribute a on a.attrelid = c.oid \
 where c.oid = to_regclass($1) and a.attnum > 0 and not a.attisdropped \
   and a.attgenerated = '' order by a.attnum";

/// Reads the table's columns and their kinds from the catalog, with the
/// limits their types declare ([`Column::decimal`], [`Column::length`]), which
/// an import checks every value against; `table` is read by the one grammar
/// of names, and text that is none is refused before anything is asked.
pub async fn describe_table(connection: &mut Connection, table: &str) -> Result<TableInfo, Error> {
    let name = POSTGRESQL.table_name(table)?.to_string();
    let rows = connection
        .query_rows(DESCRIBE_QUERY, &[Some(&name)])
        .await?;
    if rows.is_empty() {
        return Err(Error::config(format!("table {table:?} does not exist")));
    }
    let bad = || Error::protocol("unexpected row from the table catalog query");
    let mut info = TableInfo::default();
    let mut raw = Vec::new();
    let mut key: Vec<(u32, String)> = Vec::new();
    for row in rows {
        let text = |index: usize| row.get(index).cloned().flatten().ok_or_else(bad);
        info.name = text(0)?;
        let column = text(1)?;
        let oid = text(2)?.parse::<i64>().map_err(|_| bad())? as u32;
        if text(3)? == "true" {
            info.defaulted.push(column.clone());
        }
        if text(4)? == "true" {
            info.not_null.push(column.clone());
        }
        info.declared_types.push(text(5)?);
        match text(6)?.parse::<u32>().map_err(|_| bad())? {
            0 => {}
            place => key.push((place, column.clone())),
        }
        let modifier = text(7)?.parse::<i32>().map_err(|_| bad())?;
        raw.push((column, oid, modifier));
    }
    key.sort_unstable();
    info.primary_key = key.into_iter().map(|(_, column)| column).collect();
    let oids: Vec<u32> = raw.iter().map(|(_, oid, _)| *oid).collect();
    let catalog = connection.resolve_types(&oids).await;
    // resolve_types() runs inside an exchange; end it whatever happened.
    let catalog = connection.end_exchange(catalog).await?;
    info.columns = types::schema_of(&raw, &catalog)
        .columns
        .into_iter()
        .zip(&raw)
        .map(|(column, (_, oid, modifier))| {
            column.with_length(types::character_length(*oid, *modifier))
        })
        .collect();
    Ok(info)
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
    let session = SessionSettings {
        time_zone: connection.time_zone(),
        interval_style: connection.interval_style(),
    };
    let plan = Plan::new(table, &columns, options, scope, &session);
    if plan.native() && matches!(options.method, Method::Insert { .. }) {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "rows in PostgreSQL's binary form go in by COPY only, not by INSERT statements",
        ));
    }
    let input = Input {
        rows,
        decoded: &mut decoded,
        more,
    };
    let mut summary = match options.method {
        Method::Insert { rows: batch_size } => {
            insert_batches(connection, &plan, input, batch_size.max(1)).await?
        }
        Method::Copy => match options.on_error {
            OnError::Abort => copy_abort(connection, &plan, input).await?,
            OnError::Skip => copy_skip(connection, &plan, input, options, rejects).await?,
        },
    };
    summary.records = rows.records_seen();
    summary.rejected = summary.records - summary.accepted;
    Ok(summary)
}

/// An import's rows as a strategy reads them: the feed, the rows read from it
/// already, and whether it has more.
struct Input<'a, 'f> {
    rows: &'a mut (dyn RowFeed + 'f),
    decoded: &'a mut Decoded,
    more: bool,
}

impl Input<'_, '_> {
    /// Clears the rows handled and reads the next piece; false when there was none.
    async fn advance(&mut self) -> Result<bool, Error> {
        self.decoded.clear();
        if !self.more {
            return Ok(false);
        }
        self.more = self.rows.next(self.decoded).await?;
        Ok(true)
    }
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

/// The statements of one import.
struct Plan {
    table: String,
    columns: Vec<Column>,
    kinds: Vec<Kind>,
    /// Set for upserts: the `INSERT … SELECT … ON CONFLICT` from the staging table.
    upsert: Option<String>,
    /// Roll back instead of committing.
    dry_run: bool,
    scope: Scope,
    /// One binary encoder per column when the COPY is binary: asked for, and
    /// every column has one.
    encoders: Option<Vec<ValueEncoder>>,
}

const STAGE: &str = "sluice_import_stage";

/// One binary encoder per column, or `None` for a text COPY: values in
/// PostgreSQL's own binary form ([`Encoding::Native`], all or none) are framed
/// as they are; others are encoded when binary COPY is asked for and every
/// column has an encoder.
fn encoders_for(
    table: &TableInfo,
    columns: &[Column],
    options: &ImportOptions,
    session: &SessionSettings<'_>,
) -> Option<Vec<ValueEncoder>> {
    if all_native(columns) {
        return Some(vec![native_encoder(); columns.len()]);
    }
    options
        .binary_copy
        .then(|| {
            columns
                .iter()
                .map(|column| {
                    encoder_for_column(column, table.declared_type(&column.name), session)
                })
                .collect()
        })
        .flatten()
}

/// Whether every value arrives in PostgreSQL's own binary form (sources send
/// all columns so or none).
fn all_native(columns: &[Column]) -> bool {
    !columns.is_empty()
        && columns
            .iter()
            .all(|column| column.encoding == Encoding::Native)
}

impl Plan {
    /// `session`: the target session's settings, for the binary encoders.
    fn new(
        table: &TableInfo,
        columns: &[Column],
        options: &ImportOptions,
        scope: Scope,
        session: &SessionSettings<'_>,
    ) -> Plan {
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
            scope,
            encoders: encoders_for(table, columns, options, session),
        }
    }

    /// Whether the values arrive in PostgreSQL's own binary form.
    fn native(&self) -> bool {
        all_native(&self.columns)
    }

    /// Whether the import begins and ends a transaction of its own: never in
    /// the caller's; otherwise when its strategy runs several statements
    /// (`several`), or for an upsert's staging table or a dry run's rollback
    /// (one COPY alone is atomic).
    fn owns_transaction(&self, several: bool) -> bool {
        self.scope == Scope::Own && (several || self.upsert.is_some() || self.dry_run)
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
        let format = if self.encoders.is_some() {
            " (format binary)"
        } else {
            ""
        };
        format!(
            "copy {target} ({}) from stdin{format}",
            column_list(&self.columns)
        )
    }

    /// Starts the COPY: binary when every column has an encoder, text otherwise.
    async fn start_copy<'c>(&self, connection: &'c mut Connection) -> Result<Copier<'c>, Error> {
        let statement = self.copy_statement();
        Ok(match &self.encoders {
            Some(encoders) => Copier::Binary(
                connection
                    .copy_in_binary(&statement, &self.columns, encoders.clone())
                    .await?,
            ),
            None => Copier::Text(connection.copy_in(&statement, &self.kinds).await?),
        })
    }

    fn stage_statement(&self) -> String {
        format!(
            "create temporary table {STAGE} (like {} including defaults) on commit drop",
            self.table
        )
    }
}

/// An open COPY in either format.
enum Copier<'c> {
    Text(CopyIn<'c>),
    Binary(CopyInBinary<'c>),
}

impl Copier<'_> {
    async fn write_rows(
        &mut self,
        batch: &sluice_core::Batch,
        rows: impl IntoIterator<Item = usize>,
    ) -> Result<(), Error> {
        match self {
            Copier::Text(copy) => copy.write_rows(batch, rows).await,
            Copier::Binary(copy) => copy.write_rows(batch, rows).await,
        }
    }

    async fn finish(self) -> Result<u64, Error> {
        match self {
            Copier::Text(copy) => copy.finish().await,
            Copier::Binary(copy) => copy.finish().await,
        }
    }

    async fn fail(self, reason: &str) -> Result<(), Error> {
        match self {
            Copier::Text(copy) => copy.fail(reason).await,
            Copier::Binary(copy) => copy.fail(reason).await,
        }
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

/// Runs `work` in the transaction the plan calls for (`several`: see
/// [`Plan::owns_transaction`]), after `setup` (a staging table): begun,
/// committed (or rolled back for a dry run) and rolled back on failure when
/// the import owns it; left to the caller otherwise.
async fn in_transaction<T>(
    connection: &mut Connection,
    plan: &Plan,
    several: bool,
    setup: Option<String>,
    work: impl AsyncFnOnce(&mut Connection) -> Result<T, Error>,
) -> Result<T, Error> {
    let owns = plan.owns_transaction(several);
    let opening: Vec<String> = owns
        .then(|| "begin".to_owned())
        .into_iter()
        .chain(setup)
        .collect();
    let outcome = async {
        if !opening.is_empty() {
            execute(connection, &opening.join("; ")).await?;
        }
        work(connection).await
    }
    .await;
    match outcome {
        Ok(value) if owns => {
            execute(connection, plan.end()).await?;
            Ok(value)
        }
        Ok(value) => Ok(value),
        Err(error) if owns => Err(rollback(connection, error).await),
        Err(error) => Err(error),
    }
}

/// One COPY of every row (into the staging table for an upsert, which then
/// moves them); the first bad record or refused row fails it all.
async fn copy_abort(
    connection: &mut Connection,
    plan: &Plan,
    mut input: Input<'_, '_>,
) -> Result<ImportSummary, Error> {
    let stage = plan.upsert.as_ref().map(|_| plan.stage_statement());
    in_transaction(connection, plan, false, stage, async |connection| {
        let mut summary = copy_everything(connection, plan, &mut input).await?;
        if let Some(upsert) = &plan.upsert {
            summary.written = execute(connection, upsert).await?;
        }
        Ok(summary)
    })
    .await
}

/// The COPY of [`copy_abort`]: rows accepted, and written by the COPY.
async fn copy_everything(
    connection: &mut Connection,
    plan: &Plan,
    input: &mut Input<'_, '_>,
) -> Result<ImportSummary, Error> {
    let mut summary = ImportSummary::default();
    let mut lines = LineMap::default();
    let mut copy = plan.start_copy(connection).await?;
    if let Err(error) = send_all(&mut copy, input, &mut lines, &mut summary).await {
        // A database error has already ended the COPY; anything else has not.
        if error.kind() != ErrorKind::Database {
            copy.fail(&error.to_string()).await.ok();
        }
        return Err(error);
    }
    summary.written = copy
        .finish()
        .await
        .map_err(|error| at_line(error, |row| lines.line(row)))?;
    Ok(summary)
}

/// Sends every row of `input` into `copy`, noting each row's line.
async fn send_all(
    copy: &mut Copier<'_>,
    input: &mut Input<'_, '_>,
    lines: &mut LineMap,
    summary: &mut ImportSummary,
) -> Result<(), Error> {
    loop {
        if let Some(first) = input.decoded.rejected.first() {
            return Err(Error::bad_row(first.error.clone()));
        }
        lines.extend(&input.decoded.lines);
        let rows = input.decoded.batch.num_rows();
        copy.write_rows(&input.decoded.batch, 0..rows)
            .await
            .map_err(|error| at_line(error, |row| lines.line(row)))?;
        input.rows.progress().add_rows(rows as u64);
        summary.accepted += rows as u64;
        if !input.advance().await? {
            return Ok(());
        }
    }
}

/// Rows in chunks under savepoints, each refused row rejected and the rest
/// sent again; the good rows commit together.
async fn copy_skip(
    connection: &mut Connection,
    plan: &Plan,
    mut input: Input<'_, '_>,
    options: &ImportOptions,
    rejects: &mut RejectSink<'_>,
) -> Result<ImportSummary, Error> {
    let stage = plan.upsert.as_ref().map(|_| plan.stage_statement());
    in_transaction(connection, plan, true, stage, async |connection| {
        let mut summary = ImportSummary::default();
        loop {
            for rejected in input.decoded.rejected.drain(..) {
                rejects(&rejected)?;
            }
            if input.decoded.batch.num_rows() >= options.chunk_rows.max(1) || !input.more {
                let accepted = copy_chunk(connection, plan, input.decoded, rejects).await?;
                input.rows.progress().add_rows(accepted);
                summary.accepted += accepted;
                input.decoded.clear();
            }
            if !input.more {
                break;
            }
            input.more = input.rows.next(input.decoded).await?;
        }
        summary.written = summary.accepted;
        if let Some(upsert) = &plan.upsert {
            summary.written = execute(connection, upsert).await?;
        }
        Ok(summary)
    })
    .await
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
        let attempt = copy_segment(connection, plan, decoded, &segment).await;
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

/// One COPY of the rows of `decoded` that `segment` lists. A value the binary
/// COPY cannot encode abandons it (the caller rolls back to its savepoint).
async fn copy_segment(
    connection: &mut Connection,
    plan: &Plan,
    decoded: &Decoded,
    segment: &[usize],
) -> Result<u64, Error> {
    let mut copy = plan.start_copy(connection).await?;
    if let Err(error) = copy
        .write_rows(&decoded.batch, segment.iter().copied())
        .await
    {
        if error.kind() != ErrorKind::Database {
            copy.fail(&error.to_string()).await.ok();
        }
        return Err(error);
    }
    copy.finish().await
}

/// Multi-row INSERTs of `batch_size` rows, one round trip each, in one transaction.
async fn insert_batches(
    connection: &mut Connection,
    plan: &Plan,
    mut input: Input<'_, '_>,
    batch_size: usize,
) -> Result<ImportSummary, Error> {
    in_transaction(connection, plan, true, None, async |connection| {
        let mut summary = ImportSummary::default();
        let mut pending = Decoded::default();
        pending.batch.reset(plan.columns.len());
        let mut prepared = false;
        loop {
            let decoded = &mut *input.decoded;
            if let Some(first) = decoded.rejected.first() {
                return Err(Error::bad_row(first.error.clone()));
            }
            for index in 0..decoded.batch.num_rows() {
                pending.batch.push_row(&decoded.batch.row(index));
                pending.lines.push(decoded.lines[index]);
            }
            let more = input.more;
            while pending.batch.num_rows() >= batch_size || (!more && !pending.batch.is_empty()) {
                let rows = pending.batch.num_rows().min(batch_size);
                let written =
                    insert_pending(connection, plan, &pending, rows, batch_size, &mut prepared)
                        .await?;
                summary.accepted += rows as u64;
                summary.written += written;
                input.rows.progress().add_rows(rows as u64);
                pending = rest_of(&pending, rows, plan.columns.len());
            }
            if !input.advance().await? {
                return Ok(summary);
            }
        }
    })
    .await
}

/// One INSERT of the first `rows` pending rows (through the prepared
/// statement when it holds `batch_size` rows); its error names their lines.
async fn insert_pending(
    connection: &mut Connection,
    plan: &Plan,
    pending: &Decoded,
    rows: usize,
    batch_size: usize,
    prepared: &mut bool,
) -> Result<u64, Error> {
    const STATEMENT: &str = "sluice_insert";
    let name = if rows == batch_size { STATEMENT } else { "" };
    if name.is_empty() || !*prepared {
        let sql = insert_statement(plan, rows);
        connection.encode_parse(name, &sql)?;
        *prepared |= !name.is_empty();
    }
    insert_rows(connection, plan, name, &pending.batch, 0..rows)
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
        })
}

/// The pending rows after the first `sent`.
fn rest_of(pending: &Decoded, sent: usize, columns: usize) -> Decoded {
    let mut rest = Decoded::default();
    rest.batch.reset(columns);
    for index in sent..pending.batch.num_rows() {
        rest.batch.push_row(&pending.batch.row(index));
        rest.lines.push(pending.lines[index]);
    }
    rest
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
            method: Method::Insert { rows: 10 },
            ..ImportOptions::default()
        };
        assert_eq!(fault_of(skip_insert), Some(ImportFault::SkipWithInsert));
        let fine = ImportOptions {
            on_conflict: OnConflict::Ignore,
            key: vec!["id".into()],
            method: Method::Insert { rows: 10 },
            ..ImportOptions::default()
        };
        assert!(fine.check().is_ok());
    }
}
