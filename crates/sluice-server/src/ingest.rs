//! `POST /tables/{name}`: an NDJSON or CSV request body streamed into an
//! allow-listed table by its database's session (`Session::import`), with the options
//! of `sluice import` as query parameters.
//!
//! The body is never held whole: its first [`READ_AHEAD_BYTES`] are read
//! before a session is taken (so a small body never makes a session wait on its
//! client), the rest in pieces as the import asks for them (a [`StreamReader`]
//! over the body's frames), and rows go to the database as they are decoded, so
//! a slow database slows the upload (TCP flow control). A body that comes
//! slower than `[server] body_read_timeout` and `min_body_rate` allow is ended
//! with 408 and nothing is written ([`crate::body`]).
//! The import runs in a task of its own, so a client that leaves mid-upload still
//! has its import ended properly: the body then ends in an error, the COPY is
//! failed (or the transaction rolled back) and nothing is committed.
//!
//! Responses: 200 with `{"records", "accepted", "rejected", "written",
//! "round_trips"}` (with `on_error=skip`, also `"rejects"`: the first
//! [`MAX_REJECTS`] rejected records in full, and `"rejects_omitted"`: how many
//! more there were); 422 with `{"error", "line", "column", "sqlstate"}` for a
//! bad record or a row the database refused in abort mode; 400 for bad options;
//! 401/403 without a token of scope `write`; 404 for a table not in the
//! configuration; 405 on a server whose databases are all SQLite (read-only);
//! 408 for a body that came too slowly; 413 for one over `max_body`.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use sluice_core::connect::{ImportRequest, Session};
use sluice_core::load::{
    ImportInput, ImportOptions, ImportSummary, Method, OnConflict, OnError, RejectSink, TableInfo,
};
use sluice_core::word::Word;
use sluice_core::{DbCause, Decoder, Error, ErrorKind, Progress, Rejected};
use sluice_formats::{CsvHeader, ExpectedNames, HeaderMismatch, InputFormat, InputOptions};
use tokio_util::io::StreamReader;

use sluice_gateway::config::TableConfig;
use sluice_gateway::AppState;
use sluice_gateway::GatewayError;
use sluice_gateway::Need;

use crate::body::{limited, read_ahead, Limit, Pace, READ_AHEAD_BYTES};
use crate::error::{row_reason, AppError};
use sluice_gateway::RequestContext;

use crate::stream::HTTP;
use crate::uri::{check_known_once, QueryPairs, RouteName};

/// Rejected records reported in full in a skip-mode response; later ones are counted.
pub const MAX_REJECTS: usize = 1000;

/// Bytes of a rejected record echoed in the response; longer ones are cut.
pub const MAX_REJECT_RECORD_BYTES: usize = 4096;

/// The import options of one request.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// The body's format.
    pub format: InputFormat,
    /// The decoder's settings from the request (`columns`, `header`,
    /// `ignore_unknown`); the table and its configuration fill in the rest.
    pub input: InputOptions,
    /// Everything else.
    pub import: ImportOptions,
}

const KNOWN: &[&str] = &[
    "format",
    "columns",
    "header",
    "on_error",
    "on_conflict",
    "key",
    "method",
    "insert_rows",
    "ignore_unknown",
    "dry_run",
];

/// Parameters renamed to the CLI's words, old spelling first: still read,
/// with a warning in the log (and `deprecated` in the OpenAPI document).
/// Both old ones name the rows of one INSERT, as `sluice import --insert-rows`.
pub(crate) const RENAMED: &[(&str, &str)] =
    &[("batch_rows", "insert_rows"), ("batch_size", "insert_rows")];

fn flag(name: &str, value: &str) -> Result<bool, AppError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(AppError::parameter(name, "expected true or false")),
    }
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The body's format: `?format=`, else the `Content-Type`, else NDJSON.
fn input_format(format: Option<&str>, headers: &HeaderMap) -> Result<InputFormat, AppError> {
    if let Some(format) = format {
        return format
            .parse()
            .map_err(|message: String| AppError::parameter("format", message));
    }
    let Some(content_type) = headers.get(header::CONTENT_TYPE) else {
        return Ok(InputFormat::Ndjson);
    };
    let content_type = content_type.to_str().unwrap_or("");
    InputFormat::for_media_type(content_type).ok_or_else(|| {
        let media = content_type.split(';').next().unwrap_or("").trim();
        AppError::UnsupportedMediaType(format!(
            "cannot import a body of type {:?}: send Content-Type application/x-ndjson or \
             text/csv, or say ?format=ndjson|csv",
            media.to_ascii_lowercase()
        ))
    })
}

/// The parameter `name`, one of `T`'s spellings; `T`'s default when absent.
fn word<T: Word + Default>(name: &str, value: Option<&str>) -> Result<T, AppError> {
    value.map_or_else(
        || Ok(T::default()),
        |text| {
            text.parse()
                .map_err(|message: String| AppError::parameter(name, message))
        },
    )
}

/// `insert_rows=N`, N at least 1.
fn positive_rows(value: &str) -> Result<usize, AppError> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|rows| *rows > 0)
        .ok_or_else(|| AppError::parameter("insert_rows", "expected a positive integer"))
}

/// `header=true|false|match`; a bare `header` is true, as in COPY.
fn header_setting(value: &str) -> Result<CsvHeader, AppError> {
    if value.trim().is_empty() {
        return Ok(CsvHeader::Present);
    }
    value
        .parse()
        .map_err(|message: String| AppError::parameter("header", message))
}

/// `pairs` with renamed parameters in their new spelling, each renaming
/// logged as a warning.
fn modern_spellings(pairs: &[(String, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(
            |(key, value)| match RENAMED.iter().find(|(old, _)| key == old) {
                Some((old, new)) => {
                    tracing::warn!("POST /tables: the parameter {old} is deprecated: say {new}");
                    ((*new).to_owned(), value.clone())
                }
                None => (key.clone(), value.clone()),
            },
        )
        .collect()
}

/// Reads the query parameters of `POST /tables/{name}`: each known and given once.
pub fn parse_options(
    pairs: &[(String, String)],
    headers: &HeaderMap,
) -> Result<IngestOptions, AppError> {
    let renamed: Vec<(String, String)>;
    let pairs = if pairs
        .iter()
        .any(|(key, _)| RENAMED.iter().any(|(old, _)| key == old))
    {
        renamed = modern_spellings(pairs);
        &renamed[..]
    } else {
        pairs
    };
    check_known_once(
        pairs,
        KNOWN,
        &format!("unknown parameter (known: {})", KNOWN.join(", ")),
    )?;
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let format = input_format(get("format"), headers)?;
    let on_error: OnError = word("on_error", get("on_error"))?;
    let on_conflict: OnConflict = word("on_conflict", get("on_conflict"))?;
    let insert_rows = get("insert_rows").map(positive_rows).transpose()?;
    let method = match (word("method", get("method"))?, insert_rows) {
        (Method::Copy, Some(_)) => {
            return Err(AppError::parameter(
                "insert_rows",
                "goes with method=insert",
            ))
        }
        (method, Some(rows)) => method.with_insert_rows(rows),
        (method, None) => method,
    };
    let key = get("key").map(list).unwrap_or_default();
    let ignore_unknown = get("ignore_unknown")
        .map(|value| flag("ignore_unknown", value))
        .transpose()?
        .unwrap_or(false);
    let header = get("header").map(header_setting).transpose()?;
    let dry_run = get("dry_run")
        .map(|value| flag("dry_run", value))
        .transpose()?
        .unwrap_or(false);
    let options = IngestOptions {
        format,
        input: InputOptions {
            columns: get("columns")
                .map(list)
                .filter(|columns| !columns.is_empty()),
            header,
            ignore_unknown,
            ..InputOptions::default()
        },
        import: ImportOptions {
            on_error,
            on_conflict,
            key,
            method,
            dry_run,
            ..ImportOptions::default()
        },
    };
    // The libraries judge which settings fit together; this API names the parameter.
    let checked = format
        .check(&options.input)
        .and_then(|()| options.import.check());
    checked.map_err(|error| {
        AppError::from_import_fault(&error)
            .unwrap_or_else(|| AppError::bad_request(error.to_string()))
    })?;
    Ok(options)
}

/// The handler. The import runs in a task of its own (see the module docs).
pub async fn ingest(
    State(state): State<AppState>,
    RouteName(name): RouteName,
    query: Result<QueryPairs, AppError>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let pairs = query.map(|QueryPairs(pairs)| pairs);
    let task = tokio::spawn(run(state, name, pairs, headers, body));
    task.await.unwrap_or_else(|error| {
        AppError::Gateway(GatewayError::Internal(format!(
            "the import task failed: {error}"
        )))
        .into_response()
    })
}

/// A finished import.
struct Done {
    summary: ImportSummary,
    rejects: Option<(Vec<Value>, u64)>,
    dry_run: bool,
}

/// A failed request: the error, the log outcome, and round trips spent.
struct Failed {
    error: AppError,
    outcome: &'static str,
    round_trips: u64,
}

impl From<AppError> for Failed {
    fn from(error: AppError) -> Failed {
        Failed {
            error,
            outcome: "rejected",
            round_trips: 0,
        }
    }
}

async fn run(
    state: AppState,
    name: String,
    pairs: Result<Vec<(String, String)>, AppError>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut context =
        RequestContext::new(HTTP, "tables", name.clone(), false, state.shutdown_token());
    let shutdown = state.shutdown_token();
    let mut round_trips = 0;
    let result = tokio::select! {
        result = import_body(&state, IngestRequest { name: &name, pairs, headers: &headers, body }, &mut context, &mut round_trips) => result,
        () = shutdown.cancelled() => Err(Failed {
            // Dropping the import closes its session: the server rolls back.
            error: AppError::Gateway(GatewayError::Unavailable("the server is shutting down".into())),
            outcome: "shutdown",
            round_trips: 0,
        }),
    };
    match result {
        Ok(done) => {
            let summary = done.summary;
            context.finish(200, "complete", summary.records, 0, round_trips, None);
            let mut body = json!({
                "records": summary.records,
                "accepted": summary.accepted,
                "rejected": summary.rejected,
                "written": summary.written,
                "round_trips": round_trips,
            });
            if done.dry_run {
                body["dry_run"] = json!(true);
            }
            if let Some((rejects, omitted)) = done.rejects {
                body["rejects"] = Value::Array(rejects);
                body["rejects_omitted"] = json!(omitted);
            }
            Json(body).into_response()
        }
        Err(failed) => {
            let round_trips = failed.round_trips.max(round_trips);
            context.finish(
                failed.error.status().as_u16(),
                failed.outcome,
                0,
                0,
                round_trips,
                Some(&failed.error.to_string()),
            );
            failed.error.into_response()
        }
    }
}

/// What a `POST /tables/{name}` request brought.
struct IngestRequest<'a> {
    /// The table's name in the configuration.
    name: &'a str,
    /// The query string, or why it could not be read.
    pairs: Result<Vec<(String, String)>, AppError>,
    headers: &'a HeaderMap,
    body: Body,
}

/// Checks the request, takes a session and loads the body; `round_trips` is
/// kept current for the log line, whatever happens.
async fn import_body(
    state: &AppState,
    request: IngestRequest<'_>,
    context: &mut RequestContext,
    round_trips: &mut u64,
) -> Result<Done, Failed> {
    let IngestRequest {
        name,
        pairs,
        headers,
        body,
    } = request;
    let Some(table) = state.config().tables.get(name) else {
        if !state.has_writable_database() {
            return Err(AppError::MethodNotAllowed(
                "this server's databases are all served read-only: \
                 POST /tables needs one that takes writes"
                    .into(),
            )
            .into());
        }
        // Unknown names are 404 only for writers, so tokens reveal nothing.
        crate::auth::admit(state.auth(), headers, Need::Write)?;
        return Err(AppError::Gateway(GatewayError::NotFound(format!(
            "no table named {name:?} is open to writes"
        )))
        .into());
    };
    context.admit(crate::auth::admit(state.auth(), headers, Need::Write)?);
    let pairs = pairs?;
    let options = parse_options(&pairs, headers)?;
    let limit = Limit::max_body(table.max_body.unwrap_or(state.config().max_body));
    let (body, cut) = limited(headers, body, limit, Pace::of(state.config()))?;
    // Most bodies are whole before the session is taken: it waits on no client.
    let body = read_ahead(body, READ_AHEAD_BYTES)
        .await
        .map_err(|error| cut.read_error(&error))?;
    let database = state.database(&table.database).map_err(AppError::from)?;
    let Some(session) = database.session(table.statement_timeout, false).await else {
        return Err(AppError::MethodNotAllowed(format!(
            "database {:?} is {}, which is served read-only",
            table.database,
            database.kind().product()
        ))
        .into());
    };
    let mut session = session.map_err(|error| AppError::from_start(error, false))?;
    let result = async {
        let info = session
            .describe_table(&table.table)
            .await
            .map_err(|error| match error.kind() {
                ErrorKind::Config => AppError::Gateway(GatewayError::Internal(format!(
                    "tables.{name}: {error} (table = {:?})",
                    table.table
                ))),
                _ => AppError::from_query(error, false),
            })?;
        load(&mut *session, &info, table, &options, body).await
    }
    .await;
    // A body cut at its limit or for its pace is 413 or 408, whatever the
    // import made of the cut.
    let result = result.map_err(|error| match cut.happened() {
        true => cut.error(),
        false => error,
    });
    *round_trips = session.round_trips();
    match result {
        Ok(done) => {
            session.close().await;
            Ok(done)
        }
        // Dropping the session discards it: whatever an error left open is
        // rolled back by the server when the socket closes.
        Err(error) => Err(Failed {
            outcome: match &error {
                _ if cut.too_slow() => "timeout",
                AppError::Gateway(GatewayError::BadRequest { message, .. })
                    if message.starts_with(BODY_FAILED) =>
                {
                    "client_gone"
                }
                _ => "error",
            },
            error,
            round_trips: *round_trips,
        }),
    }
}

const BODY_FAILED: &str = "reading the request body failed";

/// Decodes the body into the table.
async fn load(
    session: &mut dyn Session,
    info: &TableInfo,
    table: &TableConfig,
    options: &IngestOptions,
    body: futures_util::stream::BoxStream<'static, std::io::Result<bytes::Bytes>>,
) -> Result<Done, AppError> {
    let mut reader = StreamReader::new(body);
    let skip = options.import.on_error == OnError::Skip;
    let mut rejects: Vec<Value> = Vec::new();
    let mut omitted = 0u64;
    let mut sink = |rejected: &Rejected| -> Result<(), Error> {
        if rejects.len() >= MAX_REJECTS {
            omitted += 1;
            return Ok(());
        }
        let cut = rejected.record.len() > MAX_REJECT_RECORD_BYTES;
        let record = &rejected.record[..rejected.record.len().min(MAX_REJECT_RECORD_BYTES)];
        let mut entry = json!({
            "line": rejected.error.line,
            "column": rejected.error.column,
            "error": row_reason(&rejected.error),
            "record": String::from_utf8_lossy(record),
        });
        if cut {
            entry["record_truncated"] = json!(true);
        }
        rejects.push(entry);
        Ok(())
    };
    let progress = Progress::new();
    let input = InputOptions {
        defaulted: info.defaulted.clone(),
        max_record_bytes: table.max_line_bytes,
        keep_records: skip,
        ..options.input.clone()
    };
    let mut decoder = options
        .format
        .decoder(info.columns.clone(), &input)
        .map_err(|error| {
            AppError::from_import_fault(&error)
                .unwrap_or_else(|| AppError::parameter("columns", error.to_string()))
        })?;
    let result = run_import(
        session,
        info,
        &mut decoder,
        &mut reader,
        &options.import,
        &mut sink,
        &progress,
    )
    .await;
    let summary = result.map_err(import_error)?;
    Ok(Done {
        summary,
        rejects: skip.then_some((rejects, omitted)),
        dry_run: options.import.dry_run,
    })
}

async fn run_import(
    session: &mut dyn Session,
    table: &TableInfo,
    decoder: &mut dyn Decoder,
    reader: &mut (dyn tokio::io::AsyncRead + Unpin + Send),
    options: &ImportOptions,
    rejects: &mut RejectSink<'_>,
    progress: &Progress,
) -> Result<ImportSummary, Error> {
    let mut input = ImportInput::new(decoder, reader, progress);
    let request = ImportRequest {
        table,
        rows: &mut input,
        options,
        rejects,
    };
    session.import(request).await
}

/// A CSV header that does not match, told in this endpoint's parameters.
fn header_mismatch(mismatch: &HeaderMismatch) -> AppError {
    let (expected, label, hint) = match mismatch.expected_from {
        ExpectedNames::Columns => (
            "columns=",
            "columns",
            "if line 1 is data, not a header, add header=false",
        ),
        ExpectedNames::Table => (
            "the table's columns (header=match)",
            "table",
            "header=true fills only the columns the header names",
        ),
    };
    AppError::Gateway(GatewayError::Unprocessable {
        message: format!(
            "the CSV header does not match {expected}: {} (header: {}; {label}: {}); {hint}",
            mismatch.difference(),
            HeaderMismatch::list(&mismatch.found),
            HeaderMismatch::list(&mismatch.expected),
        ),
        line: Some(1),
        column: None,
        sqlstate: None,
    })
}

/// The response for an import that failed.
fn import_error(error: Error) -> AppError {
    if let Some(mismatch) = HeaderMismatch::of(&error) {
        return header_mismatch(mismatch);
    }
    if let Some(fault) = AppError::from_import_fault(&error) {
        return fault;
    }
    // Lost a race with other sessions (a deadlock, a serialization failure):
    // not the body's fault, so no 422, which tells a client not to retry.
    if sluice_gateway::is_transient(&error) {
        return AppError::Gateway(GatewayError::Transient {
            message: error
                .as_db_error()
                .map_or_else(|| error.to_string(), |db| db.message.clone()),
            sqlstate: error.code().map(str::to_owned),
        });
    }
    if let Some(row) = error.as_row_error() {
        return AppError::Gateway(GatewayError::Unprocessable {
            message: row_reason(row),
            line: Some(row.line),
            column: row.column.clone(),
            sqlstate: error.code().map(str::to_owned),
        });
    }
    match error.kind() {
        // A refused row the server could not place (a foreign key is checked
        // after the last row; a streamed body cannot be read again to find it).
        ErrorKind::Database
            if error.as_db_error().is_some_and(|db| {
                matches!(
                    db.cause,
                    DbCause::Data | DbCause::DuplicateKey | DbCause::Integrity
                )
            }) =>
        {
            let message = error.as_db_error().map_or_else(
                || error.to_string(),
                |db| match &db.detail {
                    Some(detail) => format!("{} ({detail})", db.message),
                    None => db.message.clone(),
                },
            );
            AppError::Gateway(GatewayError::Unprocessable {
                message,
                line: None,
                column: error.as_db_error().and_then(|db| db.column.clone()),
                sqlstate: error.code().map(str::to_owned),
            })
        }
        ErrorKind::Data => AppError::Gateway(GatewayError::Unprocessable {
            message: error.to_string(),
            line: None,
            column: None,
            sqlstate: None,
        }),
        ErrorKind::Config => AppError::bad_request(error.to_string()),
        ErrorKind::Io if error.to_string().starts_with("reading the input failed") => {
            AppError::bad_request(format!("{BODY_FAILED}: {error}"))
        }
        _ => AppError::from_query(error, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::load::INSERT_ROWS;

    fn options(query: &str, content_type: Option<&str>) -> Result<IngestOptions, String> {
        let pairs: Vec<(String, String)> = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                (key.to_owned(), value.to_owned())
            })
            .collect();
        let mut headers = HeaderMap::new();
        if let Some(content_type) = content_type {
            headers.insert(header::CONTENT_TYPE, content_type.parse().unwrap());
        }
        parse_options(&pairs, &headers).map_err(|error| error.to_string())
    }

    #[test]
    fn options_follow_sluice_import() {
        let parsed = options(
            "on_error=skip&on_conflict=update&key=id,at&columns=a,b&dry_run",
            Some("text/csv; charset=utf-8"),
        )
        .unwrap();
        assert_eq!(parsed.format, InputFormat::Csv);
        assert_eq!(parsed.import.on_error, OnError::Skip);
        assert_eq!(parsed.import.on_conflict, OnConflict::Update);
        assert_eq!(parsed.import.key, ["id", "at"]);
        assert_eq!(parsed.input.columns, Some(vec!["a".into(), "b".into()]));
        assert_eq!(parsed.input.header, None);
        assert!(parsed.import.dry_run);
        for (query, header) in [
            ("header=false", CsvHeader::Absent),
            ("header=match", CsvHeader::Match),
            ("header", CsvHeader::Present),
        ] {
            let parsed = options(query, Some("text/csv")).unwrap();
            assert_eq!(parsed.input.header, Some(header), "{query}");
        }

        let parsed = options("method=insert&insert_rows=50&ignore_unknown=true", None).unwrap();
        for old in ["batch_rows", "batch_size"] {
            let query = format!("method=insert&{old}=50&ignore_unknown=true");
            let old = options(&query, None).unwrap();
            assert_eq!(old.import.method, parsed.import.method, "{query}");
        }
        assert!(options("method=insert&batch_size=5&batch_rows=5", None)
            .is_err_and(|error| error.to_string().contains("more than once")));
        assert_eq!(
            options("method=insert", None).unwrap().import.method,
            Method::Insert { rows: INSERT_ROWS }
        );
        assert_eq!(parsed.format, InputFormat::Ndjson);
        assert_eq!(parsed.import.method, Method::Insert { rows: 50 });
        assert!(parsed.input.ignore_unknown);
        assert_eq!(
            options("format=csv", Some("application/x-ndjson"))
                .unwrap()
                .format,
            InputFormat::Csv
        );

        for (query, fault) in [
            ("on_error=maybe", "on_error"),
            ("on_conflict=update", "key"),
            ("method=insert&on_error=skip", "on_error"),
            ("insert_rows=10", "insert_rows"),
            ("method=insert&insert_rows=0", "insert_rows"),
            ("batch_rows=10", "insert_rows"),
            ("batch_size=10", "insert_rows"),
            ("method=upsert", "method"),
            ("colour=red", "colour"),
            ("dry_run=1&dry_run=0", "dry_run"),
            ("format=xml", "format"),
            ("format=csv&header=maybe", "header"),
            // NDJSON has no header line: refused rather than ignored.
            ("header=false", "header"),
            ("format=csv&ignore_unknown", "ignore_unknown"),
            ("key=id", "key"),
        ] {
            let error = options(query, None).unwrap_err();
            assert!(error.contains(&format!("{fault:?}")), "{query}: {error}");
        }
        assert!(options("", Some("application/x-www-form-urlencoded"))
            .unwrap_err()
            .contains("Content-Type"));
    }
}
