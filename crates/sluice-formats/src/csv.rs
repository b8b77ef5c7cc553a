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
        crate::forms::require_text(schema)?;
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

    fn begin_row(&mut self, _output: &mut Vec<u8>) -> Result<(), Error> {
        Ok(())
    }

    fn row_value(
        &mut self,
        column: usize,
        value: Option<&[u8]>,
        output: &mut Vec<u8>,
    ) -> Result<(), Error> {
        if column > 0 {
            output.push(b',');
        }
        match value {
            None => {}
            Some(bytes) if self.bytes_columns[column] => {
                output.extend_from_slice(b"\\x");
                write_hex(bytes, output);
            }
            Some(text) => write_field(text, self.single_column, output),
        }
        Ok(())
    }

    fn begin_value(&mut self, column: usize, output: &mut Vec<u8>) -> Result<(), Error> {
        if column > 0 {
            output.push(b',');
        }
        if self.bytes_columns[column] {
            output.extend_from_slice(b"\\x");
        } else {
            // Whether a value needs quotes depends on all of it; a value too large
            // to hold is always quoted, which any CSV reader (and COPY) reads the
            // same. This is the one place where output can differ from COPY's bytes.
            output.push(b'"');
        }
        Ok(())
    }

    fn value_piece(
        &mut self,
        column: usize,
        piece: &[u8],
        output: &mut Vec<u8>,
    ) -> Result<(), Error> {
        if self.bytes_columns[column] {
            write_hex(piece, output);
        } else {
            let mut run_start = 0;
            for (index, &byte) in piece.iter().enumerate() {
                if byte == b'"' {
                    output.extend_from_slice(&piece[run_start..=index]);
                    output.push(b'"');
                    run_start = index + 1;
                }
            }
            output.extend_from_slice(&piece[run_start..]);
        }
        Ok(())
    }

    fn end_value(&mut self, column: usize, output: &mut Vec<u8>) -> Result<(), Error> {
        if !self.bytes_columns[column] {
            output.push(b'"');
        }
        Ok(())
    }

    fn end_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
        output.push(b'\n');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Column;

    #[test]
    fn a_row_in_pieces_reads_like_the_whole_row() {
        let schema = Schema {
            columns: ["t", "b", "n"]
                .iter()
                .map(|name| {
                    let kind = if *name == "b" {
                        Kind::Bytes
                    } else {
                        Kind::Text
                    };
                    Column::new(*name, kind, "")
                })
                .collect(),
        };
        let mut encoder = CsvEncoder::new();
        let mut output = Vec::new();
        encoder.begin(&schema, &mut output).unwrap();
        encoder.begin_row(&mut output).unwrap();
        encoder.begin_value(0, &mut output).unwrap();
        encoder.value_piece(0, b"say \"", &mut output).unwrap();
        encoder.value_piece(0, b"hi\"", &mut output).unwrap();
        encoder.end_value(0, &mut output).unwrap();
        encoder.begin_value(1, &mut output).unwrap();
        encoder.value_piece(1, b"\x01", &mut output).unwrap();
        encoder.value_piece(1, b"\xff", &mut output).unwrap();
        encoder.end_value(1, &mut output).unwrap();
        encoder.row_value(2, None, &mut output).unwrap();
        encoder.end_row(&mut output).unwrap();
        assert_eq!(
            String::from_utf8(output).unwrap(),
            "t,b,n\n\"say \"\"hi\"\"\",\\x01ff,\n"
        );
    }

    #[test]
    fn follows_copy_quoting_rules() {
        let schema = Schema {
            columns: ["a", "b,c", "d"]
                .iter()
                .map(|name| {
                    let kind = if *name == "d" {
                        Kind::Bytes
                    } else {
                        Kind::Text
                    };
                    Column::new(*name, kind, "")
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
