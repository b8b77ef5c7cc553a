//! One request as the log and the metrics see it ([`RequestContext`]), what
//! time it is given ([`Timing`]), and the hand-over of each item of an answer to
//! a client that may be slow or gone ([`hand_over`]), which every front end
//! shares.
//!
//! Statuses are the front end's own (an HTTP status code, a gRPC code): the
//! gateway records the number it is given, and asks the front end ([`Front`])
//! which numbers mean "the client left" and "the server stopped".

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::auth::Grant;
use crate::metrics::{self, RequestRecord};
use crate::throttle::Slot;

/// A front end's status codes for a request that ended before it answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Front {
    /// The client left (HTTP logs nginx's 499, "client closed request").
    pub client_gone: u16,
    /// The server stopped at the shutdown deadline.
    pub shutdown: u16,
}

/// Who asked for what, for the log line and the metrics.
///
/// Every request is logged and counted exactly once: by [`RequestContext::finish`],
/// or, if the request's future is dropped before that (its client left while it
/// waited for a pooled connection, or the server stopped at the shutdown
/// deadline), by the context's `Drop`, as `client_gone` or `shutdown`, with
/// the status its [`Front`] gives those (unless a response had begun).
#[derive(Debug)]
pub struct RequestContext {
    /// `queries` or `sql`.
    pub route: &'static str,
    /// The named query (empty for ad-hoc SQL).
    pub query: String,
    /// The token's name, if any.
    pub token: Option<String>,
    /// The request's slot among its token's concurrent requests, held until the
    /// context is dropped with the request's end.
    slot: Option<Slot>,
    /// When the request arrived.
    pub started: Instant,
    /// True for ad-hoc SQL (decides the status of database errors).
    pub ad_hoc: bool,
    /// The front end's status codes for requests that never answered.
    front: Front,
    /// Set once logged, so a request is never logged twice.
    logged: AtomicBool,
    /// Cancelled at the shutdown deadline: tells a request the server dropped
    /// from one whose client left.
    shutdown: CancellationToken,
    /// The status sent, once a response has begun.
    status_sent: Option<u16>,
}

impl RequestContext {
    /// The context of a request that arrives now.
    pub fn new(
        front: Front,
        route: &'static str,
        query: impl Into<String>,
        ad_hoc: bool,
        shutdown: CancellationToken,
    ) -> RequestContext {
        RequestContext {
            route,
            query: query.into(),
            token: None,
            slot: None,
            started: Instant::now(),
            ad_hoc,
            front,
            logged: AtomicBool::new(false),
            shutdown,
            status_sent: None,
        }
    }

    /// Records the token that let the request through (none when auth is off).
    pub fn admit(&mut self, grant: Option<Grant>) {
        if let Some(grant) = grant {
            self.token = Some(grant.name);
            self.slot = Some(grant.slot);
        }
    }

    /// Records that the response began with `status`, which a request dropped
    /// later is then logged with.
    pub fn response_began(&mut self, status: u16) {
        self.status_sent = Some(status);
    }

    /// Logs and records a request that ended (or never started a body); only the
    /// first call for a request counts.
    pub fn finish(
        &self,
        status: u16,
        outcome: &'static str,
        rows: u64,
        bytes: u64,
        round_trips: u64,
        error: Option<&str>,
    ) {
        if self.logged.swap(true, Ordering::Relaxed) {
            return;
        }
        let seconds = self.started.elapsed().as_secs_f64();
        let duration_ms = (seconds * 1000.0 * 10.0).round() / 10.0;
        let token = self.token.as_deref().unwrap_or("-");
        match error {
            None => tracing::info!(
                target: "sluice::request",
                route = self.route, query = %self.query, token, status, outcome,
                rows, bytes, round_trips, duration_ms,
                "request"
            ),
            Some(error) => tracing::warn!(
                target: "sluice::request",
                route = self.route, query = %self.query, token, status, outcome,
                rows, bytes, round_trips, duration_ms, error,
                "request"
            ),
        }
        metrics::record(&RequestRecord {
            route: self.route,
            query: self.query.clone(),
            status,
            outcome,
            rows,
            bytes,
            round_trips,
            seconds,
        });
    }
}

impl Drop for RequestContext {
    /// A request whose future was dropped before it was logged: hyper drops it
    /// when the connection closes (the client left, typically while waiting for
    /// a pooled connection), the server when the shutdown deadline passes.
    fn drop(&mut self) {
        if self.logged.load(Ordering::Relaxed) {
            return;
        }
        let (outcome, status, error) = if self.shutdown.is_cancelled() {
            (
                "shutdown",
                self.status_sent.unwrap_or(self.front.shutdown),
                "the server stopped at the shutdown deadline before the request ended",
            )
        } else {
            (
                "client_gone",
                self.status_sent.unwrap_or(self.front.client_gone),
                "the client left before the request ended",
            )
        };
        self.finish(status, outcome, 0, 0, 0, Some(error));
    }
}

/// How long a response may take: resolved from the query's limits and the
/// server's defaults.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The longest the body may run.
    pub max_duration: Duration,
    /// The longest the client may leave a chunk untaken.
    pub idle_write_timeout: Duration,
}

/// Sends one item of a response (an HTTP chunk, a Flight message), waiting at
/// most `idle_write_timeout` for the client to take the one before and no
/// later than the body's deadline.
pub async fn hand_over<T>(
    sender: &mpsc::Sender<T>,
    item: T,
    body_deadline: tokio::time::Instant,
    idle_write_timeout: Duration,
) -> Result<(), NotTaken> {
    let idle_deadline = tokio::time::Instant::now() + idle_write_timeout;
    let (deadline, late) = match idle_deadline <= body_deadline {
        true => (idle_deadline, NotTaken::Idle),
        false => (body_deadline, NotTaken::PastDeadline),
    };
    match tokio::time::timeout_at(deadline, sender.send(item)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(NotTaken::ClientGone),
        Err(_) => Err(late),
    }
}

/// Why [`hand_over`] did not hand an item over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotTaken {
    /// The receiver is gone: the client left.
    ClientGone,
    /// The client took nothing for the idle-write timeout.
    Idle,
    /// The body's deadline (`max_stream_duration`) came first.
    PastDeadline,
}
