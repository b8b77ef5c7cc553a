//! [`NdjsonDecoder`]: NDJSON lines into rows of a table, each value converted by
//! the target column's [`Kind`].
//!
//! Each line is parsed once by serde_json into borrowed raw values (no tree for
//! scalars), which are then written in the canonical forms of
//! [`sluice_core::value`]: numbers keep their exact digits, strings are unescaped,
//! `bytea` arrives as base64 (or `\x` hex), JSON documents are kept as text for
//! `json`/`jsonb` columns, and JSON arrays and objects become PostgreSQL array
//! and record literals for array and composite columns.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use sluice_core::{Column, Decoded, Decoder, Error, Kind, Rejected, RowError, RowFault};

use crate::pg_input::{decode_bytes_text, write_array_literal, write_record_literal};

/// Settings of [`NdjsonDecoder`]; each states its default.
#[derive(Debug, Clone)]
pub struct NdjsonOptions {
    /// The columns to fill, by name. Default (`None`): every column of the
    /// table, in table order, except those named in `defaulted` that the first
    /// record leaves out (they keep their defaults). A key missing from a record
    /// is NULL.
    pub columns: Option<Vec<String>>,
    /// Columns that have a default (serial keys, `default now()`): filled only
    /// when the first record has them. Default: empty.
    pub defaulted: Vec<String>,
    /// Skip keys that name no target column instead of rejecting the record. Default: false.
    pub ignore_unknown: bool,
    /// Longest line accepted, in bytes; a longer one is rejected without being
    /// held in memory. Default: 64 MiB.
    pub max_line_bytes: usize,
    /// Keep each good record's bytes beside its row (for reject files when the
    /// database refuses the row later). Default: false.
    pub keep_records: bool,
}

impl Default for NdjsonOptions {
    fn default() -> NdjsonOptions {
        NdjsonOptions {
            columns: None,
            defaulted: Vec::new(),
            ignore_unknown: false,
            max_line_bytes: 64 * 1024 * 1024,
            keep_records: false,
        }
    }
}

/// Decodes NDJSON: one JSON object per line; blank lines are skipped and not counted.
pub struct NdjsonDecoder {
    table: Vec<Column>,
    by_name: HashMap<String, usize>,
    options: NdjsonOptions,
    /// Target columns as table indexes, in row order.
    target: Option<Vec<usize>>,
    target_columns: Vec<Column>,
    /// For each table column, its position in the row, if targeted.
    slot_of: Vec<Option<usize>>,
    /// Lines fully consumed so far.
    lines_done: u64,
    records: u64,
    /// Bytes of the current line already scanned for a newline (none found).
    scanned: usize,
    /// Inside a line over the size limit, discarding until its end.
    skipping: bool,
}

impl NdjsonDecoder {
    /// A decoder filling `table`'s columns (all of the table, in order).
    pub fn new(table: Vec<Column>, options: NdjsonOptions) -> Result<NdjsonDecoder, Error> {
        let by_name = table
            .iter()
            .enumerate()
            .map(|(index, column)| (column.name.clone(), index))
            .collect::<HashMap<_, _>>();
        let mut decoder = NdjsonDecoder {
            slot_of: vec![None; table.len()],
            table,
            by_name,
            options,
            target: None,
            target_columns: Vec::new(),
            lines_done: 0,
            records: 0,
            scanned: 0,
            skipping: false,
        };
        if let Some(names) = decoder.options.columns.clone() {
            let mut indexes = Vec::with_capacity(names.len());
            for name in names {
                let index = *decoder.by_name.get(&name).ok_or_else(|| {
                    Error::config(format!(
                        "the column list names a column {name:?} that the table does not have"
                    ))
                })?;
                if indexes.contains(&index) {
                    return Err(Error::config(format!(
                        "the column list names column {name:?} twice"
                    )));
                }
                indexes.push(index);
            }
            decoder.set_target(indexes);
        }
        Ok(decoder)
    }

    fn set_target(&mut self, indexes: Vec<usize>) {
        self.slot_of = vec![None; self.table.len()];
        for (slot, &index) in indexes.iter().enumerate() {
            self.slot_of[index] = Some(slot);
        }
        self.target_columns = indexes
            .iter()
            .map(|&index| self.table[index].clone())
            .collect();
        self.target = Some(indexes);
    }

    /// Decodes one non-blank line into `output`.
    fn decode_line(&mut self, line: &[u8], number: u64, output: &mut Decoded) {
        let reject_for = |output: &mut Decoded, column: Option<String>, reason: String, fault| {
            output.rejected.push(Rejected {
                error: RowError {
                    line: number,
                    column,
                    reason,
                    fault,
                },
                record: line.to_vec(),
            });
        };
        let reject =
            |output: &mut Decoded, column, reason| reject_for(output, column, reason, None);
        let pairs = match parse_object(line) {
            Ok(pairs) => pairs,
            Err(reason) => return reject(output, None, reason),
        };
        // Resolve keys to table columns.
        let mut found: Vec<(usize, &RawValue)> = Vec::with_capacity(pairs.len());
        for (key, value) in &pairs {
            match self.by_name.get(key.as_ref()) {
                Some(&index) => {
                    if found.iter().any(|(seen, _)| *seen == index) {
                        return reject(
                            output,
                            Some(key.to_string()),
                            "the key appears twice".into(),
                        );
                    }
                    found.push((index, value));
                }
                None if self.options.ignore_unknown => {}
                None => {
                    return reject_for(
                        output,
                        Some(key.to_string()),
                        "the table has no such column".into(),
                        Some(RowFault::UnknownColumn),
                    )
                }
            }
        }
        if self.target.is_none() {
            let indexes: Vec<usize> = (0..self.table.len())
                .filter(|&index| {
                    !self.options.defaulted.contains(&self.table[index].name)
                        || found.iter().any(|(seen, _)| *seen == index)
                })
                .collect();
            self.set_target(indexes);
            output.batch.reset(self.target_columns.len());
        }
        let mut slots: Vec<Option<&RawValue>> = vec![None; self.target_columns.len()];
        for (index, value) in found {
            match self.slot_of[index] {
                Some(slot) => slots[slot] = Some(value),
                None if self.options.ignore_unknown => {}
                None => {
                    // Say why the column is left out: the two causes need different fixes.
                    let (reason, fault) = if self.options.columns.is_some() {
                        (
                            "the column is not among the columns to import",
                            RowFault::NotListed,
                        )
                    } else {
                        (
                            "the column has a default and the first record did not set it, so \
                             it is not imported",
                            RowFault::DefaultedNotSet,
                        )
                    };
                    let column = Some(self.table[index].name.clone());
                    return reject_for(output, column, reason.into(), Some(fault));
                }
            }
        }
        let mark = output.batch.mark();
        for (slot, value) in slots.into_iter().enumerate() {
            let column = &self.target_columns[slot];
            let result = match value {
                None => {
                    output.batch.push_null();
                    Ok(())
                }
                Some(raw) => push_value(
                    &column.kind,
                    &column.type_name,
                    raw.get(),
                    &mut output.batch,
                ),
            };
            if let Err(reason) = result {
                output.batch.rollback(mark);
                return reject(output, Some(column.name.clone()), reason);
            }
        }
        output.lines.push(number);
        if self.options.keep_records {
            output.records.push(line.to_vec());
        }
    }
}

/// A key, borrowed from the line unless it had escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(text.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

type Pairs<'a> = Vec<(Cow<'a, str>, &'a RawValue)>;

/// Parses one line as a JSON object into (key, raw value) pairs.
fn parse_object(line: &[u8]) -> Result<Pairs<'_>, String> {
    struct ObjectVisitor;
    impl<'de> Visitor<'de> for ObjectVisitor {
        type Value = Pairs<'de>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs<'de>, A::Error> {
            let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(8));
            while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                let value: &'de RawValue = map.next_value()?;
                pairs.push((key, value));
            }
            Ok(pairs)
        }
    }
    let mut deserializer = serde_json::Deserializer::from_slice(line);
    let pairs = deserializer
        .deserialize_map(ObjectVisitor)
        .and_then(|pairs| deserializer.end().map(|()| pairs))
        .map_err(|error| match error.classify() {
            serde_json::error::Category::Data => "expected a JSON object".to_string(),
            _ => {
                // serde_json appends " at line 1 column N"; say it our way once.
                let message = error.to_string();
                let message = message
                    .rfind(" at line ")
                    .map_or(message.as_str(), |at| &message[..at]);
                format!("invalid JSON at character {}: {message}", error.column())
            }
        })?;
    Ok(pairs)
}

/// Writes one JSON value for a column of `kind` in canonical form.
fn push_value(
    kind: &Kind,
    type_name: &str,
    raw: &str,
    batch: &mut sluice_core::Batch,
) -> Result<(), String> {
    let first = raw.as_bytes()[0];
    if first == b'n' {
        batch.push_null();
        return Ok(());
    }
    match (kind, first) {
        (Kind::Json, _) => batch.push_value(raw.as_bytes()),
        (_, b'"') => {
            let text = unescape(raw)?;
            if *kind == Kind::Bytes {
                batch.push_value(&decode_bytes_text(&text)?);
            } else {
                batch.push_value(text.as_bytes());
            }
        }
        (Kind::Bool, b't') => batch.push_value(b"t"),
        (Kind::Bool, b'f') => batch.push_value(b"f"),
        (Kind::Bytes, _) => return Err(format!("expected a base64 string for {type_name}")),
        (Kind::Array(element), b'[') => {
            let items: Vec<serde_json::Value> =
                serde_json::from_str(raw).map_err(|error| error.to_string())?;
            let start = batch.begin_value();
            write_array_literal(element, &items, batch.value_buffer())?;
            batch.end_value(start);
        }
        (Kind::Composite(fields), b'{') => {
            let value: serde_json::Value =
                serde_json::from_str(raw).map_err(|error| error.to_string())?;
            let start = batch.begin_value();
            write_record_literal(fields, &value, batch.value_buffer())?;
            batch.end_value(start);
        }
        (_, b'[') => return Err(format!("a JSON array is not a valid {type_name}")),
        (_, b'{') => return Err(format!("a JSON object is not a valid {type_name}")),
        // Numbers and true/false: their JSON text is valid input for the column's type
        // or the database says why not.
        _ => batch.push_value(raw.as_bytes()),
    }
    Ok(())
}

/// The text of a JSON string literal, borrowed when it has no escapes.
fn unescape(raw: &str) -> Result<Cow<'_, str>, String> {
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains('\\') {
        return Ok(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(raw)
        .map(Cow::Owned)
        .map_err(|error| error.to_string())
}

impl Decoder for NdjsonDecoder {
    fn decode(
        &mut self,
        input: &[u8],
        end_of_input: bool,
        output: &mut Decoded,
    ) -> Result<usize, Error> {
        if let Some(target) = &self.target {
            if output.batch.num_columns() != target.len() {
                output.batch.reset(target.len());
            }
        }
        let mut consumed = 0;
        loop {
            let rest = &input[consumed..];
            let newline = memchr::memchr(b'\n', &rest[self.scanned.min(rest.len())..])
                .map(|at| at + self.scanned);
            let (line, advance) = match newline {
                Some(at) => (&rest[..at], at + 1),
                None if end_of_input && !rest.is_empty() => (rest, rest.len()),
                None => {
                    if !self.skipping && rest.len() > self.options.max_line_bytes {
                        // Report now and drop what we have; the rest of the line is
                        // discarded as it arrives, never held.
                        self.records += 1;
                        output.rejected.push(Rejected::too_long(
                            self.lines_done + 1,
                            "line",
                            self.options.max_line_bytes,
                        ));
                        self.skipping = true;
                    }
                    if self.skipping {
                        self.scanned = 0;
                        return Ok(input.len());
                    }
                    self.scanned = rest.len();
                    return Ok(consumed);
                }
            };
            self.scanned = 0;
            consumed += advance;
            self.lines_done += 1;
            if self.skipping {
                self.skipping = false;
                continue;
            }
            // The limit counts the line as a read that stops short of its
            // newline sees it (a `\r` included, blank or not), so a line is
            // too long or not whatever the size of the reads.
            if line.len() > self.options.max_line_bytes {
                self.records += 1;
                output.rejected.push(Rejected::too_long(
                    self.lines_done,
                    "line",
                    self.options.max_line_bytes,
                ));
                continue;
            }
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            self.records += 1;
            self.decode_line(line, self.lines_done, output);
            if consumed == input.len() {
                return Ok(consumed);
            }
        }
    }

    fn target_columns(&self) -> Option<&[Column]> {
        self.target.as_ref().map(|_| self.target_columns.as_slice())
    }

    fn records_seen(&self) -> u64 {
        self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::assert_split_reads_agree;

    /// What fuzzing found: a blank line longer than the limit was skipped when
    /// read whole and refused as too long when read in pieces.
    #[test]
    fn reads_split_anywhere_decode_alike() {
        let make = || -> Box<dyn Decoder> {
            let options = NdjsonOptions {
                max_line_bytes: 8,
                ..NdjsonOptions::default()
            };
            Box::new(NdjsonDecoder::new(table(), options).unwrap())
        };
        for input in [
            &b"{\"id\":1}\n\t\t\t\t\t\t\t\t\t\t\n{\"id\":2}\n"[..],
            b"{\"id\":1}\r\n        \r\n{\"id\":22222}\r\n",
            b"\n\n{\"id\":3}",
        ] {
            assert_split_reads_agree(make, input);
        }
    }

    fn table() -> Vec<Column> {
        let column = |name: &str, kind: Kind| Column::new(name, kind, "t");
        vec![
            column("id", Kind::Integer),
            column("amount", Kind::Decimal),
            column("blob", Kind::Bytes),
            column("doc", Kind::Json),
            column("ok", Kind::Bool),
            column("tags", Kind::Array(Box::new(Kind::Text))),
        ]
    }

    fn decode(input: &str, options: NdjsonOptions) -> (Decoded, NdjsonDecoder) {
        let mut decoder = NdjsonDecoder::new(table(), options).unwrap();
        let mut output = Decoded::default();
        let consumed = decoder.decode(input.as_bytes(), true, &mut output).unwrap();
        assert_eq!(consumed, input.len());
        (output, decoder)
    }

    #[test]
    fn values_are_converted_by_column_kind() {
        let (output, decoder) = decode(
            "{\"id\": 1, \"amount\": 123456789012345678901234567890.5, \"blob\": \"AAE=\", \"doc\": {\"a\": [1]}, \"ok\": true, \"tags\": [\"x\", null]}\n\n\
             {\"amount\": \"12.5\", \"id\": 2}\n",
            NdjsonOptions::default(),
        );
        assert!(output.rejected.is_empty(), "{:?}", output.rejected);
        assert_eq!(decoder.target_columns().unwrap().len(), 6);
        assert_eq!(output.batch.row(1).get(5), None, "absent keys are NULL");
        let first = output.batch.row(0);
        assert_eq!(first.get(1), Some(&b"123456789012345678901234567890.5"[..]));
        assert_eq!(first.get(2), Some(&b"\x00\x01"[..]));
        assert_eq!(first.get(3), Some(&b"{\"a\": [1]}"[..]));
        assert_eq!(first.get(4), Some(&b"t"[..]));
        assert_eq!(first.get(5), Some(&b"{\"x\",NULL}"[..]));
        let second = output.batch.row(1);
        assert_eq!(second.get(0), Some(&b"2"[..]));
        assert_eq!(second.get(1), Some(&b"12.5"[..]));
        assert_eq!(second.get(2), None);
        assert_eq!(output.lines, [1, 3]);
        assert_eq!(decoder.records_seen(), 2);
    }

    #[test]
    fn columns_with_defaults_follow_the_first_record() {
        let options = NdjsonOptions {
            defaulted: vec!["id".into(), "ok".into()],
            ..NdjsonOptions::default()
        };
        let (output, decoder) = decode("{\"amount\": 1, \"ok\": false}\n{\"id\": 2}\n", options);
        let names: Vec<&str> = decoder
            .target_columns()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["amount", "blob", "doc", "ok", "tags"]);
        assert_eq!(output.batch.num_rows(), 1);
        assert_eq!(output.rejected[0].error.line, 2);
        assert_eq!(output.rejected[0].error.column.as_deref(), Some("id"));
        assert_eq!(
            output.rejected[0].error.fault,
            Some(RowFault::DefaultedNotSet)
        );
    }

    #[test]
    fn a_key_outside_the_named_columns_is_named_as_such() {
        let options = NdjsonOptions {
            columns: Some(vec!["id".into()]),
            defaulted: vec!["ok".into()],
            ..NdjsonOptions::default()
        };
        let (output, _) = decode("{\"id\": 1, \"ok\": true}\n", options);
        assert_eq!(
            output.rejected[0].error.to_string(),
            "line 1, column ok: the column is not among the columns to import"
        );
        assert_eq!(output.rejected[0].error.fault, Some(RowFault::NotListed));
    }

    #[test]
    fn bad_records_name_line_column_and_reason() {
        let (output, _) = decode(
            "{\"id\": 1}\n{\"id\": 2, \"nope\": 1}\n{\"id\": \n[1]\n{\"id\": 5, \"blob\": \"!!\"}\n{\"id\": 6, \"id\": 7}\n",
            NdjsonOptions {
                columns: Some(vec!["id".into(), "blob".into()]),
                ..NdjsonOptions::default()
            },
        );
        let errors: Vec<String> = output
            .rejected
            .iter()
            .map(|r| r.error.to_string())
            .collect();
        assert_eq!(output.batch.num_rows(), 1);
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert_eq!(
            errors[0],
            "line 2, column nope: the table has no such column"
        );
        assert_eq!(
            output.rejected[0].error.fault,
            Some(RowFault::UnknownColumn)
        );
        assert_eq!(output.rejected[1].error.fault, None);
        assert!(errors[1].starts_with("line 3: invalid JSON"), "{errors:?}");
        assert_eq!(errors[2], "line 4: expected a JSON object");
        assert!(
            errors[3].starts_with("line 5, column blob: not valid base64"),
            "{errors:?}"
        );
        assert_eq!(errors[4], "line 6, column id: the key appears twice");
    }

    #[test]
    fn long_lines_are_rejected_without_being_held() {
        let options = NdjsonOptions {
            max_line_bytes: 16,
            ..NdjsonOptions::default()
        };
        let mut decoder = NdjsonDecoder::new(table(), options).unwrap();
        let mut output = Decoded::default();
        // A long line arriving in pieces.
        let first = b"{\"id\": 1}\n{\"id\": 2, \"amount\": 11111";
        let consumed = decoder.decode(first, false, &mut output).unwrap();
        assert_eq!(
            consumed,
            first.len(),
            "the oversized part is dropped at once"
        );
        let consumed = decoder
            .decode(b"1111111}\n{\"id\": 3}\n", true, &mut output)
            .unwrap();
        assert_eq!(consumed, 19);
        assert_eq!(output.batch.num_rows(), 2);
        assert_eq!(output.rejected.len(), 1);
        assert_eq!(
            output.rejected[0].error.to_string(),
            "line 2: the line is longer than the maximum of 16 bytes"
        );
        assert_eq!(output.lines, [1, 3]);
        assert_eq!(decoder.records_seen(), 3);
    }
}
