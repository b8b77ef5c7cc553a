//! `/openapi.json`: an OpenAPI 3.0 document generated from the named queries, so
//! clients and tools see every query, its typed parameters and its formats.

use serde_json::{json, Value};

use sluice_formats::ParamType;

use crate::config::Config;

/// The document for `config`.
pub fn document(config: &Config) -> Value {
    let mut paths = serde_json::Map::new();
    let error = json!({"$ref": "#/components/responses/Error"});
    for query in config.queries.values() {
        let mut parameters: Vec<Value> = query
            .params
            .iter()
            .map(|param| {
                let mut schema = value_schema(param.ty);
                if let (Some(default), Some(object)) = (&param.default, schema.as_object_mut()) {
                    object.insert("default".into(), json!(default));
                }
                let mut parameter = json!({
                    "name": param.name,
                    "in": "query",
                    "required": param.required,
                    "schema": schema,
                });
                if let Some(description) = &param.description {
                    parameter["description"] = json!(description);
                }
                parameter
            })
            .collect();
        parameters.push(json!({
            "name": "format",
            "in": "query",
            "required": false,
            "description": "Overrides the Accept header.",
            "schema": {"type": "string", "enum": ["ndjson", "json", "csv", "arrow"]},
        }));
        parameters.push(json!({
            "name": "complete",
            "in": "query",
            "required": false,
            "description": "1: a complete NDJSON body ends with {\"_complete\": true, \"rows\": N}; a cut one never has that line. NDJSON only.",
            "schema": {"type": "string", "enum": ["1", "0", "true", "false"]},
        }));
        let mut limits = Vec::new();
        if let Some(rows) = query.limits.max_rows {
            limits.push(format!("at most {rows} rows"));
        }
        if let Some(bytes) = query.limits.max_bytes {
            limits.push(format!("at most {bytes} bytes"));
        }
        if let Some(timeout) = query.limits.statement_timeout {
            limits.push(format!("statement timeout {:?}", timeout));
        }
        let mut description = query.description.clone().unwrap_or_default();
        if !limits.is_empty() {
            description.push_str(&format!(
                "\n\nLimits: {}. A response that would exceed a limit is aborted, never cut short silently.",
                limits.join(", ")
            ));
        }
        paths.insert(
            format!("/queries/{}", query.name),
            json!({
                "get": {
                    "operationId": query.name,
                    "summary": query.description.clone().unwrap_or_else(|| format!("Run query {}", query.name)),
                    "description": description.trim(),
                    "parameters": parameters,
                    "responses": {
                        "200": {
                            "description": "The rows, streamed. A failure after the first byte aborts the transfer.",
                            "content": {
                                "application/x-ndjson": {"schema": {"type": "string"}},
                                "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
                                "text/csv": {"schema": {"type": "string"}},
                                "application/vnd.apache.arrow.stream": {"schema": {"type": "string", "format": "binary"}},
                            }
                        },
                        "400": error, "401": error, "403": error, "406": error,
                        "500": error, "503": error, "504": error,
                    },
                }
            }),
        );
    }
    let mut document = json!({
        "openapi": "3.0.3",
        "info": {
            "title": "sluice",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Named SQL queries streamed as NDJSON, JSON, CSV or an Arrow IPC stream.",
        },
        "paths": paths,
        "components": {
            "responses": {
                "Error": {
                    "description": "An error before the first byte of the body.",
                    "content": {"application/json": {"schema": {
                        "type": "object",
                        "properties": {
                            "error": {"type": "string"},
                            "sqlstate": {"type": "string"},
                            "parameter": {"type": "string"},
                        },
                        "required": ["error"],
                    }}},
                }
            },
        },
    });
    if !config.tokens.is_empty() {
        document["components"]["securitySchemes"] =
            json!({"bearer": {"type": "http", "scheme": "bearer"}});
        document["security"] = json!([{"bearer": []}]);
    }
    document
}

/// The OpenAPI schema of a value of type `ty`.
fn value_schema(ty: ParamType) -> Value {
    match ty {
        ParamType::SmallInt | ParamType::Int => json!({"type": "integer", "format": "int32"}),
        ParamType::BigInt => json!({"type": "integer", "format": "int64"}),
        ParamType::Numeric => {
            json!({"type": "string", "format": "decimal", "pattern": "^-?[0-9]+(\\.[0-9]+)?$"})
        }
        ParamType::Float => json!({"type": "number", "format": "double"}),
        ParamType::Text => json!({"type": "string"}),
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
