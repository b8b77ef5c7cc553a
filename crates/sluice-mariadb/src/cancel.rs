//! [`CancelToken`]: stopping a session's running statement from elsewhere.
//!
//! MariaDB and MySQL have no out-of-band cancel message: a second session
//! sends `KILL QUERY <id>`. The statement ends with error 1317 on its own
//! session, which stays usable.
//!
//! The second session never touches the first one's connection, so a cancel
//! works, or fails, the same whether that connection is busy or given up as
//! stalled; with a wait timeout its own waits are bounded by it too, so a
//! server that stopped answering cannot hold a command that already reported
//! the stall.

use std::time::Duration;

use sluice_core::{Error, Meter};

use crate::config::Config;
use crate::connection::Connection;

/// What is needed to stop one session's statement.
#[derive(Debug, Clone)]
pub struct CancelToken {
    config: Config,
    connection_id: u32,
    /// The session's wait timeout, for the cancel's own waits.
    wait_timeout: Option<Duration>,
}

impl CancelToken {
    /// A token for the session `connection_id` of the server `config` names.
    pub fn new(config: Config, connection_id: u32) -> CancelToken {
        CancelToken {
            config,
            connection_id,
            wait_timeout: None,
        }
    }

    /// The same token, its own login and `KILL QUERY` bounded by `timeout`
    /// (the cancelled session's, see [`Connection::set_wait_timeout`]).
    pub fn with_wait_timeout(self, timeout: Option<Duration>) -> CancelToken {
        CancelToken {
            wait_timeout: timeout.filter(|timeout| !timeout.is_zero()),
            ..self
        }
    }

    /// Connects again and kills the session's running statement; harmless
    /// when nothing runs. (Not counted on the session's meter: a cancel is no
    /// part of its work.)
    pub async fn cancel(&self) -> Result<(), Error> {
        let mut config = self.config.clone();
        if let Some(limit) = self.wait_timeout {
            config.connect_timeout = config.connect_timeout.min(limit);
        }
        let mut connection = Connection::connect(&config, &Meter::new()).await?;
        connection.set_wait_timeout(self.wait_timeout);
        let killed = connection
            .simple_query(&format!("KILL QUERY {}", self.connection_id))
            .await;
        connection.close().await;
        match killed {
            // The session ended meanwhile: nothing left to stop.
            Err(error)
                if error.as_db_error().and_then(|db| db.vendor_code) == Some(UNKNOWN_THREAD) =>
            {
                Ok(())
            }
            other => other.map(drop),
        }
    }
}

/// `ER_NO_SUCH_THREAD`.
const UNKNOWN_THREAD: u32 = 1094;
