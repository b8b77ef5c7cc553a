//! # sluice-drivers
//!
//! The registry of every database sluice speaks. Front ends (the CLI's
//! commands, `sluice serve`'s configuration) open a database by its URL through
//! [`all`], so none of them names a database crate: adding a database is its
//! crate, with a `sluice_core::connect::Driver`, and one line here.
#![warn(missing_docs)]

use sluice_core::connect::Drivers;
use sluice_mariadb::MariaDbDriver;
use sluice_postgres::PostgresDriver;
use sluice_sqlite::SqliteDriver;

/// Every database driver, in the order URLs are matched against them.
pub fn all() -> Drivers {
    Drivers::new()
        .with(PostgresDriver)
        .with(MariaDbDriver)
        .with(SqliteDriver)
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_url_finds_its_database() {
        let drivers = super::all();
        let postgres = drivers.open("postgres://u@h/db").unwrap();
        assert_eq!(postgres.product(), "PostgreSQL");
        for url in ["mariadb://u@h/db", "mysql://u@h/db", "MARIADB://u@h/db"] {
            assert_eq!(
                drivers.open(url).unwrap().product(),
                if url.starts_with("mysql") {
                    "MySQL"
                } else {
                    "MariaDB"
                }
            );
        }
        let sqlite = drivers.open("sqlite:///tmp/x.db").unwrap();
        assert_eq!(sqlite.product(), "SQLite");
        assert!(drivers.open("oracle://h/db").is_err());
    }
}
