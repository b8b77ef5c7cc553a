//! [`CsvDecoder`]: CSV with a header line into rows, by PostgreSQL's CSV rules.
//!
//! Hand-written rather than through the `csv` crate because PostgreSQL's rules
//! depend on something that crate does not report: whether a field was quoted. An
//! unquoted empty field is NULL, a quoted one (`""`) the empty string. Otherwise the
//! rules are the usual ones: `,` separates, `"` quotes (anywhere in a field), `""`
//! inside quotes is a quote, line breaks inside quotes are data, lines end in `\n`
//! or `\r\n`, and a line holding only `\.` ends the data.

use sluice_core::{Column, Decoded, Decoder, Error, Kind, Rejected, RowError};

use crate::pg_input::decode_hex;

/// Settings of [`CsvDecoder`]; each states its default.
#[derive(Debug, Clone)]
pub struct CsvOptions {
    /// Names for the file's columns, overriding its header line (which is still
    /// skipped). Default (`None`): the header line names them.
    pub columns: Option<Vec<String>>,
    /// Longest record accepted, in bytes; a longer one is rejected without being
    /// held in memory. Default: 64 MiB.
    pub max_record_bytes: usize,
    /// Keep each good record's bytes beside its row. Default: false.
    pub keep_records: bool,
}

impl Default for CsvOptions {
    fn default() -> CsvOptions {
        CsvOptions {
            columns: None,
            max_record_bytes: 64 * 1024 * 1024,
            keep_records: false,
        }
    }
}

/// Decodes CSV with a header line; see the module docs.
pub struct CsvDecoder {
    table: Vec<Column>,
    options: CsvOptions,
    target_columns: Option<Vec<Column>>,
    /// Physical lines fully consumed so far.
    lines_done: u64,
    records: u64,
    /// Scan state of the current record: bytes scanned, inside quotes, line breaks seen.
    scanned: usize,
    in_quotes: bool,
    breaks: u64,
    skipping: bool,
    ended: bool,
    field: Vec<u8>,
}

impl CsvDecoder {
    /// A decoder filling columns of `table`.
    pub fn new(table: Vec<Column>, options: CsvOptions) -> CsvDecoder {
        CsvDecoder {
            table,
            options,
            target_columns: None,
            lines_done: 0,
            records: 0,
            scanned: 0,
            in_quotes: false,
            breaks: 0,
            skipping: false,
            ended: false,
            field: Vec::new(),
        }
    }

    /// Finds the end of the record at the start of `rest`: `(record length,
    /// terminator length)`, continuing the scan where the last call stopped.
    fn record_end(&mut self, rest: &[u8]) -> Option<(usize, usize)> {
        let mut position = self.scanned;
        while let Some(offset) = memchr::memchr2(b'"', b'\n', &rest[position..]) {
            let at = position + offset;
            position = at + 1;
            if rest[at] == b'"' {
                self.in_quotes = !self.in_quotes;
            } else if self.in_quotes {
                self.breaks += 1;
            } else {
                self.scanned = 0;
                let record = if at > 0 && rest[at - 1] == b'\r' {
                    at - 1
                } else {
                    at
                };
                return Some((record, at + 1 - record));
            }
        }
        self.scanned = rest.len();
        None
    }

    /// Splits a record into fields: `(value, was quoted)`.
    fn fields(record: &[u8], field: &mut Vec<u8>, mut each: impl FnMut(&[u8], bool)) {
        let mut in_quotes = false;
        let mut quoted = false;
        let mut index = 0;
        field.clear();
        while index < record.len() {
            let byte = record[index];
            match byte {
                b'"' if in_quotes && record.get(index + 1) == Some(&b'"') => {
                    field.push(b'"');
                    index += 1;
                }
                b'"' => {
                    in_quotes = !in_quotes;
                    quoted = true;
                }
                b',' if !in_quotes => {
                    each(field, quoted);
                    field.clear();
                    quoted = false;
                }
                other => field.push(other),
            }
            index += 1;
        }
        each(field, quoted);
    }

    fn header(&mut self, record: &[u8]) -> Result<(), Error> {
        let names: Vec<String> = match &self.options.columns {
            Some(names) => names.clone(),
            None => {
                let mut names = Vec::new();
                let mut field = Vec::new();
                Self::fields(record, &mut field, |value, _| {
                    names.push(String::from_utf8_lossy(value).into_owned())
                });
                names
            }
        };
        let mut columns = Vec::with_capacity(names.len());
        for name in names {
            let column = self
                .table
                .iter()
                .find(|column| column.name == name)
                .ok_or_else(|| {
                    Error::config(format!(
                        "the CSV names a column {name:?} that the table does not have"
                    ))
                })?;
            if columns.iter().any(|seen: &Column| seen.name == name) {
                return Err(Error::config(format!(
                    "the CSV names column {name:?} twice"
                )));
            }
            columns.push(column.clone());
        }
        self.target_columns = Some(columns);
        Ok(())
    }

    fn record(&mut self, record: &[u8], line: u64, output: &mut Decoded) {
        let columns = self.target_columns.as_ref().expect("header read first");
        let reject = |output: &mut Decoded, column: Option<String>, reason: String| {
            output.rejected.push(Rejected {
                error: RowError {
                    line,
                    column,
                    reason,
                },
                record: record.to_vec(),
            });
        };
        if let Err(error) = std::str::from_utf8(record) {
            return reject(
                output,
                None,
                format!(
                    "invalid UTF-8 at byte {} of the record",
                    error.valid_up_to() + 1
                ),
            );
        }
        if output.batch.num_columns() != columns.len() {
            output.batch.reset(columns.len());
        }
        let mark = output.batch.mark();
        let mut count = 0usize;
        let mut failure: Option<(String, String)> = None;
        let batch = &mut output.batch;
        Self::fields(record, &mut self.field, |value, quoted| {
            if failure.is_some() {
                return;
            }
            let Some(column) = columns.get(count) else {
                count += 1;
                return;
            };
            count += 1;
            if value.is_empty() && !quoted {
                batch.push_null();
            } else if column.kind == Kind::Bytes {
                match decode_bytea(value) {
                    Some(bytes) => batch.push_value(&bytes),
                    None => failure = Some((column.name.clone(), "not a valid bytea value".into())),
                }
            } else {
                batch.push_value(value);
            }
        });
        if let Some((column, reason)) = failure {
            output.batch.rollback(mark);
            return reject(output, Some(column), reason);
        }
        if count != columns.len() {
            output.batch.rollback(mark);
            return reject(
                output,
                None,
                format!("expected {} fields, found {count}", columns.len()),
            );
        }
        output.lines.push(line);
        if self.options.keep_records {
            output.records.push(record.to_vec());
        }
    }
}

/// PostgreSQL `bytea` input text to bytes: `\x` hex, or the escape format
/// (`\\` and `\ooo` octal, other bytes as themselves).
fn decode_bytea(text: &[u8]) -> Option<Vec<u8>> {
    if let Some(hex) = text.strip_prefix(b"\\x") {
        return decode_hex(hex);
    }
    let mut bytes = Vec::with_capacity(text.len());
    let mut index = 0;
    while index < text.len() {
        if text[index] != b'\\' {
            bytes.push(text[index]);
            index += 1;
        } else if text.get(index + 1) == Some(&b'\\') {
            bytes.push(b'\\');
            index += 2;
        } else {
            let digits = text.get(index + 1..index + 4)?;
            if !digits.iter().all(|digit| (b'0'..=b'7').contains(digit)) {
                return None;
            }
            let value = digits
                .iter()
                .fold(0u32, |value, digit| value * 8 + u32::from(digit - b'0'));
            bytes.push(u8::try_from(value).ok()?);
            index += 4;
        }
    }
    Some(bytes)
}

impl Decoder for CsvDecoder {
    fn decode(
        &mut self,
        input: &[u8],
        end_of_input: bool,
        output: &mut Decoded,
    ) -> Result<usize, Error> {
        let mut consumed = 0;
        while !self.ended {
            let rest = &input[consumed..];
            let (record, advance) = match self.record_end(rest) {
                Some((length, terminator)) => (&rest[..length], length + terminator),
                None if end_of_input && !rest.is_empty() => {
                    self.scanned = 0;
                    (rest, rest.len())
                }
                None => {
                    if !self.skipping && rest.len() > self.options.max_record_bytes {
                        self.records += 1;
                        output.rejected.push(Rejected::too_long(
                            self.lines_done + 1,
                            "record",
                            self.options.max_record_bytes,
                        ));
                        self.skipping = true;
                    }
                    if self.skipping {
                        // Drop what was scanned; the quote state carries on.
                        self.scanned = 0;
                        self.lines_done += self.breaks;
                        self.breaks = 0;
                        return Ok(input.len());
                    }
                    return Ok(consumed);
                }
            };
            let line = self.lines_done + 1;
            self.lines_done += 1 + self.breaks;
            self.breaks = 0;
            self.in_quotes = false;
            consumed += advance;
            if self.skipping {
                self.skipping = false;
                continue;
            }
            if self.target_columns.is_none() {
                self.header(record)?;
                continue;
            }
            if record == b"\\." {
                self.ended = true;
                break;
            }
            if record.is_empty() && self.target_columns.as_ref().is_some_and(|c| c.len() != 1) {
                continue;
            }
            self.records += 1;
            self.record(record, line, output);
            if consumed == input.len() {
                break;
            }
        }
        if self.ended {
            return Ok(input.len());
        }
        Ok(consumed)
    }

    fn target_columns(&self) -> Option<&[Column]> {
        self.target_columns.as_deref()
    }

    fn records_seen(&self) -> u64 {
        self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Vec<Column> {
        ["id", "name", "blob"]
            .iter()
            .map(|name| Column {
                name: name.to_string(),
                kind: if *name == "blob" {
                    Kind::Bytes
                } else {
                    Kind::Text
                },
                type_name: String::new(),
            })
            .collect()
    }

    #[test]
    fn follows_postgres_csv_rules() {
        let mut decoder = CsvDecoder::new(table(), CsvOptions::default());
        let mut output = Decoded::default();
        let input =
            b"name,id,blob\r\n\"a,\"\"b\"\"\nc\",1,\\x00ff\r\n,2,\"\"\n\"\",3,ab\\\\\\001\n4\n";
        let consumed = decoder.decode(input, true, &mut output).unwrap();
        assert_eq!(consumed, input.len());
        let names: Vec<&str> = decoder
            .target_columns()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["name", "id", "blob"]);
        assert_eq!(output.batch.num_rows(), 3);
        assert_eq!(output.batch.row(0).get(0), Some(&b"a,\"b\"\nc"[..]));
        assert_eq!(output.batch.row(0).get(2), Some(&b"\x00\xff"[..]));
        assert_eq!(output.batch.row(1).get(0), None, "unquoted empty is NULL");
        assert_eq!(output.batch.row(1).get(2), Some(&b""[..]));
        assert_eq!(
            output.batch.row(2).get(0),
            Some(&b""[..]),
            "quoted empty is ''"
        );
        assert_eq!(output.batch.row(2).get(2), Some(&b"ab\\\x01"[..]));
        assert_eq!(output.lines, [2, 4, 5]);
        assert_eq!(output.rejected.len(), 1);
        assert_eq!(
            output.rejected[0].error.to_string(),
            "line 6: expected 3 fields, found 1"
        );
        assert_eq!(decoder.records_seen(), 4);
    }

    #[test]
    fn records_split_across_reads_and_unknown_header_columns() {
        let mut decoder = CsvDecoder::new(table(), CsvOptions::default());
        let mut output = Decoded::default();
        let consumed = decoder
            .decode(b"id,name\n1,\"multi\nli", false, &mut output)
            .unwrap();
        assert_eq!(consumed, 8);
        let consumed = decoder
            .decode(b"1,\"multi\nline\"\n2,x", true, &mut output)
            .unwrap();
        assert_eq!(consumed, 18);
        assert_eq!(output.batch.num_rows(), 2);
        assert_eq!(output.batch.row(0).get(1), Some(&b"multi\nline"[..]));
        assert_eq!(output.lines, [2, 4]);

        let mut decoder = CsvDecoder::new(table(), CsvOptions::default());
        let error = decoder
            .decode(b"id,nope\n", true, &mut Decoded::default())
            .unwrap_err();
        assert!(error.to_string().contains("\"nope\""), "{error}");
    }
}
