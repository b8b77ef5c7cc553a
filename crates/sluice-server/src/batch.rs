//! `POST /queries/{name}/batch`: one named query run for every NDJSON line of the
//! request body, pipelined by the database's session (prepared once, the
//! calls written back to back, the answers read as they come), with one result
//! line per input line, in input order, streamed back as NDJSON.
//!
//! The body may also be one JSON array of such calls (`Content-Type:
//! application/json`), answered with one JSON array of the result lines
//! ([`crate::batch_array`]): the form clients generated from the OpenAPI
//! document use.
//!
//! A line is a JSON array (the n-th value is the n-th declared parameter) or an
//! object keyed by the parameter names (or, for a query with one parameter, a
//! single value). Values are checked by the declared types exactly as query-string
//! values of `GET /queries/{name}` are, missing ones take their defaults, and a
//! line that does not check out fails its call (`{"line":N,"error":{"message":…}}`).
//! Result lines have the shapes `sluice call` writes:
//! `{"line":N,"rows":[…]}` (statements returning rows), `{"line":N,"affected":K}`,
//! `{"line":N,"error":{"code","message","detail"}}`, `{"line":N,"rolled_back":true}`.
//!
//! `?transaction=single` (default): all calls in one transaction; any failed call
//! rolls back everything (result lines before it were already sent: in single
//! mode an `error` line means nothing was committed). `?transaction=each`: each
//! call commits or fails on its own.
//!
//! Tokens: the named query's own permission. Writing needs scope `write` as well:
//! without it the calls run with `default_transaction_read_only = on`, so a call
//! that writes fails with SQLSTATE 25006.
//!
//! Concurrency and memory: the pipeline runs in a task that owns the database
//! session and reads the body as it needs parameter sets. Result lines are
//! collected as the pipeline reports them and handed to the response body
//! through a channel of [`CHANNEL_CHUNKS`] chunks whenever the pipeline asks for
//! the next set; a client that reads slowly therefore stops the pipeline (and
//! with it the reading of the body and the database). Memory per request is the
//! pipeline's window ([`WINDOW_BYTES`] of unanswered calls), one body line (at most
//! [`MAX_LINE_BYTES`]), the result lines of the calls in flight, and the channel,
//! besides what of the body is read before the session (below).
//! A failure after the response started (the database gone, a COMMIT refused)
//! aborts the body, so it never looks complete.
//!
//! A client cannot hold a session by being slow. The body is read before a
//! session is taken as far as the route allows: whole for a JSON array and for
//! a token without scope `write` (at most [`MAX_HELD_BODY_BYTES`]: its calls
//! only read, and it must not be able to hold the pool at all), else its first
//! [`READ_AHEAD_BYTES`], which most batches fit in. What streams after that is
//! held to the body's pace ([`crate::body`]): a body that comes too slowly is
//! ended, with 408 if that happens before the session is taken, otherwise by
//! cutting the response (and the session's transaction is rolled back). The
//! results are handed to the client within `idle_write_timeout` and
//! `max_stream_duration`, as a query's rows are.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use sluice_core::calls::{CallOutcome, ParamSet, ParamSource, Transaction};
use sluice_core::connect::Session;
use sluice_core::database::BoxFuture;
use sluice_core::{Error, ErrorKind};
use sluice_formats::{CallLines, ParamLines};
use tokio::io::{AsyncBufRead, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::io::StreamReader;

use sluice_gateway::config::QueryConfig;
use sluice_gateway::{hand_over, AppState, GatewayError, NotTaken, Timing};

use crate::batch_array::{array_as_lines, framed_as_array, BodyForm};
#[cfg(doc)]
use crate::body::MAX_HELD_BODY_BYTES;
use crate::body::{limited, read_ahead, Cut, Limit, Pace, READ_AHEAD_BYTES};
use crate::error::AppError;
use sluice_gateway::RequestContext;

use crate::stream::HTTP;
use crate::uri::{check_known_once, single, QueryPairs, RouteName};

/// Bytes of calls sent to the database but not yet answered, at most.
pub const WINDOW_BYTES: usize = 256 * 1024;

/// Longest body line accepted; a longer one fails its call without being held.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// Chunks of result lines waiting for the client, at most.
pub const CHANNEL_CHUNKS: usize = 4;

type Chunk = Result<Bytes, io::Error>;

/// Where result lines go: gathered as the pipeline reports them, then handed
/// to the response's body a chunk at a time, each within the response's time
/// limits (`idle_write_timeout`, `max_stream_duration`), as a query's rows are.
struct Results {
    gathered: Arc<Mutex<Vec<u8>>>,
    sender: mpsc::Sender<Chunk>,
    /// When the response must have ended.
    deadline: tokio::time::Instant,
    timing: Timing,
    /// Why a chunk was not taken in time, if one was not.
    late: Option<NotTaken>,
}

impl Results {
    fn new(sender: mpsc::Sender<Chunk>, timing: Timing) -> Results {
        Results {
            gathered: Arc::default(),
            sender,
            deadline: tokio::time::Instant::now() + timing.max_duration,
            timing,
            late: None,
        }
    }

    /// Adds one result line; true once the lines gathered are worth a chunk.
    fn gather(&self, line: &[u8]) -> bool {
        let mut gathered = lock(&self.gathered);
        gathered.extend_from_slice(line);
        gathered.len() >= 64 * 1024
    }

    /// Hands the gathered result lines to the response; an error once the
    /// client has gone, or has taken nothing for `idle_write_timeout`, or the
    /// response has run for `max_stream_duration`.
    async fn flush(&mut self) -> Result<usize, Error> {
        let chunk = {
            let mut gathered = lock(&self.gathered);
            if gathered.is_empty() {
                return Ok(0);
            }
            Bytes::from(std::mem::take(&mut *gathered))
        };
        let length = chunk.len();
        let handed = hand_over(
            &self.sender,
            Ok(chunk),
            self.deadline,
            self.timing.idle_write_timeout,
        )
        .await;
        handed.map_err(|not_taken| {
            let message = match not_taken {
                NotTaken::ClientGone => "the client went away before the results were sent".into(),
                NotTaken::Idle => format!(
                    "the client took no results for {:?} (idle_write_timeout)",
                    self.timing.idle_write_timeout
                ),
                NotTaken::PastDeadline => format!(
                    "the batch ran for {:?} (max_stream_duration)",
                    self.timing.max_duration
                ),
            };
            if not_taken != NotTaken::ClientGone {
                self.late = Some(not_taken);
            }
            Error::new(ErrorKind::OutputClosed, message)
        })?;
        Ok(length)
    }
}

/// The gathered lines, even if a thread panicked while adding to them: each
/// line is added whole.
fn lock(gathered: &Mutex<Vec<u8>>) -> std::sync::MutexGuard<'_, Vec<u8>> {
    gathered.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// Parameter sets from the lines of a body; before each, the result lines
/// gathered so far go to the response.
struct BodyLines<R> {
    lines: ParamLines<R>,
    results: Results,
}

impl<R: AsyncBufRead + Unpin + Send> BodyLines<R> {
    /// Single mode after a failure: the pipeline read no further, so the rest of
    /// the body is read here and each of its lines reported rolled back (one
    /// result line per input line, and the client is never cut off mid-upload).
    async fn drain_rolled_back(&mut self) -> Result<(), Error> {
        while let Some((line, _)) = self.lines.next_line().await? {
            let rolled_back = format!("{{\"line\":{line},\"rolled_back\":true}}\n");
            if self.results.gather(rolled_back.as_bytes()) {
                self.results.flush().await?;
            }
        }
        Ok(())
    }

    async fn next_set(&mut self) -> Result<Option<ParamSet>, Error> {
        self.results.flush().await?;
        self.lines.next().await
    }
}

impl<R: AsyncBufRead + Unpin + Send> ParamSource for BodyLines<R> {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        Box::pin(self.next_set())
    }
}

/// The handler: checks, reads the body (all of it that a session must not
/// wait for, see the module docs), then hands the session and the body to a
/// pipeline task and answers once the statement is prepared.
pub async fn run_batch(
    State(state): State<AppState>,
    RouteName(name): RouteName,
    query: Result<QueryPairs, AppError>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut context =
        RequestContext::new(HTTP, "batch", name.clone(), false, state.shutdown_token());
    let prepared = async {
        let config = state.admit_query(crate::auth::credential(&headers), &name, &mut context)?;
        let may_write = state.auth().has_scope(crate::auth::credential(&headers), "write");
        let QueryPairs(pairs) = query?;
        check_known_once(
            &pairs,
            &["transaction"],
            "unknown parameter (a batch takes transaction=single|each; the calls' \
             parameters are the body's lines)",
        )?;
        let mode = match single(&pairs, "transaction")? {
            None | Some("single") => Transaction::Single,
            Some("each") => Transaction::Each,
            Some(_) => {
                return Err(AppError::parameter(
                    "transaction",
                    "expected single or each",
                ))
            }
        };
        let form = BodyForm::of(&headers);
        let (body, cut) = read_before_session(&state, &headers, body, form, may_write).await?;
        let database = state.database(&config.database)?;
        let Some(session) = database
            .session(config.limits.statement_timeout, !may_write)
            .await
        else {
            return Err(AppError::MethodNotAllowed(format!(
                "query {name:?} runs on {}, which is served read-only: batches need a database that takes writes",
                database.kind().product()
            )));
        };
        let session = session.map_err(|error| AppError::from_start(error, false))?;
        Ok((config.clone(), session, mode, (body, cut), form))
    }
    .await;
    let (config, session, mode, (body, cut), form) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => {
            context.finish(
                error.status().as_u16(),
                "rejected",
                0,
                0,
                0,
                Some(&error.to_string()),
            );
            return error.into_response();
        }
    };
    let (sender, receiver) = mpsc::channel::<Chunk>(CHANNEL_CHUNKS);
    let (ready, started) = oneshot::channel::<Result<(), AppError>>();
    let shutdown = state.shutdown_token();
    let completed = Arc::new(AtomicBool::new(false));
    let task = Pipeline {
        results: Results::new(sender, state.config().timing(&config.limits)),
        config,
        mode,
        ready,
        completed: completed.clone(),
        cut,
    };
    tokio::spawn(async move {
        tokio::select! {
            () = pipeline_task(task, session, body, context) => {}
            // Dropping the task closes the session: the server rolls back what is open.
            () = shutdown.cancelled() => {}
        }
    });
    match started.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return error.into_response(),
        Err(_) => {
            return AppError::Gateway(GatewayError::Unavailable(
                "the server is shutting down".into(),
            ))
            .into_response()
        }
    }
    let chunks = ended_truthfully(receiver, completed);
    let body = match form {
        BodyForm::Lines => Body::from_stream(chunks),
        BodyForm::Array => Body::from_stream(framed_as_array(chunks)),
    };
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(form.media_type()),
    );
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Reads what of the body must come before a database session is taken: a
/// JSON array, and NDJSON from a token without scope `write` (whose calls
/// only read), whole; other NDJSON, its first [`READ_AHEAD_BYTES`]. The body
/// is given back whole, with what tells whether it was cut (and why).
async fn read_before_session(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    form: BodyForm,
    may_write: bool,
) -> Result<(BoxStream<'static, io::Result<Bytes>>, Cut), AppError> {
    let max_body = state.config().max_body;
    let (limit, ahead) = match (form, may_write) {
        (BodyForm::Lines, true) => (Limit::max_body(max_body), READ_AHEAD_BYTES),
        _ => (Limit::held_whole(max_body), usize::MAX),
    };
    let (body, cut) = limited(headers, body, limit, Pace::of(state.config()))?;
    let body = match form {
        BodyForm::Array => array_as_lines(body, &cut).await?,
        BodyForm::Lines => read_ahead(body, ahead)
            .await
            .map_err(|error| cut.read_error(&error))?,
    };
    Ok((body, cut))
}

/// The result chunks as the response's body, which ends cleanly only once
/// `completed` says the batch ended well, and otherwise in an error (hyper
/// then aborts the transfer): a cut batch never looks complete.
fn ended_truthfully(
    receiver: mpsc::Receiver<Chunk>,
    completed: Arc<AtomicBool>,
) -> impl futures_util::Stream<Item = Chunk> + Send + 'static {
    futures_util::stream::unfold(Some(receiver), move |receiver| {
        let completed = completed.clone();
        async move {
            let mut receiver = receiver?;
            match receiver.recv().await {
                Some(chunk) => Some((chunk, Some(receiver))),
                None if completed.load(Ordering::Acquire) => None,
                None => Some((
                    Err(io::Error::other("the batch ended before its last result")),
                    None,
                )),
            }
        }
    })
    // A body may be polled again after its end (the compression layer does).
    .fuse()
}

/// What the pipeline task is given besides its session, body and log entry.
struct Pipeline {
    config: QueryConfig,
    mode: Transaction,
    /// Where the result lines go.
    results: Results,
    /// Answered once the statement is prepared (or refused).
    ready: oneshot::Sender<Result<(), AppError>>,
    /// Set when every result has been sent and the batch ended well.
    completed: Arc<AtomicBool>,
    /// Whether the body was cut, and why.
    cut: Cut,
}

/// Prepares the statement (answering `ready`), runs the pipeline over the body's
/// lines, sends the result lines, and logs the request. The session goes back
/// (or, after a failure, is dropped) before the last result lines are handed
/// over, so it never waits on the client.
async fn pipeline_task(
    task: Pipeline,
    mut session: Box<dyn Session>,
    body: BoxStream<'static, io::Result<Bytes>>,
    mut context: RequestContext,
) {
    let Pipeline {
        config,
        mode,
        results,
        ready,
        completed,
        cut,
    } = task;
    let mut ready = Some(ready);
    let gathered = results.gathered.clone();
    let reader = BufReader::with_capacity(64 * 1024, StreamReader::new(body));
    let mut source = BodyLines {
        lines: ParamLines::new(
            reader,
            config.signature.clone(),
            session.param_spelling(),
            MAX_LINE_BYTES,
        ),
        results,
    };
    let outcome = async {
        let pipeline = match session.prepare_calls(&config.sql).await {
            Ok(pipeline) => pipeline,
            Err(error) => return Err((Some(AppError::from_query(error, false)), None)),
        };
        if pipeline.parameters() != config.params.len() {
            return Err((
                Some(AppError::Gateway(GatewayError::Internal(format!(
                    "query {:?} declares {} parameters but its SQL takes {}",
                    config.name,
                    config.params.len(),
                    pipeline.parameters()
                )))),
                None,
            ));
        }
        let mut lines = CallLines::new(pipeline.schema().clone());
        if let Some(ready) = ready.take() {
            let _ = ready.send(Ok(()));
            // Cut by the shutdown deadline from now on, the request is logged as a 200.
            context.response_began(200);
        }
        let mut report = |line: u64, outcome: CallOutcome<'_>| -> Result<(), Error> {
            let line = lines.line(line, outcome)?;
            lock(&gathered).extend_from_slice(line);
            Ok(())
        };
        let summary = pipeline
            .run(&mut source, mode, WINDOW_BYTES, &mut report)
            .await
            .map_err(|error| (None, Some(error)))?;
        if mode == Transaction::Single && summary.failed > 0 {
            source
                .drain_rolled_back()
                .await
                .map_err(|error| (None, Some(error)))?;
        }
        Ok(summary)
    }
    .await;
    let round_trips = session.round_trips();
    let BodyLines { lines, mut results } = source;
    let body_failed = lines.input_failed();
    drop(lines);
    match outcome {
        Ok(summary) => {
            // The session keeps its settings: the next user sets what it needs.
            session.close().await;
            // The lines reported last, then the end of the body.
            match results.flush().await {
                Ok(_) => {
                    completed.store(true, Ordering::Release);
                    context.finish(200, "complete", summary.calls, 0, round_trips, None);
                }
                Err(error) => {
                    let outcome = ended_early(&error, &results, &cut, body_failed);
                    let message = error.to_string();
                    context.finish(200, outcome, summary.calls, 0, round_trips, Some(&message));
                }
            }
        }
        Err((Some(error), _)) => {
            // Before the response: a proper error status.
            context.finish(
                error.status().as_u16(),
                "rejected",
                0,
                0,
                round_trips,
                Some(&error.to_string()),
            );
            if let Some(ready) = ready.take() {
                let _ = ready.send(Err(error));
            }
        }
        Err((None, error)) => {
            let error = error.unwrap_or_else(|| Error::protocol("the pipeline failed"));
            // Dropped, not given back: its transaction is rolled back.
            drop(session);
            // What was reported is true; then the body ends in an error (it
            // was not completed), never cleanly.
            let _ = results.flush().await;
            let outcome = ended_early(&error, &results, &cut, body_failed);
            context.finish(200, outcome, 0, 0, round_trips, Some(&error.to_string()));
        }
    }
}

/// The log's outcome of a batch that ended after its response began.
fn ended_early(error: &Error, results: &Results, cut: &Cut, body_failed: bool) -> &'static str {
    if cut.too_slow() || results.late.is_some() {
        "timeout"
    } else if cut.happened() {
        "limit"
    } else if error.kind() == ErrorKind::OutputClosed || body_failed {
        "client_gone"
    } else {
        "error"
    }
}
