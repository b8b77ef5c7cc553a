//! The gateway's pool of PostgreSQL connections: how it opens and checks
//! one ([`PostgresConnector`]) and the slot a request takes ([`PooledSlot`]),
//! which a pooled session gives back when it closes.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::pool::{Connector, Taken};
use sluice_core::{Error, Meter};

use crate::{Config, Connection};

/// Opens and checks the pool's sessions.
#[derive(Debug)]
pub(crate) struct PostgresConnector {
    pub(crate) config: Arc<Config>,
}

impl Connector for PostgresConnector {
    type Connection = Connection;
    type Settings = Settings;

    async fn connect(&self) -> Result<Connection, Error> {
        Connection::connect(&self.config, &Meter::new()).await
    }

    fn check_idle(connection: &mut Connection) -> Result<(), Error> {
        connection.check_idle()
    }
}

/// A pool slot taken for one request.
pub(crate) type PooledSlot = Taken<PostgresConnector>;

/// The session settings a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    /// `statement_timeout` (`None`: none).
    pub(crate) statement_timeout: Option<Duration>,
    /// `default_transaction_read_only = on`; false is the server's default for the
    /// login (RESET), not a forced `off`.
    pub(crate) read_only: bool,
}

impl Settings {
    /// The SQL that takes a session from `current` to these settings; empty when
    /// nothing changes.
    pub(crate) fn sql_from(self, current: Option<Settings>) -> String {
        let mut statements = Vec::new();
        if current.map(|current| current.statement_timeout) != Some(self.statement_timeout) {
            statements.push(format!(
                "SET statement_timeout = {}",
                milliseconds(self.statement_timeout)
            ));
        }
        if current.map(|current| current.read_only) != Some(self.read_only) {
            statements.push(if self.read_only {
                "SET default_transaction_read_only = on".to_owned()
            } else {
                "RESET default_transaction_read_only".to_owned()
            });
        }
        statements.join("; ")
    }

    /// Gives `connection` these settings, `current` being what it has (updated).
    pub(crate) async fn apply(
        self,
        connection: &mut Connection,
        current: &mut Option<Settings>,
    ) -> Result<(), Error> {
        let sql = self.sql_from(*current);
        if sql.is_empty() {
            return Ok(());
        }
        // Until it succeeded, the session's settings are unknown.
        *current = None;
        connection.simple_query(&sql).await?;
        *current = Some(self);
        Ok(())
    }
}

/// A timeout in PostgreSQL's milliseconds, 0 for none.
pub(crate) fn milliseconds(timeout: Option<Duration>) -> u128 {
    timeout.map_or(0, |timeout| timeout.as_millis())
}
