//! The control API: the faults in force, listed, added and removed over HTTP
//! while the proxy runs, on an address of its own (loopback unless allowed
//! otherwise: it has no authentication).
//!
//! | request | answer |
//! |---|---|
//! | `GET /faults` | `200 {"faults": [{"id": 1, "spec": "cut:at-data-row=5", "acted": 0}]}` |
//! | `POST /faults` with `{"spec": "…"}` | `201 {"id": 2, "spec": "…"}` (the spec as canonically spelled); `400 {"error": "…"}` for a bad one |
//! | `DELETE /faults/{id}` | `200 {"removed": {"id": 2, "spec": "…"}}`; `404 {"error": "…"}` |
//! | `DELETE /faults` | `200 {"removed": 3}` (how many) |
//!
//! Every error is JSON with an `error` message.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::fault::{Fault, FaultList, Listed};

/// Serves the API on `listener` until the proxy's runtime ends.
pub(crate) async fn serve(listener: std::net::TcpListener, faults: Arc<FaultList>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let _ = axum::serve(listener, router(faults)).await;
}

/// The API's routes.
fn router(faults: Arc<FaultList>) -> Router {
    Router::new()
        .route("/faults", get(list).post(add).delete(clear))
        .route("/faults/{id}", delete(remove))
        .fallback(|| async {
            failure(
                StatusCode::NOT_FOUND,
                "no such endpoint: the control API serves /faults and /faults/{id}",
            )
        })
        .with_state(faults)
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
async fn add(State(faults): State<Arc<FaultList>>, body: Bytes) -> Response {
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

async fn remove(State(faults): State<Arc<FaultList>>, Path(id): Path<String>) -> Response {
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
