//! What a `FlightDescriptor` asks for: a named query, its parameters and the
//! number of parts.
//!
//! Two spellings, so that any Flight client can ask:
//! - a command (`FlightDescriptor::new_cmd`), JSON:
//!   `{"query": "payments", "params": {"status": "settled"}, "partitions": 4}`
//!   (`params` and `partitions` optional; values may be strings, numbers or
//!   booleans, read as the HTTP query string's text would be);
//! - a path (`FlightDescriptor::new_path`): `["payments"]`, without parameters.

use arrow_flight::flight_descriptor::DescriptorType;
use arrow_flight::FlightDescriptor;
use serde::Deserialize;
use serde_json::Value;

/// A request for a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRequest {
    /// The named query.
    pub query: String,
    /// Its parameters as text, by name.
    pub params: Vec<(String, String)>,
    /// How many parts; `None`: the configured default.
    pub partitions: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Command {
    query: String,
    #[serde(default)]
    params: serde_json::Map<String, Value>,
    partitions: Option<usize>,
}

/// Reads `descriptor`; the error says what is wrong, for the client.
pub fn plan_request(descriptor: &FlightDescriptor) -> Result<PlanRequest, String> {
    match DescriptorType::try_from(descriptor.r#type) {
        Ok(DescriptorType::Cmd) => command(&descriptor.cmd),
        Ok(DescriptorType::Path) => match descriptor.path.as_slice() {
            [query] => Ok(PlanRequest {
                query: query.clone(),
                params: Vec::new(),
                partitions: None,
            }),
            _ => Err(format!(
                "a path names one query, as [\"payments\"]; got {} elements \
                 (parameters go in a command: {})",
                descriptor.path.len(),
                COMMAND_EXAMPLE
            )),
        },
        _ => Err(format!("unknown descriptor type {}", descriptor.r#type)),
    }
}

const COMMAND_EXAMPLE: &str =
    r#"{"query": "payments", "params": {"status": "settled"}, "partitions": 4}"#;

fn command(bytes: &[u8]) -> Result<PlanRequest, String> {
    let command: Command = serde_json::from_slice(bytes).map_err(|error| {
        format!("the command is not a query request such as {COMMAND_EXAMPLE}: {error}")
    })?;
    let mut params = Vec::with_capacity(command.params.len());
    for (name, value) in command.params {
        let text = match value {
            Value::String(text) => text,
            Value::Number(number) => number.to_string(),
            Value::Bool(flag) => flag.to_string(),
            other => {
                return Err(format!(
                    "parameter {name:?}: give a string, a number or a boolean, not {other}"
                ))
            }
        };
        params.push((name, text));
    }
    if command.partitions == Some(0) {
        return Err("partitions must be at least 1".into());
    }
    Ok(PlanRequest {
        query: command.query,
        params,
        partitions: command.partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_paths_name_a_query() {
        let descriptor = FlightDescriptor::new_cmd(
            r#"{"query": "payments", "params": {"status": "settled", "limit": 5, "all": true}, "partitions": 3}"#,
        );
        let request = plan_request(&descriptor).unwrap();
        assert_eq!(request.query, "payments");
        assert_eq!(request.partitions, Some(3));
        let mut params = request.params;
        params.sort();
        assert_eq!(
            params,
            [
                ("all".to_owned(), "true".to_owned()),
                ("limit".to_owned(), "5".to_owned()),
                ("status".to_owned(), "settled".to_owned())
            ]
        );
        let path = plan_request(&FlightDescriptor::new_path(vec!["payments".into()])).unwrap();
        assert_eq!(path.query, "payments");
        assert!(path.params.is_empty() && path.partitions.is_none());
    }

    #[test]
    fn malformed_requests_say_what_is_expected() {
        let error = plan_request(&FlightDescriptor::new_cmd("select 1")).unwrap_err();
        assert!(error.contains(r#"{"query": "payments""#), "{error}");
        let error = plan_request(&FlightDescriptor::new_cmd(
            r#"{"query": "q", "partitions": 0}"#,
        ))
        .unwrap_err();
        assert!(error.contains("at least 1"), "{error}");
        let error = plan_request(&FlightDescriptor::new_cmd(
            r#"{"query": "q", "params": {"a": [1]}}"#,
        ))
        .unwrap_err();
        assert!(error.contains("parameter \"a\""), "{error}");
        let error =
            plan_request(&FlightDescriptor::new_path(vec!["a".into(), "b".into()])).unwrap_err();
        assert!(error.contains("one query"), "{error}");
    }
}
