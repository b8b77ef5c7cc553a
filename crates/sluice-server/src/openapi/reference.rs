//! The book's route reference (`docs/src/http-routes.md`), written from the
//! OpenAPI document the server serves for the configuration reference's
//! example file: every route, its parameters with type, default and meaning,
//! its body and its responses. A test fails when the checked-in page is stale
//! (`SLUICE_BLESS=1 cargo test -p sluice-server --lib openapi::reference`
//! writes it anew).
//!
//! The page is a reading of the document, never a second description: a
//! parameter, a default or a status added to [`super::document`] shows here
//! once the page is blessed.

use serde_json::{Map, Value};

/// The page's opening.
const HEADER: &str = "# HTTP routes of the example configuration

> Generated from the OpenAPI document `sluice serve` makes for the example file of the
> [configuration reference](configuration.md#the-whole-file); a test fails when this page
> is stale (`SLUICE_BLESS=1 cargo test -p sluice-server --lib openapi::reference` writes it
> anew).

A server describes the routes of its own configuration at `GET /openapi.json`; this page
is that document for the example configuration, read for people. The overview (formats,
completeness, what each status means) is [HTTP API](http-api.md).
";

/// The page for `document`, an OpenAPI document made by [`super::document`].
pub fn reference_page(document: &Value) -> String {
    let mut page = String::from(HEADER);
    for (path, operations) in sorted(&document["paths"]) {
        for (method, operation) in sorted(operations) {
            page.push_str(&operation_section(document, path, method, operation));
        }
    }
    page
}

/// An object's members by name: the page must not depend on whether
/// `serde_json` keeps insertion order (its `preserve_order` feature, which a
/// workspace build may turn on for another crate).
fn sorted(object: &Value) -> Vec<(&String, &Value)> {
    let mut members: Vec<(&String, &Value)> = object.as_object().into_iter().flatten().collect();
    members.sort_by(|a, b| a.0.cmp(b.0));
    members
}

/// An object's member names, sorted, as code spans.
fn sorted_names(object: &Value) -> Vec<String> {
    sorted(object)
        .into_iter()
        .map(|(name, _)| format!("`{name}`"))
        .collect()
}

/// One route and method: its summary, description, parameters, body and
/// responses.
fn operation_section(document: &Value, path: &str, method: &str, operation: &Value) -> String {
    let mut section = format!("\n## `{} {path}`\n\n", method.to_uppercase());
    if let Some(summary) = operation["summary"].as_str() {
        section.push_str(&format!("{}\n\n", one_line(summary)));
    }
    if let Some(description) = operation["description"].as_str() {
        // A query's description repeats its summary before its limits.
        let summary = operation["summary"].as_str().unwrap_or_default();
        let rest = description
            .strip_prefix(summary)
            .unwrap_or(description)
            .trim();
        if !rest.is_empty() {
            section.push_str(&format!("{}\n\n", one_line(rest)));
        }
    }
    if let Some(parameters) = operation["parameters"].as_array() {
        section.push_str("| parameter | in | type | required | default | meaning |\n");
        section.push_str("|---|---|---|---|---|---|\n");
        for parameter in parameters {
            section.push_str(&parameter_row(parameter));
        }
        section.push('\n');
    }
    if let Some(body) = operation["requestBody"].as_object() {
        section.push_str(&body_line(body));
    }
    section.push_str(&responses_line(document, &operation["responses"]));
    section
}

/// A parameter's row.
fn parameter_row(parameter: &Value) -> String {
    let schema = &parameter["schema"];
    let default = match &schema["default"] {
        Value::Null => String::new(),
        Value::String(text) => format!("`{text}`"),
        other => format!("`{other}`"),
    };
    format!(
        "| `{}` | {} | {} | {} | {} | {} |\n",
        parameter["name"].as_str().unwrap_or_default(),
        parameter["in"].as_str().unwrap_or_default(),
        type_text(schema),
        if parameter["required"] == Value::Bool(true) {
            "yes"
        } else {
            "no"
        },
        default,
        cell(parameter["description"].as_str().unwrap_or_default()),
    )
}

/// A schema's type as a person reads it: `integer (int64)`, `one of a, b`,
/// `array of string`, `JSON`.
fn type_text(schema: &Value) -> String {
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .map(|value| {
                format!(
                    "`{}`",
                    value.as_str().map_or(value.to_string(), str::to_owned)
                )
            })
            .collect();
        return format!("one of {}", values.join(", "));
    }
    if schema.get("$ref").is_some() || schema.get("anyOf").is_some() {
        return "JSON".into();
    }
    let base = match &schema["type"] {
        Value::String(name) => name.clone(),
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    };
    let base = if base == "array" {
        format!("array of {}", type_text(&schema["items"]))
    } else {
        base
    };
    match schema["format"].as_str() {
        Some(format) => format!("{base} ({format})"),
        None => base,
    }
}

/// The body's media types.
fn body_line(body: &Map<String, Value>) -> String {
    let media = body.get("content").map(sorted_names).unwrap_or_default();
    let required = if body.get("required") == Some(&Value::Bool(true)) {
        "required"
    } else {
        "optional"
    };
    let mut line = format!("Body ({required}): {}.", media.join(", "));
    if let Some(description) = body.get("description").and_then(Value::as_str) {
        line.push_str(&format!(" {}", one_line(description)));
    }
    line.push_str("\n\n");
    line
}

/// The responses, by status, each with its description (a shared response
/// of the document's components read through its `$ref`).
fn responses_line(document: &Value, responses: &Value) -> String {
    let mut text = String::from("| status | meaning |\n|---|---|\n");
    for (status, response) in sorted(responses) {
        let response = resolve(document, response);
        let media = sorted_names(&response["content"]);
        let mut meaning = cell(response["description"].as_str().unwrap_or_default());
        if !media.is_empty() {
            meaning.push_str(&format!(" ({})", media.join(", ")));
        }
        text.push_str(&format!("| {status} | {meaning} |\n"));
    }
    text
}

/// `value`, or what its `$ref` (`#/components/…`) points to.
fn resolve<'a>(document: &'a Value, value: &'a Value) -> &'a Value {
    match value["$ref"]
        .as_str()
        .and_then(|path| path.strip_prefix('#'))
    {
        Some(pointer) => document.pointer(pointer).unwrap_or(value),
        None => value,
    }
}

/// Text on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text for a table cell: one line, `|` escaped.
fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sluice_gateway::config::example_file;
    use sluice_gateway::{AppState, Config};

    use super::*;

    /// The document of the configuration reference's example file.
    fn example_document() -> Value {
        std::env::set_var("APP_DATABASE_URL", "postgres://app@db.internal/app");
        std::env::set_var("SLUICE_FLIGHT_SECRET", "s".repeat(32));
        let config = Config::parse(&example_file(), "example.toml").unwrap();
        super::super::document(&AppState::new(config))
    }

    #[tokio::test]
    async fn the_route_reference_is_current() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/http-routes.md");
        let page = reference_page(&example_document());
        if std::env::var_os("SLUICE_BLESS").is_some() {
            std::fs::write(&path, &page).unwrap();
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == page,
            "{} is stale: run SLUICE_BLESS=1 cargo test -p sluice-server --lib openapi::reference",
            path.display()
        );
    }

    #[tokio::test]
    async fn every_route_and_parameter_of_the_document_is_on_the_page() {
        let document = example_document();
        let page = reference_page(&document);
        for (path, operations) in document["paths"].as_object().unwrap() {
            for (method, operation) in operations.as_object().unwrap() {
                let heading = format!("## `{} {path}`", method.to_uppercase());
                assert!(page.contains(&heading), "{heading}");
                for parameter in operation["parameters"].as_array().into_iter().flatten() {
                    let name = format!("| `{}` |", parameter["name"].as_str().unwrap());
                    assert!(page.contains(&name), "{name} of {heading}");
                }
            }
        }
    }

    #[tokio::test]
    async fn an_uploads_words_are_its_types_spellings_and_old_names_are_deprecated() {
        use sluice_core::load::{Method, OnConflict, OnError};
        use sluice_core::word::Word;
        let document = example_document();
        let upload = &document["paths"]["/tables/payment_events"]["post"]["parameters"];
        let parameter = |name: &str| {
            let parameters = upload.as_array().unwrap().iter();
            parameters
                .clone()
                .find(|parameter| parameter["name"] == name)
                .unwrap_or_else(|| panic!("no {name} in {upload}"))
                .clone()
        };
        for (name, spellings) in [
            ("on_error", OnError::SPELLINGS),
            ("on_conflict", OnConflict::SPELLINGS),
            ("method", Method::SPELLINGS),
        ] {
            assert_eq!(
                parameter(name)["schema"]["enum"],
                serde_json::json!(spellings)
            );
        }
        for old in ["batch_rows", "batch_size"] {
            let old = parameter(old);
            assert_eq!(old["deprecated"], true);
            assert_eq!(old["schema"], parameter("insert_rows")["schema"]);
        }
    }

    #[test]
    fn types_read_as_people_say_them() {
        let read = |schema: Value| type_text(&schema);
        assert_eq!(
            read(serde_json::json!({"type": "integer", "format": "int64"})),
            "integer (int64)"
        );
        assert_eq!(
            read(serde_json::json!({"type": "string", "enum": ["a", "b"]})),
            "one of `a`, `b`"
        );
        assert_eq!(
            read(serde_json::json!({"type": "array", "items": {"type": "string"}})),
            "array of string"
        );
        assert_eq!(
            read(serde_json::json!({"$ref": "#/components/schemas/JsonValue"})),
            "JSON"
        );
        assert_eq!(
            read(serde_json::json!({"type": ["integer", "null"]})),
            "integer or null"
        );
    }
}
