//! `POST /queries/{name}/batch`: one named query run for every NDJSON line of the
//! request body, pipelined by the database's session (prepared once, the
//! calls written back to back, the answers read as they come), with one result
//! line per input line, in input order, streamed back as NDJSON.
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
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::Value;
use sluice_core::calls::{CallOutcome, ParamSet, ParamSource, Transaction};
use sluice_core::connect::Session;
use sluice_core::database::{BoxFuture, Param};
use sluice_core::{Encoder, Error, ErrorKind};
use sluice_formats::{JsonEncoder, JsonOptions};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::io::StreamReader;

use crate::app::AppState;
use crate::auth::Need;
use crate::config::{ParamSpec, QueryConfig};
use crate::error::AppError;
use crate::stream::RequestContext;
use crate::uri::{QueryPairs, RouteName};

/// Bytes of calls sent to the database but not yet answered, at most.
pub const WINDOW_BYTES: usize = 256 * 1024;

/// Longest body line accepted; a longer one fails its call without being held.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// Chunks of result lines waiting for the client, at most.
pub const CHANNEL_CHUNKS: usize = 4;

type Chunk = Result<Bytes, io::Error>;

/// A database's way of spelling a typed parameter as text.
type Spelling = fn(&Param) -> Option<String>;

/// How a parameter set line becomes the text values of `$1`, `$2`, …, each
/// typed value spelled as the database wants it (`spell`).
fn parse_set(
    params: &[ParamSpec],
    spell: Spelling,
    line: &[u8],
) -> Result<Vec<Option<String>>, String> {
    let value: Value =
        serde_json::from_slice(line).map_err(|error| format!("invalid JSON: {error}"))?;
    let names = || {
        params
            .iter()
            .map(|param| param.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut given: Vec<Option<Value>> = vec![None; params.len()];
    match value {
        Value::Array(items) => {
            if items.len() > params.len() {
                return Err(format!(
                    "{} values, but the query takes {} parameters ({})",
                    items.len(),
                    params.len(),
                    names()
                ));
            }
            for (slot, item) in given.iter_mut().zip(items) {
                *slot = Some(item);
            }
        }
        Value::Object(object) => {
            for (key, item) in object {
                let Some(index) = params.iter().position(|param| param.name == key) else {
                    return Err(format!(
                        "parameter {key:?}: unknown parameter (this query takes: {})",
                        names()
                    ));
                };
                given[index] = Some(item);
            }
        }
        scalar if params.len() == 1 => given[0] = Some(scalar),
        _ => {
            return Err(format!(
                "expected a JSON array or an object with keys {}",
                names()
            ))
        }
    }
    params
        .iter()
        .zip(given)
        .map(|(param, value)| {
            let fault = |message: String| format!("parameter {:?}: {message}", param.name);
            let text = match value {
                None if param.required => {
                    return Err(fault(format!("required ({})", param.ty.name())))
                }
                None => match &param.default {
                    Some(default) => default.clone(),
                    None => return Ok(None),
                },
                Some(Value::Null) if param.required => {
                    return Err(fault(format!("required ({}), got null", param.ty.name())))
                }
                Some(Value::Null) => return Ok(None),
                Some(Value::String(text)) => text,
                Some(composite @ (Value::Array(_) | Value::Object(_)))
                    if param.ty != crate::params::ParamType::Json =>
                {
                    return Err(fault(format!(
                        "expected {}, got {}",
                        param.ty.name(),
                        if composite.is_array() {
                            "an array"
                        } else {
                            "an object"
                        }
                    )))
                }
                Some(other) => other.to_string(),
            };
            param
                .ty
                .parse(&text)
                .map(|param| spell(&param))
                .map_err(fault)
        })
        .collect()
}

/// Parameter sets from the lines of a body; before each, the result lines
/// gathered so far go to the response.
struct BodyLines<R> {
    reader: R,
    params: Vec<ParamSpec>,
    spell: Spelling,
    line: u64,
    buffer: Vec<u8>,
    output: Arc<Mutex<Vec<u8>>>,
    sender: mpsc::Sender<Chunk>,
    /// Body bytes failed to arrive (the client went away mid-upload).
    body_failed: bool,
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
    /// The next line into `self.buffer` (without its terminator); false at the
    /// end. A line over [`MAX_LINE_BYTES`] is read to its end but not kept:
    /// true with an empty buffer and `too_long` set.
    async fn read_line(&mut self, too_long: &mut bool) -> Result<bool, Error> {
        self.buffer.clear();
        *too_long = false;
        let mut any = false;
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(available) => available,
                Err(error) => {
                    self.body_failed = true;
                    return Err(Error::new(
                        ErrorKind::Io,
                        format!("reading the request body failed: {error}"),
                    ));
                }
            };
            if available.is_empty() {
                return Ok(any);
            }
            any = true;
            let (piece, used, done) = match available.iter().position(|&byte| byte == b'\n') {
                Some(end) => (&available[..end], end + 1, true),
                None => (available, available.len(), false),
            };
            if !*too_long && self.buffer.len() + piece.len() <= MAX_LINE_BYTES {
                self.buffer.extend_from_slice(piece);
            } else {
                *too_long = true;
                self.buffer.clear();
            }
            self.reader.consume(used);
            if done {
                return Ok(true);
            }
        }
    }
}

impl<R: AsyncBufRead + Unpin + Send> BodyLines<R> {
    /// Single mode after a failure: the pipeline read no further, so the rest of
    /// the body is read here and each of its lines reported rolled back (one
    /// result line per input line, and the client is never cut off mid-upload).
    async fn drain_rolled_back(&mut self) -> Result<(), Error> {
        let mut too_long = false;
        while self.read_line(&mut too_long).await? {
            self.line += 1;
            if !too_long && self.buffer.trim_ascii().is_empty() {
                continue;
            }
            let full = {
                let mut output = self
                    .output
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner());
                output.extend_from_slice(
                    format!("{{\"line\":{},\"rolled_back\":true}}\n", self.line).as_bytes(),
                );
                output.len() >= 64 * 1024
            };
            if full {
                flush(&self.output, &self.sender).await?;
            }
        }
        Ok(())
    }
}

impl<R: AsyncBufRead + Unpin + Send> ParamSource for BodyLines<R> {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        Box::pin(self.next_set())
    }
}

impl<R: AsyncBufRead + Unpin + Send> BodyLines<R> {
    async fn next_set(&mut self) -> Result<Option<ParamSet>, Error> {
        flush(&self.output, &self.sender).await?;
        loop {
            let mut too_long = false;
            if !self.read_line(&mut too_long).await? {
                return Ok(None);
            }
            self.line += 1;
            if too_long {
                return Ok(Some(ParamSet {
                    line: self.line,
                    values: Err(format!("the line is longer than {MAX_LINE_BYTES} bytes")),
                }));
            }
            let line = self.buffer.trim_ascii();
            if line.is_empty() {
                continue;
            }
            return Ok(Some(ParamSet {
                line: self.line,
                values: parse_set(&self.params, self.spell, line),
            }));
        }
    }
}

/// Writes one result line in `sluice call`'s shapes.
struct Lines {
    schema: sluice_core::Schema,
    encoder: JsonEncoder,
    scratch: Vec<u8>,
}

impl Lines {
    fn write(
        &mut self,
        line: u64,
        outcome: CallOutcome<'_>,
        output: &mut Vec<u8>,
    ) -> Result<(), Error> {
        let scratch = &mut self.scratch;
        scratch.clear();
        scratch.extend_from_slice(format!("{{\"line\":{line},").as_bytes());
        match outcome {
            CallOutcome::Done { rows, .. } if !self.schema.is_empty() => {
                scratch.extend_from_slice(b"\"rows\":");
                self.encoder.begin(&self.schema, scratch)?;
                self.encoder.encode(rows, scratch)?;
                self.encoder.finish(scratch)?;
                // The array encoder puts each row on a line of its own; this is one line.
                scratch.retain(|&byte| byte != b'\n');
            }
            CallOutcome::Done { affected, .. } => {
                let affected = affected.map_or("null".to_owned(), |count| count.to_string());
                scratch.extend_from_slice(format!("\"affected\":{affected}").as_bytes());
            }
            CallOutcome::Failed(db) => {
                let mut error = serde_json::Map::new();
                error.insert("code".into(), db.code.clone().into());
                error.insert("message".into(), db.message.clone().into());
                if let Some(detail) = &db.detail {
                    error.insert("detail".into(), detail.clone().into());
                }
                scratch.extend_from_slice(format!("\"error\":{}", Value::Object(error)).as_bytes());
            }
            CallOutcome::Invalid(reason) => {
                scratch.extend_from_slice(
                    format!("\"error\":{}", serde_json::json!({ "message": reason })).as_bytes(),
                );
            }
            CallOutcome::RolledBack => scratch.extend_from_slice(b"\"rolled_back\":true"),
        }
        scratch.extend_from_slice(b"}\n");
        output.extend_from_slice(scratch);
        Ok(())
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
    let mut context = RequestContext::new("batch", name.clone(), false, state.shutdown_token());
    let prepared = async {
        let Some(config) = state.config().queries.get(&name) else {
            state.auth().check(&headers, Need::Query(&name))?;
            return Err(AppError::NotFound(format!("no query named {name:?}")));
        };
        context.token = state.auth().check(&headers, Need::Query(&name))?;
        let may_write = state.auth().has_scope(&headers, "write");
        let QueryPairs(pairs) = query?;
        let mut mode = None;
        for (key, value) in &pairs {
            if key != "transaction" {
                return Err(AppError::parameter(
                    key,
                    "unknown parameter (a batch takes transaction=single|each; the calls' \
                     parameters are the body's lines)",
                ));
            }
            let chosen = match value.as_str() {
                "single" => Transaction::Single,
                "each" => Transaction::Each,
                _ => return Err(AppError::parameter(key, "expected single or each")),
            };
            if mode.replace(chosen).is_some() {
                return Err(AppError::parameter(key, "given more than once"));
            }
        }
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
        Ok((config.clone(), session, mode.unwrap_or_default()))
    }
    .await;
    let (config, session, mode) = match prepared {
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
    tokio::spawn(async move {
        tokio::select! {
            () = pipeline_task(config, session, mode, body, sender, ready, context) => {}
            // Dropping the task closes the session: the server rolls back what is open.
            () = shutdown.cancelled() => {}
        }
    });
    match started.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return error.into_response(),
        Err(_) => {
            return AppError::Unavailable("the server is shutting down".into()).into_response()
        }
    }
    let body = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    })
    .fuse();
    let mut response = (StatusCode::OK, Body::from_stream(body)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Prepares the statement (answering `ready`), runs the pipeline over the body's
/// lines, sends the result lines, and logs the request.
async fn pipeline_task(
    config: QueryConfig,
    mut session: Box<dyn Session>,
    mode: Transaction,
    body: Body,
    sender: mpsc::Sender<Chunk>,
    ready: oneshot::Sender<Result<(), AppError>>,
    mut context: RequestContext,
) {
    let mut ready = Some(ready);
    let output = Arc::new(Mutex::new(Vec::new()));
    let reader = BufReader::with_capacity(
        64 * 1024,
        StreamReader::new(
            body.into_data_stream()
                .map(|chunk| chunk.map_err(io::Error::other)),
        ),
    );
    let mut source = BodyLines {
        reader,
        params: config.params.clone(),
        spell: session.param_spelling(),
        line: 0,
        buffer: Vec::new(),
        output: output.clone(),
        sender: sender.clone(),
        body_failed: false,
    };
    let outcome = async {
        let pipeline = match session.prepare_calls(&config.sql).await {
            Ok(pipeline) => pipeline,
            Err(error) => return Err((Some(AppError::from_query(error, false)), None)),
        };
        if pipeline.parameters() != config.params.len() {
            return Err((
                Some(AppError::Internal(format!(
                    "query {:?} declares {} parameters but its SQL takes {}",
                    config.name,
                    config.params.len(),
                    pipeline.parameters()
                ))),
                None,
            ));
        }
        let mut lines = Lines {
            schema: pipeline.schema().clone(),
            encoder: JsonEncoder::array(JsonOptions::default()),
            scratch: Vec::with_capacity(1024),
        };
        if let Some(ready) = ready.take() {
            let _ = ready.send(Ok(()));
            // Cut by the shutdown deadline from now on, the request is logged as a 200.
            context.response_began(200);
        }
        let mut report = |line: u64, outcome: CallOutcome<'_>| -> Result<(), Error> {
            let mut output = output.lock().unwrap_or_else(|poison| poison.into_inner());
            lines.write(line, outcome, &mut output)
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
    let body_failed = source.body_failed;
    drop(source);
    match outcome {
        Ok(summary) => {
            // The lines reported last, then the end of the body.
            // The session keeps its settings: the next user sets what it needs.
            let flushed = flush(&output, &sender).await;
            let round_trips = session.round_trips();
            match flushed {
                Ok(_) => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ParamType;
    use sluice_postgres::gateway::param_text;

    fn param(name: &str, ty: ParamType, required: bool, default: Option<&str>) -> ParamSpec {
        ParamSpec {
            name: name.into(),
            ty,
            required,
            default: default.map(str::to_owned),
            description: None,
            line: 1,
        }
    }

    #[test]
    fn parameter_sets_are_arrays_or_objects_checked_by_type() {
        let params = [
            param("id", ParamType::Int, true, None),
            param("since", ParamType::TimestampTz, false, Some("2024-01-01")),
            param("note", ParamType::Text, false, None),
        ];
        let set = |line: &str| parse_set(&params, param_text, line.as_bytes());
        assert_eq!(
            set(r#"[7, "2024-03-01T12:00:00+02:00", "x"]"#).unwrap(),
            [
                Some("7".into()),
                Some("2024-03-01 10:00:00+00".into()),
                Some("x".into())
            ]
        );
        assert_eq!(
            set(r#"{"id": "8", "note": null}"#).unwrap(),
            [
                Some("8".into()),
                Some("2024-01-01 00:00:00+00".into()),
                None
            ]
        );
        assert_eq!(set("[9]").unwrap()[0], Some("9".into()));
        for (line, fault) in [
            (r#"{"note": "x"}"#, "\"id\": required"),
            (r#"{"id": 1, "colour": "red"}"#, "\"colour\": unknown"),
            (r#"["x"]"#, "\"id\": expected an integer"),
            (r#"[1, "yesterday"]"#, "\"since\""),
            ("[1, null, null, 4]", "4 values"),
            ("[1, null, [2]]", "\"note\": expected text, got an array"),
            ("{", "invalid JSON"),
            ("5", "expected a JSON array"),
        ] {
            let error = set(line).unwrap_err();
            assert!(error.contains(fault), "{line}: {error}");
        }
        let one = [param("n", ParamType::BigInt, true, None)];
        assert_eq!(
            parse_set(&one, param_text, b"42").unwrap(),
            [Some("42".into())]
        );
    }
}
