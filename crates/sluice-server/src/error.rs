//! [`AppError`]: every failure a client can see before the first byte of a body.
//!
//! Each becomes a status and a small JSON body, `{"error": "...", "sqlstate": "...",
//! "parameter": "..."}`, with only what the client can act on: the database's own
//! message and SQLSTATE for errors caused by the request, a generic message for
//! server-side failures (whose details go to the log, not to the client).
//! Failures after the first byte cannot change the status any more; see
//! [`crate::stream`] for how those abort the response.
//!
//! Import settings at fault are told here by their query parameter
//! ([`AppError::from_import_fault`], [`row_reason`]): the libraries name no setting.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sluice_core::load::ImportFault;
use sluice_core::{DbCause, Error, ErrorKind, RowError, RowFault};
use sluice_formats::{InputFault, ParamFault};

use crate::db::StartError;

/// Seconds a client is told to wait when the pool or the database is unavailable.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// A failure to report as an HTTP error response.
#[derive(Debug)]
pub enum AppError {
    /// 400, optionally naming the parameter at fault.
    BadRequest {
        /// What is wrong.
        message: String,
        /// The parameter at fault.
        parameter: Option<String>,
    },
    /// 401: no valid bearer token.
    Unauthorized,
    /// 403: a valid token without the right.
    Forbidden(String),
    /// 404.
    NotFound(String),
    /// 405: the route exists, but not for this database (SQLite is read-only).
    MethodNotAllowed(String),
    /// 406: no acceptable format.
    NotAcceptable(String),
    /// 413: a request body over the route's limit.
    PayloadTooLarge(String),
    /// 415: a request body in a format the route does not take.
    UnsupportedMediaType(String),
    /// 414: a query string over `[server] max_query_string`.
    UriTooLong(String),
    /// 429 with `Retry-After`: a token over its `max_concurrent` or `rate`.
    TooManyRequests {
        /// Which limit, for the client.
        message: String,
        /// Seconds to wait before retrying.
        retry_after: u64,
    },
    /// 422: a bad input record (or a row the database refused) in an upload.
    Unprocessable {
        /// What is wrong.
        message: String,
        /// The 1-based input line of the record, when known.
        line: Option<u64>,
        /// The column at fault, when known.
        column: Option<String>,
        /// The SQLSTATE, when the database refused the row.
        sqlstate: Option<String>,
    },
    /// 503 with `Retry-After`.
    Unavailable(String),
    /// 503 with `Retry-After`: the database gave up the work for a reason
    /// that a retry of the same request may not meet (`is_transient`).
    Transient {
        /// The database's words.
        message: String,
        /// Its SQLSTATE.
        sqlstate: Option<String>,
    },
    /// 504: a response that ran out of time before its first byte.
    Timeout(String),
    /// A database error before the first byte.
    Database {
        /// The error.
        error: Error,
        /// True for ad-hoc SQL, whose syntax errors are the client's.
        ad_hoc: bool,
    },
    /// 500; the message is logged, the client sees a generic one.
    Internal(String),
}

impl From<ParamFault> for AppError {
    fn from(fault: ParamFault) -> AppError {
        match fault.parameter {
            Some(parameter) => AppError::parameter(&parameter, fault.message),
            None => AppError::bad_request(fault.message),
        }
    }
}

impl AppError {
    /// A 400 naming `parameter`.
    pub fn parameter(parameter: &str, message: impl Into<String>) -> AppError {
        AppError::BadRequest {
            message: format!("parameter {parameter:?}: {}", message.into()),
            parameter: Some(parameter.to_owned()),
        }
    }

    /// A 400.
    pub fn bad_request(message: impl Into<String>) -> AppError {
        AppError::BadRequest {
            message: message.into(),
            parameter: None,
        }
    }

    /// The error that stopped a query from starting.
    pub fn from_start(error: StartError, ad_hoc: bool) -> AppError {
        match error {
            StartError::Busy => {
                AppError::Unavailable("all database connections are busy; retry shortly".into())
            }
            StartError::Unavailable(error) => {
                tracing::warn!(%error, "database unavailable");
                AppError::Unavailable("the database is unavailable; retry shortly".into())
            }
            StartError::Query(error) => AppError::from_query(error, ad_hoc),
            // A configuration problem, not the client's: the log says which.
            StartError::Refused(refusal) => {
                AppError::Internal(format!("POST /sql refused: {refusal}"))
            }
        }
    }

    /// A query error before the first byte.
    pub fn from_query(error: Error, ad_hoc: bool) -> AppError {
        match error.kind() {
            ErrorKind::Database => AppError::Database { error, ad_hoc },
            // A parameter count the SQL does not match, a write refused by SQLite.
            ErrorKind::Config if ad_hoc => AppError::bad_request(error.to_string()),
            ErrorKind::Connect | ErrorKind::Closed | ErrorKind::Authentication => {
                tracing::warn!(%error, "database unavailable");
                AppError::Unavailable("the database is unavailable; retry shortly".into())
            }
            _ => AppError::Internal(error.to_string()),
        }
    }

    /// A 400 naming the query parameter of `POST /tables` at fault, when a setting
    /// of the import is (`None` for any other error).
    pub fn from_import_fault(error: &Error) -> Option<AppError> {
        if let Some(fault) = InputFault::of(error) {
            return Some(match fault {
                InputFault::HeaderForNdjson => {
                    AppError::parameter("header", "goes with CSV (NDJSON has no header line)")
                }
                InputFault::IgnoreUnknownForCsv => {
                    AppError::parameter("ignore_unknown", "goes with NDJSON")
                }
                InputFault::UnknownHeaderColumn => AppError::Unprocessable {
                    message: format!(
                        "{error}; if line 1 is data, not a header, add header=false \
                         (and columns= to name the columns in order)"
                    ),
                    line: Some(1),
                    column: None,
                    sqlstate: None,
                },
            });
        }
        Some(match ImportFault::of(error)? {
            ImportFault::UpdateWithoutKey => AppError::parameter(
                "key",
                "on_conflict=update needs the key columns, e.g. key=id",
            ),
            ImportFault::KeyWithoutConflictAction => {
                AppError::parameter("key", "goes with on_conflict=ignore or on_conflict=update")
            }
            ImportFault::UnknownKeyColumn { name } => AppError::parameter(
                "key",
                format!("names {name:?}, which the table does not have"),
            ),
            ImportFault::SkipWithInsert => AppError::parameter(
                "on_error",
                "skip works with method=copy (INSERT batches abort on the first error)",
            ),
            ImportFault::BatchTooLarge { rows, columns } => AppError::parameter(
                "batch_rows",
                format!(
                    "too many parameters in one INSERT ({rows} rows of {columns} columns): \
                     lower batch_rows"
                ),
            ),
            other => AppError::bad_request(other.to_string()),
        })
    }

    /// The status this error is sent with.
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            AppError::Unauthorized => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            AppError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            AppError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AppError::UriTooLong(_) => StatusCode::URI_TOO_LONG,
            AppError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            AppError::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Unavailable(_) | AppError::Transient { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            AppError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            AppError::Database { error, ad_hoc } => database_status(error, *ad_hoc),
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl std::fmt::Display for AppError {
    /// The full story for the log (the response body may say less).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppError::Internal(message) => f.write_str(message),
            AppError::Unprocessable {
                message,
                line: Some(line),
                ..
            } => write!(f, "line {line}: {message}"),
            AppError::Unprocessable { message, .. } => f.write_str(message),
            AppError::Unauthorized => f.write_str("no valid bearer token"),
            AppError::Database { error, .. } => write!(f, "{error}"),
            plain => f.write_str(plain.plain_message().unwrap_or_default()),
        }
    }
}

impl AppError {
    /// The message of the errors whose message is all there is to say, to the
    /// log and to the client alike.
    fn plain_message(&self) -> Option<&str> {
        match self {
            AppError::BadRequest { message, .. }
            | AppError::Forbidden(message)
            | AppError::NotFound(message)
            | AppError::MethodNotAllowed(message)
            | AppError::NotAcceptable(message)
            | AppError::PayloadTooLarge(message)
            | AppError::UnsupportedMediaType(message)
            | AppError::UriTooLong(message)
            | AppError::TooManyRequests { message, .. }
            | AppError::Unavailable(message)
            | AppError::Transient { message, .. }
            | AppError::Timeout(message) => Some(message),
            _ => None,
        }
    }
}

/// Why a record was refused, with the query parameter that would let it through,
/// if one would.
pub fn row_reason(row: &RowError) -> String {
    let hint = match row.fault {
        Some(RowFault::UnknownColumn) => "set ignore_unknown=true to skip unknown keys",
        Some(RowFault::NotListed) => "add it to columns=",
        Some(RowFault::DefaultedNotSet) => "name it in columns=",
        _ => return row.reason.clone(),
    };
    format!("{} ({hint})", row.reason)
}

/// True for a database error that says nothing about the request itself:
/// the work lost a race with other sessions (a deadlock, a serialization
/// failure, a lock not granted in time) and a retry may succeed. The driver
/// says so ([`DbCause::LostRace`]), reading its database's codes.
pub fn is_transient(error: &Error) -> bool {
    cause(error) == DbCause::LostRace
}

/// What a database error means, as its driver read it.
fn cause(error: &Error) -> DbCause {
    error.as_db_error().map_or(DbCause::Other, |db| db.cause)
}

/// The status for a database error, by what it means.
fn database_status(error: &Error, ad_hoc: bool) -> StatusCode {
    match cause(error) {
        // What the request asked for: a value its type rejects, a division
        // by zero, a key that exists.
        DbCause::Data | DbCause::DuplicateKey | DbCause::Integrity => StatusCode::BAD_REQUEST,
        // The client's in ad-hoc SQL; a broken named query otherwise.
        DbCause::Statement | DbCause::TransactionState | DbCause::ReadOnly if ad_hoc => {
            StatusCode::BAD_REQUEST
        }
        // A named query that writes, run by a token without scope `write`.
        DbCause::ReadOnly => StatusCode::FORBIDDEN,
        DbCause::StatementTimeout => StatusCode::GATEWAY_TIMEOUT,
        DbCause::Unavailable | DbCause::LostRace => StatusCode::SERVICE_UNAVAILABLE,
        DbCause::Statement | DbCause::TransactionState | DbCause::Other => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = serde_json::Map::new();
        let message = match &self {
            AppError::Unprocessable {
                message,
                line,
                column,
                sqlstate,
            } => {
                body.insert("line".into(), json!(line));
                body.insert("column".into(), json!(column));
                if let Some(code) = sqlstate {
                    body.insert("sqlstate".into(), json!(code));
                }
                message.clone()
            }
            AppError::Transient { message, sqlstate } => {
                if let Some(code) = sqlstate {
                    body.insert("sqlstate".into(), json!(code));
                }
                format!("{message}; nothing was committed: retry the request")
            }
            AppError::Unauthorized => "a valid bearer token is required".into(),
            AppError::Database { error, .. } => {
                if let Some(code) = error.code().filter(|code| !code.is_empty()) {
                    body.insert("sqlstate".into(), json!(code));
                }
                if status.is_client_error() || status == StatusCode::GATEWAY_TIMEOUT {
                    error
                        .as_db_error()
                        .map_or_else(|| error.to_string(), |db| db.message.clone())
                } else {
                    tracing::error!(%error, "query failed");
                    "the query failed on the database".into()
                }
            }
            AppError::Internal(message) => {
                tracing::error!(error = %message, "internal error");
                "internal error".into()
            }
            plain => plain.plain_message().unwrap_or_default().to_owned(),
        };
        body.insert("error".into(), json!(message));
        if let AppError::BadRequest {
            parameter: Some(parameter),
            ..
        } = &self
        {
            body.insert("parameter".into(), json!(parameter));
        }
        let retry_after = match &self {
            AppError::TooManyRequests { retry_after, .. } => Some(*retry_after),
            _ if status == StatusCode::SERVICE_UNAVAILABLE => Some(RETRY_AFTER_SECONDS),
            _ => None,
        };
        let mut response = (status, axum::Json(serde_json::Value::Object(body))).into_response();
        let headers = response.headers_mut();
        if let Some(seconds) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
