//! # sluice-drivers
//!
//! The registry of every database sluice speaks. Front ends (the CLI's
//! commands, `sluice serve`'s configuration) open a database by its URL through
//! [`all`], so none of them names a database crate: adding a database is its
//! crate, with a `sluice_core::connect::Driver`, and one line here.
//!
//! A target is what users write: a URL, or another form a driver claims
//! (PostgreSQL's libpq `key=value` strings; SQLite's bare file path, by a
//! SQLite file name extension or, for an existing file, by its header). The
//! drivers are asked in order and the first that claims a target opens it, so
//! forms that could be read two ways go to the earlier driver.
//!
//! [`demo`] is here for the same reason: `sluice serve --demo` makes its
//! database (a SQLite file of generated rows) without naming SQLite.
#![warn(missing_docs)]

use sluice_core::connect::Drivers;
use sluice_mariadb::MariaDbDriver;
use sluice_postgres::PostgresDriver;
use sluice_sqlite::SqliteDriver;

/// The demo's database: a SQLite file of generated payment events, made on
/// first start ([`demo::ensure`]) and then served through the SQLite driver
/// like any other file.
pub use sluice_sqlite::demo;

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

    #[test]
    fn a_path_is_opened_by_the_driver_that_claims_it() {
        let drivers = super::all();
        for path in ["/var/lib/app.db", "relative/app.sqlite3"] {
            assert_eq!(drivers.open(path).unwrap().product(), "SQLite", "{path}");
        }
        // libpq's key=value form is PostgreSQL's even where it looks like a file.
        let settings = drivers.open("host=h dbname=app.db").unwrap();
        assert_eq!(settings.product(), "PostgreSQL");
        let error = drivers.open("no/such/file").unwrap_err();
        assert!(error.to_string().contains("sqlite:///"), "{error}");
    }
}
