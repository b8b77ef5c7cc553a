//! PostgreSQL array (`{1,NULL,"a b"}`) and record (`(1,"a b",)`) literals rendered as
//! JSON arrays and objects, written in one pass without building a tree.
//!
//! Hand-written because no crate parses these text forms; the grammar follows the
//! server's `array_out`/`record_out`: elements are quoted when they contain special
//! characters, `\` escapes inside quotes (and `""` inside record quotes), an unquoted
//! `NULL` is a null array element and an empty unquoted record field is a null field.
//! A literal that does not parse (which the server never sends) is written as a
//! JSON string rather than lost.

use sluice_core::{Field, Kind};

use crate::json_value::{write_string, write_text_value, JsonOptions};

struct Parser<'a> {
    text: &'a [u8],
    position: usize,
    scratch: Vec<u8>,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.position).copied()
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        if self.peek() == Some(byte) {
            self.position += 1;
            Some(())
        } else {
            None
        }
    }

    /// Reads a double-quoted element into `scratch`, undoing `\x` escapes and, in
    /// records, doubled quotes.
    fn quoted(&mut self, doubled_quotes: bool) -> Option<()> {
        self.expect(b'"')?;
        self.scratch.clear();
        loop {
            let byte = self.peek()?;
            self.position += 1;
            match byte {
                b'\\' => {
                    self.scratch.push(self.peek()?);
                    self.position += 1;
                }
                b'"' if doubled_quotes && self.peek() == Some(b'"') => {
                    self.scratch.push(b'"');
                    self.position += 1;
                }
                b'"' => return Some(()),
                other => self.scratch.push(other),
            }
        }
    }

    /// Reads an unquoted element up to (not including) a delimiter or closer.
    fn unquoted(&mut self, closer: u8) -> &'a [u8] {
        let start = self.position;
        while let Some(byte) = self.peek() {
            if byte == b',' || byte == closer {
                break;
            }
            self.position += 1;
        }
        &self.text[start..self.position]
    }

    fn array(&mut self, element: &Kind, options: &JsonOptions, output: &mut Vec<u8>) -> Option<()> {
        self.expect(b'{')?;
        output.push(b'[');
        if self.expect(b'}').is_some() {
            output.push(b']');
            return Some(());
        }
        loop {
            match self.peek()? {
                b'{' => self.array(element, options, output)?,
                b'"' => {
                    self.quoted(false)?;
                    let scratch = std::mem::take(&mut self.scratch);
                    write_text_value(element, &scratch, options, output);
                    self.scratch = scratch;
                }
                _ => {
                    let token = self.unquoted(b'}');
                    if token.eq_ignore_ascii_case(b"NULL") {
                        output.extend_from_slice(b"null");
                    } else {
                        write_text_value(element, token, options, output);
                    }
                }
            }
            match self.peek()? {
                b',' => {
                    self.position += 1;
                    output.push(b',');
                }
                b'}' => {
                    self.position += 1;
                    output.push(b']');
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn composite(
        &mut self,
        fields: &[Field],
        options: &JsonOptions,
        output: &mut Vec<u8>,
    ) -> Option<()> {
        self.expect(b'(')?;
        output.push(b'{');
        for (index, field) in fields.iter().enumerate() {
            if index > 0 {
                output.push(b',');
                self.expect(b',')?;
            }
            write_string(field.name.as_bytes(), output);
            output.push(b':');
            match self.peek()? {
                b',' | b')' => output.extend_from_slice(b"null"),
                b'"' => {
                    self.quoted(true)?;
                    let scratch = std::mem::take(&mut self.scratch);
                    write_text_value(&field.kind, &scratch, options, output);
                    self.scratch = scratch;
                }
                _ => {
                    let token = self.unquoted(b')');
                    write_text_value(&field.kind, token, options, output);
                }
            }
        }
        self.expect(b')')?;
        output.push(b'}');
        (self.position == self.text.len()).then_some(())
    }
}

/// Writes an array literal of `element` values as a (nested) JSON array. Explicit
/// bounds (`[0:1]={…}`) are dropped, as PostgreSQL's JSON functions drop them.
pub fn write_array(element: &Kind, text: &[u8], options: &JsonOptions, output: &mut Vec<u8>) {
    let start = output.len();
    let mut parser = Parser {
        text,
        position: 0,
        scratch: Vec::new(),
    };
    if text.first() == Some(&b'[') {
        if let Some(equals) = memchr::memchr(b'=', text) {
            parser.position = equals + 1;
        }
    }
    let parsed = parser.array(element, options, output);
    if parsed.is_none() || parser.position != text.len() {
        output.truncate(start);
        write_string(text, output);
    }
}

/// Writes a record literal as a JSON object keyed by the composite's field names.
pub fn write_composite(fields: &[Field], text: &[u8], options: &JsonOptions, output: &mut Vec<u8>) {
    let start = output.len();
    let mut parser = Parser {
        text,
        position: 0,
        scratch: Vec::new(),
    };
    if parser.composite(fields, options, output).is_none() {
        output.truncate(start);
        write_string(text, output);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(element: Kind, text: &str) -> String {
        let mut output = Vec::new();
        write_array(
            &element,
            text.as_bytes(),
            &JsonOptions::default(),
            &mut output,
        );
        String::from_utf8(output).unwrap()
    }

    #[test]
    fn arrays_nest_with_nulls_and_quoting() {
        assert_eq!(array(Kind::Integer, "{{1,2},{NULL,4}}"), "[[1,2],[null,4]]");
        assert_eq!(
            array(Kind::Text, r#"{"a b","c\"d","NULL",NULL,"","e\\"}"#),
            r#"["a b","c\"d","NULL",null,"","e\\"]"#
        );
        assert_eq!(array(Kind::Integer, "[0:1]={5,6}"), "[5,6]");
        assert_eq!(array(Kind::Integer, "{}"), "[]");
        assert_eq!(array(Kind::Bool, "{t,f}"), "[true,false]");
        assert_eq!(array(Kind::Bytes, r#"{"\\x0001"}"#), r#"["AAE="]"#);
        assert_eq!(array(Kind::Integer, "{1,2"), r#""{1,2""#);
    }

    #[test]
    fn composites_become_objects() {
        let fields = vec![
            Field {
                name: "id".into(),
                kind: Kind::Integer,
            },
            Field {
                name: "label".into(),
                kind: Kind::Text,
            },
            Field {
                name: "tags".into(),
                kind: Kind::Array(Box::new(Kind::Text)),
            },
            Field {
                name: "missing".into(),
                kind: Kind::Text,
            },
        ];
        let mut output = Vec::new();
        write_composite(
            &fields,
            br#"(1,"say ""hi"", \\ ok","{a,""b c""}",)"#,
            &JsonOptions::default(),
            &mut output,
        );
        assert_eq!(
            String::from_utf8(output).unwrap(),
            r#"{"id":1,"label":"say \"hi\", \\ ok","tags":["a","b c"],"missing":null}"#
        );
    }
}
