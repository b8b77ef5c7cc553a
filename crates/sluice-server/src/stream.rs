//! A query's result as an HTTP response body, with its ending told truthfully.
//!
//! A task per response fills chunks and hands each to the body through a
//! channel of one: the next chunk is made only once the client has taken the
//! one before, so a slow client slows the encoder, which slows the database
//! cursor (TCP flow control on the PostgreSQL socket, the bounded channel for
//! SQLite). Memory per request is one batch plus two output chunks. The task is
//! what lets a response be stopped while its client reads nothing: after
//! `idle_write_timeout` with a chunk not taken, or once the body has run for
//! `max_stream_duration`, it ends the body in an error and cancels the query, so
//! a stalled client cannot hold a database session.
//!
//! Before the response starts, the first chunk is produced (the query has then
//! been accepted and its first rows read), so bad SQL, a parameter the database
//! rejects or an early division by zero is still a proper 4xx/5xx JSON error.
//! A result that ends within that first chunk (a short query) is sent whole,
//! with a `Content-Length`, and needs no task (unless trailers were asked for).
//! After the first byte the status cannot change: a later failure (a database
//! error, the server restarting, a limit exceeded, shutdown) ends the body with an
//! error, which makes hyper abort the chunked transfer so the client sees an
//! incomplete response, never one that looks complete (the body ends in an
//! error unless the task said it completed). A client that sends `TE: trailers`
//! gets `Sluice-Rows` and `Sluice-Complete: true` as trailers after a complete
//! body, so it can tell without trusting the transport. Every ending (complete,
//! failed, client gone) is logged once with rows, bytes, round trips and time, and
//! a query that did not complete is cancelled on the database.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use http_body::Frame;
use sluice_core::database::RunningQuery;
use sluice_core::transfer::FLUSH_BYTES;
use sluice_core::{Encoder, Transfer, TransferError};
use sluice_formats::Format;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use sluice_gateway::config::Limits;
use sluice_gateway::{hand_over, Front, NotTaken, RequestContext, Timing};

use sluice_gateway::GatewayError;

use crate::error::AppError;

/// HTTP's statuses for a request that ended before it answered: nginx's 499
/// "client closed request" (no status was ever sent), and 503 at shutdown.
pub const HTTP: Front = Front {
    client_gone: 499,
    shutdown: 503,
};

enum Failure {
    /// The transfer stopped: the source failed, the encoder refused a value, or
    /// a configured limit would be exceeded.
    Transfer(TransferError),
    /// The shutdown deadline passed.
    Shutdown,
    /// The body ran for `max_stream_duration` (given).
    TooLong(Duration),
    /// The client took nothing for `idle_write_timeout` (given).
    ClientIdle(Duration),
}

impl Failure {
    fn outcome(&self) -> &'static str {
        match self {
            Failure::Transfer(TransferError::TooManyRows(_) | TransferError::TooManyBytes(_)) => {
                "limit"
            }
            Failure::Transfer(_) => "error",
            Failure::Shutdown => "shutdown",
            Failure::TooLong(_) | Failure::ClientIdle(_) => "timeout",
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
            Failure::TooLong(limit) => format!(
                "the response ran longer than max_stream_duration = {}",
                humantime::format_duration(*limit)
            ),
            Failure::ClientIdle(limit) => format!(
                "the client took nothing for idle_write_timeout = {}",
                humantime::format_duration(*limit)
            ),
        }
    }

    /// The error response of a failure before the first byte.
    fn into_app_error(self, ad_hoc: bool) -> AppError {
        match self {
            Failure::Transfer(TransferError::Source(error)) => AppError::from_query(error, ad_hoc),
            Failure::Transfer(TransferError::Encode(error)) => {
                AppError::Gateway(GatewayError::Internal(error.to_string()))
            }
            Failure::Transfer(_) => AppError::bad_request(self.message()),
            Failure::Shutdown => AppError::Gateway(GatewayError::Unavailable(self.message())),
            Failure::TooLong(_) | Failure::ClientIdle(_) => {
                AppError::Gateway(GatewayError::Timeout(self.message()))
            }
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
    /// When the body must have ended.
    deadline: tokio::time::Instant,
    /// `max_stream_duration`, for the message.
    max_duration: Duration,
    /// The capacity the next chunk starts with; see [`chunk_capacity`].
    chunk_capacity: usize,
}

/// The first chunk's capacity: a short query's whole body, without the
/// 96 KiB a full chunk takes (allocating and freeing that much on every
/// request costs more than the query's encoding).
const FIRST_CHUNK_BYTES: usize = 8 * 1024;

/// The capacity of the chunk after one of `filled` bytes: a body that filled
/// its last chunk will likely fill the next, so it gets the full size at once
/// rather than growing into it.
fn chunk_capacity(filled: usize) -> usize {
    const FULL: usize = FLUSH_BYTES + FLUSH_BYTES / 2;
    if filled >= FIRST_CHUNK_BYTES {
        FULL
    } else {
        FIRST_CHUNK_BYTES
    }
}

impl Running {
    /// The next chunk of the body: what [`Transfer::fill`] hands out, unless the
    /// shutdown deadline passes first. Empty once the body is complete.
    async fn fill(&mut self) -> Result<Bytes, Failure> {
        let Some(transfer) = self.transfer.as_mut() else {
            return Ok(Bytes::new());
        };
        let mut output = Vec::with_capacity(self.chunk_capacity);
        let more = tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => return Err(Failure::Shutdown),
            () = tokio::time::sleep_until(self.deadline) => return Err(Failure::TooLong(self.max_duration)),
            more = transfer.fill(&mut output) => more.map_err(Failure::Transfer)?,
        };
        self.rows = transfer.rows();
        self.bytes = transfer.bytes();
        self.chunk_capacity = chunk_capacity(output.len());
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

/// How a result is written: its format, and how a client can tell a
/// complete body from a cut one without trusting the transport.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// The format, of which `encoder` is the encoder.
    pub format: Format,
    /// End a complete body with `{"_complete": true, "rows": N}` (`?complete=1`).
    pub completion_line: bool,
    /// Send `Sluice-Rows` and `Sluice-Complete` trailers after a complete body
    /// (the request said `TE: trailers`).
    pub trailers: bool,
}

/// The trailers announced in the `Trailer` header (HTTP/1.1 sends only those).
pub const TRAILER_NAMES: &str = "Sluice-Rows, Sluice-Complete";

/// True when the request accepts trailers (`TE: trailers`).
pub fn accepts_trailers(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|entry| {
            let name = entry.split(';').next().unwrap_or("").trim();
            name.eq_ignore_ascii_case("trailers")
        })
}

/// What the filling task tells the body about its end.
#[derive(Debug, Default)]
struct Ending {
    /// Set once the last chunk (and trailers) are in the channel.
    complete: AtomicBool,
    /// Why the body stopped short, for the error that ends it.
    failure: std::sync::Mutex<Option<String>>,
}

impl Ending {
    fn failed(&self, running: &Running) {
        let message = running.error.clone();
        *self
            .failure
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = message;
    }

    fn error(&self) -> std::io::Error {
        let message = self
            .failure
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take();
        std::io::Error::other(message.unwrap_or_else(|| "the response was stopped".into()))
    }
}

type BodyFrame = Result<Frame<Bytes>, std::io::Error>;

/// What a request is answered with: the running query, the encoder and output
/// its result is written with, and the time and size limits on sending it.
pub struct Answer {
    /// The query whose rows make the body.
    pub source: Box<dyn RunningQuery>,
    /// The encoder of `output.format`.
    pub encoder: Box<dyn Encoder>,
    /// The format and how the body's ending is told.
    pub output: Output,
    /// How long the body may run and wait on its client.
    pub timing: Timing,
    /// The named query's (or `[sql]`'s) limits on the transfer.
    pub limits: Limits,
}

/// The server a response is streamed under: a shutdown stops the body, and
/// waits on the tracker for its task to log the request and cancel its query.
pub struct Serving {
    /// Cancelled when the server shuts down.
    pub shutdown: CancellationToken,
    /// The server's tasks, which a shutdown waits for.
    pub tracker: TaskTracker,
}

/// Streams the answer's query, encoded as its output says, as the response.
/// Errors until the first chunk is ready come back as [`AppError`]s (already
/// logged).
pub async fn respond(
    answer: Answer,
    context: RequestContext,
    serving: Serving,
) -> Result<Response, AppError> {
    let Answer {
        source,
        encoder,
        output,
        timing,
        limits,
    } = answer;
    let Serving { shutdown, tracker } = serving;
    let mut running = Running {
        transfer: Some(Transfer::new(source, encoder).with_limits(limits.transfer())),
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
        deadline: tokio::time::Instant::now() + timing.max_duration,
        max_duration: timing.max_duration,
        chunk_capacity: FIRST_CHUNK_BYTES,
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
    if running.state == State::Complete && !output.trailers {
        // The whole body came in the first chunk (a short query): it goes
        // with a Content-Length, in one write, without a task, a channel and
        // chunked framing, which cost more than such a query's encoding. The
        // request is logged here, as its last byte is handed to the connection.
        drop(running);
        return Ok(with_headers(Body::from(first).into_response(), &output));
    }
    let (sender, receiver) = mpsc::channel::<BodyFrame>(1);
    let ending = Arc::new(Ending::default());
    // The first chunk goes first; the channel has room for it.
    if !first.is_empty() {
        let _ = sender.try_send(Ok(Frame::data(first)));
    }
    // Followed by the tracker, so a shutdown waits for the task to log the
    // request and cancel its query.
    let tracker = running.tracker.clone();
    tracker.spawn(fill_body(
        running,
        sender,
        ending.clone(),
        output.trailers,
        timing.idle_write_timeout,
    ));
    let body = futures_util::stream::unfold(
        (receiver, ending, false),
        |(mut receiver, ending, done)| async move {
            if done {
                return None;
            }
            match receiver.recv().await {
                Some(frame) => Some((frame, (receiver, ending, false))),
                // The task is gone: a complete body ends here; any other
                // ending must not look like one, so it ends in an error.
                None if ending.complete.load(Ordering::Acquire) => None,
                None => Some((Err(ending.error()), (receiver, ending, true))),
            }
        },
    )
    // Compression may poll again after the end.
    .fuse();
    let response = (
        StatusCode::OK,
        Body::new(http_body_util::StreamBody::new(body)),
    )
        .into_response();
    Ok(with_headers(response, &output))
}

/// A 200 response's headers: the format's media type, and the trailers it
/// will have.
fn with_headers(mut response: Response, output: &Output) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(output.format.media_type()),
    );
    // Intermediaries must not buffer a stream that may be large.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if output.trailers {
        headers.insert(header::TRAILER, HeaderValue::from_static(TRAILER_NAMES));
    }
    response
}

/// The task behind a body: fills chunks and hands each over as soon as the
/// client has taken the one before, until the end, a failure, the client
/// leaving, or a time limit. Dropping `running` at the end logs the request
/// and cancels the query unless it completed.
async fn fill_body(
    mut running: Running,
    sender: mpsc::Sender<BodyFrame>,
    ending: Arc<Ending>,
    trailers: bool,
    idle_write_timeout: Duration,
) {
    while running.state == State::Streaming {
        let filled = tokio::select! {
            biased;
            // Gone while the database worked on the next chunk: stop now, not
            // when that chunk is ready.
            () = sender.closed() => return,
            filled = running.fill() => filled,
        };
        let chunk = match filled {
            Ok(chunk) => chunk,
            Err(failure) => {
                running.fail(&failure);
                // Ending the task without `complete` aborts the body.
                ending.failed(&running);
                return;
            }
        };
        if !chunk.is_empty() {
            let limits = (running.deadline, running.max_duration, idle_write_timeout);
            let handed = tokio::select! {
                // A client that stopped reading does not hold the shutdown up.
                _ = running.shutdown.cancelled() => Err(Some(Failure::Shutdown)),
                handed = hand_over(&sender, Ok(Frame::data(chunk)), limits.0, limits.2) => {
                    handed.map_err(|not_taken| match not_taken {
                        NotTaken::ClientGone => None,
                        NotTaken::Idle => Some(Failure::ClientIdle(limits.2)),
                        NotTaken::PastDeadline => Some(Failure::TooLong(limits.1)),
                    })
                }
            };
            if let Err(failure) = handed {
                if let Some(failure) = failure {
                    running.fail(&failure);
                    ending.failed(&running);
                }
                return;
            }
        }
    }
    if trailers && running.state == State::Complete {
        let mut fields = HeaderMap::new();
        fields.insert("sluice-rows", HeaderValue::from(running.rows));
        fields.insert("sluice-complete", HeaderValue::from_static("true"));
        if sender.send(Ok(Frame::trailers(fields))).await.is_err() {
            return;
        }
    }
    if running.state == State::Complete {
        ending.complete.store(true, Ordering::Release);
    }
}
