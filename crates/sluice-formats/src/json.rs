//! [`JsonEncoder`]: rows as JSON objects, one per line (NDJSON) or in one array.

use sluice_core::{Batch, Encoder, Error, Kind, Schema};

use crate::json_value::{write_string, write_value, JsonOptions};

/// How one column is rendered, chosen once per schema so the row loop only
/// branches on a small enum.
enum Render {
    /// Integers: the canonical text is already a JSON number.
    Verbatim,
    /// Text-like values: a JSON string.
    String,
    /// Everything else, through the general renderer.
    General(Kind),
}

struct ColumnPlan {
    /// `"name":`, preceded by `,` for all but the first column.
    key: Vec<u8>,
    render: Render,
}

/// Writes rows as JSON objects whose keys are the column names in column order
/// (duplicates made unique by [`Schema::unique_names`]).
///
/// - NDJSON ([`JsonEncoder::ndjson`]): `{…}\n` per row; no rows, no output.
/// - JSON ([`JsonEncoder::array`]): `[`, rows separated by `,\n`, `]\n`; `[]\n` when empty.
pub struct JsonEncoder {
    array: bool,
    options: JsonOptions,
    plan: Vec<ColumnPlan>,
    rows_written: u64,
}

impl JsonEncoder {
    /// An NDJSON encoder.
    pub fn ndjson(options: JsonOptions) -> JsonEncoder {
        JsonEncoder {
            array: false,
            options,
            plan: Vec::new(),
            rows_written: 0,
        }
    }

    /// A JSON-array encoder.
    pub fn array(options: JsonOptions) -> JsonEncoder {
        JsonEncoder {
            array: true,
            ..JsonEncoder::ndjson(options)
        }
    }
}

impl Encoder for JsonEncoder {
    fn begin(&mut self, schema: &Schema, output: &mut Vec<u8>) -> Result<(), Error> {
        self.plan = schema
            .unique_names()
            .iter()
            .zip(&schema.columns)
            .enumerate()
            .map(|(index, (name, column))| {
                let mut key = Vec::with_capacity(name.len() + 4);
                if index > 0 {
                    key.push(b',');
                }
                write_string(name.as_bytes(), &mut key);
                key.push(b':');
                let render = match column.kind {
                    Kind::Integer => Render::Verbatim,
                    Kind::Text | Kind::Date | Kind::Time | Kind::TimeTz | Kind::Other => {
                        Render::String
                    }
                    ref other => Render::General(other.clone()),
                };
                ColumnPlan { key, render }
            })
            .collect();
        self.rows_written = 0;
        if self.array {
            output.push(b'[');
        }
        Ok(())
    }

    fn encode(&mut self, batch: &Batch, output: &mut Vec<u8>) -> Result<(), Error> {
        for row in batch.rows() {
            if self.array && self.rows_written > 0 {
                output.extend_from_slice(b",\n");
            }
            output.push(b'{');
            for (index, column) in self.plan.iter().enumerate() {
                output.extend_from_slice(&column.key);
                match row.get(index) {
                    None => output.extend_from_slice(b"null"),
                    Some(value) => match &column.render {
                        Render::Verbatim if !value.is_empty() => output.extend_from_slice(value),
                        Render::Verbatim | Render::String => write_string(value, output),
                        Render::General(kind) => write_value(kind, value, &self.options, output),
                    },
                }
            }
            output.push(b'}');
            if !self.array {
                output.push(b'\n');
            }
            self.rows_written += 1;
        }
        Ok(())
    }

    fn finish(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
        if self.array {
            output.extend_from_slice(b"]\n");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Column;

    fn schema() -> Schema {
        let column = |name: &str, kind: Kind| Column {
            name: name.into(),
            kind,
            type_name: String::new(),
        };
        Schema {
            columns: vec![
                column("id", Kind::Integer),
                column("id", Kind::Text),
                column("ok", Kind::Bool),
            ],
        }
    }

    fn encode(mut encoder: JsonEncoder, rows: usize) -> String {
        let mut batch = Batch::new(3);
        for row in 0..rows {
            batch.push_value(row.to_string().as_bytes());
            batch.push_null();
            batch.push_value(b"t");
        }
        let mut output = Vec::new();
        encoder.begin(&schema(), &mut output).unwrap();
        encoder.encode(&batch, &mut output).unwrap();
        encoder.finish(&mut output).unwrap();
        String::from_utf8(output).unwrap()
    }

    #[test]
    fn ndjson_writes_one_object_per_line_with_unique_keys() {
        assert_eq!(
            encode(JsonEncoder::ndjson(JsonOptions::default()), 2),
            "{\"id\":0,\"id_2\":null,\"ok\":true}\n{\"id\":1,\"id_2\":null,\"ok\":true}\n"
        );
    }

    #[test]
    fn json_array_is_valid_even_when_empty() {
        assert_eq!(
            encode(JsonEncoder::array(JsonOptions::default()), 0),
            "[]\n"
        );
        let two = encode(JsonEncoder::array(JsonOptions::default()), 2);
        let parsed: serde_json::Value = serde_json::from_str(&two).unwrap();
        assert_eq!(parsed.as_array().unwrap().len(), 2);
    }
}
