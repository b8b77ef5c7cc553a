//! [`CsvEncoder`]: CSV byte-identical to PostgreSQL's `COPY … TO STDOUT WITH (FORMAT csv, HEADER)`.
//!
//! Hand-written rather than through the `csv` crate because COPY's rules differ from
//! RFC-4180 writers in ways that change bytes: NULL is an empty unquoted field while
//! an empty string is `""`, and a lone `\.` in a one-column result is quoted so it
//! cannot be read back as the end-of-data marker.

use sluice_core::{Batch, Encoder, Error, Kind, Schema};

use crate::json_value::write_hex;

/// Writes a header line of column names, then one line per row, `\n`-terminated.
/// Values are the canonical text forms (which are PostgreSQL's own output), with
/// `bytea` in PostgreSQL's hex form.
#[derive(Default)]
pub struct CsvEncoder {
    bytes_columns: Vec<bool>,
    single_column: bool,
}

impl CsvEncoder {
    /// A CSV encoder with COPY's defaults: `,` delimiter, `"` quote, header line.
    pub fn new() -> CsvEncoder {
        CsvEncoder::default()
    }
}

/// Bytes that force a field into quotes: the delimiter, the quote and line breaks.
static NEEDS_QUOTES: [bool; 256] = {
    let mut table = [false; 256];
    table[b',' as usize] = true;
    table[b'"' as usize] = true;
    table[b'\n' as usize] = true;
    table[b'\r' as usize] = true;
    table
};

fn write_field(text: &[u8], single_column: bool, output: &mut Vec<u8>) {
    let quote = text.is_empty()
        || (single_column && text == b"\\.")
        || text.iter().any(|&byte| NEEDS_QUOTES[byte as usize]);
    if !quote {
        output.extend_from_slice(text);
        return;
    }
    output.push(b'"');
    let mut run_start = 0;
    for (index, &byte) in text.iter().enumerate() {
        if byte == b'"' {
            output.extend_from_slice(&text[run_start..=index]);
            output.push(b'"');
            run_start = index + 1;
        }
    }
    output.extend_from_slice(&text[run_start..]);
    output.push(b'"');
}

impl Encoder for CsvEncoder {
    fn begin(&mut self, schema: &Schema, output: &mut Vec<u8>) -> Result<(), Error> {
        self.bytes_columns = schema
            .columns
            .iter()
            .map(|column| column.kind == Kind::Bytes)
            .collect();
        self.single_column = schema.len() == 1;
        for (index, column) in schema.columns.iter().enumerate() {
            if index > 0 {
                output.push(b',');
            }
            write_field(column.name.as_bytes(), self.single_column, output);
        }
        output.push(b'\n');
        Ok(())
    }

    fn encode(&mut self, batch: &Batch, output: &mut Vec<u8>) -> Result<(), Error> {
        for row in batch.rows() {
            for (index, &is_bytes) in self.bytes_columns.iter().enumerate() {
                if index > 0 {
                    output.push(b',');
                }
                match row.get(index) {
                    None => {}
                    Some(bytes) if is_bytes => {
                        // Hex text never needs quoting.
                        output.extend_from_slice(b"\\x");
                        write_hex(bytes, output);
                    }
                    Some(text) => write_field(text, self.single_column, output),
                }
            }
            output.push(b'\n');
        }
        Ok(())
    }

    fn finish(&mut self, _output: &mut Vec<u8>) -> Result<(), Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Column;

    #[test]
    fn follows_copy_quoting_rules() {
        let schema = Schema {
            columns: ["a", "b,c", "d"]
                .iter()
                .map(|name| Column {
                    name: name.to_string(),
                    kind: if *name == "d" {
                        Kind::Bytes
                    } else {
                        Kind::Text
                    },
                    type_name: String::new(),
                })
                .collect(),
        };
        let mut batch = Batch::new(3);
        batch.push_value(b"");
        batch.push_null();
        batch.push_value(b"\x01\xab");
        batch.push_value(b"say \"hi\"\nbye");
        batch.push_value(b"\\.");
        batch.push_null();
        let mut encoder = CsvEncoder::new();
        let mut output = Vec::new();
        encoder.begin(&schema, &mut output).unwrap();
        encoder.encode(&batch, &mut output).unwrap();
        encoder.finish(&mut output).unwrap();
        assert_eq!(
            String::from_utf8(output).unwrap(),
            "a,\"b,c\",d\n\"\",,\\x01ab\n\"say \"\"hi\"\"\nbye\",\\.,\n"
        );
    }
}
