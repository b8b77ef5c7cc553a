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
//! [`MAX_LINE_BYTES`]), the result lines of the calls in flight, and the channel.
//! A failure after the response started (the database gone, a COMMIT refused)
//! aborts the body, so it never looks complete.

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
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
use sluice_gateway::AppState;
use sluice_gateway::GatewayError;

use crate::batch_array::{array_as_lines, framed_as_array, BodyForm, MAX_ARRAY_BODY_BYTES};
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

/// Parameter sets from the lines of a body; before each, the result lines
/// gathered so far go to the response.
struct BodyLines<R> {
    lines: ParamLines<R>,
    output: Arc<Mutex<Vec<u8>>>,
    sender: mpsc::Sender<Chunk>,
}

/// Hands the gathered result lines to the response; an error once the client has gone.
async fn flush(output: &Mutex<Vec<u8>>, sender: &mpsc::Sender<Chunk>) -> Result<usize, Error> {
    let chunk = {
        let mut output = output.lock().unwrap_or_else(|poison| poison.into_inner());
        if output.is_empty() {
            return Ok(0);
        }
        Bytes::from(std::mem::take(&mut *output))
    };
    let length = chunk.len();
    sender.send(Ok(chunk)).await.map_err(|_| {
        Error::new(
            ErrorKind::OutputClosed,
            "the client went away before the results were sent",
        )
    })?;
    Ok(length)
}

impl<R: AsyncBufRead + Unpin + Send> BodyLines<R> {
    /// Single mode after a failure: the pipeline read no further, so the rest of
    /// the body is read here and each of its lines reported rolled back (one
    /// result line per input line, and the client is never cut off mid-upload).
    async fn drain_rolled_back(&mut self) -> Result<(), Error> {
        while let Some((line, _)) = self.lines.next_line().await? {
            let full = {
                let mut output = self
                    .output
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner());
                output.extend_from_slice(
                    format!("{{\"line\":{line},\"rolled_back\":true}}\n").as_bytes(),
                );
                output.len() >= 64 * 1024
            };
            if full {
                flush(&self.output, &self.sender).await?;
            }
        }
        Ok(())
    }

    async fn next_set(&mut self) -> Result<Option<ParamSet>, Error> {
        flush(&self.output, &self.sender).await?;
        self.lines.next().await
    }
}

impl<R: AsyncBufRead + Unpin + Send> ParamSource for BodyLines<R> {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        Box::pin(self.next_set())
    }
}

/// The handler: checks, then hands the session and the body to a pipeline task
/// and answers once the statement is prepared.
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
        let body = match form {
            BodyForm::Lines => crate::body::limited(&headers, body, state.config().max_body)?.0,
            BodyForm::Array => {
                let limit = state.config().max_body.min(MAX_ARRAY_BODY_BYTES);
                let (body, overrun) = crate::body::limited(&headers, body, limit)?;
                array_as_lines(body, &overrun).await?
            }
        };
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
        Ok((config.clone(), session, mode, body, form))
    }
    .await;
    let (config, session, mode, body, form) = match prepared {
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
        config,
        mode,
        sender,
        ready,
        completed: completed.clone(),
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
    let chunks = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    })
    .fuse();
    let body = match form {
        BodyForm::Lines => Body::from_stream(chunks),
        BodyForm::Array => Body::from_stream(framed_as_array(chunks, completed)),
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

/// What the pipeline task is given besides its session, body and log entry.
struct Pipeline {
    config: QueryConfig,
    mode: Transaction,
    /// Where the result lines go.
    sender: mpsc::Sender<Chunk>,
    /// Answered once the statement is prepared (or refused).
    ready: oneshot::Sender<Result<(), AppError>>,
    /// Set when every result has been sent and the batch ended well.
    completed: Arc<AtomicBool>,
}

/// Prepares the statement (answering `ready`), runs the pipeline over the body's
/// lines, sends the result lines, and logs the request.
async fn pipeline_task(
    task: Pipeline,
    mut session: Box<dyn Session>,
    body: futures_util::stream::BoxStream<'static, io::Result<Bytes>>,
    mut context: RequestContext,
) {
    let Pipeline {
        config,
        mode,
        sender,
        ready,
        completed,
    } = task;
    let mut ready = Some(ready);
    let output = Arc::new(Mutex::new(Vec::new()));
    let reader = BufReader::with_capacity(64 * 1024, StreamReader::new(body));
    let mut source = BodyLines {
        lines: ParamLines::new(
            reader,
            config.signature.clone(),
            session.param_spelling(),
            MAX_LINE_BYTES,
        ),
        output: output.clone(),
        sender: sender.clone(),
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
            let mut output = output.lock().unwrap_or_else(|poison| poison.into_inner());
            output.extend_from_slice(line);
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
    let round_trips_before_reset = session.round_trips();
    let body_failed = source.lines.input_failed();
    drop(source);
    match outcome {
        Ok(summary) => {
            // The lines reported last, then the end of the body.
            // The session keeps its settings: the next user sets what it needs.
            let flushed = flush(&output, &sender).await;
            let round_trips = session.round_trips();
            match flushed {
                Ok(_) => {
                    completed.store(true, std::sync::atomic::Ordering::Release);
                    session.close().await;
                    context.finish(200, "complete", summary.calls, 0, round_trips, None);
                }
                Err(error) => {
                    context.finish(
                        200,
                        "client_gone",
                        summary.calls,
                        0,
                        round_trips,
                        Some(&error.to_string()),
                    );
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
                round_trips_before_reset,
                Some(&error.to_string()),
            );
            if let Some(ready) = ready.take() {
                let _ = ready.send(Err(error));
            }
        }
        Err((None, error)) => {
            let error = error.unwrap_or_else(|| Error::protocol("the pipeline failed"));
            let outcome = if error.kind() == ErrorKind::OutputClosed || body_failed {
                "client_gone"
            } else {
                "error"
            };
            // What was reported is true; then the body is aborted, never ended cleanly.
            let _ = flush(&output, &sender).await;
            let _ = sender.send(Err(io::Error::other(error.to_string()))).await;
            context.finish(
                200,
                outcome,
                0,
                0,
                round_trips_before_reset,
                Some(&error.to_string()),
            );
            // The session is dropped, not released: its transaction is rolled back.
        }
    }
}
