//! # sluice-drivers
//!
//! The registry of every database sluice speaks. Front ends (the CLI's
//! commands, `sluice serve`'s configuration) open a database by its URL through
//! [`all`], so none of them names a database crate: adding a database is its
//! crate, with a `sluice_core::connect::Driver`, and one line here.
#![warn(missing_docs)]

use sluice_core::connect::Drivers;
use sluice_postgres::PostgresDriver;
use sluice_sqlite::SqliteDriver;

/// Every database driver, in the order URLs are matched against them.
pub fn all() -> Drivers {
    Drivers::new().with(PostgresDriver).with(SqliteDriver)
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_url_finds_its_database() {
        let drivers = super::all();
        let postgres = drivers.open("postgres://u@h/db").unwrap();
        assert_eq!(postgres.product(), "PostgreSQL");
        let sqlite = drivers.open("sqlite:///tmp/x.db").unwrap();
        assert_eq!(sqlite.product(), "SQLite");
        assert!(drivers.open("oracle://h/db").is_err());
    }
}
