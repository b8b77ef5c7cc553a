//! [`PostgresDriver`]: PostgreSQL for front ends that open databases by URL
//! ([`sluice_core::connect`]). It recognises `postgres://` and `postgresql://`
//! URLs and libpq's `key=value` strings, parses them with the `PG*` environment
//! defaults ([`Config`]), and opens sessions whose operations are this crate's:
//! [`crate::QueryStream`] for exports, [`import`](mod@crate::import) for loads, [`crate::Pipeline`] for calls
//! (the session itself is in the crate's `session` module).

use std::sync::Arc;

use sluice_core::connect::{Dialect, Driver, PoolOptions, Session, Target};
use sluice_core::database::{BoxFuture, Database};
use sluice_core::{Error, Meter};

use crate::dialect::POSTGRESQL;
use crate::gateway::PostgresDatabase;
use crate::session::PostgresSession;
use crate::{Config, Connection};

/// PostgreSQL's [`Driver`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PostgresDriver;

impl Driver for PostgresDriver {
    fn dialect(&self) -> Dialect {
        POSTGRESQL
    }

    fn placeholders(&self) -> &'static str {
        "`$1`, `$2`, …"
    }

    fn url_forms(&self) -> &'static [&'static str] {
        &["postgres://", "postgresql://", "libpq key=value strings"]
    }

    fn recognizes(&self, target: &str) -> bool {
        let lower = target.trim_start().to_ascii_lowercase();
        lower.starts_with("postgres://")
            || lower.starts_with("postgresql://")
            // libpq's key=value form: settings without a URL scheme; an empty
            // string is libpq's too: everything from the PG* variables.
            || (!lower.contains("://") && (lower.contains('=') || lower.trim().is_empty()))
    }

    fn target(&self, target: &str) -> Result<Arc<dyn Target>, Error> {
        let config: Config = target.parse()?;
        Ok(Arc::new(PostgresTarget {
            config: Arc::new(config),
        }))
    }
}

/// A parsed PostgreSQL connection target.
#[derive(Debug)]
struct PostgresTarget {
    config: Arc<Config>,
}

impl Target for PostgresTarget {
    fn dialect(&self) -> Dialect {
        POSTGRESQL
    }

    fn has_large_objects(&self) -> bool {
        true
    }

    fn splits_reads(&self) -> bool {
        true
    }

    fn connect<'a>(&'a self, meter: &'a Meter) -> BoxFuture<'a, Result<Box<dyn Session>, Error>> {
        Box::pin(async move {
            let connection = Connection::connect(&self.config, meter).await?;
            let session: Box<dyn Session> =
                Box::new(PostgresSession::direct(connection, self.config.clone()));
            Ok(session)
        })
    }

    fn gateway(&self, options: PoolOptions) -> Arc<dyn Database> {
        Arc::new(PostgresDatabase::new((*self.config).clone(), options))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_urls_and_key_value_strings_but_not_other_schemes() {
        let driver = PostgresDriver;
        assert!(driver.recognizes("postgres://u@h/db"));
        assert!(driver.recognizes("PostgreSQL://u@h/db"));
        assert!(driver.recognizes("host=h dbname=db"));
        assert!(driver.recognizes(""));
        assert!(!driver.recognizes("mysql://u@h/db"));
        assert!(!driver.recognizes("sqlite:///tmp/x.db"));
        assert!(!driver.recognizes("/tmp/x.db"));
    }
}
