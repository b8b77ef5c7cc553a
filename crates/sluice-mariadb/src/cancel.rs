//! [`CancelToken`]: stopping a session's running statement from elsewhere.
//!
//! MariaDB and MySQL have no out-of-band cancel message: a second session
//! sends `KILL QUERY <id>`. The statement ends with error 1317 on its own
//! session, which stays usable.

use sluice_core::{Error, Meter};

use crate::config::Config;
use crate::connection::Connection;

/// What is needed to stop one session's statement.
#[derive(Debug, Clone)]
pub struct CancelToken {
    config: Config,
    connection_id: u32,
}

impl CancelToken {
    /// A token for the session `connection_id` of the server `config` names.
    pub fn new(config: Config, connection_id: u32) -> CancelToken {
        CancelToken {
            config,
            connection_id,
        }
    }

    /// Connects again and kills the session's running statement; harmless
    /// when nothing runs. (Not counted on the session's meter: a cancel is no
    /// part of its work.)
    pub async fn cancel(&self) -> Result<(), Error> {
        let mut connection = Connection::connect(&self.config, &Meter::new()).await?;
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
