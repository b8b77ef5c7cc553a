//! Flight's connections: accepted on the listener and, when the gateway serves
//! HTTPS, through the same TLS as HTTP (`[server] tls_cert` and `tls_key`, the
//! same acceptor, so a SIGHUP's new certificate applies to Flight's next
//! handshake too). gRPC needs HTTP/2, which the acceptor offers by ALPN.
//!
//! Handshakes run in tasks of their own, so a client that never finishes one
//! holds nothing but its task, for at most [`HANDSHAKE_TIMEOUT`].
//!
//! **Idle connections.** A connection that carries no call is closed as HTTP
//! closes one without a request: `[server] header_read_timeout` after it was
//! accepted if no call ever began, `keep_alive_timeout` after its last call
//! ended. A call counts from its request's arrival to the end of its
//! response ([`TrackCalls`]), so a long `DoGet` is never cut for being
//! quiet. Without this, connections that finish a handshake and say nothing
//! would hold a descriptor each for as long as their client likes.
//!
//! **How many.** The listener holds at most `[server] max_connections`
//! connections (`sluice_gateway::ConnectionSlots`); one more is closed at once and
//! counted, and a failing `accept` (out of descriptors) pauses the loop.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use sluice_gateway::{AcceptBackoff, ConnectionSlots, ServerTls, Slot, Timeouts};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::either::Either;
use tonic::codegen::http;
use tonic::transport::server::Connected;

/// The longest a TLS handshake may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the listener needs besides the socket.
pub struct Accepting {
    /// The gateway's TLS, when it serves HTTPS.
    pub tls: Option<ServerTls>,
    /// When an idle connection is closed.
    pub timeouts: Timeouts,
    /// The listener's share of connections.
    pub slots: ConnectionSlots,
}

/// One client's connection, plain or TLS, with its idle watchdog and its
/// listener slot.
pub struct Connection {
    stream: Either<TcpStream, Box<TlsStream<TcpStream>>>,
    calls: Calls,
    timeouts: Timeouts,
    watchdog: Pin<Box<Sleep>>,
    _slot: Slot,
}

/// Accepts connections on `listener` until the returned stream is dropped.
pub fn incoming(
    listener: TcpListener,
    accepting: Accepting,
) -> ReceiverStream<io::Result<Connection>> {
    let (sender, receiver) = mpsc::channel(64);
    tokio::spawn(accept(listener, accepting, sender));
    ReceiverStream::new(receiver)
}

async fn accept(
    listener: TcpListener,
    accepting: Accepting,
    sender: mpsc::Sender<io::Result<Connection>>,
) {
    let mut backoff = AcceptBackoff::new("flight");
    loop {
        let stream = tokio::select! {
            () = sender.closed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    backoff.failed(error).await;
                    continue;
                }
            },
        };
        backoff.accepted();
        let Some(slot) = accepting.slots.take() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let timeouts = accepting.timeouts;
        match &accepting.tls {
            None => {
                let connection = Connection::new(Either::Left(stream), timeouts, slot);
                if sender.send(Ok(connection)).await.is_err() {
                    return;
                }
            }
            Some(tls) => {
                let handshake = handshake(tls.clone(), stream, timeouts, slot, sender.clone());
                tokio::spawn(handshake);
            }
        }
    }
}

async fn handshake(
    tls: ServerTls,
    stream: TcpStream,
    timeouts: Timeouts,
    slot: Slot,
    sender: mpsc::Sender<io::Result<Connection>>,
) {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream)).await {
        Ok(Ok(stream)) => {
            let connection = Connection::new(Either::Right(Box::new(stream)), timeouts, slot);
            let _ = sender.send(Ok(connection)).await;
        }
        Ok(Err(error)) => {
            tracing::debug!(%error, "Flight: TLS handshake failed");
            sluice_gateway::metrics::tls_handshake_failed();
        }
        Err(_) => {
            tracing::debug!("Flight: TLS handshake timed out");
            sluice_gateway::metrics::tls_handshake_failed();
        }
    }
}

impl Connection {
    fn new(
        stream: Either<TcpStream, Box<TlsStream<TcpStream>>>,
        timeouts: Timeouts,
        slot: Slot,
    ) -> Connection {
        let calls = Calls::default();
        let first = calls.deadline(timeouts).unwrap_or_else(Instant::now);
        Connection {
            stream,
            calls,
            timeouts,
            watchdog: Box::pin(tokio::time::sleep_until(first)),
            _slot: slot,
        }
    }

    /// The timeout that expired (`header_read` or `keep_alive`), once the
    /// connection has been idle too long. The watchdog shares
    /// the read's waker: hyper always polls an HTTP/2 connection's read side,
    /// so the timer firing wakes the connection, which reads and ends here.
    fn expired(&mut self, context: &mut Context<'_>) -> Option<&'static str> {
        loop {
            if self.watchdog.as_mut().poll(context).is_pending() {
                return None;
            }
            let now = Instant::now();
            let next = match self.calls.deadline(self.timeouts) {
                // Busy: nothing is timed; look again later.
                None => now + self.timeouts.keep_alive,
                Some(deadline) if deadline <= now => return Some(self.calls.phase()),
                Some(deadline) => deadline,
            };
            self.watchdog.as_mut().reset(next);
        }
    }
}

/// The calls of one connection: how many are running, and since when none is.
#[derive(Clone, Default)]
pub struct Calls(Arc<Mutex<CallState>>);

struct CallState {
    running: usize,
    any_began: bool,
    idle_since: Instant,
}

impl Default for CallState {
    fn default() -> CallState {
        CallState {
            running: 0,
            any_began: false,
            idle_since: Instant::now(),
        }
    }
}

/// One running call; it ends when dropped (with its response body).
pub struct Call(Calls);

impl Calls {
    fn lock(&self) -> std::sync::MutexGuard<'_, CallState> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A call begins.
    pub fn begin(&self) -> Call {
        let mut state = self.lock();
        state.running += 1;
        state.any_began = true;
        Call(self.clone())
    }

    /// When the connection is to be closed if nothing happens: `None` while
    /// a call runs.
    fn deadline(&self, timeouts: Timeouts) -> Option<Instant> {
        let state = self.lock();
        match (state.running, state.any_began) {
            (0, false) => Some(state.idle_since + timeouts.header_read),
            (0, true) => Some(state.idle_since + timeouts.keep_alive),
            _ => None,
        }
    }

    /// The timeout that applies now, as the metrics name it.
    fn phase(&self) -> &'static str {
        if self.lock().any_began {
            "keep_alive"
        } else {
            "header_read"
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.running -= 1;
        if state.running == 0 {
            state.idle_since = Instant::now();
        }
    }
}

impl Connected for Connection {
    type ConnectInfo = Calls;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.calls.clone()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(timeout) = self.expired(context) {
            tracing::debug!(
                timeout,
                "Flight: closing a connection that carried no call in time"
            );
            sluice_gateway::metrics::connection_timed_out(timeout);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "idle Flight connection",
            )));
        }
        Pin::new(&mut self.stream).poll_read(context, buffer)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(context, bytes)
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}

/// The layer that marks each call on its connection's [`Calls`], from the
/// request's arrival until its response body is dropped.
#[derive(Clone, Copy, Default)]
pub struct TrackCalls;

impl<S> tower::Layer<S> for TrackCalls {
    type Service = Tracked<S>;

    fn layer(&self, inner: S) -> Tracked<S> {
        Tracked(inner)
    }
}

/// A service whose calls are marked on their connection.
#[derive(Clone)]
pub struct Tracked<S>(S);

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, RequestBody, ResponseBody> tower::Service<http::Request<RequestBody>> for Tracked<S>
where
    S: tower::Service<http::Request<RequestBody>, Response = http::Response<ResponseBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    RequestBody: Send + 'static,
{
    type Response = http::Response<TrackedBody<ResponseBody>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<RequestBody>) -> Self::Future {
        let call = request.extensions().get::<Calls>().map(Calls::begin);
        // The service that was made ready is the one to call (tower's rule).
        let clone = self.0.clone();
        let mut ready = std::mem::replace(&mut self.0, clone);
        Box::pin(async move {
            let response = ready.call(request).await?;
            Ok(response.map(|body| TrackedBody { body, _call: call }))
        })
    }
}

/// A response body that holds its call open until it is dropped.
pub struct TrackedBody<B> {
    body: B,
    _call: Option<Call>,
}

impl<B> http_body::Body for TrackedBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUTS: Timeouts = Timeouts {
        header_read: Duration::from_secs(10),
        keep_alive: Duration::from_secs(60),
    };

    #[tokio::test(flavor = "current_thread")]
    async fn a_connection_is_timed_only_while_no_call_runs() {
        let calls = Calls::default();
        let accepted = calls.lock().idle_since;
        assert_eq!(
            calls.deadline(TIMEOUTS),
            Some(accepted + TIMEOUTS.header_read)
        );
        assert_eq!(calls.phase(), "header_read");
        let first = calls.begin();
        let second = calls.begin();
        assert_eq!(calls.deadline(TIMEOUTS), None);
        drop(first);
        assert_eq!(calls.deadline(TIMEOUTS), None);
        drop(second);
        let ended = calls.lock().idle_since;
        assert!(ended >= accepted);
        assert_eq!(calls.deadline(TIMEOUTS), Some(ended + TIMEOUTS.keep_alive));
        assert_eq!(calls.phase(), "keep_alive");
    }
}
