//! The gateway's pool of MariaDB and MySQL sessions: how it opens and
//! checks one ([`MariaDbConnector`]), the slot a request takes
//! ([`PooledSlot`]), which a pooled session gives back when it closes, and
//! the settings a slot's session was given ([`Settings`]).
//!
//! # Settings of named queries
//!
//! A pooled session remembers the settings it was given, and a request sends
//! a `SET` only for what differs, queued to travel with the query (no round
//! trip of its own):
//!
//! - the statement timeout: MariaDB's `max_statement_time` (seconds; any
//!   statement; error 1969, SQLSTATE `70100`), MySQL's `max_execution_time`
//!   (milliseconds), which MySQL applies to read-only `SELECT`s only: other
//!   statements run unbounded there;
//! - read-only requests: `SET SESSION TRANSACTION READ ONLY` (a write fails
//!   with error 1792, SQLSTATE `25006`, as it does on PostgreSQL; so does
//!   DDL, which a read-only *transaction* alone would let through by
//!   committing it implicitly), and `READ WRITE` back.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::pool::{Connector, Taken};
use sluice_core::{Error, Meter};

use crate::{Config, Connection};

pub(crate) const READ_ONLY: &str = "SET SESSION TRANSACTION READ ONLY";
const READ_WRITE: &str = "SET SESSION TRANSACTION READ WRITE";

/// Opens and checks the pool's sessions.
#[derive(Debug)]
pub(crate) struct MariaDbConnector {
    pub(crate) config: Arc<Config>,
}

impl Connector for MariaDbConnector {
    type Connection = Connection;
    type Settings = Settings;

    async fn connect(&self) -> Result<Connection, Error> {
        Connection::connect(&self.config, &Meter::new()).await
    }

    fn check_idle(connection: &mut Connection) -> Result<(), Error> {
        connection.check_idle()
    }
}

/// The session settings a named query needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    /// The statement timeout (`None`: none).
    pub(crate) statement_timeout: Option<Duration>,
    /// Read-only transactions.
    pub(crate) read_only: bool,
}

impl Settings {
    /// The statements that take a session from `current` to these settings;
    /// none when nothing changes.
    fn statements_from(self, current: Option<Settings>, mariadb: bool) -> Vec<String> {
        let mut statements = Vec::new();
        if current.map(|current| current.statement_timeout) != Some(self.statement_timeout) {
            statements.push(timeout_setting(self.statement_timeout, mariadb));
        }
        if current.map(|current| current.read_only) != Some(self.read_only) {
            let setting = if self.read_only {
                READ_ONLY
            } else {
                READ_WRITE
            };
            statements.push(setting.to_owned());
        }
        statements
    }
}

/// The `SET` of a statement timeout: MariaDB's `max_statement_time` in
/// seconds, MySQL's `max_execution_time` in milliseconds; 0 is none for both,
/// so a timeout is never rounded down to it.
pub(crate) fn timeout_setting(timeout: Option<Duration>, mariadb: bool) -> String {
    match (timeout, mariadb) {
        (None, true) => "SET SESSION max_statement_time = 0".to_owned(),
        (None, false) => "SET SESSION max_execution_time = 0".to_owned(),
        (Some(timeout), true) => {
            let micros = timeout.as_micros().max(1);
            format!(
                "SET SESSION max_statement_time = {}.{:06}",
                micros / 1_000_000,
                micros % 1_000_000
            )
        }
        (Some(timeout), false) => {
            let millis = timeout.as_millis().clamp(1, u128::from(u32::MAX));
            format!("SET SESSION max_execution_time = {millis}")
        }
    }
}

/// A pool slot taken for one request.
pub(crate) type PooledSlot = Taken<MariaDbConnector>;

/// Queues what takes `connection` from its `current` settings to `wanted`, to
/// travel with the next command and be answered before it.
pub(crate) fn queue_settings(
    connection: &mut Connection,
    wanted: Settings,
    current: Option<Settings>,
) {
    let mariadb = connection.server().mariadb;
    for statement in wanted.statements_from(current, mariadb) {
        connection.queue_setting(&statement);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_sent_only_when_they_change() {
        let named = Settings {
            statement_timeout: Some(Duration::from_millis(300)),
            read_only: true,
        };
        assert_eq!(
            named.statements_from(None, true),
            [
                "SET SESSION max_statement_time = 0.300000",
                "SET SESSION TRANSACTION READ ONLY"
            ]
        );
        assert!(named.statements_from(Some(named), true).is_empty());
        let writer = Settings {
            read_only: false,
            ..named
        };
        assert_eq!(
            writer.statements_from(Some(named), true),
            ["SET SESSION TRANSACTION READ WRITE"]
        );
        assert_eq!(
            named.statements_from(Some(writer), false),
            ["SET SESSION TRANSACTION READ ONLY"]
        );
    }

    #[test]
    fn timeouts_are_spelled_per_product_and_never_become_none() {
        assert_eq!(
            timeout_setting(None, true),
            "SET SESSION max_statement_time = 0"
        );
        assert_eq!(
            timeout_setting(Some(Duration::from_secs(90)), true),
            "SET SESSION max_statement_time = 90.000000"
        );
        assert_eq!(
            timeout_setting(Some(Duration::from_nanos(10)), true),
            "SET SESSION max_statement_time = 0.000001"
        );
        assert_eq!(
            timeout_setting(Some(Duration::from_millis(1500)), false),
            "SET SESSION max_execution_time = 1500"
        );
        assert_eq!(
            timeout_setting(Some(Duration::from_micros(10)), false),
            "SET SESSION max_execution_time = 1"
        );
    }
}
