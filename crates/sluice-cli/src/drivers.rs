//! The databases this binary speaks: the one place the CLI names database
//! crates. Every command opens its `--db` through this registry, so adding a
//! database is a crate with a `Driver` plus one line here.

use sluice_core::connect::Drivers;
use sluice_postgres::PostgresDriver;
use sluice_sqlite::SqliteDriver;

/// Every database driver, in the order URLs are matched against them.
pub fn drivers() -> Drivers {
    Drivers::new().with(PostgresDriver).with(SqliteDriver)
}
