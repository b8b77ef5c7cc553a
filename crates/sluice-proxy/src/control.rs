//! The control API: the faults in force, listed, added and removed over HTTP
//! while the proxy runs, on an address of its own (loopback unless allowed
//! otherwise).
//!
//! | request | answer |
//! |---|---|
//! | `GET /faults` | `200 {"faults": [{"id": 1, "spec": "cut:at-data-row=5", "acted": 0}]}` |
//! | `POST /faults` with `{"spec": "…"}` | `201 {"id": 2, "spec": "…"}` (the spec as canonically spelled); `400 {"error": "…"}` for a bad one |
//! | `DELETE /faults/{id}` | `200 {"removed": {"id": 2, "spec": "…"}}`; `404 {"error": "…"}` |
//! | `DELETE /faults` | `200 {"removed": 3}` (how many) |
//!
//! Before any of that, [`Access`] refuses what a web page would send: a
//! `Host` not naming this machine (403, unless a token is set), an `Origin`
//! other than the API's own (403), a request without the token when one is
//! set (401), a body that is not `application/json` (415). A body over
//! [`MAX_BODY`] is refused too (413).
//!
//! Every error is JSON with an `error` message.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::fault::{Fault, FaultList, Listed};

mod access;

pub(crate) use access::Access;
pub use access::{ControlToken, ControlTokenError};

/// The largest body taken: a fault's spec is a few dozen bytes.
const MAX_BODY: usize = 64 * 1024;

/// Serves the API on `listener`, to the requests `access` lets through,
/// until the proxy's runtime ends.
pub(crate) async fn serve(listener: std::net::TcpListener, faults: Arc<FaultList>, access: Access) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let _ = axum::serve(listener, router(faults, Arc::new(access))).await;
}

/// The API's routes, behind the access checks.
fn router(faults: Arc<FaultList>, access: Arc<Access>) -> Router {
    Router::new()
        .route("/faults", get(list).post(add).delete(clear))
        .route("/faults/{id}", delete(remove))
        .fallback(|| async {
            failure(
                StatusCode::NOT_FOUND,
                "no such endpoint: the control API serves /faults and /faults/{id}",
            )
        })
        .method_not_allowed_fallback(|| async {
            failure(
                StatusCode::METHOD_NOT_ALLOWED,
                "no such method here: GET, POST and DELETE /faults, DELETE /faults/{id}",
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(access, admit))
        .with_state(faults)
}

/// Serves a request only if [`Access::check`] lets it through.
async fn admit(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    match access.check(request.method(), request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

/// An error answer: `{"error": message}`.
fn failure(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

fn listed(fault: &Listed) -> Value {
    json!({ "id": fault.id, "spec": fault.fault.to_string(), "acted": fault.acted })
}

async fn list(State(faults): State<Arc<FaultList>>) -> Json<Value> {
    let listed: Vec<Value> = faults.list().iter().map(listed).collect();
    Json(json!({ "faults": listed }))
}

/// Adds the fault a body such as `{"spec": "cut:at-data-row=5"}` spells.
async fn add(
    State(faults): State<Arc<FaultList>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return body_failure(&rejection),
    };
    let spec = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(object)) => object
            .get("spec")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    };
    let Some(spec) = spec else {
        return failure(
            StatusCode::BAD_REQUEST,
            r#"the body must be a JSON object with the fault's spec, e.g. {"spec": "cut:at-data-row=5"}"#,
        );
    };
    match spec.parse::<Fault>() {
        Ok(fault) => {
            let id = faults.add(fault);
            let body = json!({ "id": id, "spec": fault.to_string() });
            (StatusCode::CREATED, Json(body)).into_response()
        }
        Err(error) => failure(StatusCode::BAD_REQUEST, error.to_string()),
    }
}

/// The body could not be read: too large, typically (axum's own answer would
/// be plain text).
fn body_failure(rejection: &BytesRejection) -> Response {
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return failure(
            status,
            format!("the body is too large: at most {MAX_BODY} bytes"),
        );
    }
    failure(status, rejection.body_text())
}

async fn remove(
    State(faults): State<Arc<FaultList>>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let id = match id {
        Ok(Path(id)) => id,
        Err(rejection) => return failure(rejection.status(), rejection.body_text()),
    };
    let Ok(number) = id.parse::<u64>() else {
        return failure(
            StatusCode::BAD_REQUEST,
            format!("{id:?} is not a fault id (GET /faults lists them)"),
        );
    };
    match faults.remove(number) {
        Some(fault) => {
            let removed = json!({ "id": number, "spec": fault.to_string() });
            Json(json!({ "removed": removed })).into_response()
        }
        None => failure(StatusCode::NOT_FOUND, format!("no fault {number}")),
    }
}

async fn clear(State(faults): State<Arc<FaultList>>) -> Json<Value> {
    Json(json!({ "removed": faults.clear() }))
}
