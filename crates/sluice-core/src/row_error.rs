//! [`RowError`]: why one input record could not become a row, and where it
//! is. Decoders report it, an [`crate::Error`] can carry it, and each front
//! end words it for its users (a line of a file, a row of a request).

use std::fmt;

/// Why one input record could not become a row, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    /// 1-based line of the input where the record starts.
    pub line: u64,
    /// The column at fault, when one is.
    pub column: Option<String>,
    /// What is wrong, in words that name no option of any caller.
    pub reason: String,
    /// What is wrong, for the faults a setting of the caller would avoid: the
    /// command line and the HTTP API each name their own setting.
    pub fault: Option<RowFault>,
}

impl RowError {
    /// A record `reason` refuses, at `line` and optionally `column`, with no [`RowFault`].
    pub fn new(line: u64, column: Option<String>, reason: impl Into<String>) -> RowError {
        RowError {
            line,
            column,
            reason: reason.into(),
            fault: None,
        }
    }
}

/// A record refused for a reason a setting of the import would change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RowFault {
    /// A key names no column of the table; the import could skip unknown keys.
    UnknownColumn,
    /// The column is not among the columns the caller listed to fill.
    NotListed,
    /// The column has a default, and without a list of columns to fill only
    /// those the first record set are filled; listing the column fills it.
    DefaultedNotSet,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.column {
            Some(column) => write!(f, "line {}, column {}: {}", self.line, column, self.reason),
            None => write!(f, "line {}: {}", self.line, self.reason),
        }
    }
}
