//! [`CancelToken`]: asking the server to stop a running query, from another socket.
//!
//! As libpq 17 does, the request travels encrypted when the session it cancels
//! is: the cancel key lets anyone who sees it stop that session's queries, so
//! it must not cross the network in clear text beside a TLS session.

use postgres_protocol::message::frontend;
use sluice_core::{Error, ErrorKind, Meter};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::{Config, Target};
use crate::connection::transport::open_socket;
use crate::connection::transport::{negotiate, Negotiated};

/// Everything needed to send a `CancelRequest` for one session.
#[derive(Debug, Clone)]
pub struct CancelToken {
    target: Target,
    process_id: i32,
    secret_key: i32,
    encrypted: bool,
    /// Raised before each request is sent, for the session to see (see
    /// [`CancelAsked`]).
    asked: CancelAsked,
}

/// That a cancel was asked for during the statement a session is running,
/// shared by the session's connection and its [`CancelToken`]s.
///
/// The server drops a cancel request that reaches the backend while it is
/// reading the client's next message: between the round trip that parses
/// and describes a statement and the `Bind`/`Execute` that runs it, the
/// backend waits for exactly that, so a cancel (Ctrl-C, an HTTP client gone)
/// landing there would be lost and the statement would then run to its end.
/// The session therefore looks at this mark before it runs the statement it
/// has described, and stops instead. The mark is cleared when a statement
/// begins, so a cancel asked while nothing ran does not touch the next one.
#[derive(Debug, Clone, Default)]
pub(crate) struct CancelAsked(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl CancelAsked {
    fn raise(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// A statement begins: earlier cancels were for earlier statements.
    pub(crate) fn clear(&self) {
        self.0.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a cancel was asked since the statement began.
    pub(crate) fn is_raised(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl CancelToken {
    pub(crate) fn new(
        target: Target,
        process_id: i32,
        secret_key: i32,
        encrypted: bool,
        asked: CancelAsked,
    ) -> CancelToken {
        CancelToken {
            target,
            process_id,
            secret_key,
            encrypted,
            asked,
        }
    }

    /// Sends the cancel request on a new connection (over TLS when the session
    /// is encrypted) and waits for the server to close it (which it does after
    /// signalling the backend). Cancelling a session that is idle is harmless.
    pub async fn cancel(&self, config: &Config) -> Result<(), Error> {
        self.asked.raise();
        let socket = open_socket(&self.target, config).await?;
        let client = match &config.tls.client {
            Some(client) if self.encrypted => client,
            _ => return self.send(socket).await,
        };
        // Not counted anywhere: a cancel is not part of the session's work.
        let stream = Meter::new().wrap(socket);
        match negotiate(stream, &self.target, client).await? {
            Negotiated::Tls(transport) => self.send(transport).await,
            Negotiated::Refused(_) => Err(Error::new(
                ErrorKind::Connect,
                format!(
                    "{} refused TLS for a cancel request although the session uses TLS",
                    self.target
                ),
            )),
            Negotiated::Failed(error) => Err(error),
        }
    }

    async fn send(&self, mut stream: impl AsyncRead + AsyncWrite + Unpin) -> Result<(), Error> {
        let mut message = bytes::BytesMut::with_capacity(16);
        frontend::cancel_request(self.process_id, self.secret_key, &mut message);
        stream.write_all(&message).await.map_err(Error::io)?;
        stream.flush().await.map_err(Error::io)?;
        let mut sink = [0u8; 64];
        // The server answers nothing and closes; wait briefly for that.
        let _ =
            tokio::time::timeout(std::time::Duration::from_secs(2), stream.read(&mut sink)).await;
        Ok(())
    }
}
