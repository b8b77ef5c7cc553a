//! What SQLite is to the rest of sluice: its [`Dialect`], how it reads and
//! quotes names.

use sluice_core::connect::{Dialect, Family};

/// SQLite, the one place this crate says which database it is.
pub(crate) const SQLITE: Dialect = Dialect::new("SQLite", Family::new("SQLite"));
