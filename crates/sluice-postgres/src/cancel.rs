//! [`CancelToken`]: asking the server to stop a running query, from another socket.

use postgres_protocol::message::frontend;
use sluice_core::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::{Config, Target};
use crate::connection::Socket;

/// Everything needed to send a `CancelRequest` for one session.
#[derive(Debug, Clone)]
pub struct CancelToken {
    target: Target,
    process_id: i32,
    secret_key: i32,
}

impl CancelToken {
    pub(crate) fn new(target: Target, process_id: i32, secret_key: i32) -> CancelToken {
        CancelToken {
            target,
            process_id,
            secret_key,
        }
    }

    /// Sends the cancel request on a new connection and waits for the server to
    /// close it (which it does after signalling the backend). Cancelling a session
    /// that is idle is harmless.
    pub async fn cancel(&self, config: &Config) -> Result<(), Error> {
        let mut socket = Socket::open(&self.target, config).await?;
        let mut message = bytes::BytesMut::with_capacity(16);
        frontend::cancel_request(self.process_id, self.secret_key, &mut message);
        socket.write_all(&message).await.map_err(Error::io)?;
        let mut sink = [0u8; 64];
        // The server answers nothing and closes; wait briefly for that.
        let _ =
            tokio::time::timeout(std::time::Duration::from_secs(2), socket.read(&mut sink)).await;
        Ok(())
    }
}
