//! One accepted connection: HTTP/1 served by hyper, the header-read and
//! keep-alive timeouts, and the reset that makes a cut body unmistakable.
//!
//! **Timeouts.** A connection is always in one of three phases: reading a
//! request's head (since it was accepted, or since the first byte after an idle
//! spell), idle between requests (kept alive), or busy answering. A watchdog
//! closes it when the head takes longer than `header_read_timeout` or the idle
//! spell longer than `keep_alive_timeout`; while busy nothing is timed here (a
//! slow stream is the client's right, and flow control bounds its cost). hyper's
//! own `header_read_timeout` is not used: it also runs while a kept-alive
//! connection is idle, so one setting would close idle connections at the
//! header limit.
//!
//! **Resets.** Once a response has begun, a failure can only end the body
//! early. With chunked encoding (HTTP/1.1) the missing last chunk tells the
//! client; an HTTP/1.0 body, delimited by the connection's close, would look
//! complete. So when a response body fails, the socket is closed with
//! `SO_LINGER` 0: the client gets a TCP reset, an error in every HTTP client,
//! whatever the protocol version.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How long a connection may wait for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From the connection being accepted, or a kept-alive connection's next
    /// first byte, to the end of the request's head.
    pub header_read: Duration,
    /// Between the end of a response and the next request's first byte.
    pub keep_alive: Duration,
}

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
}

impl Shared {
    fn new() -> Shared {
        Shared {
            phase: watch::Sender::new(Phase::ReadingHead {
                since: Instant::now(),
            }),
            reset: AtomicBool::new(false),
        }
    }

    /// Bytes arrived: an idle connection starts reading a head.
    fn bytes_arrived(&self) {
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

/// The accepted socket as hyper sees it: reads move the phase on; a socket
/// whose response failed is reset when dropped, never shut down cleanly.
struct Socket {
    stream: TcpStream,
    shared: Arc<Shared>,
}

impl AsyncRead for Socket {
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

impl AsyncWrite for Socket {
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
            // A FIN now would let an HTTP/1.0 client take the cut body as whole.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        if self.shared.reset.load(Ordering::Relaxed) {
            // Closing with a zero linger sends RST instead of FIN.
            let socket = socket2::SockRef::from(&self.stream);
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
            tracing::debug!(%error, "a response body failed: resetting its connection");
            self.request.shared.reset.store(true, Ordering::Relaxed);
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

/// Serves HTTP/1 on `stream` until the client closes, a timeout expires, or
/// (after `draining` is cancelled) the request in progress has been answered.
pub(crate) async fn serve_connection(
    stream: TcpStream,
    router: Router,
    timeouts: Timeouts,
    draining: CancellationToken,
) {
    let shared = Arc::new(Shared::new());
    let watchdog = watchdog(shared.phase.subscribe(), timeouts);
    let requests = shared.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let in_flight = InFlight::start(requests.clone());
        let router = router.clone();
        async move {
            let response = router.oneshot(request.map(Body::new)).await?;
            Ok::<_, Infallible>(response.map(|body| Watched {
                body,
                request: in_flight,
            }))
        }
    });
    let socket = TokioIo::new(Socket { stream, shared });
    let connection = hyper::server::conn::http1::Builder::new()
        // The watchdog times heads (see the module docs).
        .header_read_timeout(None)
        .serve_connection(socket, service);
    tokio::pin!(connection, watchdog);
    let mut drained = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            expired = &mut watchdog => {
                tracing::debug!(timeout = expired.label(), "closing a connection that sent no request in time");
                crate::metrics::connection_timed_out(expired.label());
                return;
            }
            () = draining.cancelled(), if !drained => {
                drained = true;
                // Idle connections close now, busy ones after their response.
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}
