//! [`InputFault`]: a setting given for the other input format, carried as an
//! error's source so that each front end words it in its own terms (a flag, a
//! query parameter). Both decoders' setup and the CSV decoder raise it.

use std::fmt;

use sluice_core::Error;

/// A setting given for the other input format. The error (of kind
/// [`ErrorKind::Config`](sluice_core::ErrorKind::Config)) carries it as its source;
/// [`InputFault::of`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFault {
    /// A header setting for NDJSON, which has no header line.
    HeaderForNdjson,
    /// Skipping unknown keys for CSV, whose columns are named, not keyed.
    IgnoreUnknownForCsv,
    /// A CSV header names a column the table does not have: often a file
    /// without a header, whose first record was read as one.
    UnknownHeaderColumn,
}

impl InputFault {
    /// The fault behind an error, when a setting for the other format caused it.
    pub fn of(error: &Error) -> Option<&InputFault> {
        std::error::Error::source(error)?.downcast_ref::<InputFault>()
    }
}

impl fmt::Display for InputFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InputFault::HeaderForNdjson => {
                "a header setting goes with CSV: NDJSON has no header line"
            }
            InputFault::IgnoreUnknownForCsv => "skipping unknown keys goes with NDJSON input",
            InputFault::UnknownHeaderColumn => {
                "the CSV header names a column the table does not have"
            }
        })
    }
}

impl std::error::Error for InputFault {}
