//! [`Error`]: one opaque error type for every sluice operation.
//!
//! Callers branch on [`Error::kind`] and, for errors the database reported, read the
//! structured [`DbError`] (SQLSTATE, position, detail) through [`Error::as_db_error`].
//! Constructors mirror rust-postgres so call sites read `.map_err(Error::io)`.

use std::fmt;

use crate::RowError;

/// What went wrong, at the level a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The connection settings or command-line input are invalid.
    Config,
    /// The server could not be reached (refused, unresolvable, timed out).
    Connect,
    /// The server refused the credentials or asked for an unsupported method.
    Authentication,
    /// The database reported an error (see [`Error::as_db_error`]).
    Database,
    /// The server sent something the protocol does not allow.
    Protocol,
    /// Reading or writing a socket or file failed.
    Io,
    /// The connection to the database was lost mid-operation.
    Closed,
    /// The output was closed by its reader (a closed pipe or HTTP client).
    OutputClosed,
    /// Input data could not be decoded or converted.
    Data,
    /// The operation was cancelled on request.
    Cancelled,
    /// The database cannot do what was asked (loading a table into a database
    /// served read-only).
    Unsupported,
}

/// What a database error means for the request that met it, read from the
/// database's codes by its driver ([`DbCause::of_sqlstate`] for the SQL
/// standard's classes, plus the database's own codes), so that a front end
/// chooses its answer (an HTTP status, a gRPC code, a retry) without knowing
/// any database's codes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DbCause {
    /// Nothing below: the statement failed for a reason of the server's.
    #[default]
    Other,
    /// The data met or given: a value its type refuses, a division by zero
    /// (SQLSTATE class `22`).
    Data,
    /// A key that exists already (`23505`, MariaDB's 1062).
    DuplicateKey,
    /// Any other constraint: foreign key, not null, check (class `23`).
    Integrity,
    /// The statement itself: its syntax, a name it uses, a privilege it needs
    /// (class `42`).
    Statement,
    /// A write in a read-only transaction (`25006`).
    ReadOnly,
    /// Another invalid transaction state (class `25`).
    TransactionState,
    /// The statement ran past its time limit.
    StatementTimeout,
    /// The work lost a race with other sessions — a deadlock, a serialization
    /// failure, a lock not granted in time — and a retry may succeed.
    LostRace,
    /// The server cannot serve now: its connection, its resources, an
    /// operator (classes `08`, `53`, `57`).
    Unavailable,
    /// The snapshot a part of a split read was to join is no longer held (its
    /// coordinating session ended): the read must be planned again. Set by
    /// the driver that joins the snapshot, which alone knows the statement.
    SnapshotGone,
}

impl DbCause {
    /// The cause the SQL standard's SQLSTATE classes give `code`; a driver
    /// reads its database's own codes first.
    pub fn of_sqlstate(code: &str) -> DbCause {
        match (code, code.get(..2).unwrap_or("")) {
            ("23505", _) => DbCause::DuplicateKey,
            ("25006", _) => DbCause::ReadOnly,
            (_, "22") => DbCause::Data,
            (_, "23") => DbCause::Integrity,
            (_, "42") => DbCause::Statement,
            (_, "25") => DbCause::TransactionState,
            (_, "40") => DbCause::LostRace,
            (_, "08" | "53" | "57") => DbCause::Unavailable,
            _ => DbCause::Other,
        }
    }
}

/// An error the database server reported, with its structured fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DbError {
    /// What it means for the request, as the driver read the codes.
    pub cause: DbCause,
    /// `ERROR`, `FATAL`, …
    pub severity: String,
    /// The five-character SQLSTATE code.
    pub code: String,
    /// The database's own error number, where it has one (MariaDB's `1062` for
    /// a duplicate key); PostgreSQL's errors are named by SQLSTATE alone.
    pub vendor_code: Option<u32>,
    /// The primary message.
    pub message: String,
    /// Optional detail.
    pub detail: Option<String>,
    /// Optional hint.
    pub hint: Option<String>,
    /// 1-based character position in the query text, when the error points into it.
    pub position: Option<u32>,
    /// Where the error happened (e.g. `COPY t, line 3, column a: "x"`).
    pub where_: Option<String>,
    /// The constraint violated, if any.
    pub constraint: Option<String>,
    /// The column concerned, if any.
    pub column: Option<String>,
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.severity, self.code)?;
        if let Some(vendor_code) = self.vendor_code {
            write!(f, " ({vendor_code})")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(position) = self.position {
            write!(f, " (at character {position})")?;
        }
        if let Some(detail) = &self.detail {
            write!(f, "; detail: {detail}")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "; hint: {hint}")?;
        }
        Ok(())
    }
}

/// The error type of every sluice crate.
pub struct Error {
    kind: ErrorKind,
    message: String,
    db: Option<Box<DbError>>,
    row: Option<Box<RowError>>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Error {
    /// An error of `kind` described by `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            db: None,
            row: None,
            source: None,
        }
    }

    /// Adds the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Error {
        self.source = Some(Box::new(source));
        self
    }

    /// An I/O failure; a peer that went away becomes [`ErrorKind::Closed`].
    pub fn io(error: std::io::Error) -> Error {
        use std::io::ErrorKind as Io;
        let kind = match error.kind() {
            Io::UnexpectedEof | Io::ConnectionReset | Io::ConnectionAborted | Io::BrokenPipe => {
                ErrorKind::Closed
            }
            _ => ErrorKind::Io,
        };
        let message = match kind {
            ErrorKind::Closed => format!("connection to the database was lost: {error}"),
            _ => error.to_string(),
        };
        Error::new(kind, message).with_source(error)
    }

    /// A failure writing the output; a reader that went away becomes [`ErrorKind::OutputClosed`].
    pub fn output(error: std::io::Error) -> Error {
        let kind = match error.kind() {
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                ErrorKind::OutputClosed
            }
            _ => ErrorKind::Io,
        };
        Error::new(kind, format!("writing the output failed: {error}")).with_source(error)
    }

    /// An error reported by the database.
    pub fn db(error: DbError) -> Error {
        Error {
            kind: ErrorKind::Database,
            message: error.to_string(),
            db: Some(Box::new(error)),
            row: None,
            source: None,
        }
    }

    /// A protocol violation by the server.
    pub fn protocol(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Protocol, message)
    }

    /// Invalid settings or input from the user.
    pub fn config(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Config, message)
    }

    /// The same error filed under another kind, keeping its message and database
    /// fields: a database error while logging in is a connection failure to the
    /// caller, not a statement failure.
    pub fn with_kind(mut self, kind: ErrorKind) -> Error {
        self.kind = kind;
        self
    }

    /// Ties the error to one input record: the message becomes the record's
    /// position and reason (`line 7, column amount: …`); the kind stays, so a
    /// constraint violation is still a database error with its SQLSTATE.
    pub fn at_row(mut self, row: RowError) -> Error {
        self.message = row.to_string();
        self.row = Some(Box::new(row));
        self
    }

    /// A bad input record.
    pub fn bad_row(row: RowError) -> Error {
        Error::new(ErrorKind::Data, String::new()).at_row(row)
    }

    /// The input record at fault, for import errors that have one.
    pub fn as_row_error(&self) -> Option<&RowError> {
        self.row.as_deref()
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The same error, for a statement that was run inside `wrapper_chars`
    /// characters of SQL the user did not write: the position the database
    /// gives is made to count from the start of the user's text, and dropped
    /// when it points into the wrapper.
    pub fn unwrapped_position(mut self, wrapper_chars: u32) -> Error {
        if let Some(db) = self.db.as_deref_mut() {
            let said = self.message == db.to_string();
            db.position = db
                .position
                .and_then(|position| position.checked_sub(wrapper_chars))
                .filter(|&position| position > 0);
            if said {
                self.message = db.to_string();
            }
        }
        self
    }

    /// The same error, its database error filed under `cause`: for a driver
    /// that knows more of what a code means where it ran the statement than
    /// the code alone says.
    pub fn with_db_cause(mut self, cause: DbCause) -> Error {
        if let Some(db) = self.db.as_deref_mut() {
            db.cause = cause;
        }
        self
    }

    /// The database's structured error, when the database reported it.
    pub fn as_db_error(&self) -> Option<&DbError> {
        self.db.as_deref()
    }

    /// The SQLSTATE code, when the database reported the error.
    pub fn code(&self) -> Option<&str> {
        self.db.as_deref().map(|db| db.code.as_str())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .field("db", &self.db)
            .field("row", &self.row)
            .field("source", &self.source)
            .finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

/// Why a session gave its connection up: nothing moved on it, either way, for
/// `after` while the session waited on the server (its wait timeout, see
/// [`crate::connect::Session::set_wait_timeout`]). It rides on an
/// [`ErrorKind::Closed`] error, so a front end can name its own setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stalled {
    /// How long nothing moved.
    pub after: std::time::Duration,
}

impl Stalled {
    /// The stall behind an error, if that is why it failed.
    pub fn of(error: &Error) -> Option<&Stalled> {
        std::error::Error::source(error)?.downcast_ref::<Stalled>()
    }

    /// The error a session fails with, naming the server at `target`.
    pub fn into_error(self, target: &dyn fmt::Display) -> Error {
        Error::new(
            ErrorKind::Closed,
            format!("the database server at {target} stopped answering: {self}"),
        )
        .with_source(self)
    }
}

impl fmt::Display for Stalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nothing was received or sent for {}, so the connection was given up",
            humantime::format_duration(self.after)
        )
    }
}

impl std::error::Error for Stalled {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_s_classes_say_what_an_error_means() {
        for (code, cause) in [
            ("22012", DbCause::Data),
            ("23505", DbCause::DuplicateKey),
            ("23503", DbCause::Integrity),
            ("42P01", DbCause::Statement),
            ("25006", DbCause::ReadOnly),
            ("25P02", DbCause::TransactionState),
            ("40001", DbCause::LostRace),
            ("40P01", DbCause::LostRace),
            ("08006", DbCause::Unavailable),
            ("53300", DbCause::Unavailable),
            ("XX000", DbCause::Other),
            ("", DbCause::Other),
        ] {
            assert_eq!(DbCause::of_sqlstate(code), cause, "{code}");
        }
    }

    #[test]
    fn a_wrapped_statement_s_position_counts_from_the_user_s_text() {
        let error = |position| {
            Error::db(DbError {
                severity: "ERROR".into(),
                code: "42601".into(),
                message: "syntax error at or near \"form\"".into(),
                position,
                ..DbError::default()
            })
        };
        let moved = error(Some(24)).unwrapped_position(15);
        assert_eq!(moved.as_db_error().unwrap().position, Some(9));
        assert!(moved.to_string().ends_with("(at character 9)"), "{moved}");
        let inside = error(Some(3)).unwrapped_position(15);
        assert_eq!(inside.as_db_error().unwrap().position, None);
        assert!(!inside.to_string().contains("character"), "{inside}");
        let plain = Error::config("x").unwrapped_position(15);
        assert_eq!(plain.to_string(), "x");
    }
}
