//! [`GatewayError`]: every failure of the gateway's policy a client can see
//! before its answer begins, and [`Class`], what it means to the client, which
//! each front end words as its own status (HTTP a status code and a JSON body,
//! Flight a gRPC status).
//!
//! A failure carries only what the client can act on: the database's own
//! message and SQLSTATE for errors caused by the request, a generic message for
//! server-side failures (whose details go to the log, not to the client).

use sluice_core::{DbCause, Error, ErrorKind};
use sluice_formats::ParamFault;

use crate::db::StartError;

/// Seconds a client is told to wait when the pool or the database is unavailable.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// A failure of a request, before its answer began.
#[derive(Debug)]
pub enum GatewayError {
    /// The request is wrong, optionally naming the parameter at fault.
    BadRequest {
        /// What is wrong.
        message: String,
        /// The parameter at fault.
        parameter: Option<String>,
    },
    /// No valid bearer token.
    Unauthorized,
    /// A valid token without the right.
    Forbidden(String),
    /// No such query, table or route.
    NotFound(String),
    /// A token over its `max_concurrent` or `rate`, or a cap reached.
    TooManyRequests {
        /// Which limit, for the client.
        message: String,
        /// Seconds to wait before retrying.
        retry_after: u64,
    },
    /// A bad input record (or a row the database refused) in an upload.
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
    /// The pool or the database is unavailable: retry shortly.
    Unavailable(String),
    /// The database gave up the work for a reason that a retry of the same
    /// request may not meet ([`is_transient`]).
    Transient {
        /// The database's words.
        message: String,
        /// Its SQLSTATE.
        sqlstate: Option<String>,
    },
    /// The request ran out of time before its answer began.
    Timeout(String),
    /// A database error.
    Database {
        /// The error.
        error: Error,
        /// True for ad-hoc SQL, whose syntax errors are the client's.
        ad_hoc: bool,
    },
    /// A failure of the server; the message is logged, the client sees a
    /// generic one.
    Internal(String),
}

/// What a failure means to the client: each front end has one status for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The request (a parameter, a value, the SQL) is at fault.
    Invalid,
    /// No valid credential.
    Unauthenticated,
    /// A credential without the right.
    Forbidden,
    /// Nothing by that name.
    NotFound,
    /// A limit reached: retry later.
    Exhausted,
    /// The database or the server cannot take the work now: retry shortly.
    Unavailable,
    /// Out of time.
    TimedOut,
    /// The server's fault.
    Internal,
}

impl From<ParamFault> for GatewayError {
    fn from(fault: ParamFault) -> GatewayError {
        match fault.parameter {
            Some(parameter) => GatewayError::parameter(&parameter, fault.message),
            None => GatewayError::bad_request(fault.message),
        }
    }
}

impl GatewayError {
    /// A bad request naming `parameter`.
    pub fn parameter(parameter: &str, message: impl Into<String>) -> GatewayError {
        GatewayError::BadRequest {
            message: format!("parameter {parameter:?}: {}", message.into()),
            parameter: Some(parameter.to_owned()),
        }
    }

    /// A bad request.
    pub fn bad_request(message: impl Into<String>) -> GatewayError {
        GatewayError::BadRequest {
            message: message.into(),
            parameter: None,
        }
    }

    /// The error that stopped a query from starting.
    pub fn from_start(error: StartError, ad_hoc: bool) -> GatewayError {
        match error {
            StartError::Busy => {
                GatewayError::Unavailable("all database connections are busy; retry shortly".into())
            }
            StartError::Unavailable(error) => {
                tracing::warn!(%error, "database unavailable");
                GatewayError::Unavailable("the database is unavailable; retry shortly".into())
            }
            StartError::Query(error) => GatewayError::from_query(error, ad_hoc),
            // A configuration problem, not the client's: the log says which.
            StartError::Refused(refusal) => {
                GatewayError::Internal(format!("ad-hoc SQL refused: {refusal}"))
            }
        }
    }

    /// A query error before the answer began.
    pub fn from_query(error: Error, ad_hoc: bool) -> GatewayError {
        match error.kind() {
            ErrorKind::Database => GatewayError::Database { error, ad_hoc },
            // A parameter count the SQL does not match, a write refused by SQLite.
            ErrorKind::Config if ad_hoc => GatewayError::bad_request(error.to_string()),
            ErrorKind::Connect | ErrorKind::Closed | ErrorKind::Authentication => {
                tracing::warn!(%error, "database unavailable");
                GatewayError::Unavailable("the database is unavailable; retry shortly".into())
            }
            _ => GatewayError::Internal(error.to_string()),
        }
    }

    /// What this failure means to the client.
    pub fn class(&self) -> Class {
        match self {
            GatewayError::BadRequest { .. } | GatewayError::Unprocessable { .. } => Class::Invalid,
            GatewayError::Unauthorized => Class::Unauthenticated,
            GatewayError::Forbidden(_) => Class::Forbidden,
            GatewayError::NotFound(_) => Class::NotFound,
            GatewayError::TooManyRequests { .. } => Class::Exhausted,
            GatewayError::Unavailable(_) | GatewayError::Transient { .. } => Class::Unavailable,
            GatewayError::Timeout(_) => Class::TimedOut,
            GatewayError::Database { error, ad_hoc } => database_class(error, *ad_hoc),
            GatewayError::Internal(_) => Class::Internal,
        }
    }

    /// The message of the failures whose message is all there is to say, to
    /// the log and to the client alike.
    fn plain_message(&self) -> Option<&str> {
        match self {
            GatewayError::BadRequest { message, .. }
            | GatewayError::Forbidden(message)
            | GatewayError::NotFound(message)
            | GatewayError::TooManyRequests { message, .. }
            | GatewayError::Unavailable(message)
            | GatewayError::Transient { message, .. }
            | GatewayError::Timeout(message) => Some(message),
            _ => None,
        }
    }

    /// What the client is told: the log's story without what only the server's
    /// operator should read (a server-side database error's text, an internal
    /// failure's cause), which is logged here instead.
    pub fn client_message(&self) -> String {
        match self {
            GatewayError::Unprocessable { message, .. } => message.clone(),
            GatewayError::Transient { message, .. } => {
                format!("{message}; nothing was committed: retry the request")
            }
            GatewayError::Unauthorized => "a valid bearer token is required".into(),
            GatewayError::Database { error, .. } => {
                if matches!(
                    self.class(),
                    Class::Internal | Class::Unavailable | Class::Exhausted
                ) {
                    tracing::error!(%error, "query failed");
                    "the query failed on the database".into()
                } else {
                    error.as_db_error().map_or_else(
                        || error.to_string(),
                        |db| match db.position {
                            // Where in the client's own SQL the database points.
                            Some(position) => format!("{} (at character {position})", db.message),
                            None => db.message.clone(),
                        },
                    )
                }
            }
            GatewayError::Internal(message) => {
                tracing::error!(error = %message, "internal error");
                "internal error".into()
            }
            plain => plain.plain_message().unwrap_or_default().to_owned(),
        }
    }
}

impl std::fmt::Display for GatewayError {
    /// The full story for the log (what the client is told may say less).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GatewayError::Internal(message) => f.write_str(message),
            GatewayError::Unprocessable {
                message,
                line: Some(line),
                ..
            } => write!(f, "line {line}: {message}"),
            GatewayError::Unprocessable { message, .. } => f.write_str(message),
            GatewayError::Unauthorized => f.write_str("no valid bearer token"),
            GatewayError::Database { error, .. } => write!(f, "{error}"),
            plain => f.write_str(plain.plain_message().unwrap_or_default()),
        }
    }
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

/// What a database error means to the client, by what it means to the database.
fn database_class(error: &Error, ad_hoc: bool) -> Class {
    match cause(error) {
        // What the request asked for: a value its type rejects, a division
        // by zero, a key that exists.
        DbCause::Data | DbCause::DuplicateKey | DbCause::Integrity => Class::Invalid,
        // The client's in ad-hoc SQL; a broken named query otherwise.
        DbCause::Statement | DbCause::TransactionState | DbCause::ReadOnly if ad_hoc => {
            Class::Invalid
        }
        // A named query that writes, run by a token without scope `write`.
        DbCause::ReadOnly => Class::Forbidden,
        DbCause::StatementTimeout => Class::TimedOut,
        // Plan again: the snapshot the part was to read is gone.
        DbCause::Unavailable | DbCause::LostRace | DbCause::SnapshotGone => Class::Unavailable,
        DbCause::Statement | DbCause::TransactionState | DbCause::Other => Class::Internal,
    }
}
