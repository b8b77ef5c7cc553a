//! [`MariaDbDriver`]: MariaDB and MySQL for front ends that open databases by
//! URL ([`sluice_core::connect`]). It recognises `mariadb://` and `mysql://`
//! URLs, parses them with the MySQL clients' environment defaults
//! ([`Config`]), and opens sessions whose exports are
//! [`QueryStream`](crate::QueryStream)s (the session itself is in the
//! crate's `session` module).

use std::sync::Arc;

use sluice_core::connect::{Dialect, Driver, PoolOptions, Session, Target};
use sluice_core::database::{BoxFuture, Database};
use sluice_core::{Error, Meter};

use crate::dialect::{dialect_of_scheme, MARIADB};
use crate::gateway::MariaDbDatabase;
use crate::session::MariaDbSession;
use crate::{Config, Connection};

/// MariaDB's and MySQL's [`Driver`].
#[derive(Debug, Clone, Copy, Default)]
pub struct MariaDbDriver;

impl Driver for MariaDbDriver {
    fn dialect(&self) -> Dialect {
        MARIADB
    }

    fn placeholders(&self) -> &'static str {
        "`?`"
    }

    fn url_forms(&self) -> &'static [&'static str] {
        &["mariadb://", "mysql://"]
    }

    fn recognizes(&self, target: &str) -> bool {
        let lower = target.trim_start().to_ascii_lowercase();
        lower.starts_with("mariadb://") || lower.starts_with("mysql://")
    }

    fn target(&self, target: &str) -> Result<Arc<dyn Target>, Error> {
        let config: Config = target.parse()?;
        Ok(Arc::new(MariaDbTarget {
            config: Arc::new(config),
        }))
    }
}

/// A parsed MariaDB or MySQL connection target.
#[derive(Debug)]
struct MariaDbTarget {
    config: Arc<Config>,
}

impl Target for MariaDbTarget {
    fn dialect(&self) -> Dialect {
        dialect_of_scheme(self.config.scheme)
    }

    fn connect<'a>(&'a self, meter: &'a Meter) -> BoxFuture<'a, Result<Box<dyn Session>, Error>> {
        Box::pin(async move {
            let connection = Connection::connect(&self.config, meter).await?;
            let session: Box<dyn Session> =
                Box::new(MariaDbSession::direct(connection, self.config.clone()));
            Ok(session)
        })
    }

    fn gateway(&self, options: PoolOptions) -> Arc<dyn Database> {
        Arc::new(MariaDbDatabase::new((*self.config).clone(), options))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Scheme;
    use crate::dialect::{dialect_of_version, MYSQL};

    #[test]
    fn the_version_says_mariadb_and_anything_else_is_mysql() {
        assert_eq!(dialect_of_version("10.11.6-MariaDB-0+deb12u1"), MARIADB);
        assert_eq!(dialect_of_version("11.4.2-MariaDB"), MARIADB);
        assert_eq!(dialect_of_version("8.0.36"), MYSQL);
        assert_eq!(dialect_of_version("8.4.0-0ubuntu0.24.04.1"), MYSQL);
    }

    #[test]
    fn the_scheme_names_the_dialect_until_the_server_says() {
        assert_eq!(dialect_of_scheme(Scheme::MariaDb).to_string(), "MariaDB");
        assert_eq!(dialect_of_scheme(Scheme::MySql).to_string(), "MySQL");
        let target = MariaDbDriver.target("mysql://root@localhost/test").unwrap();
        assert_eq!(target.product(), "MySQL");
    }
}
