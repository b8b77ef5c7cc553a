//! What the flags of `sluice copy` ask for, checked ([`Plan`]): made once
//! from the arguments, then read by the single copy and the parts alike.

use sluice_core::load::{ImportOptions, TableSetup};

/// What the flags ask for, checked.
pub(super) struct Plan {
    /// The source's table, when the source is one (not a query).
    pub(super) source_table: Option<String>,
    pub(super) target_table: String,
    pub(super) options: ImportOptions,
    pub(super) setup: TableSetup,
    /// Parts copied at once.
    pub(super) jobs: usize,
    pub(super) split_by: Option<String>,
    /// Values go in the source's own binary form, unread ([`super::wants_native`]).
    pub(super) native: bool,
}
