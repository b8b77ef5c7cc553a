//! Reports for programs that run sluice rather than for a person: with
//! `SLUICE_REPORT=json` in the environment, an error is one JSON object on
//! standard error, `{"error": {…}}`, and `--stats` prints `{"stats": {…}}`, each
//! on one line. The Python package (`python/sluice`) reads them to raise
//! exceptions carrying the SQLSTATE and positions and to answer `last_stats()`;
//! the terminal wording of `report` stays as it is for everyone else.

use std::time::Duration;

use serde_json::{json, Map, Value};
use sluice_core::{peak_rss_bytes, Error, ErrorKind};

use crate::console::err_line;
use crate::exit::exit_code;
use crate::position::line_and_column;

/// The environment variable that asks for these reports, and its one value.
const VARIABLE: &str = "SLUICE_REPORT";
const JSON: &str = "json";

/// True when the caller asked for JSON reports.
pub fn enabled() -> bool {
    std::env::var(VARIABLE).is_ok_and(|value| value == JSON)
}

/// The name a program tells error kinds apart by.
fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Config => "config",
        ErrorKind::Connect => "connect",
        ErrorKind::Authentication => "authentication",
        ErrorKind::Database => "database",
        ErrorKind::Protocol => "protocol",
        ErrorKind::Io => "io",
        ErrorKind::Closed => "closed",
        ErrorKind::OutputClosed => "output_closed",
        ErrorKind::Data => "data",
        ErrorKind::Cancelled => "cancelled",
        ErrorKind::Unsupported => "unsupported",
        _ => "other",
    }
}

/// The error as one JSON object: its kind, the exit code, the words a person
/// would read (`message`), and whatever is known of where it happened: the
/// server's fields for a database error (with the position as `line` and
/// `column` of `sql`), the record and column for a refused input record.
pub fn error_object(error: &Error, message: &str, sql: &str) -> Value {
    let mut fields = Map::new();
    fields.insert("kind".into(), kind_name(error.kind()).into());
    fields.insert("exit_code".into(), exit_code(error).into());
    fields.insert("message".into(), message.into());
    if let Some(db) = error.as_db_error() {
        fields.insert("sqlstate".into(), db.code.clone().into());
        fields.insert("severity".into(), db.severity.clone().into());
        fields.insert("server_message".into(), db.message.clone().into());
        for (name, value) in [
            ("detail", &db.detail),
            ("hint", &db.hint),
            ("constraint", &db.constraint),
        ] {
            if let Some(value) = value {
                fields.insert(name.into(), value.clone().into());
            }
        }
        if let Some(position) = db.position {
            fields.insert("position".into(), position.into());
            if let Some((line, column)) = line_and_column(sql, position) {
                fields.insert("line".into(), line.into());
                fields.insert("column".into(), column.into());
            }
        }
    }
    if let Some(row) = error.as_row_error() {
        fields.insert("record".into(), row.line.into());
        fields.insert("reason".into(), row.reason.clone().into());
        if let Some(column) = &row.column {
            fields.insert("column_name".into(), column.clone().into());
        }
    }
    json!({ "error": fields })
}

/// Prints [`error_object`] on standard error.
pub fn print_error(error: &Error, message: &str, sql: &str) {
    err_line!("{}", error_object(error, message, sql));
}

/// Prints a command's `--stats` figures as `{"stats": {…}}`: its own figures
/// under their names (spaces as underscores), then round trips, wire bytes,
/// seconds and peak memory.
pub fn print_stats(
    figures: &[(&'static str, u64)],
    part_rows: &[u64],
    round_trips: (u64, u64),
    wire_bytes: (u64, u64),
    elapsed: Duration,
) {
    let mut fields = Map::new();
    for (name, value) in figures {
        fields.insert(name.replace(' ', "_"), (*value).into());
    }
    if !part_rows.is_empty() {
        fields.insert("part_rows".into(), part_rows.into());
    }
    let (connecting, operation) = round_trips;
    let (sent, received) = wire_bytes;
    fields.insert("round_trips".into(), (connecting + operation).into());
    fields.insert("round_trips_connecting".into(), connecting.into());
    fields.insert("round_trips_operation".into(), operation.into());
    fields.insert("wire_bytes_sent".into(), sent.into());
    fields.insert("wire_bytes_received".into(), received.into());
    fields.insert("elapsed_seconds".into(), elapsed.as_secs_f64().into());
    if let Some(bytes) = peak_rss_bytes() {
        fields.insert("peak_memory_bytes".into(), bytes.into());
    }
    err_line!("{}", json!({ "stats": fields }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{DbError, RowError};

    #[test]
    fn a_database_error_carries_its_sqlstate_and_where_it_points() {
        let error = Error::db(DbError {
            severity: "ERROR".into(),
            code: "42601".into(),
            message: "syntax error at or near \"frm\"".into(),
            position: Some(13),
            ..DbError::default()
        });
        let object = error_object(&error, "words", "select 1\nfrom frm");
        let fields = &object["error"];
        assert_eq!(fields["kind"], "database");
        assert_eq!(fields["sqlstate"], "42601");
        assert_eq!(fields["exit_code"], 1);
        assert_eq!((&fields["line"], &fields["column"]), (&2.into(), &4.into()));
        assert_eq!(fields["message"], "words");
    }

    #[test]
    fn a_refused_record_names_its_record_and_column() {
        let error = Error::bad_row(RowError::new(7, Some("amount".into()), "not a number"));
        let fields = &error_object(&error, "m", "")["error"];
        assert_eq!(fields["record"], 7);
        assert_eq!(fields["column_name"], "amount");
        assert_eq!(fields["reason"], "not a number");
        assert!(fields.get("sqlstate").is_none());
    }
}
