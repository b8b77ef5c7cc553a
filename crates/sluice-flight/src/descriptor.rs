//! What a `FlightDescriptor` asks for: a named query, its parameters and the
//! number of parts.
//!
//! Two spellings, so that any Flight client can ask:
//! - a command (`FlightDescriptor::new_cmd`), JSON:
//!   `{"query": "payments", "params": {"status": "settled"}, "partitions": 4,
//!   "columns": ["id", "amount"]}` (`params`, `partitions` and `columns`
//!   optional; values may be strings, numbers or booleans, read as the HTTP
//!   query string's text would be; `columns` picks some of the query's columns,
//!   in that order, and the database reads only those);
//! - a path (`FlightDescriptor::new_path`): `["payments"]`, without parameters.
//!
//! A command may also be Flight SQL's `CommandStatementQuery` (a protobuf
//! `Any`, as ADBC's and JDBC's Flight SQL drivers send it), or its
//! `CommandPreparedStatementQuery` (a handle of [`crate::prepared`]): ad-hoc
//! SQL, served where `[sql]` allows it. Only those commands of Flight SQL are
//! read: sluice is no SQL catalog server.

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
    /// The query's columns to read, in this order; empty: all of them.
    pub columns: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Command {
    query: String,
    #[serde(default)]
    params: serde_json::Map<String, Value>,
    partitions: Option<usize>,
    #[serde(default)]
    columns: Vec<String>,
}

/// What a descriptor asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// A named query.
    Query(PlanRequest),
    /// Ad-hoc SQL (Flight SQL's `CommandStatementQuery`).
    Statement(String),
    /// A prepared statement's handle (Flight SQL's
    /// `CommandPreparedStatementQuery`), not yet opened.
    Prepared(bytes::Bytes),
}

/// `google.protobuf.Any`, which carries every Flight SQL command. Flight
/// SQL's few messages sluice reads are declared here rather than taken from
/// arrow-flight's `flight-sql` feature, which would build five more Arrow
/// crates for them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    /// Which message `value` is.
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// The message.
    #[prost(bytes = "bytes", tag = "2")]
    pub value: bytes::Bytes,
}

impl Any {
    /// `message` as the Flight SQL message `name` (`CommandStatementQuery`).
    pub fn pack(name: &str, message: &impl prost::Message) -> Any {
        Any {
            type_url: format!("{FLIGHT_SQL_TYPES}{name}"),
            value: message.encode_to_vec().into(),
        }
    }

    /// The Flight SQL message's name, without its package.
    pub fn name(&self) -> &str {
        self.type_url.rsplit('.').next().unwrap_or("")
    }
}

/// Flight SQL's `CommandPreparedStatementQuery`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CommandPreparedStatementQuery {
    /// The handle `CreatePreparedStatement` (or a `DoPut` of parameters) gave.
    #[prost(bytes = "bytes", tag = "1")]
    pub prepared_statement_handle: bytes::Bytes,
}

/// The package of Flight SQL's messages, as `Any` names them.
pub const FLIGHT_SQL_TYPES: &str = "type.googleapis.com/arrow.flight.protocol.sql.";

/// Flight SQL's `CommandStatementQuery` (without a transaction: sluice's
/// ad-hoc SQL runs in a read-only transaction of its own).
#[derive(Clone, PartialEq, prost::Message)]
struct CommandStatementQuery {
    #[prost(string, tag = "1")]
    query: String,
    #[prost(bytes = "bytes", optional, tag = "2")]
    transaction_id: Option<bytes::Bytes>,
}

/// Reads `descriptor`; the error says what is wrong, for the client.
pub fn read_descriptor(descriptor: &FlightDescriptor) -> Result<Asked, String> {
    let is_json = descriptor.cmd.first() == Some(&b'{');
    match DescriptorType::try_from(descriptor.r#type) {
        Ok(DescriptorType::Cmd) if !is_json && !descriptor.cmd.is_empty() => {
            flight_sql(&descriptor.cmd)
        }
        _ => plan_request(descriptor).map(Asked::Query),
    }
}

/// A Flight SQL command: `CommandStatementQuery` and
/// `CommandPreparedStatementQuery` are served.
fn flight_sql(bytes: &[u8]) -> Result<Asked, String> {
    use prost::Message;
    let any = Any::decode(bytes).map_err(|_| {
        format!("the command is neither a query request such as {COMMAND_EXAMPLE} nor a Flight SQL command")
    })?;
    if !any.type_url.starts_with(FLIGHT_SQL_TYPES) {
        return Err(format!("{} is no Flight SQL command", any.type_url));
    }
    if any.name() == "CommandPreparedStatementQuery" {
        let command = CommandPreparedStatementQuery::decode(any.value)
            .map_err(|error| format!("a malformed CommandPreparedStatementQuery: {error}"))?;
        return Ok(Asked::Prepared(command.prepared_statement_handle));
    }
    if any.name() != "CommandStatementQuery" {
        return Err(format!(
            "Flight SQL's {} is not served: sluice serves CommandStatementQuery and prepared \
             statements (ad-hoc SQL) and its named queries",
            any.name()
        ));
    }
    let command = CommandStatementQuery::decode(any.value)
        .map_err(|error| format!("a malformed CommandStatementQuery: {error}"))?;
    if command.transaction_id.is_some() {
        return Err(
            "transactions are not served: each statement runs in its own read-only one".into(),
        );
    }
    Ok(Asked::Statement(command.query))
}

/// Reads a descriptor that names a query.
pub fn plan_request(descriptor: &FlightDescriptor) -> Result<PlanRequest, String> {
    match DescriptorType::try_from(descriptor.r#type) {
        Ok(DescriptorType::Cmd) => command(&descriptor.cmd),
        Ok(DescriptorType::Path) => match descriptor.path.as_slice() {
            [query] => Ok(PlanRequest {
                query: query.clone(),
                params: Vec::new(),
                partitions: None,
                columns: Vec::new(),
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
    for (index, column) in command.columns.iter().enumerate() {
        if command.columns[..index].contains(column) {
            return Err(format!("columns names {column:?} twice"));
        }
    }
    Ok(PlanRequest {
        query: command.query,
        params,
        partitions: command.partitions,
        columns: command.columns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_paths_name_a_query() {
        let descriptor = FlightDescriptor::new_cmd(
            r#"{"query": "payments", "params": {"status": "settled", "limit": 5, "all": true}, "partitions": 3, "columns": ["amount", "id"]}"#,
        );
        let request = plan_request(&descriptor).unwrap();
        assert_eq!(request.query, "payments");
        assert_eq!(request.partitions, Some(3));
        assert_eq!(request.columns, ["amount", "id"]);
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
    fn flight_sql_statement_queries_are_ad_hoc_sql_and_other_commands_are_refused() {
        use prost::Message;
        let statement = CommandStatementQuery {
            query: "select 1".into(),
            transaction_id: None,
        };
        let any = |type_url: &str| Any {
            type_url: type_url.into(),
            value: statement.encode_to_vec().into(),
        };
        let statement_query = format!("{FLIGHT_SQL_TYPES}CommandStatementQuery");
        let descriptor = FlightDescriptor::new_cmd(any(&statement_query).encode_to_vec());
        assert_eq!(
            read_descriptor(&descriptor),
            Ok(Asked::Statement("select 1".into()))
        );
        let other = any("type.googleapis.com/arrow.flight.protocol.sql.CommandGetTables");
        let error = read_descriptor(&FlightDescriptor::new_cmd(other.encode_to_vec())).unwrap_err();
        assert!(error.contains("CommandGetTables is not served"), "{error}");
        let json = FlightDescriptor::new_cmd(r#"{"query": "q"}"#);
        assert!(matches!(read_descriptor(&json), Ok(Asked::Query(_))));
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
        let error = plan_request(&FlightDescriptor::new_cmd(
            r#"{"query": "q", "columns": ["id", "id"]}"#,
        ))
        .unwrap_err();
        assert!(error.contains(r#"columns names "id" twice"#), "{error}");
        let error =
            plan_request(&FlightDescriptor::new_path(vec!["a".into(), "b".into()])).unwrap_err();
        assert!(error.contains("one query"), "{error}");
    }
}
