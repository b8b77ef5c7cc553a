//! The HTTP API: [`app`] builds the router over an [`AppState`] and holds the
//! handlers of queries, ad-hoc SQL, health, metrics and the OpenAPI document.
//!
//! | route | what |
//! |---|---|
//! | `GET /queries/{name}?param=value` | stream a named query (`Accept` or `?format=`: NDJSON, JSON, CSV, Arrow IPC stream) |
//! | `POST /sql` | stream ad-hoc SQL (`{"sql": "...", "params": [...]}`), if enabled, scope `sql` |
//! | `POST /tables/{name}` | stream an NDJSON or CSV body into an allow-listed table, scope `write` ([`crate::ingest`]) |
//! | `POST /queries/{name}/batch` | run a named query for each NDJSON line of the body, pipelined ([`crate::batch`]) |
//! | `GET /health` | `select 1` on every database (a pool with no free session is `busy`, not waited for): 200 healthy, 503 otherwise |
//! | `GET /metrics` | Prometheus text |
//! | `GET /openapi.json` | OpenAPI 3 description of every named query |
//!
//! Responses are compressed with gzip or zstd when the client's `Accept-Encoding`
//! asks for it. Without tokens, every route first checks the `Host` header
//! ([`crate::auth::check_host`]).

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use sluice_formats::{untyped_param, Format, JsonOptions};
use tokio_util::sync::CancellationToken;
use tower_http::compression::CompressionLayer;

use sluice_core::database::Param;
use sluice_gateway::config::QueryConfig;
use sluice_gateway::GatewayError;

use crate::body::{limited, read_whole, Limit, Pace};
use crate::error::AppError;
use sluice_gateway::AppState;
use sluice_gateway::RequestContext;

use crate::stream::{respond, Answer, Output, Serving, HTTP};
use crate::uri::{single, QueryPairs, RouteName};
use sluice_core::database::{Access, RunningQuery};

/// The router. Tests drive it with `tower::ServiceExt::oneshot`; `sluice serve`
/// serves it on a listener.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/queries/{name}", get(run_query))
        .route("/queries/{name}/batch", post(crate::batch::run_batch))
        .route("/sql", post(run_sql))
        .route("/tables/{name}", post(crate::ingest::ingest))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .fallback(not_found)
        .layer(CompressionLayer::new())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            request_guard,
        ))
        .with_state(state)
}

/// Why Parquet and Arrow's file format are not served: both are read from a
/// footer written last, so a client can use nothing before the end.
const NOT_STREAMED: &str = "Parquet and the Arrow file format are not offered over HTTP \
     (each is read from a footer written last): ask for application/vnd.apache.arrow.stream";

/// The format asked for by `?format=` or else by `Accept` (by quality, then order;
/// no header or `*/*` means NDJSON). Formats that cannot stream are not offered.
pub fn choose_format(format: Option<&str>, headers: &HeaderMap) -> Result<Format, AppError> {
    if let Some(format) = format {
        let format: Format = format
            .parse()
            .map_err(|message: String| AppError::parameter("format", message))?;
        return match format.is_streamable() {
            true => Ok(format),
            false => Err(AppError::NotAcceptable(NOT_STREAMED.into())),
        };
    }
    let Some(accept) = headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
    else {
        return Ok(Format::Ndjson);
    };
    let mut candidates: Vec<(f32, usize, &str)> = Vec::new();
    for (index, entry) in accept.split(',').enumerate() {
        let mut parts = entry.split(';');
        let media = parts.next().unwrap_or("").trim();
        let quality = parts
            .filter_map(|part| part.trim().strip_prefix("q="))
            .filter_map(|value| value.trim().parse::<f32>().ok())
            .next()
            .unwrap_or(1.0);
        if quality > 0.0 && !media.is_empty() {
            candidates.push((quality, index, media));
        }
    }
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut footer_last = false;
    for (_, _, media) in candidates {
        let format = match media.to_ascii_lowercase().as_str() {
            "application/x-ndjson"
            | "application/ndjson"
            | "application/jsonl"
            | "application/x-jsonlines"
            | "*/*"
            | "application/*" => Format::Ndjson,
            "application/json" => Format::Json,
            "text/csv" | "text/*" => Format::Csv,
            "application/vnd.apache.arrow.stream" => Format::Arrow,
            "application/vnd.apache.arrow.file" | "application/vnd.apache.parquet" => {
                footer_last = true;
                continue;
            }
            _ => continue,
        };
        return Ok(format);
    }
    Err(AppError::NotAcceptable(match footer_last {
        true => NOT_STREAMED.into(),
        false => "acceptable formats: application/x-ndjson, application/json, text/csv, \
             application/vnd.apache.arrow.stream"
            .into(),
    }))
}

/// Checks the request's parameters against the query's declarations: every key
/// known and given once, every value of its type, required ones present.
fn bind_params(query: &QueryConfig, pairs: &[(String, String)]) -> Result<Vec<Param>, AppError> {
    query
        .signature
        .bind_pairs(
            pairs
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_str())),
            |key| sluice_gateway::config::RESERVED_PARAMETERS.contains(&key),
        )
        .map_err(AppError::from)
}

async fn run_query(
    State(state): State<AppState>,
    RouteName(name): RouteName,
    query: Result<QueryPairs, AppError>,
    headers: HeaderMap,
) -> Response {
    let mut context =
        RequestContext::new(HTTP, "queries", name.clone(), false, state.shutdown_token());
    let prepared = async {
        let config = state.admit_query(crate::auth::credential(&headers), &name, &mut context)?;
        // A GET must not write unless the token may.
        let read_only = !state
            .auth()
            .has_scope(crate::auth::credential(&headers), "write");
        let QueryPairs(pairs) = query?;
        let output = output_of(&pairs, &headers)?;
        let params = bind_params(config, &pairs)?;
        let database = state.database(&config.database)?;
        let source = database
            .start(
                &config.sql,
                params,
                config.limits.statement_timeout,
                Access::Named { read_only },
                sluice_gateway::Reading {
                    format: output.format,
                    inline_large_objects: config.inline_large_objects,
                },
            )
            .await
            .map_err(|error| AppError::from_start(error, false))?;
        Ok((source, output, config.limits.clone()))
    }
    .await;
    stream_or_reject(prepared, context, &state).await
}

/// The output asked for: the format by `?format=`, else by `Accept`, and
/// `?complete=` (`1`/`true` or `0`/`false`), each given at most once: the completion line for NDJSON;
/// nothing to add for JSON and Arrow, whose bodies cannot end whole without
/// their closing `]` or end-of-stream marker; refused for CSV, which has
/// neither (trailers are its way).
fn output_of(pairs: &[(String, String)], headers: &HeaderMap) -> Result<Output, AppError> {
    let format = choose_format(single(pairs, "format")?, headers)?;
    let completion_line = match single(pairs, "complete")? {
        None | Some("0" | "false") => false,
        Some("1" | "true") => true,
        Some(_) => return Err(AppError::parameter("complete", "give 1 or 0")),
    };
    if completion_line && format == Format::Csv {
        return Err(AppError::parameter(
            "complete",
            "CSV has no way to show that a body is complete: ask with TE: trailers \
             (Sluice-Complete), or for NDJSON",
        ));
    }
    Ok(Output {
        format,
        completion_line: completion_line && format == Format::Ndjson,
        trailers: crate::stream::accepts_trailers(headers),
    })
}

/// Streams a prepared query's result, or answers and logs why it was rejected.
async fn stream_or_reject(
    prepared: Result<
        (
            Box<dyn RunningQuery>,
            Output,
            sluice_gateway::config::Limits,
        ),
        AppError,
    >,
    context: RequestContext,
    state: &AppState,
) -> Response {
    match prepared {
        Ok((source, output, limits)) => {
            let answer = Answer {
                source,
                encoder: output.format.encoder(JsonOptions::default()),
                output,
                timing: state.config().timing(&limits),
                limits,
            };
            let serving = Serving {
                shutdown: state.shutdown_token(),
                tracker: state.tracker(),
            };
            respond(answer, context, serving)
                .await
                .unwrap_or_else(IntoResponse::into_response)
        }
        Err(error) => {
            context.finish(
                error.status().as_u16(),
                "rejected",
                0,
                0,
                0,
                Some(&error.to_string()),
            );
            error.into_response()
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlRequest {
    sql: String,
    #[serde(default)]
    params: Vec<serde_json::Value>,
}

async fn run_sql(
    State(state): State<AppState>,
    query: Result<QueryPairs, AppError>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut context = RequestContext::new(HTTP, "sql", "", true, state.shutdown_token());
    let prepared = async {
        let Some(sql) = state.admit_sql(crate::auth::credential(&headers), &mut context)? else {
            return Err(AppError::Gateway(GatewayError::NotFound(
                "POST /sql is not enabled on this server".into(),
            )));
        };
        let QueryPairs(pairs) = query?;
        let output = output_of(&pairs, &headers)?;
        // Read here, not by an extractor: after the token check, and so that a
        // body over the limit is answered, logged and counted like any request.
        let body = read_sql_body(&headers, body, &state).await?;
        let request = parse_sql_request(&body)?;
        let params = request.params.into_iter().map(untyped_param).collect();
        let database = state.database(&sql.database)?;
        let source = database
            .start(
                &request.sql,
                params,
                sql.limits.statement_timeout,
                Access::AdHoc {
                    role: sql.role.as_deref(),
                },
                sluice_gateway::Reading {
                    format: output.format,
                    inline_large_objects: false,
                },
            )
            .await
            .map_err(|error| AppError::from_start(error, true))?;
        Ok((source, output, sql.limits.clone()))
    }
    .await;
    stream_or_reject(prepared, context, &state).await
}

/// The longest `POST /sql` body (axum's limit for buffered bodies).
const MAX_SQL_BODY: Limit = Limit {
    bytes: 2 << 20,
    source: "a POST /sql body is at most 2 MiB",
};

/// Reads a `POST /sql` body whole, within [`MAX_SQL_BODY`] and at the
/// server's pace for bodies (before any session is taken).
async fn read_sql_body(
    headers: &HeaderMap,
    body: Body,
    state: &AppState,
) -> Result<Vec<u8>, AppError> {
    let (body, cut) = limited(headers, body, MAX_SQL_BODY, Pace::of(state.config()))?;
    read_whole(body, &cut).await
}

/// The body of `POST /sql`. A parameter that does not parse (a string that is
/// not UTF-8, a lone surrogate escape) is a 400 naming it, e.g. `params[1]`.
fn parse_sql_request(body: &[u8]) -> Result<SqlRequest, AppError> {
    let expected = |error: &dyn std::fmt::Display| {
        AppError::bad_request(format!(
            "expected a JSON body {{\"sql\": \"...\", \"params\": [...]}}: {error}"
        ))
    };
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let request: SqlRequest =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let path = error.path().to_string();
            if path.starts_with("params[") {
                AppError::parameter(&path, error.inner().to_string())
            } else {
                expected(error.inner())
            }
        })?;
    // Trailing characters after the object are an error, as in `from_slice`.
    deserializer.end().map_err(|error| expected(&error))?;
    Ok(request)
}

fn simple_context(route: &'static str) -> RequestContext {
    RequestContext::new(HTTP, route, "", false, CancellationToken::new())
}

async fn health(State(state): State<AppState>) -> Response {
    let context = simple_context("health");
    let (healthy, databases) = state.health().await;
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body =
        json!({"status": if healthy { "healthy" } else { "unhealthy" }, "databases": databases});
    context.finish(
        status.as_u16(),
        if healthy { "complete" } else { "unhealthy" },
        0,
        0,
        0,
        None,
    );
    let mut response = (status, Json(body)).into_response();
    if !healthy {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(sluice_gateway::RETRY_AFTER_SECONDS),
        );
    }
    response
}

async fn metrics(State(state): State<AppState>) -> Response {
    for (name, database) in state.databases() {
        let usage = database.usage();
        sluice_gateway::metrics::pool(name, usage.in_use, usage.size, usage.waiting);
    }
    let text = sluice_gateway::metrics::handle().render();
    simple_context("metrics").finish(200, "complete", 0, text.len() as u64, 0, None);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// Made per request, from the configuration in force and the rows its
/// databases have described so far: a database that did not answer at start
/// has its queries' rows typed once its checks have run.
async fn openapi(State(state): State<AppState>) -> Response {
    simple_context("openapi").finish(200, "complete", 0, 0, 0, None);
    Json(crate::openapi::document(&state)).into_response()
}

/// Checks every request makes before its route: without tokens, refuses
/// requests whose `Host` names something else than this machine (DNS
/// rebinding; with tokens, the token is the check); refuses query strings
/// longer than `[server] max_query_string` (414).
async fn request_guard(
    State(state): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let host = match state.auth_enabled() {
        true => Ok(()),
        false => crate::auth::check_host(request.headers(), request.uri()),
    };
    let limit = state.config().max_query_string;
    let checked = host.and_then(|()| match request.uri().query() {
        Some(query) if query.len() > limit => Err(AppError::UriTooLong(format!(
            "the query string is {} bytes, over this server's limit of {limit} (max_query_string)",
            query.len()
        ))),
        _ => Ok(()),
    });
    if let Err(error) = checked {
        simple_context("other").finish(
            error.status().as_u16(),
            "rejected",
            0,
            0,
            0,
            Some(&error.to_string()),
        );
        return error.into_response();
    }
    next.run(request).await
}

async fn not_found() -> Response {
    let error = AppError::Gateway(GatewayError::NotFound(
        "no such route (see /openapi.json)".into(),
    ));
    simple_context("other").finish(404, "rejected", 0, 0, 0, None);
    error.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> Result<Format, u16> {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, value.parse().unwrap());
        choose_format(None, &headers).map_err(|error| error.status().as_u16())
    }

    #[test]
    fn the_format_follows_accept_by_quality_then_order() {
        assert_eq!(accept("text/csv"), Ok(Format::Csv));
        assert_eq!(
            accept("application/json;q=0.5, text/csv;q=0.9"),
            Ok(Format::Csv)
        );
        assert_eq!(accept("text/html, application/json"), Ok(Format::Json));
        assert_eq!(accept("*/*"), Ok(Format::Ndjson));
        assert_eq!(accept("image/png"), Err(406));
        assert_eq!(
            choose_format(None, &HeaderMap::new()).ok(),
            Some(Format::Ndjson)
        );
        assert_eq!(
            choose_format(Some("csv"), &HeaderMap::new()).ok(),
            Some(Format::Csv)
        );
        assert!(choose_format(Some("xml"), &HeaderMap::new()).is_err());
    }

    #[test]
    fn arrow_streams_are_offered_and_footer_last_formats_refused() {
        assert_eq!(
            accept("application/vnd.apache.arrow.stream"),
            Ok(Format::Arrow)
        );
        assert_eq!(
            choose_format(Some("arrow"), &HeaderMap::new()).ok(),
            Some(Format::Arrow)
        );
        assert_eq!(accept("application/vnd.apache.parquet"), Err(406));
        assert_eq!(accept("application/vnd.apache.arrow.file"), Err(406));
        // Another acceptable type still wins.
        assert_eq!(
            accept("application/vnd.apache.parquet, text/csv;q=0.5"),
            Ok(Format::Csv)
        );
        for format in ["parquet", "arrow-file"] {
            let error = choose_format(Some(format), &HeaderMap::new()).unwrap_err();
            assert_eq!(error.status().as_u16(), 406);
            assert!(
                error.to_string().contains("not offered over HTTP"),
                "{error}"
            );
        }
    }
}
