//! One accepted connection: its TLS handshake when the server has a
//! certificate, HTTP/1.1 or HTTP/2 (as ALPN chose) served by hyper, the
//! header-read and keep-alive timeouts, and the reset that makes a cut body
//! unmistakable.
//!
//! **Timeouts.** A connection is always in one of three phases: reading a
//! request's head (since it was accepted, or since the first byte after an idle
//! spell), idle between requests (kept alive), or busy answering. A watchdog
//! closes it when the head takes longer than `header_read_timeout` or the idle
//! spell longer than `keep_alive_timeout`; while busy nothing is timed here (a
//! slow stream is the client's right, and flow control bounds its cost). hyper's
//! own `header_read_timeout` is not used: it also runs while a kept-alive
//! connection is idle, so one setting would close idle connections at the
//! header limit. The TLS handshake counts as reading the first head. On
//! HTTP/2, bytes on an idle connection do not start a head (window updates
//! and pings arrive between requests); only a request ends the idle spell.
//!
//! **Resets.** Once a response has begun, a failure can only end the body
//! early. With chunked encoding (HTTP/1.1) the missing last chunk tells the
//! client; an HTTP/1.0 body, delimited by the connection's close, would look
//! complete. So when a response body fails, the socket is closed with
//! `SO_LINGER` 0: the client gets a TCP reset, an error in every HTTP client,
//! whatever the protocol version (over TLS too: no `close_notify` is sent).
//! HTTP/2 needs none of this: hyper resets the one failed stream
//! (`RST_STREAM`), and the connection's other streams go on.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::reload::LiveApp;
use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::TokioExecutor;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use sluice_gateway::{ServerTls, Timeouts, ALPN_HTTP2};

/// Where a connection is, for the watchdog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading a request's head since `since`.
    ReadingHead { since: Instant },
    /// Kept alive without a request since `since`.
    Idle { since: Instant },
    /// Answering this many requests (more than one only while hyper starts the
    /// next one before dropping the previous body).
    Busy { requests: usize },
}

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expired {
    HeaderRead,
    KeepAlive,
}

impl Expired {
    fn label(self) -> &'static str {
        match self {
            Expired::HeaderRead => "header_read",
            Expired::KeepAlive => "keep_alive",
        }
    }
}

/// What the socket, the requests and their bodies share.
struct Shared {
    phase: watch::Sender<Phase>,
    /// Set when a response body failed: the socket is reset, not closed.
    reset: AtomicBool,
    /// Set for HTTP/2: several requests share the connection.
    multiplexed: AtomicBool,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            phase: watch::Sender::new(Phase::ReadingHead {
                since: Instant::now(),
            }),
            reset: AtomicBool::new(false),
            multiplexed: AtomicBool::new(false),
        }
    }

    /// Bytes arrived: an idle HTTP/1 connection starts reading a head.
    fn bytes_arrived(&self) {
        if self.multiplexed.load(Ordering::Relaxed) {
            return;
        }
        self.phase.send_if_modified(|phase| match phase {
            Phase::Idle { .. } => {
                *phase = Phase::ReadingHead {
                    since: Instant::now(),
                };
                true
            }
            _ => false,
        });
    }

    /// A response body failed: on HTTP/1 its connection must be reset (see
    /// the module docs); on HTTP/2 hyper resets the stream alone.
    fn body_failed(&self) {
        if !self.multiplexed.load(Ordering::Relaxed) {
            self.reset.store(true, Ordering::Relaxed);
        }
    }

    fn request_started(&self) {
        self.phase.send_modify(|phase| {
            *phase = match *phase {
                Phase::Busy { requests } => Phase::Busy {
                    requests: requests + 1,
                },
                _ => Phase::Busy { requests: 1 },
            }
        });
    }

    fn request_ended(&self) {
        self.phase.send_modify(|phase| {
            *phase = match *phase {
                Phase::Busy { requests } if requests > 1 => Phase::Busy {
                    requests: requests - 1,
                },
                _ => Phase::Idle {
                    since: Instant::now(),
                },
            }
        });
    }
}

/// Resolves when the connection has waited too long for a request.
async fn watchdog(mut phase: watch::Receiver<Phase>, timeouts: Timeouts) -> Expired {
    loop {
        let deadline = match *phase.borrow_and_update() {
            Phase::ReadingHead { since } => {
                Some((since + timeouts.header_read, Expired::HeaderRead))
            }
            Phase::Idle { since } => Some((since + timeouts.keep_alive, Expired::KeepAlive)),
            Phase::Busy { .. } => None,
        };
        let changed = async {
            if phase.changed().await.is_err() {
                // The connection is gone; its task ends without the watchdog.
                std::future::pending::<()>().await;
            }
        };
        match deadline {
            Some((deadline, expired)) => tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(deadline) => return expired,
            },
            None => changed.await,
        }
    }
}

/// A stream over an accepted TCP socket: the socket itself, or TLS on it.
trait OverTcp: AsyncRead + AsyncWrite + Unpin {
    fn tcp(&self) -> &TcpStream;
}

impl OverTcp for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl OverTcp for TlsStream<TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref().0
    }
}

/// The accepted connection as hyper sees it (above TLS, so only requests'
/// bytes count): reads move the phase on; a connection whose response failed
/// is reset when dropped, never shut down cleanly.
struct Socket<S: OverTcp> {
    stream: S,
    shared: Arc<Shared>,
}

impl<S: OverTcp> AsyncRead for Socket<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buffer.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(context, buffer);
        if matches!(polled, Poll::Ready(Ok(()))) && buffer.filled().len() > before {
            self.shared.bytes_arrived();
        }
        polled
    }
}

impl<S: OverTcp> AsyncWrite for Socket<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(context, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(context, buffers)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.shared.reset.load(Ordering::Relaxed) {
            // A FIN (or TLS close_notify) now would let an HTTP/1.0 client
            // take the cut body as whole.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}

impl<S: OverTcp> Drop for Socket<S> {
    fn drop(&mut self) {
        if self.shared.reset.load(Ordering::Relaxed) {
            // Closing with a zero linger sends RST instead of FIN.
            let socket = socket2::SockRef::from(self.stream.tcp());
            if let Err(error) = socket.set_linger(Some(Duration::ZERO)) {
                tracing::debug!(%error, "cannot set SO_LINGER to reset a connection");
            }
        }
    }
}

/// One request from its start until its response body is dropped (sent, or
/// abandoned with the connection): the connection is busy meanwhile.
struct InFlight {
    shared: Arc<Shared>,
}

impl InFlight {
    fn start(shared: Arc<Shared>) -> InFlight {
        shared.request_started();
        InFlight { shared }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.shared.request_ended();
    }
}

/// A response body that marks its connection for a reset if it fails.
struct Watched {
    body: Body,
    request: InFlight,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(context);
        if let Poll::Ready(Some(Err(error))) = &polled {
            tracing::debug!(%error, "a response body failed: resetting its connection or stream");
            self.request.shared.body_failed();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Serves `stream` until the client closes, a timeout expires, or (after
/// `draining` is cancelled) the requests in progress have been answered: HTTP/1
/// in clear, or after a TLS handshake HTTP/2 or HTTP/1.1 as ALPN chose.
pub(crate) async fn serve_connection(
    stream: TcpStream,
    tls: Option<ServerTls>,
    live: LiveApp,
    timeouts: Timeouts,
    draining: CancellationToken,
) {
    let shared = Arc::new(Shared::new());
    let mut watchdog = Box::pin(watchdog(shared.phase.subscribe(), timeouts));
    let service = service(live, shared.clone());
    let Some(tls) = tls else {
        let socket = TokioIo::new(Socket { stream, shared });
        let connection = http1(socket, service);
        return drive(connection, watchdog, draining).await;
    };
    let stream = tokio::select! {
        accepted = tls.acceptor().accept(stream) => match accepted {
            Ok(stream) => stream,
            Err(error) => {
                // Scanners and clients that do not trust the certificate end
                // here; the client sees the alert, the log only a debug line.
                tracing::debug!(%error, "TLS handshake failed");
                sluice_gateway::metrics::tls_handshake_failed();
                return;
            }
        },
        expired = &mut watchdog => return timed_out(expired),
        () = draining.cancelled() => return,
    };
    if stream.get_ref().1.alpn_protocol() == Some(ALPN_HTTP2) {
        shared.multiplexed.store(true, Ordering::Relaxed);
        let socket = TokioIo::new(Socket { stream, shared });
        let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(socket, service);
        drive(connection, watchdog, draining).await;
    } else {
        let socket = TokioIo::new(Socket { stream, shared });
        drive(http1(socket, service), watchdog, draining).await;
    }
}

/// The current router as a hyper service whose requests keep the connection
/// busy until their response bodies are dropped. Each request takes the router
/// of the moment, so a kept-alive connection sees a reload at its next request.
fn service(
    live: LiveApp,
    shared: Arc<Shared>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = hyper::Response<Watched>,
    Error = Infallible,
    Future = impl Future<Output = Result<hyper::Response<Watched>, Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |request: Request<Incoming>| {
        let in_flight = InFlight::start(shared.clone());
        let router = live.router();
        async move {
            let response = router.oneshot(request.map(Body::new)).await?;
            Ok::<_, Infallible>(response.map(|body| Watched {
                body,
                request: in_flight,
            }))
        }
    })
}

/// An HTTP/1 connection whose heads the watchdog times (see the module docs).
fn http1<S, F>(
    socket: TokioIo<Socket<S>>,
    service: F,
) -> hyper::server::conn::http1::Connection<TokioIo<Socket<S>>, F>
where
    S: OverTcp,
    F: hyper::service::HttpService<Incoming, ResBody = Watched>,
{
    hyper::server::conn::http1::Builder::new()
        .header_read_timeout(None)
        .serve_connection(socket, service)
}

/// Something hyper serves that can be asked to finish gracefully.
trait GracefulConnection: Future<Output = hyper::Result<()>> {
    /// Closes an idle connection now, a busy one after its responses.
    fn finish(self: Pin<&mut Self>);
}

impl<S, F> GracefulConnection for hyper::server::conn::http1::Connection<TokioIo<Socket<S>>, F>
where
    S: OverTcp,
    F: hyper::service::HttpService<Incoming, ResBody = Watched>,
{
    fn finish(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<S, F> GracefulConnection
    for hyper::server::conn::http2::Connection<TokioIo<Socket<S>>, F, TokioExecutor>
where
    S: OverTcp,
    F: hyper::service::HttpService<Incoming, ResBody = Watched>,
    TokioExecutor: hyper::rt::bounds::Http2ServerConnExec<F::Future, Watched>,
{
    fn finish(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Runs `connection` until it ends or the watchdog expires; `draining` asks
/// it to finish gracefully.
async fn drive(
    connection: impl GracefulConnection,
    mut watchdog: Pin<Box<impl Future<Output = Expired>>>,
    draining: CancellationToken,
) {
    tokio::pin!(connection);
    let mut drained = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            expired = &mut watchdog => return timed_out(expired),
            () = draining.cancelled(), if !drained => {
                drained = true;
                connection.as_mut().finish();
            }
        }
    }
}

fn timed_out(expired: Expired) {
    tracing::debug!(
        timeout = expired.label(),
        "closing a connection that sent no request in time"
    );
    sluice_gateway::metrics::connection_timed_out(expired.label());
}
