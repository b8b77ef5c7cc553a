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

use std::fmt::Write as _;

use sluice_core::canonical::{self, Strictness};
use sluice_core::load::{
    ImportInput, ImportOptions, ImportSummary, LineMap, Method, OnConflict, OnError, Opening,
    RejectSink, RowFeed, Scope, TableInfo,
};
use sluice_core::{
    Batch, Column, DbError, DecimalShape, Decoded, Decoder, Error, ErrorKind, Kind, Progress,
    Rejected, RowError,
};
use tokio::io::AsyncRead;

use crate::connection::Connection;
use crate::error::{server_error, unexpected};
use crate::moment::{duration_to_time, to_utc};
use crate::protocol::read_lenenc_int;
use crate::sql::{identifier, literal};

/// Data is sent to the server in packets of about this size.
const SEND_BYTES: usize = 256 * 1024;

/// The name sluice gives the "file" `LOAD DATA LOCAL` asks for.
const INPUT_NAME: &str = "sluice-input";

const STAGE: &str = "`sluice_import_stage`";

/// Reads the table's columns and their kinds from `information_schema`, with
/// the limits their types declare (`DECIMAL(p,s)`'s digits, `VARCHAR(n)`'s
/// characters), which an import checks every value against
/// (`sluice_core::load`). The schema shows a table's columns to anyone with a
/// privilege on it (`INSERT` alone will do). `table` is read by the one
/// grammar of names, and text that is none is refused before anything is asked.
pub async fn describe_table(connection: &mut Connection, table: &str) -> Result<TableInfo, Error> {
    let table_name = connection.server().dialect().table_name(table)?;
    let (schema, name) = (table_name.schema(), table_name.table());
    let schema_sql = schema.map_or("DATABASE()".to_owned(), literal);
    // MariaDB stores JSON as LONGTEXT with a json_valid() check; MySQL has the type.
    let json_check = if connection.server().mariadb {
        "EXISTS (SELECT 1 FROM information_schema.CHECK_CONSTRAINTS k \
                  WHERE k.CONSTRAINT_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME \
                    AND k.CHECK_CLAUSE = CONCAT('json_valid(`', c.COLUMN_NAME, '`)'))"
    } else {
        "0"
    };
    let sql = format!(
        "SELECT c.TABLE_SCHEMA, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.COLUMN_DEFAULT, c.EXTRA, \
                {json_check}, c.IS_NULLABLE, \
                (SELECT k.ORDINAL_POSITION FROM information_schema.KEY_COLUMN_USAGE k \
                 WHERE k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME \
                   AND k.COLUMN_NAME = c.COLUMN_NAME AND k.CONSTRAINT_NAME = 'PRIMARY'), \
                c.NUMERIC_PRECISION, c.NUMERIC_SCALE, c.CHARACTER_MAXIMUM_LENGTH \
         FROM information_schema.COLUMNS c \
         WHERE c.TABLE_SCHEMA = {schema_sql} AND c.TABLE_NAME = {} \
         ORDER BY c.ORDINAL_POSITION",
        literal(name)
    );
    let rows = connection.simple_query(&sql).await?.rows;
    if rows.is_empty() {
        return Err(Error::config(format!("table {table:?} does not exist")));
    }
    let text = |row: &[Option<Vec<u8>>], index: usize| -> String {
        row.get(index)
            .and_then(Option::as_ref)
            .map(|value| String::from_utf8_lossy(value).into_owned())
            .unwrap_or_default()
    };
    let mut info = TableInfo {
        name: format!("{}.{}", identifier(&text(&rows[0], 0)), identifier(name)),
        ..TableInfo::default()
    };
    let mut key: Vec<(u64, String)> = Vec::new();
    for row in &rows {
        let extra = text(row, 5).to_ascii_lowercase();
        if extra.contains("generated") || extra.contains("virtual") || extra.contains("persistent")
        {
            continue;
        }
        let column = text(row, 1);
        let default = row.get(4).and_then(Option::as_ref);
        // MariaDB shows an implicit DEFAULT NULL as the text NULL.
        if default.is_some_and(|value| value.as_slice() != b"NULL")
            || extra.contains("auto_increment")
        {
            info.defaulted.push(column.clone());
        }
        if text(row, 7) == "NO" {
            info.not_null.push(column.clone());
        }
        if let Ok(place) = text(row, 8).parse::<u64>() {
            key.push((place, column.clone()));
        }
        let column_type = text(row, 3);
        info.declared_types.push(column_type.clone());
        let data_type = text(row, 2).to_ascii_lowercase();
        let number = |index: usize| text(row, index).parse::<u32>().ok();
        let decimal = match (number(9), number(10)) {
            (Some(precision), Some(scale))
                if matches!(data_type.as_str(), "decimal" | "numeric") =>
            {
                Some(DecimalShape {
                    precision: u16::try_from(precision).unwrap_or(u16::MAX),
                    scale: i16::try_from(scale).unwrap_or(i16::MAX),
                })
            }
            _ => None,
        };
        // A CHAR(n)'s trailing spaces mean nothing: it drops them when read.
        let length = number(11).filter(|_| data_type == "varchar");
        info.columns.push(
            Column::new(
                column,
                kind_of(&data_type, text(row, 6) == "1"),
                column_type,
            )
            .with_decimal(decimal)
            .with_length(length),
        );
    }
    key.sort_unstable();
    info.primary_key = key.into_iter().map(|(_, column)| column).collect();
    Ok(info)
}

/// A column's kind from its `DATA_TYPE`.
fn kind_of(data_type: &str, json: bool) -> Kind {
    match data_type.to_ascii_lowercase().as_str() {
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" | "year" => {
            Kind::Integer
        }
        "decimal" | "numeric" => Kind::Decimal,
        "float" | "double" | "real" => Kind::Float,
        "date" => Kind::Date,
        "datetime" => Kind::Timestamp,
        "timestamp" => Kind::TimestampTz,
        "time" => Kind::Interval,
        "json" => Kind::Json,
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => Kind::Bytes,
        "longtext" if json => Kind::Json,
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" | "enum" | "set" => {
            Kind::Text
        }
        _ => Kind::Other,
    }
}

/// How a canonical value is turned into what the server reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Convert {
    /// As it is.
    Verbatim,
    /// `t`/`f` (or `true`/`false`) as `1`/`0`.
    Bool,
    /// A moment with an offset, as UTC without one (the session's zone): for
    /// `TIMESTAMP` and `DATETIME` columns alike, as MySQL reads an offset in a
    /// literal (MariaDB refuses one). A moment without an offset goes as it is.
    Utc,
    /// Bytes, as hex for `UNHEX()` (text of the load is UTF-8; bytes are not).
    Hex,
    /// An ISO 8601 duration (as sluice writes a `TIME` in JSON) as `H:MM:SS`.
    Time,
}

/// The statements and conversions of one import.
struct Plan {
    table: String,
    columns: Vec<Column>,
    converts: Vec<Convert>,
    /// For each column, the expression a value goes through (`?` or `@vN`
    /// inside it), when it is not stored as it is.
    wrappers: Vec<Option<&'static str>>,
    on_conflict: OnConflict,
    dry_run: bool,
    scope: Scope,
}

impl Plan {
    fn new(table: &TableInfo, columns: &[Column], options: &ImportOptions, scope: Scope) -> Plan {
        let column_type = |column: &Column| -> String {
            table
                .columns
                .iter()
                .find(|known| known.name == column.name)
                .map(|known| known.type_name.to_ascii_lowercase())
                .unwrap_or_default()
        };
        let converts = columns
            .iter()
            .map(|column| match column.kind {
                Kind::Bool => Convert::Bool,
                Kind::TimestampTz | Kind::Timestamp => Convert::Utc,
                Kind::Bytes => Convert::Hex,
                Kind::Interval => Convert::Time,
                _ if column_type(column).starts_with("tinyint(1)") => Convert::Bool,
                _ => Convert::Verbatim,
            })
            .collect::<Vec<_>>();
        let wrappers = columns
            .iter()
            .zip(&converts)
            .map(|(column, convert)| wrapper(&column_type(column), *convert))
            .collect();
        Plan {
            table: table.name.clone(),
            columns: columns.to_vec(),
            converts,
            wrappers,
            on_conflict: options.on_conflict,
            dry_run: options.dry_run,
            scope,
        }
    }

    fn column_list(&self) -> String {
        self.columns
            .iter()
            .map(|column| identifier(&column.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The `LOAD DATA LOCAL INFILE` statement, into the table or the stage.
    fn load_statement(&self) -> String {
        let (modifier, target) = match self.on_conflict {
            OnConflict::Error => ("", self.table.as_str()),
            OnConflict::Ignore => (" IGNORE", self.table.as_str()),
            OnConflict::Update => (" REPLACE", STAGE),
        };
        let mut targets = Vec::new();
        let mut sets = Vec::new();
        for (index, column) in self.columns.iter().enumerate() {
            match self.wrappers[index] {
                None => targets.push(identifier(&column.name)),
                Some(wrapper) => {
                    let variable = format!("@v{index}");
                    sets.push(format!(
                        "{} = {}",
                        identifier(&column.name),
                        wrapper.replace('?', &variable)
                    ));
                    targets.push(variable);
                }
            }
        }
        let mut sql = format!(
            "LOAD DATA LOCAL INFILE '{INPUT_NAME}'{modifier} INTO TABLE {target} \
             CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\\t' ENCLOSED BY '' ESCAPED BY '\\\\' \
             LINES TERMINATED BY '\\n' STARTING BY '' ({})",
            targets.join(", ")
        );
        if !sets.is_empty() {
            let _ = write!(sql, " SET {}", sets.join(", "));
        }
        sql
    }

    /// A prepared `INSERT` of `rows` rows.
    fn insert_statement(&self, rows: usize) -> String {
        let placeholders: Vec<&str> = self
            .wrappers
            .iter()
            .map(|wrapper| wrapper.unwrap_or("?"))
            .collect();
        let one = format!("({})", placeholders.join(", "));
        let modifier = if self.on_conflict == OnConflict::Ignore {
            " IGNORE"
        } else {
            ""
        };
        let mut sql = format!(
            "INSERT{modifier} INTO {} ({}) VALUES {}",
            self.table,
            self.column_list(),
            vec![one; rows].join(", ")
        );
        if self.on_conflict == OnConflict::Update {
            let _ = write!(sql, " ON DUPLICATE KEY UPDATE {}", self.updates());
        }
        sql
    }

    fn updates(&self) -> String {
        self.columns
            .iter()
            .map(|column| {
                let name = identifier(&column.name);
                format!("{name} = VALUES({name})")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Moves the staged rows into the table (conflicts updated).
    fn upsert_statement(&self) -> String {
        let list = self.column_list();
        format!(
            "INSERT INTO {} ({list}) SELECT {list} FROM {STAGE} ON DUPLICATE KEY UPDATE {}",
            self.table,
            self.updates()
        )
    }

    /// Whether a warning of this code is the expected effect of the options.
    fn expected_warning(&self, code: u32) -> bool {
        code == DUPLICATE_KEY && self.on_conflict != OnConflict::Error
    }

    fn end(&self) -> &'static str {
        if self.dry_run {
            "ROLLBACK"
        } else {
            "COMMIT"
        }
    }
}

/// The expression a column's value goes through, `?` standing for the value.
fn wrapper(column_type: &str, convert: Convert) -> Option<&'static str> {
    const SPATIAL: [&str; 8] = [
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
    ];
    if convert == Convert::Hex {
        Some("UNHEX(?)")
    } else if column_type.starts_with("bit") {
        Some("CAST(CONV(?, 2, 10) AS UNSIGNED)")
    } else if SPATIAL.iter().any(|name| column_type.starts_with(name)) {
        Some("ST_GeomFromText(?)")
    } else {
        None
    }
}

/// `ER_DUP_ENTRY`.
const DUPLICATE_KEY: u32 = 1062;

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

/// How a chunk of rows travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Load,
    Insert,
}

/// The whole input in one `LOAD DATA`.
async fn load_all(
    connection: &mut Connection,
    plan: &Plan,
    input: &mut dyn RowFeed,
    decoded: &mut Decoded,
    mut more: bool,
) -> Result<ImportSummary, Error> {
    let mut summary = ImportSummary::default();
    let mut lines = LineMap::default();
    let mut load = LoadData::start(connection, plan).await?;
    let sent: Result<(), Error> = async {
        loop {
            if let Some(first) = decoded.rejected.first() {
                return Err(Error::bad_row(first.error.clone()));
            }
            lines.extend(&decoded.lines);
            let rows = decoded.batch.num_rows();
            load.write_rows(&decoded.batch, 0..rows).await?;
            input.progress().add_rows(rows as u64);
            summary.accepted += rows as u64;
            decoded.clear();
            if !more {
                return Ok(());
            }
            more = input.next(decoded).await?;
        }
    }
    .await;
    // The load is ended either way (an empty packet); a client-side failure
    // then rolls back what the server took.
    let finished = load.finish().await;
    sent?;
    let loaded = finished?;
    check_warnings(connection, plan, loaded.warnings, |row| lines.line(row)).await?;
    summary.written = loaded.affected_rows;
    Ok(summary)
}

/// Chunks under savepoints; refused rows rejected, the rest sent again.
/// `input` is the feed, the rows read from it already, and whether it has more.
async fn load_skipping(
    connection: &mut Connection,
    plan: &Plan,
    (input, decoded, mut more): (&mut dyn RowFeed, &mut Decoded, bool),
    options: &ImportOptions,
    rejects: &mut RejectSink<'_>,
    path: Path,
) -> Result<ImportSummary, Error> {
    let mut summary = ImportSummary::default();
    loop {
        for rejected in decoded.rejected.drain(..) {
            rejects(&rejected)?;
        }
        if decoded.batch.num_rows() >= options.chunk_rows.max(1) || !more {
            let (accepted, written) = send_chunk(connection, plan, decoded, rejects, path).await?;
            input.progress().add_rows(accepted);
            summary.accepted += accepted;
            summary.written += written;
            decoded.clear();
        }
        if !more {
            return Ok(summary);
        }
        more = input.next(decoded).await?;
    }
}

/// Sends the rows of `decoded` under savepoints, rejecting each row the
/// server refuses: rows accepted and rows written.
async fn send_chunk(
    connection: &mut Connection,
    plan: &Plan,
    decoded: &Decoded,
    rejects: &mut RejectSink<'_>,
    path: Path,
) -> Result<(u64, u64), Error> {
    let (mut accepted, mut written) = (0, 0);
    let mut pending: Vec<Vec<usize>> = vec![(0..decoded.batch.num_rows()).collect()];
    while let Some(segment) = pending.pop() {
        if segment.is_empty() {
            continue;
        }
        connection.queue_setting("SAVEPOINT sluice_chunk");
        let attempt = match path {
            Path::Load => load_segment(connection, plan, &decoded.batch, &segment).await,
            Path::Insert => insert_segment(connection, plan, &decoded.batch, &segment).await,
        };
        match attempt {
            Ok(rows_written) => {
                connection.queue_setting("RELEASE SAVEPOINT sluice_chunk");
                accepted += segment.len() as u64;
                written += rows_written;
            }
            Err(error) if error.kind() == ErrorKind::Database => {
                connection
                    .simple_query("ROLLBACK TO SAVEPOINT sluice_chunk")
                    .await?;
                let refused = refused_rows(&error, segment.len());
                if refused.is_empty() && segment.len() > 1 {
                    // The server cannot say which row: halve until it is one.
                    let half = segment.len() / 2;
                    pending.push(segment[half..].to_vec());
                    pending.push(segment[..half].to_vec());
                    continue;
                }
                let refused = if refused.is_empty() { vec![0] } else { refused };
                for &index in &refused {
                    let row = segment[index];
                    rejects(&Rejected {
                        error: reason_of(&error, decoded.lines[row]),
                        record: decoded.records.get(row).cloned().unwrap_or_default(),
                    })?;
                }
                let rest = segment
                    .iter()
                    .enumerate()
                    .filter(|(index, _)| !refused.contains(index))
                    .map(|(_, &row)| row)
                    .collect();
                pending.push(rest);
            }
            Err(error) => return Err(error),
        }
    }
    // The last RELEASE travels with the next command.
    Ok((accepted, written))
}

/// One `LOAD DATA` of some rows of `batch`; warnings become its error.
async fn load_segment(
    connection: &mut Connection,
    plan: &Plan,
    batch: &Batch,
    rows: &[usize],
) -> Result<u64, Error> {
    let mut load = LoadData::start(connection, plan).await?;
    let written = load.write_rows(batch, rows.iter().copied()).await;
    let finished = load.finish().await;
    written?;
    let loaded = finished?;
    check_warnings(connection, plan, loaded.warnings, Some).await?;
    Ok(loaded.affected_rows)
}

/// The rows (0-based within the segment) an error names, from the server's
/// "at row N" (1-based within the statement).
fn refused_rows(error: &Error, segment_rows: usize) -> Vec<usize> {
    let mut rows: Vec<usize> = error
        .as_row_error()
        .map(|row| row.line)
        .into_iter()
        .chain(row_numbers_in(error))
        .filter_map(|row| usize::try_from(row).ok()?.checked_sub(1))
        .filter(|&index| index < segment_rows)
        .collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

fn row_numbers_in(error: &Error) -> Vec<u64> {
    error
        .as_db_error()
        .and_then(|db| db.detail.as_deref())
        .map(|detail| {
            detail
                .split(',')
                .filter_map(|row| row.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The server's message about one row, tied to its input line: without the
/// statement's "at row N" (the line says where), with the column it names.
fn reason_of(error: &Error, line: u64) -> RowError {
    let message = error
        .as_db_error()
        .map_or_else(|| error.to_string(), |db| db.message.clone());
    let column = column_in(&message);
    let message = match message.rsplit_once(" at row ") {
        Some((before, after)) if after.trim().parse::<u64>().is_ok() => before.to_owned(),
        _ => message,
    };
    RowError::new(line, column, message)
}

/// The column a message names: "… for column `db`.`t`.`amount` …" or
/// "… column 'amount' …".
fn column_in(message: &str) -> Option<String> {
    let start = message.to_ascii_lowercase().find("column ")? + "column ".len();
    let after = &message[start..];
    if after.starts_with('`') {
        let quoted = after
            .split(|character: char| character.is_whitespace())
            .next()?;
        let last = quoted.rsplit("`.`").next()?;
        return Some(last.trim_matches('`').replace("``", "`"));
    }
    let rest = after.strip_prefix('\'')?;
    Some(rest.split('\'').next()?.to_owned())
}

/// What `LOAD DATA` reported.
struct Loaded {
    affected_rows: u64,
    warnings: u16,
}

/// A `LOAD DATA LOCAL INFILE` in progress: the server has asked for the file.
struct LoadData<'a> {
    connection: &'a mut Connection,
    converts: &'a [Convert],
    buffer: Vec<u8>,
}

impl<'a> LoadData<'a> {
    async fn start(connection: &'a mut Connection, plan: &'a Plan) -> Result<LoadData<'a>, Error> {
        let answer = connection.simple_query_head(&plan.load_statement()).await?;
        match answer.first() {
            Some(0xFB) if &answer[1..] == INPUT_NAME.as_bytes() => {}
            // A server asking for another file than the statement named is
            // hostile: sluice sends only its own rows, never a file.
            Some(0xFB) => {
                let what = "a LOAD DATA statement that named another";
                return Err(connection.unexpected_answer(what, &answer).await);
            }
            Some(0xFF) => return Err(server_error(&answer, connection.capabilities)),
            _ => return Err(unexpected("a request for the load's data", &answer)),
        }
        Ok(LoadData {
            connection,
            converts: &plan.converts,
            buffer: Vec::with_capacity(SEND_BYTES + 64 * 1024),
        })
    }

    async fn write_rows(
        &mut self,
        batch: &Batch,
        rows: impl Iterator<Item = usize>,
    ) -> Result<(), Error> {
        for index in rows {
            encode_row(batch, index, self.converts, &mut self.buffer)?;
            if self.buffer.len() >= SEND_BYTES {
                self.send().await?;
            }
        }
        Ok(())
    }

    async fn send(&mut self) -> Result<(), Error> {
        self.connection.wire.queue(&self.buffer);
        self.buffer.clear();
        self.connection.wire.flush().await
    }

    /// Sends what is left and the empty packet that ends the file; reads the
    /// server's answer.
    async fn finish(self) -> Result<Loaded, Error> {
        if !self.buffer.is_empty() {
            self.connection.wire.queue(&self.buffer);
        }
        self.connection.wire.queue(&[]);
        self.connection.wire.flush().await?;
        let answer = self.connection.wire.read_payload().await?;
        match answer.first() {
            Some(0x00) => {
                let mut rest = &answer[1..];
                let affected_rows = read_lenenc_int(&mut rest)?;
                let _last_insert_id = read_lenenc_int(&mut rest)?;
                let warnings = rest
                    .get(2..4)
                    .map_or(0, |bytes| u16::from_le_bytes([bytes[0], bytes[1]]));
                Ok(Loaded {
                    affected_rows,
                    warnings,
                })
            }
            Some(0xFF) => Err(server_error(&answer, self.connection.capabilities)),
            _ => Err(unexpected("the load's result", &answer)),
        }
    }
}

/// Appends one row as a line of the load's text: tab-separated, `\N` for
/// NULL, backslash escapes for what would end a field or a line.
fn encode_row(
    batch: &Batch,
    index: usize,
    converts: &[Convert],
    output: &mut Vec<u8>,
) -> Result<(), Error> {
    let row = batch.row(index);
    for (column, convert) in converts.iter().enumerate() {
        if column > 0 {
            output.push(b'\t');
        }
        match row.get(column) {
            None => output.extend_from_slice(b"\\N"),
            Some(value) => match convert {
                Convert::Verbatim => escape_into(value, output),
                Convert::Bool => output.push(bool_digit(value)),
                Convert::Utc => escape_into(to_utc(value).as_deref().unwrap_or(value), output),
                Convert::Hex => write_hex(value, output),
                Convert::Time => {
                    escape_into(duration_to_time(value).as_deref().unwrap_or(value), output)
                }
            },
        }
    }
    output.push(b'\n');
    Ok(())
}

fn escape_into(value: &[u8], output: &mut Vec<u8>) {
    // Most values hold nothing to escape: copy the runs between the bytes
    // that need it, not byte by byte.
    let mut rest = value;
    while let Some(position) = rest
        .iter()
        .position(|&byte| NEEDS_ESCAPE[usize::from(byte)])
    {
        output.extend_from_slice(&rest[..position]);
        output.extend_from_slice(match rest[position] {
            b'\\' => b"\\\\",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            _ => b"\\0",
        });
        rest = &rest[position + 1..];
    }
    output.extend_from_slice(rest);
}

/// The bytes a value's text cannot hold as they are in the load's format.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    table[b'\\' as usize] = true;
    table[b'\t' as usize] = true;
    table[b'\n' as usize] = true;
    table[b'\r' as usize] = true;
    table[0] = true;
    table
};

fn write_hex(value: &[u8], output: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &byte in value {
        output.push(DIGITS[usize::from(byte >> 4)]);
        output.push(DIGITS[usize::from(byte & 15)]);
    }
}

/// A boolean as PostgreSQL's `boolin` reads it (`t`, `true`, `1`, `y`, `on`…)
/// as `1` or `0`; anything else the server then refuses as it would any bad
/// value.
fn bool_digit(value: &[u8]) -> u8 {
    match canonical::read_bool(value, Strictness::Lenient) {
        Ok(true) => b'1',
        Ok(false) => b'0',
        // Not a boolean: a character MariaDB refuses for the column, so the
        // server names the row.
        Err(_) => b'?',
    }
}

/// After a load: the warnings that are not the options' expected effect
/// become an error, tied to its row by `line_of` when the server names one.
async fn check_warnings(
    connection: &mut Connection,
    plan: &Plan,
    warnings: u16,
    line_of: impl Fn(u64) -> Option<u64>,
) -> Result<(), Error> {
    if warnings == 0 {
        return Ok(());
    }
    let shown = connection.simple_query("SHOW WARNINGS").await?;
    let mut refused: Vec<(u32, String, Option<u64>)> = Vec::new();
    for row in &shown.rows {
        let field = |index: usize| {
            row.get(index)
                .and_then(Option::as_ref)
                .map(|value| String::from_utf8_lossy(value).into_owned())
                .unwrap_or_default()
        };
        let (level, code, message) = (field(0), field(1).parse().unwrap_or(0), field(2));
        if level.eq_ignore_ascii_case("note") || plan.expected_warning(code) {
            continue;
        }
        let row_number = at_row(&message);
        refused.push((code, message, row_number));
    }
    let Some((code, message, row)) = refused.first().cloned() else {
        return Ok(());
    };
    let rows: Vec<String> = refused
        .iter()
        .filter_map(|(_, _, row)| row.map(|row| row.to_string()))
        .collect();
    let error = Error::db(DbError {
        severity: "ERROR".into(),
        code: sqlstate_of(code).into(),
        vendor_code: Some(code),
        message,
        // The rows of every refused value, for skip mode to reject them all.
        detail: (!rows.is_empty()).then(|| rows.join(",")),
        ..DbError::default()
    });
    Err(match row.and_then(&line_of) {
        Some(line) => {
            let reason = reason_of(&error, line);
            error.at_row(reason)
        }
        None => error,
    })
}

/// The row number of a warning's "… at row N".
fn at_row(message: &str) -> Option<u64> {
    let (_, after) = message.rsplit_once(" at row ")?;
    after.trim().parse().ok()
}

/// The SQLSTATE the server gives the error a warning stands for.
fn sqlstate_of(code: u32) -> &'static str {
    match code {
        1048 | 1062 | 1263 | 1451 | 1452 | 4025 => "23000",
        1264 => "22003",
        1265 | 1406 => "22001",
        1292 | 1366 | 1367 => "22007",
        _ => "HY000",
    }
}

/// The whole input as prepared multi-row INSERTs. `batch_size` is the rows
/// per statement asked for, each sent and answered before the next (one
/// round trip each: the seeds' experiment); without it, statements are sized
/// to `max_allowed_packet` and sent back to back, [`PIPELINE_DEPTH`] answers
/// outstanding.
async fn insert_all(
    connection: &mut Connection,
    plan: &Plan,
    input: &mut dyn RowFeed,
    decoded: &mut Decoded,
    mut more: bool,
    batch_size: Option<usize>,
) -> Result<ImportSummary, Error> {
    let mut summary = ImportSummary::default();
    let rows_per_statement = batch_size
        .unwrap_or_else(|| rows_per_packet(connection, plan, &decoded.batch))
        .max(1);
    let depth = if batch_size.is_some() {
        1
    } else {
        PIPELINE_DEPTH
    };
    let mut inserts = Inserts::new(depth);
    let sent: Result<(), Error> = async {
        loop {
            if let Some(first) = decoded.rejected.first() {
                return Err(Error::bad_row(first.error.clone()));
            }
            let rows = decoded.batch.num_rows();
            inserts.lines.extend(&decoded.lines);
            for index in 0..rows {
                inserts.push_row(plan, &decoded.batch, index);
                if inserts.pending_rows == rows_per_statement {
                    inserts.send(connection, plan).await?;
                }
            }
            input.progress().add_rows(rows as u64);
            summary.accepted += rows as u64;
            decoded.clear();
            if !more {
                return inserts.send(connection, plan).await;
            }
            more = input.next(decoded).await?;
        }
    }
    .await;
    let finished = inserts.finish(connection).await;
    sent?;
    summary.written = finished?;
    Ok(summary)
}

/// INSERTs sent back to back when the server refuses local files: enough to
/// keep it busy, few enough that their parameters stay a bounded amount.
const PIPELINE_DEPTH: usize = 4;

/// Rows gathered into INSERT statements of one prepared size, executed with
/// answers read up to `depth` statements behind.
struct Inserts {
    depth: usize,
    /// Prepared statement ids by row count (the full size and the last, shorter one).
    statements: Vec<(usize, u32)>,
    /// Parameters of the rows gathered for the next statement.
    pending: Vec<Option<Vec<u8>>>,
    pending_rows: usize,
    /// Rows sent so far (the next statement's first row is the one after).
    rows_sent: u64,
    /// For each statement sent and not yet answered: its first row (1-based)
    /// and its row count.
    in_flight: std::collections::VecDeque<(u64, usize)>,
    lines: LineMap,
    written: u64,
    failure: Option<Error>,
}

impl Inserts {
    fn new(depth: usize) -> Inserts {
        Inserts {
            depth,
            statements: Vec::new(),
            pending: Vec::new(),
            pending_rows: 0,
            rows_sent: 0,
            in_flight: std::collections::VecDeque::new(),
            lines: LineMap::default(),
            written: 0,
            failure: None,
        }
    }

    fn push_row(&mut self, plan: &Plan, batch: &Batch, index: usize) {
        let row = batch.row(index);
        for (column, convert) in plan.converts.iter().enumerate() {
            self.pending
                .push(row.get(column).map(|value| parameter(*convert, value)));
        }
        self.pending_rows += 1;
    }

    /// Executes the gathered rows (preparing a statement of that size first
    /// if there is none), reading answers as far as the depth requires.
    async fn send(&mut self, connection: &mut Connection, plan: &Plan) -> Result<(), Error> {
        if let Some(error) = self.failure.take() {
            // Stop reading the input: the import has failed.
            return Err(error);
        }
        let rows = self.pending_rows;
        if rows == 0 {
            return Ok(());
        }
        let statement = match self.statements.iter().find(|(size, _)| *size == rows) {
            Some((_, statement)) => *statement,
            None => {
                // The prepare's answer comes after those outstanding: read them first.
                self.drain(connection).await?;
                let statement =
                    crate::query::prepare(connection, &plan.insert_statement(rows)).await?;
                self.statements.push((rows, statement));
                statement
            }
        };
        crate::query::queue_execute(connection, statement, &self.pending, false);
        connection.wire.flush().await?;
        self.in_flight.push_back((self.rows_sent + 1, rows));
        self.rows_sent += rows as u64;
        self.pending.clear();
        self.pending_rows = 0;
        while self.in_flight.len() >= self.depth {
            self.read_answer(connection).await?;
        }
        Ok(())
    }

    /// Reads the oldest outstanding answer; a refusal is kept (tied to its
    /// input line) and ends the sending.
    async fn read_answer(&mut self, connection: &mut Connection) -> Result<(), Error> {
        let Some((first_row, rows)) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let answer = connection.wire.read_payload().await?;
        match answer.first() {
            Some(0x00) => self.written += read_lenenc_int(&mut &answer[1..])?,
            Some(0xFF) if self.failure.is_none() => {
                let error = server_error(&answer, connection.capabilities);
                self.failure = Some(self.at_line(error, first_row, rows));
            }
            Some(0xFF) => {}
            _ => return Err(connection.unexpected_answer("the INSERT", &answer).await),
        }
        Ok(())
    }

    /// Ties an INSERT's error to the input line of the row it names ("at row
    /// N" within the statement), or of its only row.
    fn at_line(&self, error: Error, first_row: u64, rows: usize) -> Error {
        let within = error
            .as_db_error()
            .and_then(|db| at_row(&db.message))
            .or((rows == 1).then_some(1));
        match within.and_then(|within| self.lines.line(first_row + within - 1)) {
            Some(line) => {
                let reason = reason_of(&error, line);
                error.at_row(reason)
            }
            None => error,
        }
    }

    async fn drain(&mut self, connection: &mut Connection) -> Result<(), Error> {
        while !self.in_flight.is_empty() {
            self.read_answer(connection).await?;
        }
        match self.failure.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Reads every outstanding answer and closes the statements: the rows
    /// written, or the first refusal.
    async fn finish(mut self, connection: &mut Connection) -> Result<u64, Error> {
        let drained = self.drain(connection).await;
        for (_, statement) in &self.statements {
            crate::query::queue_close(connection, *statement);
        }
        drained.map(|()| self.written)
    }
}

/// A value as an INSERT's parameter.
fn parameter(convert: Convert, value: &[u8]) -> Vec<u8> {
    match convert {
        Convert::Verbatim => value.to_vec(),
        Convert::Bool => vec![bool_digit(value)],
        Convert::Utc => to_utc(value).unwrap_or_else(|| value.to_vec()),
        Convert::Hex => {
            let mut hex = Vec::with_capacity(value.len() * 2);
            write_hex(value, &mut hex);
            hex
        }
        Convert::Time => duration_to_time(value).unwrap_or_else(|| value.to_vec()),
    }
}

/// Rows per INSERT so one statement's parameters stay under the server's
/// packet limit and the protocol's 65,535 placeholders.
fn rows_per_packet(connection: &Connection, plan: &Plan, batch: &Batch) -> usize {
    let columns = plan.columns.len().max(1);
    let by_placeholders = 65_535 / columns;
    let rows = batch.num_rows().max(1);
    let bytes_per_row = batch.data_len() / rows + columns * 9 + 1;
    let limit = (connection.server().max_allowed_packet as usize).clamp(1 << 20, 1 << 30);
    let by_packet = (limit * 3 / 4) / bytes_per_row;
    by_placeholders.min(by_packet).max(1)
}

/// One prepared INSERT of `rows` of `batch`: rows written.
async fn insert_segment(
    connection: &mut Connection,
    plan: &Plan,
    batch: &Batch,
    rows: &[usize],
) -> Result<u64, Error> {
    let mut params: Vec<Option<Vec<u8>>> = Vec::with_capacity(rows.len() * plan.columns.len());
    for &index in rows {
        let row = batch.row(index);
        for (column, convert) in plan.converts.iter().enumerate() {
            params.push(row.get(column).map(|value| parameter(*convert, value)));
        }
    }
    connection
        .execute_prepared(&plan.insert_statement(rows.len()), &params)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_escaped_for_load_data() {
        let mut batch = Batch::new(4);
        batch.push_value(b"tab\there\\ and\nnewline\0");
        batch.push_null();
        batch.push_value(&[0xde, 0xad]);
        batch.push_value(b"t");
        let mut output = Vec::new();
        encode_row(
            &batch,
            0,
            &[
                Convert::Verbatim,
                Convert::Verbatim,
                Convert::Hex,
                Convert::Bool,
            ],
            &mut output,
        )
        .unwrap();
        assert_eq!(
            output,
            b"tab\\there\\\\ and\\nnewline\\0\t\\N\tdead\t1\n".to_vec()
        );
    }

    #[test]
    fn messages_name_their_column() {
        assert_eq!(
            column_in("Incorrect decimal value: 'abc' for column `test`.`imp`.`amount` at row 7")
                .as_deref(),
            Some("amount")
        );
        assert_eq!(
            column_in("Column 'name' cannot be null").as_deref(),
            Some("name")
        );
        assert_eq!(column_in("Duplicate entry '2' for key 'PRIMARY'"), None);
        let error = Error::db(DbError {
            message: "Incorrect decimal value: 'abc' for column `d`.`t`.`amount` at row 7".into(),
            ..DbError::default()
        });
        assert_eq!(
            reason_of(&error, 12).to_string(),
            "line 12, column amount: Incorrect decimal value: 'abc' for column `d`.`t`.`amount`"
        );
    }

    #[test]
    fn upserts_count_rows_added_or_changed() {
        // 3 inserted, 2 updated, 5 already so.
        assert_eq!(
            upserted(3 + 2 * 2, "Records: 10  Duplicates: 7  Warnings: 0"),
            5
        );
        assert_eq!(upserted(4, ""), 4);
    }

    #[test]
    fn warnings_name_their_row() {
        assert_eq!(
            at_row("Incorrect integer value: 'x' for column `d`.`t`.`id` at row 777777"),
            Some(777_777)
        );
        assert_eq!(at_row("Duplicate entry '1' for key 'PRIMARY'"), None);
    }
}
