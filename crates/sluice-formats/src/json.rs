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
    /// Where in [`JsonEncoder::keys`] this column's `"name":` is, preceded by
    /// `,` for all but the first column.
    key: std::ops::Range<usize>,
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
    /// Every column's key, one after the other: one allocation per response
    /// rather than one per column.
    keys: Vec<u8>,
    rows_written: u64,
    /// A value arriving in pieces: bytes not yet base64-encoded (at most two), or
    /// the whole value for kinds that cannot be rendered piecewise.
    carry: Vec<u8>,
}

impl JsonEncoder {
    /// An NDJSON encoder.
    pub fn ndjson(options: JsonOptions) -> JsonEncoder {
        JsonEncoder {
            array: false,
            options,
            plan: Vec::new(),
            keys: Vec::new(),
            rows_written: 0,
            carry: Vec::new(),
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

impl JsonEncoder {
    fn write_value(&self, column: usize, value: Option<&[u8]>, output: &mut Vec<u8>) {
        let plan = &self.plan[column];
        match value {
            None => output.extend_from_slice(b"null"),
            Some(value) => match &plan.render {
                Render::Verbatim if !value.is_empty() => output.extend_from_slice(value),
                Render::Verbatim | Render::String => write_string(value, output),
                Render::General(kind) => write_value(kind, value, &self.options, output),
            },
        }
    }

    fn start_row(&mut self, output: &mut Vec<u8>) {
        if self.array && self.rows_written > 0 {
            output.extend_from_slice(b",\n");
        }
        output.push(b'{');
    }

    fn close_row(&mut self, output: &mut Vec<u8>) {
        output.push(b'}');
        if !self.array {
            output.push(b'\n');
        }
        self.rows_written += 1;
    }
}

/// How a value arriving in pieces is written.
enum Piecewise {
    /// Base64 (or hex) of binary data, a piece at a time.
    Bytes,
    /// An escaped JSON string, a piece at a time.
    String,
    /// Embedded JSON or a number, copied a piece at a time.
    Raw,
    /// Kinds whose rendering needs the whole text (arrays, composites,
    /// timestamps): gathered, then written. Such values are never huge.
    Whole,
}

fn piecewise(render: &Render) -> Piecewise {
    match render {
        Render::Verbatim => Piecewise::Raw,
        Render::String => Piecewise::String,
        Render::General(Kind::Bytes) => Piecewise::Bytes,
        Render::General(Kind::Json) => Piecewise::Raw,
        Render::General(_) => Piecewise::Whole,
    }
}

impl JsonEncoder {
    /// Column `column`'s `"name":` (with its leading `,`).
    fn key(&self, column: usize) -> &[u8] {
        &self.keys[self.plan[column].key.clone()]
    }
}

impl Encoder for JsonEncoder {
    fn begin(&mut self, schema: &Schema, output: &mut Vec<u8>) -> Result<(), Error> {
        crate::forms::require_text(schema)?;
        let names = schema.unique_names();
        self.keys.clear();
        self.keys
            .reserve(names.iter().map(|name| name.len() + 4).sum::<usize>());
        self.plan = names
            .iter()
            .zip(&schema.columns)
            .enumerate()
            .map(|(index, (name, column))| {
                let start = self.keys.len();
                if index > 0 {
                    self.keys.push(b',');
                }
                write_string(name.as_bytes(), &mut self.keys);
                self.keys.push(b':');
                let render = match column.kind {
                    Kind::Integer => Render::Verbatim,
                    Kind::Text | Kind::Date | Kind::Time | Kind::TimeTz | Kind::Other => {
                        Render::String
                    }
                    ref other => Render::General(other.clone()),
                };
                ColumnPlan {
                    key: start..self.keys.len(),
                    render,
                }
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
            self.start_row(output);
            for index in 0..self.plan.len() {
                output.extend_from_slice(self.key(index));
                self.write_value(index, row.get(index), output);
            }
            self.close_row(output);
        }
        Ok(())
    }

    fn begin_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
        self.start_row(output);
        Ok(())
    }

    fn row_value(
        &mut self,
        column: usize,
        value: Option<&[u8]>,
        output: &mut Vec<u8>,
    ) -> Result<(), Error> {
        output.extend_from_slice(self.key(column));
        self.write_value(column, value, output);
        Ok(())
    }

    fn begin_value(&mut self, column: usize, output: &mut Vec<u8>) -> Result<(), Error> {
        output.extend_from_slice(self.key(column));
        self.carry.clear();
        match piecewise(&self.plan[column].render) {
            Piecewise::Bytes => {
                output.push(b'"');
                if self.options.bytes == crate::json_value::BytesEncoding::Hex {
                    output.extend_from_slice(b"\\\\x");
                }
            }
            Piecewise::String => output.push(b'"'),
            Piecewise::Raw | Piecewise::Whole => {}
        }
        Ok(())
    }

    fn value_piece(
        &mut self,
        column: usize,
        piece: &[u8],
        output: &mut Vec<u8>,
    ) -> Result<(), Error> {
        match piecewise(&self.plan[column].render) {
            Piecewise::Bytes => match self.options.bytes {
                crate::json_value::BytesEncoding::Hex => {
                    crate::json_value::write_hex(piece, output)
                }
                crate::json_value::BytesEncoding::Base64 => {
                    // Encode whole groups of three; keep the rest for the next piece.
                    self.carry.extend_from_slice(piece);
                    let whole = self.carry.len() / 3 * 3;
                    crate::json_value::write_base64(&self.carry[..whole], output);
                    self.carry.drain(..whole);
                }
            },
            Piecewise::String => {
                // Escapes concern ASCII bytes only, so a piece boundary inside a
                // multi-byte character changes nothing.
                crate::json_value::write_escaped(piece, output);
            }
            Piecewise::Raw => crate::json_value::write_embedded_json(piece, output),
            Piecewise::Whole => self.carry.extend_from_slice(piece),
        }
        Ok(())
    }

    fn end_value(&mut self, column: usize, output: &mut Vec<u8>) -> Result<(), Error> {
        match piecewise(&self.plan[column].render) {
            Piecewise::Bytes => {
                crate::json_value::write_base64(&self.carry, output);
                output.push(b'"');
            }
            Piecewise::String => output.push(b'"'),
            Piecewise::Raw => {}
            Piecewise::Whole => {
                let whole = std::mem::take(&mut self.carry);
                self.write_value(column, Some(&whole), output);
            }
        }
        self.carry.clear();
        Ok(())
    }

    fn end_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
        self.close_row(output);
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
        let column = |name: &str, kind: Kind| Column::new(name, kind, "");
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
    fn a_row_in_pieces_reads_like_the_whole_row() {
        let schema = Schema {
            columns: vec![
                Column::new("blob", Kind::Bytes, ""),
                Column::new("text", Kind::Text, ""),
                Column::new("at", Kind::TimestampTz, ""),
            ],
        };
        let whole = {
            let mut batch = Batch::new(3);
            batch.push_value(b"\x00\x01\x02\x03\x04\xff\xfe");
            batch.push_value("caf\u{e9} \"x\"\n".as_bytes());
            batch.push_value(b"2024-01-01 00:00:00+00");
            let mut encoder = JsonEncoder::ndjson(JsonOptions::default());
            let mut output = Vec::new();
            encoder.begin(&schema, &mut output).unwrap();
            encoder.encode(&batch, &mut output).unwrap();
            output
        };
        let mut encoder = JsonEncoder::ndjson(JsonOptions::default());
        let mut output = Vec::new();
        encoder.begin(&schema, &mut output).unwrap();
        encoder.begin_row(&mut output).unwrap();
        encoder.begin_value(0, &mut output).unwrap();
        for piece in [&b"\x00"[..], b"\x01\x02\x03\x04", b"\xff", b"\xfe"] {
            encoder.value_piece(0, piece, &mut output).unwrap();
        }
        encoder.end_value(0, &mut output).unwrap();
        encoder.begin_value(1, &mut output).unwrap();
        let text = "caf\u{e9} \"x\"\n".as_bytes();
        // Split inside the two-byte é.
        encoder.value_piece(1, &text[..4], &mut output).unwrap();
        encoder.value_piece(1, &text[4..], &mut output).unwrap();
        encoder.end_value(1, &mut output).unwrap();
        encoder.begin_value(2, &mut output).unwrap();
        encoder.value_piece(2, b"2024-01-01 ", &mut output).unwrap();
        encoder.value_piece(2, b"00:00:00+00", &mut output).unwrap();
        encoder.end_value(2, &mut output).unwrap();
        encoder.end_row(&mut output).unwrap();
        assert_eq!(
            String::from_utf8(output).unwrap(),
            String::from_utf8(whole).unwrap()
        );
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
