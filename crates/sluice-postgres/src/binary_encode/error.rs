//! [`EncodeError`]: why a value has no binary form, worded and coded as the
//! server's input functions would for the same text, and the SQLSTATEs they
//! use; every encoder of the module, the interval reader's included, fails
//! with it.

use std::fmt;

/// Why one value has no binary form: the message and SQLSTATE are the ones
/// the server gives for the same text (`22P02`, `invalid input syntax for
/// type integer: "12x"`), so a load reports it as it would over text COPY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError {
    code: &'static str,
    reason: String,
}

/// SQLSTATEs of the errors below, as the server's input functions raise them.
pub(super) const INVALID_TEXT_REPRESENTATION: &str = "22P02";
pub(super) const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
pub(super) const DATETIME_FIELD_OVERFLOW: &str = "22008";
pub(super) const INVALID_DATETIME_FORMAT: &str = "22007";
pub(super) const INVALID_TIME_ZONE_DISPLACEMENT: &str = "22009";
pub(super) const INVALID_PARAMETER_VALUE: &str = "22023";
pub(super) const INVALID_BINARY_REPRESENTATION: &str = "22P03";
pub(super) const PROGRAM_LIMIT_EXCEEDED: &str = "54000";

impl EncodeError {
    pub(super) fn new(code: &'static str, reason: impl Into<String>) -> EncodeError {
        EncodeError {
            code,
            reason: reason.into(),
        }
    }

    pub(super) fn syntax(type_label: &str, value: &[u8]) -> EncodeError {
        let code = if type_label.starts_with("date") || type_label.starts_with("time") {
            INVALID_DATETIME_FORMAT
        } else {
            INVALID_TEXT_REPRESENTATION
        };
        let reason = format!(
            "invalid input syntax for type {type_label}: {}",
            quoted(value)
        );
        EncodeError::new(code, reason)
    }

    pub(super) fn range(type_label: &str, value: &[u8]) -> EncodeError {
        let reason = format!(
            "value {} is out of range for type {type_label}",
            quoted(value)
        );
        EncodeError::new(NUMERIC_VALUE_OUT_OF_RANGE, reason)
    }

    pub(super) fn field_range(value: &[u8]) -> EncodeError {
        let reason = format!("date/time field value out of range: {}", quoted(value));
        EncodeError::new(DATETIME_FIELD_OVERFLOW, reason)
    }

    /// What is wrong with the value.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The SQLSTATE the server gives the same fault.
    pub fn code(&self) -> &'static str {
        self.code
    }
}

impl fmt::Display for EncodeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.reason)
    }
}

impl std::error::Error for EncodeError {}

/// A value for a message: quoted, cut short when long.
pub(super) fn quoted(value: &[u8]) -> String {
    const SHOWN: usize = 64;
    let text = String::from_utf8_lossy(&value[..value.len().min(SHOWN)]);
    let more = if value.len() > SHOWN { "…" } else { "" };
    format!("\"{text}{more}\"")
}
