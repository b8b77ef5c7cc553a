//! What PostgreSQL is to the rest of sluice: its [`Dialect`] (how it reads
//! and quotes names), and how it is given a parameter's value.

use sluice_core::connect::{Dialect, Family};
use sluice_core::database::Param;

/// PostgreSQL, the one place this crate says which database it is: unquoted
/// names read in lower case, tables named up to `database.schema.table`.
pub(crate) const POSTGRESQL: Dialect = Dialect::new("PostgreSQL", Family::new("PostgreSQL"))
    .folding_unquoted_names()
    .with_table_name_parts(3);

/// The text PostgreSQL converts to the parameter's type (`None` is NULL).
pub fn param_text(param: &Param) -> Option<String> {
    match param {
        // A moment without its offset is UTC: the session's time zone must not
        // change what it means.
        Param::TimestampUtc(text) => Some(format!("{text}+00")),
        other => other.text(),
    }
}
