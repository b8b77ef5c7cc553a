//! What MariaDB and MySQL are to the rest of sluice: their [`Dialect`]s
//! (one family, backquoted names), which of the two a server is, and how a
//! parameter's value is spelled for them ([`param_text`]).

use sluice_core::connect::{Dialect, Family};
use sluice_core::database::Param;

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

/// The text MariaDB converts to a parameter's type (`None` is NULL): booleans
/// as `1`/`0`, which every numeric column takes (`true` is refused by a
/// strict `INT` column); the rest as [`Param::text`] (moments in UTC are right
/// as they are: the session's time zone is UTC).
pub fn param_text(param: &Param) -> Option<String> {
    match param {
        Param::Bool(value) => Some(u8::from(*value).to_string()),
        other => other.text(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_are_spelled_as_numbers() {
        assert_eq!(param_text(&Param::Bool(true)).as_deref(), Some("1"));
        assert_eq!(param_text(&Param::Bool(false)).as_deref(), Some("0"));
        assert_eq!(param_text(&Param::Null), None);
        assert_eq!(param_text(&Param::Text("a".into())).as_deref(), Some("a"));
    }

    #[test]
    fn parameters_are_spelled_as_mariadb_reads_text() {
        let spelled = |param: Param| param_text(&param);
        assert_eq!(spelled(Param::Bool(true)).as_deref(), Some("1"));
        assert_eq!(spelled(Param::Integer(-42)).as_deref(), Some("-42"));
        assert_eq!(
            spelled(Param::Numeric("12.50".into())).as_deref(),
            Some("12.50")
        );
        // The session's time zone is UTC: a moment in UTC is written as it is.
        assert_eq!(
            spelled(Param::TimestampUtc("2024-03-01 10:00:00.25".into())).as_deref(),
            Some("2024-03-01 10:00:00.25")
        );
        assert_eq!(
            spelled(Param::Date("2024-03-01".into())).as_deref(),
            Some("2024-03-01")
        );
        assert_eq!(
            spelled(Param::Json("{\"a\":1}".into())).as_deref(),
            Some("{\"a\":1}")
        );
        assert_eq!(spelled(Param::Null), None);
    }
}
