//! What MariaDB and MySQL are to the rest of sluice: their [`Dialect`]s
//! (one family, backquoted names), and which of the two a server is.

use sluice_core::connect::{Dialect, Family};

use crate::config::Scheme;

/// The two databases this crate speaks to: one family, as they name types and
/// spell DDL alike.
const FAMILY: Family = Family::new("MariaDB and MySQL");
/// MariaDB.
pub(crate) const MARIADB: Dialect = Dialect::new("MariaDB", FAMILY).with_identifier_quote('`');
/// MySQL.
pub(crate) const MYSQL: Dialect = Dialect::new("MySQL", FAMILY).with_identifier_quote('`');

/// Which of the two a server is, from the version its greeting gives:
/// MariaDB's says so (`10.11.6-MariaDB-0+deb12u1`), MySQL's does not (`8.0.36`).
pub(crate) fn dialect_of_version(version: &str) -> Dialect {
    if version.contains("MariaDB") {
        MARIADB
    } else {
        MYSQL
    }
}

/// Which of the two a URL names (`mariadb://`, `mysql://`), for what is said
/// before a server's greeting can tell.
pub(crate) fn dialect_of_scheme(scheme: Scheme) -> Dialect {
    match scheme {
        Scheme::MariaDb => MARIADB,
        Scheme::MySql => MYSQL,
    }
}
