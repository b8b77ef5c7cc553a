//! Result lines of pipelined calls, one NDJSON line per parameter set, in the
//! shapes `sluice call` and `POST /queries/{name}/batch` both write:
//!
//! - `{"line":N,"rows":[…]}` for a statement that returns rows,
//! - `{"line":N,"affected":K}` for one that does not (`null` when the command
//!   reports no count),
//! - `{"line":N,"error":{"code","message","detail"}}` when the database refused
//!   the call, `{"line":N,"error":{"message"}}` when its line was not a valid
//!   parameter set,
//! - `{"line":N,"rolled_back":true}` when another call of its transaction failed.

use serde_json::Value;
use sluice_core::calls::CallOutcome;
use sluice_core::{Encoder, Error, Schema};

use crate::json::JsonEncoder;
use crate::json_value::JsonOptions;

/// Writes result lines for calls whose rows have `schema`.
pub struct CallLines {
    schema: Schema,
    encoder: JsonEncoder,
    line: Vec<u8>,
}

impl CallLines {
    /// A writer for calls returning rows of `schema` (empty: no rows).
    pub fn new(schema: Schema) -> CallLines {
        CallLines {
            schema,
            encoder: JsonEncoder::array(JsonOptions::default()),
            line: Vec::with_capacity(1024),
        }
    }

    /// The result line of input line `line`, newline included.
    pub fn line(&mut self, line: u64, outcome: CallOutcome<'_>) -> Result<&[u8], Error> {
        let text = &mut self.line;
        text.clear();
        text.extend_from_slice(format!("{{\"line\":{line},").as_bytes());
        match outcome {
            CallOutcome::Done { rows, .. } if !self.schema.is_empty() => {
                text.extend_from_slice(b"\"rows\":");
                self.encoder.begin(&self.schema, text)?;
                self.encoder.encode(rows, text)?;
                self.encoder.finish(text)?;
                // The array encoder puts each row on a line of its own; this is
                // one line (JSON strings escape their newlines, so only the
                // separators are removed).
                text.retain(|&byte| byte != b'\n');
            }
            CallOutcome::Done { affected, .. } => {
                let affected = affected.map_or("null".to_owned(), |count| count.to_string());
                text.extend_from_slice(format!("\"affected\":{affected}").as_bytes());
            }
            CallOutcome::Failed(db) => {
                let mut error = serde_json::Map::new();
                error.insert("code".into(), db.code.clone().into());
                error.insert("message".into(), db.message.clone().into());
                if let Some(detail) = &db.detail {
                    error.insert("detail".into(), detail.clone().into());
                }
                text.extend_from_slice(format!("\"error\":{}", Value::Object(error)).as_bytes());
            }
            CallOutcome::Invalid(reason) => {
                let error = serde_json::json!({ "message": reason });
                text.extend_from_slice(format!("\"error\":{error}").as_bytes());
            }
            CallOutcome::RolledBack => text.extend_from_slice(b"\"rolled_back\":true"),
        }
        text.extend_from_slice(b"}\n");
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{Batch, Column, DbError, Kind};

    #[test]
    fn each_outcome_has_its_shape() {
        let mut none = CallLines::new(Schema::default());
        let empty = Batch::default();
        let done = CallOutcome::Done {
            rows: &empty,
            affected: Some(2),
        };
        assert_eq!(
            none.line(1, done).unwrap(),
            b"{\"line\":1,\"affected\":2}\n"
        );
        assert_eq!(
            none.line(2, CallOutcome::Invalid("invalid JSON")).unwrap(),
            b"{\"line\":2,\"error\":{\"message\":\"invalid JSON\"}}\n"
        );
        assert_eq!(
            none.line(3, CallOutcome::RolledBack).unwrap(),
            b"{\"line\":3,\"rolled_back\":true}\n"
        );
        let refused = DbError {
            severity: "ERROR".into(),
            code: "23505".into(),
            message: "duplicate key".into(),
            ..DbError::default()
        };
        let line = none.line(4, CallOutcome::Failed(&refused)).unwrap();
        let parsed: Value = serde_json::from_slice(line).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!({"line": 4, "error": {"code": "23505", "message": "duplicate key"}})
        );
    }

    #[test]
    fn rows_are_one_line_in_column_order() {
        let column = |name: &str, kind: Kind| Column::new(name, kind, "");
        let schema = Schema {
            columns: vec![column("z", Kind::Integer), column("a", Kind::Text)],
        };
        let mut rows = Batch::new(2);
        for (number, text) in [("1", "two\nlines"), ("2", "b")] {
            rows.push_value(number.as_bytes());
            rows.push_value(text.as_bytes());
        }
        let mut lines = CallLines::new(schema);
        let done = CallOutcome::Done {
            rows: &rows,
            affected: Some(2),
        };
        assert_eq!(
            std::str::from_utf8(lines.line(7, done).unwrap()).unwrap(),
            "{\"line\":7,\"rows\":[{\"z\":1,\"a\":\"two\\nlines\"},{\"z\":2,\"a\":\"b\"}]}\n"
        );
    }
}
