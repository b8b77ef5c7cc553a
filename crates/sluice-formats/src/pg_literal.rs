//! PostgreSQL array (`{1,NULL,"a b"}`) and record (`(1,"a b",)`) literals rendered as
//! JSON arrays and objects, written in one pass without building a tree.
//!
//! [`sluice_core::canonical`] reads the literals and hands each element over; this
//! module writes them as JSON as they come. A literal that does not parse (which the
//! server never sends) is written as a JSON string rather than lost.

use sluice_core::canonical::{self, ArrayVisitor, Strictness};
use sluice_core::{Field, Kind};

use crate::json_value::{write_string, write_text_value, JsonOptions};

/// Writes an array literal's pieces as nested JSON arrays.
struct JsonArray<'a> {
    element: &'a Kind,
    options: &'a JsonOptions,
    output: &'a mut Vec<u8>,
}

impl ArrayVisitor for JsonArray<'_> {
    type Error = std::convert::Infallible;

    fn open(&mut self, _depth: usize, index: usize) -> Result<(), Self::Error> {
        if index > 0 {
            self.output.push(b',');
        }
        self.output.push(b'[');
        Ok(())
    }

    fn element(
        &mut self,
        _depth: usize,
        index: usize,
        value: Option<&[u8]>,
    ) -> Result<(), Self::Error> {
        if index > 0 {
            self.output.push(b',');
        }
        match value {
            Some(value) => write_text_value(self.element, value, self.options, self.output),
            None => self.output.extend_from_slice(b"null"),
        }
        Ok(())
    }

    fn close(&mut self, _depth: usize, _items: usize) -> Result<(), Self::Error> {
        self.output.push(b']');
        Ok(())
    }
}

/// Writes an array literal of `element` values as a (nested) JSON array. Explicit
/// bounds (`[0:1]={…}`) are dropped, as PostgreSQL's JSON functions drop them.
pub fn write_array(element: &Kind, text: &[u8], options: &JsonOptions, output: &mut Vec<u8>) {
    let start = output.len();
    let mut visitor = JsonArray {
        element,
        options,
        output,
    };
    if canonical::read_array(text, Strictness::Canonical, &mut visitor).is_err() {
        output.truncate(start);
        write_string(text, output);
    }
}

/// Writes a record literal as a JSON object keyed by the composite's field names.
pub fn write_composite(fields: &[Field], text: &[u8], options: &JsonOptions, output: &mut Vec<u8>) {
    let start = output.len();
    output.push(b'{');
    let read = canonical::read_record::<()>(text, |index, value| {
        let field = fields.get(index).ok_or(())?;
        if index > 0 {
            output.push(b',');
        }
        write_string(field.name.as_bytes(), output);
        output.push(b':');
        match value {
            Some(value) => write_text_value(&field.kind, value, options, output),
            None => output.extend_from_slice(b"null"),
        }
        Ok(())
    });
    match read {
        Ok(count) if count == fields.len() => output.push(b'}'),
        _ => {
            output.truncate(start);
            write_string(text, output);
        }
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
