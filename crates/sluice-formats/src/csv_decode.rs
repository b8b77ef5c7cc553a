//! [`CsvDecoder`]: CSV into rows, by PostgreSQL's CSV rules, with or without a
//! header line ([`CsvHeader`], COPY's `HEADER true|false|match`).
//!
//! Hand-written rather than through the `csv` crate because PostgreSQL's rules
//! depend on something that crate does not report: whether a field was quoted. An
//! unquoted empty field is NULL, a quoted one (`""`) the empty string. Otherwise the
//! rules are the usual ones: `,` separates, `"` quotes (anywhere in a field), `""`
//! inside quotes is a quote, line breaks inside quotes are data, lines end in `\n`
//! or `\r\n`, and a line holding only `\.` ends the data.
//!
//! A header line is always read and checked, never skipped unread: when the caller
//! names the columns, a header naming others is a [`HeaderMismatch`] (the file is
//! probably headerless, and its first row would otherwise be lost). Line numbers are
//! physical lines of the input whether or not line 1 is a header.

use std::fmt;
use std::str::FromStr;

use sluice_core::{Column, Decoded, Decoder, Error, Kind, Rejected, RowError};

use sluice_core::canonical::read_hex_pairs;

/// How the first line of the input is read: COPY's `HEADER` option.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CsvHeader {
    /// `true`: line 1 names the columns to fill; with [`CsvOptions::columns`] it
    /// must name exactly those, in order. The default.
    #[default]
    Present,
    /// `match`: line 1 must name [`CsvOptions::columns`], or else all the table's
    /// columns, in order.
    Match,
    /// `false`: there is no header and line 1 is data; the columns are
    /// [`CsvOptions::columns`], or else all the table's columns in order.
    Absent,
}

impl FromStr for CsvHeader {
    type Err = String;

    /// `true`, `false` or `match`, and the other spellings of a boolean COPY takes
    /// (`on`/`off`, `1`/`0`, `yes`/`no`).
    fn from_str(text: &str) -> Result<CsvHeader, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "true" | "on" | "1" | "yes" => Ok(CsvHeader::Present),
            "false" | "off" | "0" | "no" => Ok(CsvHeader::Absent),
            "match" => Ok(CsvHeader::Match),
            other => Err(format!(
                "unknown header setting {other:?}: expected true, false or match"
            )),
        }
    }
}

/// Settings of [`CsvDecoder`]; each states its default.
#[derive(Debug, Clone)]
pub struct CsvOptions {
    /// Whether line 1 is a header, and what it must hold. Default: [`CsvHeader::Present`].
    pub header: CsvHeader,
    /// The columns to fill, in the file's order. A header line must then name
    /// exactly these (see [`CsvHeader`]). Default (`None`): the header line names
    /// them, or without one, all the table's columns.
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
            header: CsvHeader::Present,
            columns: None,
            max_record_bytes: 64 * 1024 * 1024,
            keep_records: false,
        }
    }
}

/// Where the names a header line had to hold came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedNames {
    /// The caller's column list, [`CsvOptions::columns`].
    Columns,
    /// The table's columns, all of them in order ([`CsvHeader::Match`] without a list).
    Table,
}

/// A header line that does not name the expected columns in the expected order.
/// The import stops at line 1: the error (of kind
/// [`ErrorKind::Data`](sluice_core::ErrorKind::Data), at line 1)
/// carries this as its source; [`HeaderMismatch::of`] finds it for callers who
/// word it their own way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderMismatch {
    /// The names on the header line, in order.
    pub found: Vec<String>,
    /// The names it had to hold, in order.
    pub expected: Vec<String>,
    /// Where `expected` came from.
    pub expected_from: ExpectedNames,
}

impl HeaderMismatch {
    /// The mismatch behind an import error, when a header line caused it.
    pub fn of(error: &Error) -> Option<&HeaderMismatch> {
        std::error::Error::source(error)?.downcast_ref::<HeaderMismatch>()
    }

    /// The first difference, in words: `column 2 is "x" where "b" was expected`.
    pub fn difference(&self) -> String {
        let position = self
            .found
            .iter()
            .zip(&self.expected)
            .position(|(found, expected)| found != expected)
            .unwrap_or(self.found.len().min(self.expected.len()));
        match (self.found.get(position), self.expected.get(position)) {
            (Some(found), Some(expected)) => format!(
                "column {} is {found:?} where {expected:?} was expected",
                position + 1
            ),
            (None, Some(missing)) => format!(
                "it ends after {} names, without {missing:?}",
                self.found.len()
            ),
            (Some(extra), None) => format!(
                "it has {extra:?} after the {} names expected",
                self.expected.len()
            ),
            (None, None) => "the names are the same".to_owned(),
        }
    }

    /// Names as a list for messages: `"a", "b"`.
    pub fn list(names: &[String]) -> String {
        names
            .iter()
            .map(|name| format!("{name:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for HeaderMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let from = match self.expected_from {
            ExpectedNames::Columns => "the columns given",
            ExpectedNames::Table => "the table's columns",
        };
        write!(
            f,
            "the header does not match {from}: {} (header: {}; expected: {})",
            self.difference(),
            HeaderMismatch::list(&self.found),
            HeaderMismatch::list(&self.expected)
        )
    }
}

impl std::error::Error for HeaderMismatch {}

/// Decodes CSV, with or without a header line; see the module docs.
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
    /// How lines end, fixed by the first line break outside quotes.
    line_end: Option<LineEnd>,
    /// An unquoted line break of another kind inside the current record.
    stray: Option<u8>,
}

/// The line ends PostgreSQL's COPY reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineEnd {
    Lf,
    CrLf,
    Cr,
}

impl LineEnd {
    fn length(self) -> usize {
        match self {
            LineEnd::CrLf => 2,
            LineEnd::Lf | LineEnd::Cr => 1,
        }
    }
}

impl CsvDecoder {
    /// True while the header line is still to come.
    fn expects_header(&self) -> bool {
        self.target_columns.is_none() && self.options.header != CsvHeader::Absent
    }

    /// Reports a record over the size limit that starts on `line`. A header cannot
    /// be skipped like a record: line 2 would then be read as the header.
    fn reject_too_long(&mut self, line: u64, output: &mut Decoded) -> Result<(), Error> {
        let maximum = self.options.max_record_bytes;
        if self.expects_header() {
            return Err(Error::bad_row(
                Rejected::too_long(line, "header", maximum).error,
            ));
        }
        self.records += 1;
        output
            .rejected
            .push(Rejected::too_long(line, "record", maximum));
        Ok(())
    }

    /// Settles the columns at the first record: reads it as the header (true:
    /// nothing more to do with it) or, without a header, takes the columns given
    /// or the table's (false: the record is data).
    fn first_record(&mut self, record: &[u8]) -> Result<bool, Error> {
        if self.options.header != CsvHeader::Absent {
            self.header(record)?;
            return Ok(true);
        }
        let names = match &self.options.columns {
            Some(columns) => columns.clone(),
            None => self.table_names(),
        };
        self.target_columns = Some(self.resolve(&names, false)?);
        Ok(false)
    }

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
            line_end: None,
            stray: None,
        }
    }

    /// Finds the end of the record at the start of `rest`: `(record length,
    /// terminator length)`, continuing the scan where the last call stopped.
    ///
    /// As PostgreSQL's COPY, the first line break outside quotes fixes how
    /// lines end (`\n`, `\r\n` or `\r`); an unquoted break of another kind
    /// inside a later line marks that record bad (`stray`) instead of ending it.
    fn record_end(&mut self, rest: &[u8], end_of_input: bool) -> Option<(usize, usize)> {
        let mut position = self.scanned;
        while let Some(offset) = memchr::memchr3(b'"', b'\n', b'\r', &rest[position..]) {
            let at = position + offset;
            position = at + 1;
            let byte = rest[at];
            if byte == b'"' {
                self.in_quotes = !self.in_quotes;
                continue;
            }
            if self.in_quotes {
                self.breaks += u64::from(byte == b'\n');
                continue;
            }
            let found = match (byte, rest.get(at + 1)) {
                (b'\n', _) => LineEnd::Lf,
                (_, Some(b'\n')) => LineEnd::CrLf,
                (_, Some(_)) => LineEnd::Cr,
                (_, None) if end_of_input => LineEnd::Cr,
                // Whether a `\n` follows is in the next read.
                (_, None) => {
                    self.scanned = at;
                    return None;
                }
            };
            let expected = *self.line_end.get_or_insert(found);
            let length = match (expected, found) {
                (LineEnd::Cr, _) if byte == b'\r' => 1,
                (expected, found) if expected == found => found.length(),
                _ => {
                    self.stray.get_or_insert(byte);
                    self.breaks += u64::from(byte == b'\n');
                    continue;
                }
            };
            self.scanned = 0;
            return Some((at, length));
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

    /// The names of a header record.
    fn header_names(record: &[u8]) -> Vec<String> {
        let mut names = Vec::new();
        let mut field = Vec::new();
        Self::fields(record, &mut field, |value, _| {
            names.push(String::from_utf8_lossy(value).into_owned())
        });
        names
    }

    /// Reads the header line (line 1): sets the columns, or fails if the line does
    /// not name the columns it must.
    fn header(&mut self, record: &[u8]) -> Result<(), Error> {
        let found = Self::header_names(record);
        let (names, expected_from) = match (&self.options.columns, self.options.header) {
            (Some(columns), _) => (columns.clone(), Some(ExpectedNames::Columns)),
            (None, CsvHeader::Match) => (self.table_names(), Some(ExpectedNames::Table)),
            (None, _) => (found.clone(), None),
        };
        // A bad column list is the caller's error, whatever the file holds.
        let columns = self.resolve(&names, expected_from.is_none())?;
        if let Some(expected_from) = expected_from.filter(|_| found != names) {
            let mismatch = HeaderMismatch {
                found,
                expected: names,
                expected_from,
            };
            let row = RowError::new(1, None, mismatch.to_string());
            return Err(Error::bad_row(row).with_source(mismatch));
        }
        self.target_columns = Some(columns);
        Ok(())
    }

    fn table_names(&self) -> Vec<String> {
        self.table
            .iter()
            .map(|column| column.name.clone())
            .collect()
    }

    /// The table's columns of `names`, in their order; `from_header` says whether
    /// the names came from the file, for the error.
    fn resolve(&self, names: &[String], from_header: bool) -> Result<Vec<Column>, Error> {
        let whose = if from_header {
            "the CSV header"
        } else {
            "the column list"
        };
        let mut columns = Vec::with_capacity(names.len());
        for name in names {
            let column = self
                .table
                .iter()
                .find(|column| &column.name == name)
                .ok_or_else(|| {
                    let error = Error::config(format!(
                        "{whose} names a column {name:?} that the table does not have"
                    ));
                    match from_header {
                        true => error.with_source(crate::InputFault::UnknownHeaderColumn),
                        false => error,
                    }
                })?;
            if columns.iter().any(|seen: &Column| &seen.name == name) {
                return Err(Error::config(format!(
                    "{whose} names column {name:?} twice"
                )));
            }
            columns.push(column.clone());
        }
        Ok(columns)
    }

    /// A record with an unquoted line break unlike the file's others, which
    /// PostgreSQL refuses: rejected (in a header, the whole input is).
    fn stray_line_break(
        &mut self,
        byte: u8,
        record: &[u8],
        line: u64,
        output: &mut Decoded,
    ) -> Result<(), Error> {
        let what = if byte == b'\r' {
            "carriage return"
        } else {
            "line feed"
        };
        let reason = format!(
            "unquoted {what} inside a line whose file ends its lines otherwise \
             (quote the field to keep it)"
        );
        self.refuse(record, line, &reason, output)
    }

    /// Rejects a record whose framing is broken (in a header, the whole
    /// input: the columns are not known).
    fn refuse(
        &mut self,
        record: &[u8],
        line: u64,
        reason: &str,
        output: &mut Decoded,
    ) -> Result<(), Error> {
        if self.expects_header() {
            return Err(Error::bad_row(RowError::new(line, None, reason)));
        }
        self.records += 1;
        output.rejected.push(Rejected {
            error: RowError::new(line, None, reason),
            record: record.to_vec(),
        });
        Ok(())
    }

    fn record(&mut self, record: &[u8], line: u64, output: &mut Decoded) {
        let columns = self.target_columns.as_ref().expect("header read first");
        let reject = |output: &mut Decoded, column: Option<String>, reason: String| {
            output.rejected.push(Rejected {
                error: RowError::new(line, column, reason),
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
        return read_hex_pairs(hex);
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
            let (record, advance, terminated) = match self.record_end(rest, end_of_input) {
                Some((length, terminator)) => (&rest[..length], length + terminator, true),
                None if end_of_input && !rest.is_empty() => {
                    self.scanned = 0;
                    (rest, rest.len(), false)
                }
                None => {
                    // `scanned` is the record so far: without a `\r` at the end
                    // of the read, which may yet turn out to end it.
                    if !self.skipping && self.scanned > self.options.max_record_bytes {
                        self.reject_too_long(self.lines_done + 1, output)?;
                        self.skipping = true;
                    }
                    if self.skipping {
                        // Drop what was scanned (a `\r` at the end stays for the
                        // next read to settle); the quote state carries on.
                        let scanned = std::mem::take(&mut self.scanned);
                        self.lines_done += self.breaks;
                        self.breaks = 0;
                        return Ok(consumed + scanned);
                    }
                    return Ok(consumed);
                }
            };
            let line = self.lines_done + 1;
            self.lines_done += 1 + self.breaks;
            self.breaks = 0;
            // The input ended inside quotes: PostgreSQL refuses such a field.
            let unclosed = !terminated && self.in_quotes;
            self.in_quotes = false;
            consumed += advance;
            if self.skipping {
                self.skipping = false;
                continue;
            }
            if record.len() > self.options.max_record_bytes {
                self.reject_too_long(line, output)?;
                continue;
            }
            if unclosed {
                self.stray = None;
                self.refuse(
                    record,
                    line,
                    "a quoted field is not closed before the input ends",
                    output,
                )?;
                continue;
            }
            if let Some(byte) = self.stray.take() {
                self.stray_line_break(byte, record, line, output)?;
                continue;
            }
            if self.target_columns.is_none() && self.first_record(record)? {
                continue;
            }
            // COPY's end-of-data marker is a whole line: unterminated, it is data.
            if record == b"\\." && terminated {
                self.ended = true;
                break;
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
    use crate::test_support::assert_split_reads_agree;

    fn table() -> Vec<Column> {
        ["id", "name", "blob"]
            .iter()
            .map(|name| {
                let kind = if *name == "blob" {
                    Kind::Bytes
                } else {
                    Kind::Text
                };
                Column::new(*name, kind, "")
            })
            .collect()
    }

    #[test]
    fn follows_postgres_csv_rules() {
        let mut decoder = CsvDecoder::new(table(), CsvOptions::default());
        let mut output = Decoded::default();
        let input =
            b"name,id,blob\r\n\"a,\"\"b\"\"\nc\",1,\\x00ff\r\n,2,\"\"\r\n\"\",3,ab\\\\\\001\r\n4\r\n";
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
    fn the_first_line_break_fixes_how_lines_end_as_in_copy() {
        let decode = |input: &[u8]| {
            let options = options(CsvHeader::Absent, Some(&["id", "name"]));
            let (_, output) = decode_all(options, input).unwrap();
            let rows: Vec<Vec<Option<Vec<u8>>>> = output
                .batch
                .rows()
                .map(|row| {
                    vec![
                        row.get(0).map(<[u8]>::to_vec),
                        row.get(1).map(<[u8]>::to_vec),
                    ]
                })
                .collect();
            let rejected: Vec<String> = output
                .rejected
                .iter()
                .map(|rejected| rejected.error.to_string())
                .collect();
            (rows, rejected)
        };
        // Old Mac files end lines with \r alone.
        let (rows, rejected) = decode(b"1,a\r2,b\r");
        assert_eq!(rows.len(), 2);
        assert!(rejected.is_empty());
        // A \r inside a \n-ended file is not a line end, and not data either.
        let (rows, rejected) = decode(b"1,a\n2,b\rc\n3,\"q\rq\"\n");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1][1].as_deref(), Some(&b"q\rq"[..]));
        assert_eq!(rejected.len(), 1);
        assert!(
            rejected[0].starts_with("line 2: unquoted carriage return"),
            "{rejected:?}"
        );
        // A lone \n in a \r\n-ended file likewise.
        let (rows, rejected) = decode(b"1,a\r\n2,b\nc\r\n");
        assert_eq!(rows.len(), 1);
        assert!(
            rejected[0].starts_with("line 2: unquoted line feed"),
            "{rejected:?}"
        );
        // A \r at the end of one read waits for the next to know what it is.
        let mut decoder = CsvDecoder::new(table(), options(CsvHeader::Absent, Some(&["id"])));
        let mut output = Decoded::default();
        assert_eq!(decoder.decode(b"1\r", false, &mut output).unwrap(), 0);
        assert_eq!(decoder.decode(b"1\r\n2\r\n", true, &mut output).unwrap(), 6);
        assert_eq!(output.batch.num_rows(), 2);
        assert!(output.rejected.is_empty());
    }

    /// What fuzzing found: a read ending on a `\r` must not decide what it is
    /// (line end, or the first half of `\r\n`), nor make a record too long,
    /// nor be dropped with a record being skipped.
    #[test]
    fn reads_split_anywhere_decode_alike() {
        let limited = |limit: usize| {
            move || -> Box<dyn Decoder> {
                let options = CsvOptions {
                    max_record_bytes: limit,
                    ..options(CsvHeader::Absent, Some(&["id", "name"]))
                };
                Box::new(CsvDecoder::new(table(), options))
            }
        };
        for input in [
            &b"1,a\r2,b\r\r3,c\r"[..],
            b"1,a\r\n2,\"x\r\ny\"\r\n3\r\n",
            b"1234567890,a\r1,b\r2,c\n3,d\r",
            b"12345678,a\r1,\"q\r\n\"\r2,c",
            b"1,a\n\\.\n2,b\n",
            b"1,\"open",
        ] {
            assert_split_reads_agree(limited(8), input);
            assert_split_reads_agree(limited(1 << 20), input);
        }
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

    fn options(header: CsvHeader, columns: Option<&[&str]>) -> CsvOptions {
        CsvOptions {
            header,
            columns: columns.map(|names| names.iter().map(|name| name.to_string()).collect()),
            ..CsvOptions::default()
        }
    }

    fn decode_all(options: CsvOptions, input: &[u8]) -> Result<(CsvDecoder, Decoded), Error> {
        let mut decoder = CsvDecoder::new(table(), options);
        let mut output = Decoded::default();
        let consumed = decoder.decode(input, true, &mut output)?;
        assert_eq!(consumed, input.len());
        Ok((decoder, output))
    }

    fn reasons(output: &Decoded) -> Vec<String> {
        output
            .rejected
            .iter()
            .map(|rejected| rejected.error.to_string())
            .collect()
    }

    #[test]
    fn without_a_header_line_1_is_data_and_keeps_its_number() {
        let input = b"1,a,\\xzz\n2,b,\\x01\n3,c\n";
        let (decoder, output) = decode_all(options(CsvHeader::Absent, None), input).unwrap();
        let names: Vec<&str> = decoder
            .target_columns()
            .unwrap()
            .iter()
            .map(|column| column.name.as_str())
            .collect();
        assert_eq!(names, ["id", "name", "blob"], "all the table's columns");
        assert_eq!(output.lines, [2]);
        assert_eq!(
            reasons(&output),
            [
                "line 1, column blob: not a valid bytea value",
                "line 3: expected 3 fields, found 2"
            ]
        );
        assert_eq!(decoder.records_seen(), 3);

        let input = b"one,1\ntwo,2\n";
        let columns = Some(&["name", "id"][..]);
        let (_, output) = decode_all(options(CsvHeader::Absent, columns), input).unwrap();
        assert_eq!(output.lines, [1, 2]);
        assert_eq!(output.batch.row(0).get(0), Some(&b"one"[..]));
    }

    #[test]
    fn a_header_must_name_the_columns_given() {
        let columns = Some(&["id", "name"][..]);
        for header in [CsvHeader::Present, CsvHeader::Match] {
            let (_, output) = decode_all(options(header, columns), b"id,name\n1,one\n").unwrap();
            assert_eq!(output.lines, [2]);

            // A headerless file: its first row is not taken for a header and lost.
            let Err(error) = decode_all(options(header, columns), b"1,one\n2,two\n") else {
                panic!("a header that is not the columns given must fail");
            };
            assert_eq!(error.kind(), sluice_core::ErrorKind::Data);
            assert_eq!(error.as_row_error().map(|row| row.line), Some(1));
            let mismatch = HeaderMismatch::of(&error).expect("a header mismatch");
            assert_eq!(mismatch.found, ["1", "one"]);
            assert_eq!(mismatch.expected, ["id", "name"]);
            assert_eq!(mismatch.expected_from, ExpectedNames::Columns);
            assert_eq!(
                error.to_string(),
                "line 1: the header does not match the columns given: column 1 is \"1\" \
                 where \"id\" was expected (header: \"1\", \"one\"; expected: \"id\", \"name\")"
            );
        }
        let Err(error) = decode_all(options(CsvHeader::Present, columns), b"name,id\n") else {
            panic!("the same names in another order must fail");
        };
        assert_eq!(
            HeaderMismatch::of(&error).unwrap().difference(),
            "column 1 is \"name\" where \"id\" was expected"
        );
    }

    #[test]
    fn match_without_columns_needs_every_column_of_the_table_in_order() {
        let input = b"id,name,blob\n1,a,\n";
        let (_, output) = decode_all(options(CsvHeader::Match, None), input).unwrap();
        assert_eq!(output.lines, [2]);

        let Err(error) = decode_all(options(CsvHeader::Match, None), b"id,name\n1,a\n") else {
            panic!("a header without every column must fail with match");
        };
        let mismatch = HeaderMismatch::of(&error).unwrap();
        assert_eq!(mismatch.expected_from, ExpectedNames::Table);
        assert_eq!(
            mismatch.difference(),
            "it ends after 2 names, without \"blob\""
        );
        let Err(error) = decode_all(options(CsvHeader::Match, None), b"id,name,blob,x\n") else {
            panic!("an extra name must fail with match");
        };
        assert_eq!(
            HeaderMismatch::of(&error).unwrap().difference(),
            "it has \"x\" after the 3 names expected"
        );
        // Unknown names in the caller's list are the caller's error, not the file's.
        let columns = Some(&["id", "nope"][..]);
        let Err(error) = decode_all(options(CsvHeader::Match, columns), b"id,nope\n") else {
            panic!("an unknown column must fail");
        };
        assert_eq!(error.kind(), sluice_core::ErrorKind::Config);
        assert!(HeaderMismatch::of(&error).is_none());
    }

    #[test]
    fn records_over_the_limit_are_rejected_but_a_header_over_it_fails() {
        let limited = |header| CsvOptions {
            max_record_bytes: 8,
            ..options(header, None)
        };
        let input = b"1,a,\n2,aaaaaaaaaa,\n3,b,\n";
        let (_, output) = decode_all(limited(CsvHeader::Absent), input).unwrap();
        assert_eq!(output.lines, [1, 3]);
        assert_eq!(
            reasons(&output),
            ["line 2: the record is longer than the maximum of 8 bytes"]
        );
        let Err(error) = decode_all(limited(CsvHeader::Present), b"id,name,blob\n1,a,\n") else {
            panic!("a header over the limit must fail");
        };
        assert_eq!(
            error.to_string(),
            "line 1: the header is longer than the maximum of 8 bytes"
        );
    }

    #[test]
    fn header_settings_spell_like_copy() {
        assert_eq!("true".parse(), Ok(CsvHeader::Present));
        assert_eq!("FALSE".parse(), Ok(CsvHeader::Absent));
        assert_eq!("off".parse(), Ok(CsvHeader::Absent));
        assert_eq!("match".parse(), Ok(CsvHeader::Match));
        assert!("first"
            .parse::<CsvHeader>()
            .unwrap_err()
            .contains("\"first\""));
    }
}
