//! A copy's errors, each told with the side it came from ([`Failure`]): a
//! copy reads one database and writes another, and the message says which
//! one failed.

use sluice_core::Error;

use crate::report::Side;

/// An error and the side it came from (`None`: the copy's own, such as
/// columns that do not match), for the message.
pub struct Failure {
    /// Where.
    pub side: Option<Side>,
    /// What.
    pub error: Error,
}

/// Tags an error with the side it came from, for `map_err`.
pub(super) fn on(side: Side) -> impl Fn(Error) -> Failure {
    move |error| Failure {
        side: Some(side),
        error,
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure { side: None, error }
    }
}
