//! Statements a session keeps prepared, so that the gateway's named queries
//! run in one round trip (Bind, Execute, Sync) instead of two (Parse and
//! Describe first), as drivers with a statement cache do.
//!
//! An entry holds what `Describe` said (parameter count, result columns) as
//! the finished result [`Schema`] (the columns' types looked up in the catalog
//! once), so a cached statement needs nothing from the server before it binds,
//! and nothing rebuilt per execution. Names are never reused (a counter),
//! so a statement left prepared by a failed exchange cannot collide with a
//! later one. The cache stops growing at [`MAX_STATEMENTS`]: the gateway's
//! statements are its configured queries, so the cap is a guard, not an
//! eviction policy. A change of a table under a cached statement that alters
//! its result columns makes the server refuse the next execution (SQLSTATE
//! 0A000); a failed query's session is discarded, and the statement is
//! prepared afresh on the next one.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_core::Schema;

use crate::types::Oid;

/// The most statements one session keeps.
pub(crate) const MAX_STATEMENTS: usize = 256;

/// A statement prepared on the session.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// Its name on the server.
    pub(crate) name: String,
    /// How many parameters it takes.
    pub(crate) parameters: usize,
    /// Its result columns' type OIDs.
    pub(crate) oids: Arc<[Oid]>,
    /// Its result columns, their types resolved.
    pub(crate) schema: Arc<Schema>,
}

/// The statements of one session, by SQL text.
#[derive(Debug, Default)]
pub(crate) struct Statements {
    by_sql: HashMap<String, Arc<Prepared>>,
    next: u64,
}

impl Statements {
    /// The statement prepared for `sql`, if any.
    pub(crate) fn get(&self, sql: &str) -> Option<Arc<Prepared>> {
        self.by_sql.get(sql).cloned()
    }

    /// A name for a statement about to be prepared for the cache; `None`
    /// when the cache is full (the unnamed statement is used then).
    pub(crate) fn next_name(&mut self) -> Option<String> {
        if self.by_sql.len() >= MAX_STATEMENTS {
            return None;
        }
        self.next += 1;
        Some(format!("sluice_{}", self.next))
    }

    /// Keeps `prepared` for `sql`.
    pub(crate) fn insert(&mut self, sql: &str, prepared: Prepared) {
        self.by_sql.insert(sql.to_owned(), Arc::new(prepared));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_never_reused_and_the_cache_stops_at_its_cap() {
        let mut statements = Statements::default();
        let first = statements.next_name().unwrap();
        let second = statements.next_name().unwrap();
        assert_ne!(first, second);
        for index in 0..MAX_STATEMENTS {
            let name = statements.next_name().unwrap();
            statements.insert(
                &format!("select {index}"),
                Prepared {
                    name,
                    parameters: 0,
                    oids: Arc::from([]),
                    schema: Arc::new(Schema { columns: vec![] }),
                },
            );
        }
        assert!(statements.next_name().is_none());
        assert_eq!(statements.get("select 3").unwrap().parameters, 0);
        assert!(statements.get("select -1").is_none());
    }
}
