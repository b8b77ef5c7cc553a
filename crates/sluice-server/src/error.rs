//! [`AppError`]: every failure an HTTP client can see before the first byte of a
//! body: the gateway's own ([`GatewayError`]) and those only HTTP has (a method,
//! a media type, a body or a query string the route does not take, a body too
//! slow).
//!
//! Each becomes a status and a small JSON body, `{"error": "...", "sqlstate": "...",
//! "parameter": "..."}`, with only what the client can act on (see
//! [`GatewayError::client_message`]). Failures after the first byte cannot
//! change the status any more; see [`crate::stream`] for how those abort the
//! response.
//!
//! Import settings at fault are told here by their query parameter
//! ([`AppError::from_import_fault`], [`row_reason`]): the libraries name no setting.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sluice_core::load::ImportFault;
use sluice_core::{Error, RowError, RowFault};
use sluice_formats::{InputFault, ParamFault};
use sluice_gateway::{Class, GatewayError, StartError, RETRY_AFTER_SECONDS};

/// A failure to report as an HTTP error response.
#[derive(Debug)]
pub enum AppError {
    /// The gateway's: a status by what it means ([`Class`]).
    Gateway(GatewayError),
    /// 405: the route exists, but not for this database (SQLite is read-only).
    MethodNotAllowed(String),
    /// 406: no acceptable format.
    NotAcceptable(String),
    /// 408: a request body that came too slowly (`body_read_timeout`,
    /// `min_body_rate`).
    RequestTimeout(String),
    /// 413: a request body over the route's limit.
    PayloadTooLarge(String),
    /// 415: a request body in a format the route does not take.
    UnsupportedMediaType(String),
    /// 414: a query string over `[server] max_query_string`.
    UriTooLong(String),
}

impl From<GatewayError> for AppError {
    fn from(error: GatewayError) -> AppError {
        AppError::Gateway(error)
    }
}

impl From<ParamFault> for AppError {
    fn from(fault: ParamFault) -> AppError {
        AppError::Gateway(fault.into())
    }
}

impl AppError {
    /// A 400 naming `parameter`.
    pub fn parameter(parameter: &str, message: impl Into<String>) -> AppError {
        GatewayError::parameter(parameter, message).into()
    }

    /// A 400.
    pub fn bad_request(message: impl Into<String>) -> AppError {
        GatewayError::bad_request(message).into()
    }

    /// A 500, its message logged.
    pub fn internal(message: impl Into<String>) -> AppError {
        GatewayError::Internal(message.into()).into()
    }

    /// The error that stopped a query from starting.
    pub fn from_start(error: StartError, ad_hoc: bool) -> AppError {
        GatewayError::from_start(error, ad_hoc).into()
    }

    /// A query error before the first byte.
    pub fn from_query(error: Error, ad_hoc: bool) -> AppError {
        GatewayError::from_query(error, ad_hoc).into()
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
                InputFault::UnknownHeaderColumn => AppError::Gateway(GatewayError::Unprocessable {
                    message: format!(
                        "{error}; if line 1 is data, not a header, add header=false \
                         (and columns= to name the columns in order)"
                    ),
                    line: Some(1),
                    column: None,
                    sqlstate: None,
                }),
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
                "insert_rows",
                format!(
                    "too many parameters in one INSERT ({rows} rows of {columns} columns): \
                     lower insert_rows"
                ),
            ),
            other => AppError::bad_request(other.to_string()),
        })
    }

    /// The status this error is sent with.
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::Gateway(GatewayError::Unprocessable { .. }) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            AppError::Gateway(error) => status_of(error.class()),
            AppError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            AppError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            AppError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            AppError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AppError::UriTooLong(_) => StatusCode::URI_TOO_LONG,
        }
    }
}

/// HTTP's status for each meaning of a gateway failure.
fn status_of(class: Class) -> StatusCode {
    match class {
        Class::Invalid => StatusCode::BAD_REQUEST,
        Class::Unauthenticated => StatusCode::UNAUTHORIZED,
        Class::Forbidden => StatusCode::FORBIDDEN,
        Class::NotFound => StatusCode::NOT_FOUND,
        Class::Exhausted => StatusCode::TOO_MANY_REQUESTS,
        Class::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Class::TimedOut => StatusCode::GATEWAY_TIMEOUT,
        Class::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl std::fmt::Display for AppError {
    /// The full story for the log (the response body may say less).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppError::Gateway(error) => error.fmt(f),
            AppError::MethodNotAllowed(message)
            | AppError::NotAcceptable(message)
            | AppError::RequestTimeout(message)
            | AppError::PayloadTooLarge(message)
            | AppError::UnsupportedMediaType(message)
            | AppError::UriTooLong(message) => f.write_str(message),
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

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = serde_json::Map::new();
        let message = match &self {
            AppError::Gateway(error) => {
                details(error, &mut body);
                error.client_message()
            }
            http_only => http_only.to_string(),
        };
        body.insert("error".into(), json!(message));
        let retry_after = match &self {
            AppError::Gateway(GatewayError::TooManyRequests { retry_after, .. }) => {
                Some(*retry_after)
            }
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

/// The fields of the JSON error body beside `error`: the record's line and
/// column, the SQLSTATE, the parameter at fault.
fn details(error: &GatewayError, body: &mut serde_json::Map<String, serde_json::Value>) {
    let sqlstate = match error {
        GatewayError::Unprocessable {
            line,
            column,
            sqlstate,
            ..
        } => {
            body.insert("line".into(), json!(line));
            body.insert("column".into(), json!(column));
            sqlstate.clone()
        }
        GatewayError::Transient { sqlstate, .. } => sqlstate.clone(),
        GatewayError::Database { error, .. } => error.code().map(str::to_owned),
        GatewayError::BadRequest {
            parameter: Some(parameter),
            ..
        } => {
            body.insert("parameter".into(), json!(parameter));
            None
        }
        _ => None,
    };
    if let Some(code) = sqlstate.filter(|code| !code.is_empty()) {
        body.insert("sqlstate".into(), json!(code));
    }
}
