//! `/openapi.json`: the OpenAPI 3.1 document of the server as configured, made
//! once per configuration: every named query (`GET` with its typed parameters, and its
//! `POST …/batch`), `POST /sql` when enabled, every writable table's
//! `POST /tables/{name}`, `/health`, `/metrics`, the error body and the bearer
//! scheme. Paths are written out per query and per table rather than templated,
//! so a client generator (or a fuzzer) sees each one's own parameters.
//! `reference` reads it into the book's page of routes.

/// The book's page of routes, made from this document (a test keeps it current).
#[cfg(test)]
mod reference;
mod rows;

use serde_json::{json, Map, Value};

use sluice_core::canonical::{self, Strictness};
use sluice_core::load::{Method, OnConflict, OnError, INSERT_ROWS};
use sluice_core::word::Word;
use sluice_formats::ParamType;

use sluice_gateway::config::{Config, Limits, QueryConfig, TableConfig};
use sluice_gateway::AppState;

use crate::ingest::RENAMED;

/// Media types a query's rows are offered in.
const ROW_MEDIA_TYPES: [&str; 4] = [
    "application/x-ndjson",
    "application/json",
    "text/csv",
    "application/vnd.apache.arrow.stream",
];

/// What `?format=` does, and what a client that names no format gets.
const FORMAT_DESCRIPTION: &str = "The rows' format; overrides the Accept header. Without \
    it, and with an Accept that names none of the formats (*/* included), NDJSON: one row \
    per line. A client generated from this document parses JSON, so it passes format=json.";

/// What `?complete=` does.
const COMPLETE_DESCRIPTION: &str = "1: a complete NDJSON body ends with \
    {\"_complete\": true, \"rows\": N}, which a cut one never has. JSON and Arrow bodies \
    show it already (a cut one lacks its closing ] or end-of-stream marker); CSV cannot (400): \
    send TE: trailers instead, and a complete body of any format ends with the trailers \
    Sluice-Rows and Sluice-Complete: true.";

/// The document of `state`'s configuration, served by its databases (which say
/// how their statements write parameters).
pub fn document(state: &AppState) -> Value {
    let config = state.config();
    let mut paths = Map::new();
    let mut row_schemas = Map::new();
    for query in config.queries.values() {
        let row = state.described_columns(&query.name).map(|columns| {
            let name = format!("{}_row", query.name);
            row_schemas.insert(name.clone(), rows::row_schema(&columns));
            json!({"$ref": format!("#/components/schemas/{name}")})
        });
        // Batches run on a session that may write: none on a read-only database.
        if writable(&config.databases[&query.database]) {
            let path = batch_path(query, row.clone());
            paths.insert(format!("/queries/{}/batch", query.name), path);
        }
        paths.insert(format!("/queries/{}", query.name), query_path(query, row));
    }
    if config.sql.is_some() {
        paths.insert("/sql".into(), sql_path(config, state));
    }
    for table in config.tables.values() {
        paths.insert(format!("/tables/{}", table.name), table_path(table, config));
    }
    paths.insert("/health".into(), health_path());
    paths.insert("/metrics".into(), metrics_path());
    paths.insert("/openapi.json".into(), openapi_path());
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "sluice",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Named SQL queries streamed as NDJSON, JSON, CSV or an Arrow IPC \
                stream; uploads into allow-listed tables; pipelined batches of calls. Errors \
                before the first byte of a body are JSON ({\"error\": …}); a failure after it \
                aborts the transfer, so a cut body never looks complete. Every query-string \
                parameter takes one value: a repeated one is a 400 naming it.",
        },
        "paths": paths,
        "components": components(),
    });
    if let Some(schemas) = document["components"]["schemas"].as_object_mut() {
        schemas.extend(row_schemas);
    }
    if !config.tokens.is_empty() {
        document["components"]["securitySchemes"] =
            json!({"bearer": {"type": "http", "scheme": "bearer"}});
        document["security"] = json!([{"bearer": []}]);
    }
    document
}

/// The shared parts: the error body and the responses that carry it.
fn components() -> Value {
    let error = |description: &str| {
        json!({
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        })
    };
    let retry = |description: &str| {
        let mut response = error(description);
        response["headers"] = json!({"Retry-After": {
            "description": "Seconds to wait before retrying.",
            "schema": {"type": "integer", "minimum": 0},
        }});
        response
    };
    let mut unauthorized = error("No valid bearer token.");
    unauthorized["headers"] = json!({"WWW-Authenticate": {"schema": {"type": "string"}}});
    json!({
        "schemas": {
            // A JSON parameter's document: any JSON whose strings (and keys)
            // hold no NUL, which not every database's JSON type can store (400).
            "JsonValue": {
                "anyOf": [
                    {"type": ["null", "boolean", "number"]},
                    {"type": "string", "pattern": "^[^\\u0000]*$"},
                    {"type": "array", "items": {"$ref": "#/components/schemas/JsonValue"}},
                    {
                        "type": "object",
                        "propertyNames": {"pattern": "^[^\\u0000]*$"},
                        "additionalProperties": {"$ref": "#/components/schemas/JsonValue"},
                    },
                ],
            },
            "Error": {
                "type": "object",
                "description": "Why the request failed, before the first byte of a body.",
                "properties": {
                    "error": {"type": "string", "description": "What went wrong, for a person."},
                    "sqlstate": {"type": "string", "description": "The database's SQLSTATE, when it refused the request."},
                    "parameter": {"type": "string", "description": "The query-string parameter at fault."},
                    "line": {"type": ["integer", "null"], "description": "The 1-based line of the body at fault (uploads)."},
                    "column": {"type": ["string", "null"], "description": "The column at fault (uploads)."},
                },
                "required": ["error"],
            },
        },
        "responses": {
            "BadRequest": error("A parameter is malformed, unknown or repeated, or the body is malformed, or the database refused the values."),
            "Unauthorized": unauthorized,
            "Forbidden": error("The token may not do this."),
            "NotFound": error("No such query, table or route."),
            "MethodNotAllowed": error("The database behind this route is served read-only."),
            "NotAcceptable": error("None of the formats in Accept can be served."),
            "RequestTimeout": error("The request body came too slowly (body_read_timeout, min_body_rate); nothing was written."),
            "PayloadTooLarge": error("The request body is over the route's limit."),
            "UnsupportedMediaType": error("The body's Content-Type is not one the route takes."),
            "Unprocessable": error("A record of the body is malformed or the database refused it; line and column say where."),
            "InternalError": error("The server failed; the details are in its log, not here."),
            "Unavailable": retry("Every database connection is busy, or the database cannot be reached."),
            "Timeout": error("The statement ran out of time."),
        },
    })
}

/// `{"$ref": …}` to a response of [`components`].
fn response(name: &str) -> Value {
    json!({"$ref": format!("#/components/responses/{name}")})
}

/// The error responses common to routes that reach a database.
fn database_errors(responses: &mut Map<String, Value>) {
    for (status, name) in [
        ("400", "BadRequest"),
        ("401", "Unauthorized"),
        ("403", "Forbidden"),
        ("404", "NotFound"),
        ("500", "InternalError"),
        ("503", "Unavailable"),
        ("504", "Timeout"),
    ] {
        responses.insert(status.into(), response(name));
    }
}

/// The error responses of routes that read a request body.
fn body_errors(responses: &mut Map<String, Value>) {
    responses.insert("408".into(), response("RequestTimeout"));
    responses.insert("413".into(), response("PayloadTooLarge"));
}

/// `GET /queries/{name}`: the rows of one named query, each described by
/// `row` when its database described the result.
fn query_path(query: &QueryConfig, row: Option<Value>) -> Value {
    let mut parameters: Vec<Value> = query.params.iter().map(query_parameter).collect();
    parameters.push(json!({
        "name": "format",
        "in": "query",
        "required": false,
        "description": FORMAT_DESCRIPTION,
        "schema": {"type": "string", "enum": ["ndjson", "json", "csv", "arrow"]},
    }));
    parameters.push(json!({
        "name": "complete",
        "in": "query",
        "required": false,
        "description": COMPLETE_DESCRIPTION,
        "schema": {"type": "string", "enum": ["1", "0", "true", "false"]},
    }));
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        rows_response(
            "The rows, streamed. A failure after the first byte aborts the transfer.",
            row,
        ),
    );
    database_errors(&mut responses);
    responses.insert("406".into(), response("NotAcceptable"));
    json!({"get": {
        "operationId": query.name,
        "summary": query.description.clone().unwrap_or_else(|| format!("Run query {}", query.name)),
        "description": with_limits(query.description.as_deref(), &query.limits),
        "parameters": parameters,
        "responses": responses,
    }})
}

/// A 200 of rows in every media type they are offered in, each row
/// described by `row` (any object when the result's columns are not known).
fn rows_response(description: &str, row: Option<Value>) -> Value {
    let row = row.unwrap_or_else(|| json!({"type": "object"}));
    let content: Map<String, Value> = ROW_MEDIA_TYPES
        .iter()
        .map(|media| (media.to_string(), rows_in(media, &row)))
        .collect();
    json!({"description": description, "content": content})
}

/// The schema of a query's rows in `media`.
fn rows_in(media: &str, row: &Value) -> Value {
    match media {
        "application/json" => json!({"schema": {"type": "array", "items": row}}),
        "application/vnd.apache.arrow.stream" => {
            json!({"schema": {"type": "string", "contentMediaType": media}})
        }
        _ => json!({"schema": {"type": "string"}}),
    }
}

/// One declared parameter of a named query, as a query-string parameter.
fn query_parameter(param: &sluice_gateway::config::ParamSpec) -> Value {
    let mut schema = value_schema(param.ty);
    let default = param
        .default
        .as_deref()
        .and_then(|default| typed_default(param.ty, default));
    if let (Some(default), Some(object)) = (default, schema.as_object_mut()) {
        object.insert("default".into(), default);
    }
    let mut parameter = json!({
        "name": param.name,
        "in": "query",
        "required": param.required,
    });
    // A JSON parameter is a JSON document in the query string, which OpenAPI
    // says with a media type rather than a schema for the text.
    if param.ty == ParamType::Json {
        parameter["content"] =
            json!({"application/json": {"schema": {"$ref": "#/components/schemas/JsonValue"}}});
    } else {
        parameter["schema"] = schema;
    }
    if let Some(description) = &param.description {
        parameter["description"] = json!(description);
    }
    parameter
}

/// A description followed by the limits a response is held to, if any.
fn with_limits(description: Option<&str>, limits: &Limits) -> String {
    let mut stated = Vec::new();
    if let Some(rows) = limits.max_rows {
        stated.push(format!("at most {rows} rows"));
    }
    if let Some(bytes) = limits.max_bytes {
        stated.push(format!("at most {bytes} bytes"));
    }
    if let Some(timeout) = limits.statement_timeout {
        stated.push(format!("statement timeout {timeout:?}"));
    }
    let mut text = description.unwrap_or_default().to_owned();
    if !stated.is_empty() {
        text.push_str(&format!(
            "\n\nLimits: {}. A response that would exceed a limit is aborted, never cut short silently.",
            stated.join(", ")
        ));
    }
    text.trim().to_owned()
}

/// `POST /queries/{name}/batch`: the query once per body line, pipelined.
fn batch_path(query: &QueryConfig, row: Option<Value>) -> Value {
    let names: Vec<&str> = query
        .params
        .iter()
        .map(|param| param.name.as_str())
        .collect();
    let values: Map<String, Value> = query
        .params
        .iter()
        .map(|param| (param.name.clone(), value_schema(param.ty)))
        .collect();
    let call = json!({"oneOf": [
        {"type": "array", "maxItems": names.len(), "items": {}},
        {"type": "object", "properties": values, "additionalProperties": false},
    ]});
    let result = batch_result(row);
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({
            "description": "One result per call, in order: {\"line\": N, \"rows\": […]}, \
                {\"line\": N, \"affected\": K}, {\"line\": N, \"error\": {\"code\", \"message\", \
                \"detail\"}} or {\"line\": N, \"rolled_back\": true}; NDJSON lines for an NDJSON \
                body, one JSON array for a JSON one. A failure after the first byte aborts the \
                transfer.",
            "content": {
                "application/json": {"schema": {"type": "array", "items": result}},
                "application/x-ndjson": {"schema": {"type": "string"}, "x-line-schema": result},
            },
        }),
    );
    database_errors(&mut responses);
    body_errors(&mut responses);
    json!({"post": {
        "operationId": format!("{}_batch", query.name),
        "summary": format!("Run query {} once per call of the body, pipelined", query.name),
        "description": format!(
            "Each call is one set of parameters: a JSON array in the declared order ({}), \
             an object keyed by name, or, for a query of one parameter, the value alone. \
             The body is NDJSON, one call per line, streamed (for batches of any size), or \
             one JSON array of calls, read whole (at most 16 MiB). Writing needs a token of \
             scope write; without it, NDJSON is read whole too (at most 16 MiB) before the \
             calls run.",
            names.join(", ")
        ),
        "parameters": [{
            "name": "transaction",
            "in": "query",
            "required": false,
            "description": "single (default): all calls in one transaction, any failure rolls \
                back everything; each: every call commits or fails on its own.",
            "schema": {"type": "string", "enum": ["single", "each"]},
        }],
        "requestBody": {
            "required": false,
            "description": "The calls; an empty body (or array) is no calls.",
            "content": {
                "application/json": {"schema": {"type": "array", "items": call}},
                "application/x-ndjson": {"schema": {"type": "string"}, "x-line-schema": call},
            },
        },
        "responses": responses,
    }})
}

/// One call's result in a batch's answer.
fn batch_result(row: Option<Value>) -> Value {
    let row = row.unwrap_or_else(|| json!({"type": "object"}));
    json!({
        "type": "object",
        "properties": {
            "line": {"type": "integer", "description": "The call's 1-based place in the body."},
            "rows": {"type": "array", "items": row},
            "affected": {"type": "integer"},
            "error": {
                "type": "object",
                "properties": {
                    "code": {"type": ["string", "null"]},
                    "message": {"type": "string"},
                    "detail": {"type": ["string", "null"]},
                },
                "required": ["message"],
            },
            "rolled_back": {"type": "boolean"},
        },
        "required": ["line"],
    })
}

/// True when the database takes writes (some are served read-only).
fn writable(database: &sluice_gateway::config::DatabaseConfig) -> bool {
    !database.target.read_only()
}

/// `POST /sql`: ad-hoc SQL, when `[sql]` enables it.
fn sql_path(config: &Config, state: &AppState) -> Value {
    let limits = config
        .sql
        .as_ref()
        .map(|sql| sql.limits.clone())
        .unwrap_or_default();
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        rows_response("The rows, streamed, as for a named query.", None),
    );
    database_errors(&mut responses);
    responses.insert("406".into(), response("NotAcceptable"));
    body_errors(&mut responses);
    json!({"post": {
        "operationId": "sql",
        "summary": "Run ad-hoc SQL (token scope sql)",
        "description": with_limits(
            Some(&sql_description(config, state)),
            &limits,
        ),
        "parameters": [
            {"name": "format", "in": "query", "required": false,
             "description": FORMAT_DESCRIPTION,
             "schema": {"type": "string", "enum": ["ndjson", "json", "csv", "arrow"]}},
            {"name": "complete", "in": "query", "required": false,
             "description": COMPLETE_DESCRIPTION,
             "schema": {"type": "string", "enum": ["1", "0", "true", "false"]}},
        ],
        "requestBody": {
            "required": true,
            "description": "At most 2 MiB.",
            "content": {"application/json": {"schema": {
                "type": "object",
                "properties": {
                    "sql": {"type": "string"},
                    // Any JSON value, said without a union of types, which
                    // client generators cannot read.
                    "params": {"type": "array", "items": {
                        "description": "A JSON value, bound as what JSON says it is.",
                    }},
                },
                "required": ["sql"],
                "additionalProperties": false,
            }}},
        },
        "responses": responses,
    }})
}

/// What `POST /sql` takes, its parameters written as its database writes them.
fn sql_description(config: &Config, state: &AppState) -> String {
    let database = config
        .sql
        .as_ref()
        .and_then(|sql| state.database(&sql.database).ok());
    match database {
        Some(database) => {
            let kind = database.kind();
            format!(
                "One statement with its parameters ({}, {}, … on {}).",
                kind.placeholder(1),
                kind.placeholder(2),
                kind.product()
            )
        }
        None => "One statement with its parameters.".into(),
    }
}

/// `POST /tables/{name}`: an NDJSON or CSV body into an allow-listed table.
fn table_path(table: &TableConfig, config: &Config) -> Value {
    // A bare `?dry_run` (the empty value) is true, as a bare option is in COPY.
    let flag = json!({
        "type": "string",
        "enum": ["", "true", "false", "1", "0", "yes", "no", "on", "off"],
    });
    let parameter = |name: &str, description: &str, schema: Value| json!({"name": name, "in": "query", "required": false, "description": description, "schema": schema});
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({
            "description": "The upload committed (or, with dry_run, checked and rolled back).",
            "content": {"application/json": {"schema": {
                "type": "object",
                "properties": {
                    "records": {"type": "integer", "minimum": 0},
                    "accepted": {"type": "integer", "minimum": 0},
                    "rejected": {"type": "integer", "minimum": 0},
                    "written": {"type": "integer", "minimum": 0},
                    "round_trips": {"type": "integer", "minimum": 0},
                    "dry_run": {"type": "boolean"},
                    "rejects": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "line": {"type": ["integer", "null"]},
                            "column": {"type": ["string", "null"]},
                            "error": {"type": "string"},
                            "record": {"type": "string"},
                            "record_truncated": {"type": "boolean"},
                        },
                        "required": ["line", "error", "record"],
                    }},
                    "rejects_omitted": {"type": "integer", "minimum": 0},
                },
                "required": ["records", "accepted", "rejected", "written", "round_trips"],
            }}},
        }),
    );
    database_errors(&mut responses);
    body_errors(&mut responses);
    responses.insert("415".into(), response("UnsupportedMediaType"));
    responses.insert("422".into(), response("Unprocessable"));
    if !writable(&config.databases[&table.database]) {
        responses.insert("405".into(), response("MethodNotAllowed"));
    }
    json!({"post": {
        "operationId": format!("{}_upload", table.name),
        "summary": format!("Load rows into {} (token scope write)", table.table),
        "description": format!(
            "The body is streamed into {} in one transaction (COPY by default): every record \
             or none. A record longer than {} bytes is refused.",
            table.table, table.max_line_bytes
        ),
        "parameters": with_old_spellings(vec![
            parameter("format", "The body's format; overrides Content-Type.", json!({"type": "string", "enum": ["ndjson", "csv"]})),
            parameter("columns", "Comma-separated target columns (CSV without a header line; NDJSON: the keys to take).", json!({"type": "string"})),
            parameter("header", "CSV: whether the first line names the columns (match: and they must be the table's).", json!({"type": "string", "enum": ["", "true", "false", "match"]})),
            parameter("on_error", "abort (default): a bad record fails the upload; skip: it is reported and left out (method=copy).", word_schema::<OnError>()),
            parameter("on_conflict", "What a row whose key exists does.", word_schema::<OnConflict>()),
            parameter("key", "Comma-separated key columns for on_conflict=ignore|update.", json!({"type": "string"})),
            parameter("method", "copy (default) or multi-row INSERTs.", word_schema::<Method>()),
            parameter("insert_rows", &format!("Rows per INSERT (method=insert; default {INSERT_ROWS})."), json!({"type": "integer", "minimum": 1})),
            parameter("ignore_unknown", "NDJSON: skip keys that name no column.", flag.clone()),
            parameter("dry_run", "Check every record, then roll back.", flag),
        ]),
        "requestBody": {
            "required": false,
            "description": "An empty body loads no rows.",
            "content": {
                "application/x-ndjson": {"schema": {"type": "string", "description": "One JSON object per line, keyed by column."}},
                "text/csv": {"schema": {"type": "string", "description": "RFC 4180 records."}},
            },
        },
        "responses": responses,
    }})
}

/// `parameters` followed by the old spelling of each renamed one
/// ([`RENAMED`]): its schema, marked deprecated.
fn with_old_spellings(mut parameters: Vec<Value>) -> Vec<Value> {
    for (old, new) in RENAMED {
        let Some(current) = parameters
            .iter()
            .find(|parameter| parameter["name"] == *new)
        else {
            continue;
        };
        let mut parameter = current.clone();
        parameter["name"] = json!(old);
        parameter["description"] = json!(format!("The old spelling of {new}."));
        parameter["deprecated"] = json!(true);
        parameters.push(parameter);
    }
    parameters
}

/// The schema of a parameter spelled as one of `T`'s words.
fn word_schema<T: Word>() -> Value {
    json!({"type": "string", "enum": T::SPELLINGS})
}

/// `GET /health`.
fn health_path() -> Value {
    let health = json!({
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["healthy", "unhealthy"]},
            "databases": {"type": "object", "additionalProperties": {
                "type": "string", "enum": ["ok", "busy", "unavailable", "timeout"],
            }},
        },
        "required": ["status", "databases"],
    });
    json!({"get": {
        "operationId": "health",
        "summary": "select 1 on every database",
        "security": [],
        "responses": {
            "200": {"description": "Every database answers.", "content": {"application/json": {"schema": health}}},
            "503": {
                "description": "A database does not answer.",
                "headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 0}}},
                "content": {"application/json": {"schema": health}},
            },
        },
    }})
}

/// `GET /metrics`.
fn metrics_path() -> Value {
    json!({"get": {
        "operationId": "metrics",
        "summary": "Prometheus metrics",
        "security": [],
        "responses": {"200": {
            "description": "Prometheus text exposition format 0.0.4.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }},
    }})
}

/// `GET /openapi.json`.
fn openapi_path() -> Value {
    json!({"get": {
        "operationId": "openapi",
        "summary": "This document",
        "security": [],
        "responses": {"200": {
            "description": "OpenAPI 3.1.",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }},
    }})
}

/// The OpenAPI schema of a value of type `ty`.
/// A parameter's default as a value of its schema's JSON type (`7`, not
/// `"7"`: a string default in an integer schema makes the document
/// invalid); `None` when it has no such value (a float's `NaN`), so the
/// document says nothing rather than something wrong.
fn typed_default(ty: ParamType, default: &str) -> Option<Value> {
    match ty {
        ParamType::SmallInt | ParamType::Int | ParamType::BigInt => {
            default.trim().parse::<i64>().ok().map(Value::from)
        }
        ParamType::Float => default
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|number| number.is_finite())
            .map(Value::from),
        ParamType::Bool => canonical::read_bool(default.as_bytes(), Strictness::Lenient)
            .ok()
            .map(Value::from),
        ParamType::Json => None,
        ParamType::Numeric
        | ParamType::Text
        | ParamType::Date
        | ParamType::Timestamp
        | ParamType::TimestampTz
        | ParamType::Uuid => Some(json!(default)),
    }
}

fn value_schema(ty: ParamType) -> Value {
    match ty {
        ParamType::SmallInt => {
            json!({"type": "integer", "minimum": i16::MIN, "maximum": i16::MAX})
        }
        ParamType::Int => json!({"type": "integer", "format": "int32"}),
        ParamType::BigInt => json!({"type": "integer", "format": "int64"}),
        ParamType::Numeric => {
            json!({"type": "string", "format": "decimal", "pattern": "^-?[0-9]+(\\.[0-9]+)?$"})
        }
        ParamType::Float => json!({"type": "number", "format": "double"}),
        // Text parameters cannot hold NUL (not every database's text can; 400).
        ParamType::Text => json!({"type": "string", "pattern": "^[^\\u0000]*$"}),
        ParamType::Bool => json!({"type": "boolean"}),
        ParamType::Date => json!({"type": "string", "format": "date"}),
        ParamType::Timestamp => {
            json!({"type": "string", "format": "date-time", "description": "without time zone"})
        }
        ParamType::TimestampTz => json!({"type": "string", "format": "date-time"}),
        ParamType::Uuid => json!({"type": "string", "format": "uuid"}),
        ParamType::Json => json!({"type": "string", "description": "a JSON document"}),
    }
}
