//! A query's result as an HTTP response body, with its ending told truthfully.
//!
//! The body is pulled, not pushed: hyper asks for the next chunk only when it has
//! written the previous one, so a slow client slows the encoder, which slows the
//! database cursor (TCP flow control on the PostgreSQL socket, the bounded channel
//! for SQLite). Memory per request is one batch plus one output chunk.
//!
//! Before the response starts, the first chunk is produced (the query has then
//! been accepted and its first rows read), so bad SQL, a parameter the database
//! rejects or an early division by zero is still a proper 4xx/5xx JSON error.
//! After the first byte the status cannot change: a later failure (a database
//! error, the server restarting, a limit exceeded, shutdown) ends the body with an
//! error, which makes hyper abort the chunked transfer so the client sees an
//! incomplete response, never one that looks complete. Every ending (complete,
//! failed, client gone) is logged once with rows, bytes, round trips and time, and
//! a query that did not complete is cancelled on the database.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use sluice_core::database::RunningQuery;
use sluice_core::transfer::FLUSH_BYTES;
use sluice_core::{Encoder, Transfer, TransferError};
use sluice_formats::Format;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Limits;
use crate::error::AppError;
use crate::metrics::{self, RequestRecord};

/// The status logged for a request whose client left before the response began
/// (nginx's "client closed request"): no status was ever sent.
pub const CLIENT_CLOSED_REQUEST: u16 = 499;

/// Who asked for what, for the log line and the metrics.
///
/// Every request is logged and counted exactly once: by [`RequestContext::finish`],
/// or, if the request's future is dropped before that (its client left while it
/// waited for a pooled connection, or the server stopped at the shutdown
/// deadline), by the context's `Drop`, as `client_gone` (status 499 unless a
/// response had begun) or `shutdown`.
#[derive(Debug)]
pub struct RequestContext {
    /// `queries` or `sql`.
    pub route: &'static str,
    /// The named query (empty for ad-hoc SQL).
    pub query: String,
    /// The token's name, if any.
    pub token: Option<String>,
    /// When the request arrived.
    pub started: Instant,
    /// True for ad-hoc SQL (decides the status of database errors).
    pub ad_hoc: bool,
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
        route: &'static str,
        query: impl Into<String>,
        ad_hoc: bool,
        shutdown: CancellationToken,
    ) -> RequestContext {
        RequestContext {
            route,
            query: query.into(),
            token: None,
            started: Instant::now(),
            ad_hoc,
            logged: AtomicBool::new(false),
            shutdown,
            status_sent: None,
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
                self.status_sent.unwrap_or(503),
                "the server stopped at the shutdown deadline before the request ended",
            )
        } else {
            (
                "client_gone",
                self.status_sent.unwrap_or(CLIENT_CLOSED_REQUEST),
                "the client left before the request ended",
            )
        };
        self.finish(status, outcome, 0, 0, 0, Some(error));
    }
}

enum Failure {
    /// The transfer stopped: the source failed, the encoder refused a value, or
    /// a configured limit would be exceeded.
    Transfer(TransferError),
    /// The shutdown deadline passed.
    Shutdown,
}

impl Failure {
    fn outcome(&self) -> &'static str {
        match self {
            Failure::Transfer(TransferError::TooManyRows(_) | TransferError::TooManyBytes(_)) => {
                "limit"
            }
            Failure::Transfer(_) => "error",
            Failure::Shutdown => "shutdown",
        }
    }

    /// Whether the query may still be running (and must be cancelled): not after
    /// the source itself failed.
    fn query_may_run(&self) -> bool {
        !matches!(self, Failure::Transfer(TransferError::Source(_)))
    }

    fn message(&self) -> String {
        match self {
            Failure::Transfer(TransferError::TooManyRows(max)) => {
                format!("the result has more than max_rows = {max} rows")
            }
            Failure::Transfer(TransferError::TooManyBytes(max)) => {
                format!("the response is larger than max_bytes = {max} bytes")
            }
            Failure::Transfer(error) => error.to_string(),
            Failure::Shutdown => "the server is shutting down".into(),
        }
    }

    /// The error response of a failure before the first byte.
    fn into_app_error(self, ad_hoc: bool) -> AppError {
        match self {
            Failure::Transfer(TransferError::Source(error)) => AppError::from_query(error, ad_hoc),
            Failure::Transfer(TransferError::Encode(error)) => {
                AppError::Internal(error.to_string())
            }
            Failure::Transfer(_) => AppError::bad_request(self.message()),
            Failure::Shutdown => AppError::Unavailable(self.message()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Streaming,
    Complete,
    Failed,
}

/// One response being streamed: the core's [`Transfer`] engine, driven by
/// hyper's demand for the next chunk, plus what the log line needs.
struct Running {
    /// `None` once the transfer ended and its source was handed back.
    transfer: Option<Transfer<Box<dyn RunningQuery>, Box<dyn Encoder>>>,
    rows: u64,
    bytes: u64,
    state: State,
    outcome: &'static str,
    error: Option<String>,
    /// The query is cancelled (not just abandoned) only if it may still run.
    cancel_on_drop: bool,
    status: u16,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    context: RequestContext,
    /// Round trips, kept once the source has been handed back.
    final_round_trips: Option<u64>,
    /// End a complete body with `{"_complete": true, "rows": N}` (NDJSON).
    completion_line: bool,
}

impl Running {
    /// The next chunk of the body: what [`Transfer::fill`] hands out, unless the
    /// shutdown deadline passes first. Empty once the body is complete.
    async fn fill(&mut self) -> Result<Bytes, Failure> {
        let Some(transfer) = self.transfer.as_mut() else {
            return Ok(Bytes::new());
        };
        let mut output = Vec::with_capacity(FLUSH_BYTES + FLUSH_BYTES / 2);
        let more = tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => return Err(Failure::Shutdown),
            more = transfer.fill(&mut output) => more.map_err(Failure::Transfer)?,
        };
        self.rows = transfer.rows();
        self.bytes = transfer.bytes();
        if !more {
            self.state = State::Complete;
            self.outcome = "complete";
            if self.completion_line {
                // Only here, once every row is out: a cut body never has it.
                let line = format!("{{\"_complete\": true, \"rows\": {}}}\n", self.rows);
                output.extend_from_slice(line.as_bytes());
            }
            if let Some(transfer) = self.transfer.take() {
                let source = transfer.into_source();
                self.final_round_trips = Some(source.round_trips());
                source.complete();
            }
        }
        Ok(Bytes::from(output))
    }

    /// Records a failure; the query is cancelled on drop unless the source itself
    /// failed (then nothing runs any more).
    fn fail(&mut self, failure: &Failure) {
        self.state = State::Failed;
        self.outcome = failure.outcome();
        self.error = Some(failure.message());
        self.cancel_on_drop = failure.query_may_run();
        if let Some(transfer) = &self.transfer {
            self.rows = transfer.rows();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.state == State::Streaming {
            // hyper dropped the body: the client went away, or the server dropped
            // the connection at the shutdown deadline while the stream waited for
            // a client that had stopped reading (its body was not being polled, so
            // it never saw the shutdown itself).
            if self.shutdown.is_cancelled() {
                self.outcome = Failure::Shutdown.outcome();
                self.error = Some(Failure::Shutdown.message());
            } else {
                self.outcome = "client_gone";
            }
        }
        let round_trips = match self.transfer.take() {
            Some(transfer) => {
                let source = transfer.into_source();
                let trips = source.round_trips();
                if self.state == State::Streaming || self.cancel_on_drop {
                    // Not read to the end: the query is cancelled on the server
                    // by a task the tracker follows, so shutdown waits for it.
                    if let Some(cancel) = source.abandon() {
                        if tokio::runtime::Handle::try_current().is_ok() {
                            self.tracker.spawn(cancel);
                        }
                    }
                }
                trips
            }
            None => self.final_round_trips.unwrap_or(0),
        };
        self.context.finish(
            self.status,
            self.outcome,
            self.rows,
            self.bytes,
            round_trips,
            self.error.as_deref(),
        );
    }
}

/// How a result is written: its format, and whether an NDJSON body ends with
/// a line saying it is complete (`?complete=1`), for clients that cannot rely
/// on the transport to tell a cut stream from a whole one.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// The format, of which `encoder` is the encoder.
    pub format: Format,
    /// End a complete body with `{"_complete": true, "rows": N}`.
    pub completion_line: bool,
}

/// Streams `source` encoded as `output` says as the response. Errors until
/// the first chunk is ready come back as [`AppError`]s (already logged).
pub async fn respond(
    source: Box<dyn RunningQuery>,
    output: Output,
    encoder: Box<dyn Encoder>,
    limits: Limits,
    context: RequestContext,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) -> Result<Response, AppError> {
    let limits = sluice_core::Limits {
        max_rows: limits.max_rows,
        max_bytes: limits.max_bytes,
    };
    let mut running = Running {
        transfer: Some(Transfer::new(source, encoder).with_limits(limits)),
        rows: 0,
        bytes: 0,
        state: State::Streaming,
        outcome: "client_gone",
        error: None,
        cancel_on_drop: true,
        status: 200,
        shutdown,
        tracker,
        context,
        final_round_trips: None,
        completion_line: output.completion_line,
    };
    let first = match running.fill().await {
        Ok(first) => first,
        Err(failure) => {
            running.fail(&failure);
            let error = failure.into_app_error(running.context.ad_hoc);
            running.status = error.status().as_u16();
            // Dropping `running` logs the request with this status.
            return Err(error);
        }
    };
    let rest = futures_util::stream::unfold(running, |mut running| async move {
        loop {
            if running.state != State::Streaming {
                return None;
            }
            match running.fill().await {
                Ok(chunk) if chunk.is_empty() => continue,
                Ok(chunk) => return Some((Ok(chunk), running)),
                Err(failure) => {
                    running.fail(&failure);
                    let error = std::io::Error::other(failure.message());
                    return Some((Err(error), running));
                }
            }
        }
    });
    let body = futures_util::stream::iter([Ok::<Bytes, std::io::Error>(first)])
        .filter(|chunk| std::future::ready(!matches!(chunk, Ok(bytes) if bytes.is_empty())))
        .chain(rest)
        // Compression may poll again after the end.
        .fuse();
    let mut response = (StatusCode::OK, Body::from_stream(body)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(output.format.media_type()),
    );
    // Intermediaries must not buffer a stream that may be large.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}
