//! Building PostgreSQL input text from JSON values: array literals (`{…}`) and
//! record literals (`(…)`), so NDJSON arrays and objects load into array and
//! composite columns. The inverse of [`crate::json_value`]'s literal rendering, and hand-written for
//! the same reason: no crate writes these literals.

use base64::Engine as _;
use serde_json::Value;
use sluice_core::canonical::read_hex_pairs;
use sluice_core::{Field, Kind};

/// Appends the text of a JSON scalar or container for a value of `kind`, as the
/// element of an array or a field of a record (before quoting).
fn element_text(kind: &Kind, value: &Value, output: &mut Vec<u8>) -> Result<(), String> {
    match (kind, value) {
        (Kind::Bytes, Value::String(text)) => {
            let bytes = decode_bytes_text(text)?;
            output.extend_from_slice(b"\\x");
            crate::json_value::write_hex(&bytes, output);
        }
        (Kind::Json, value) => output.extend_from_slice(value.to_string().as_bytes()),
        (Kind::Array(element), Value::Array(items)) => write_array_literal(element, items, output)?,
        (Kind::Composite(fields), Value::Object(_)) => write_record_literal(fields, value, output)?,
        (_, Value::String(text)) => output.extend_from_slice(text.as_bytes()),
        (Kind::Bool, Value::Bool(flag)) => output.push(if *flag { b't' } else { b'f' }),
        (_, Value::Bool(flag)) => output.extend_from_slice(if *flag { b"true" } else { b"false" }),
        (_, Value::Number(number)) => output.extend_from_slice(number.to_string().as_bytes()),
        (_, Value::Array(_)) => return Err("an array is not valid here".into()),
        (_, Value::Object(_)) => return Err("an object is not valid here".into()),
        (_, Value::Null) => {}
    }
    Ok(())
}

/// Writes `items` as a PostgreSQL array literal of `element` values; nested JSON
/// arrays become further dimensions and `null` becomes `NULL`.
pub fn write_array_literal(
    element: &Kind,
    items: &[Value],
    output: &mut Vec<u8>,
) -> Result<(), String> {
    output.push(b'{');
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            output.push(b',');
        }
        match item {
            Value::Null => output.extend_from_slice(b"NULL"),
            Value::Array(inner) if !matches!(element, Kind::Json) => {
                write_array_literal(element, inner, output)?
            }
            other => {
                let mut text = Vec::new();
                element_text(element, other, &mut text)?;
                quote(&text, b'\\', output);
            }
        }
    }
    output.push(b'}');
    Ok(())
}

/// Writes a JSON object as a record literal of the composite's fields, in field
/// order; absent and `null` fields are NULL, unknown keys are an error.
pub fn write_record_literal(
    fields: &[Field],
    value: &Value,
    output: &mut Vec<u8>,
) -> Result<(), String> {
    let Value::Object(object) = value else {
        return Err("expected an object".into());
    };
    if let Some(unknown) = object
        .keys()
        .find(|key| !fields.iter().any(|field| &field.name == *key))
    {
        return Err(format!("the composite type has no field {unknown:?}"));
    }
    output.push(b'(');
    for (index, field) in fields.iter().enumerate() {
        if index > 0 {
            output.push(b',');
        }
        match object.get(&field.name) {
            None | Some(Value::Null) => {}
            Some(value) => {
                let mut text = Vec::new();
                element_text(&field.kind, value, &mut text)
                    .map_err(|reason| format!("field {}: {reason}", field.name))?;
                quote(&text, b'"', output);
            }
        }
    }
    output.push(b')');
    Ok(())
}

/// Double-quotes `text`, escaping `"` and `\`: arrays escape both with a
/// backslash, records double the quote (`quote_escape`) and the backslash.
fn quote(text: &[u8], quote_escape: u8, output: &mut Vec<u8>) {
    output.push(b'"');
    for &byte in text {
        match byte {
            b'"' => {
                output.push(quote_escape);
                output.push(b'"');
            }
            b'\\' => output.extend_from_slice(b"\\\\"),
            other => output.push(other),
        }
    }
    output.push(b'"');
}

/// Decodes a binary value given as text: base64 (what sluice exports), or
/// PostgreSQL's `\x…` hex form.
pub fn decode_bytes_text(text: &str) -> Result<Vec<u8>, String> {
    if let Some(hex) = text.strip_prefix("\\x") {
        return read_hex_pairs(hex.as_bytes()).ok_or_else(|| "not valid hex after \\x".to_string());
    }
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|error| format!("not valid base64 ({error})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_and_records_are_quoted_for_postgres() {
        let mut output = Vec::new();
        let value: Value = serde_json::from_str(r#"[["a\"b", null], ["c\\d", "e"]]"#).unwrap();
        write_array_literal(&Kind::Text, value.as_array().unwrap(), &mut output).unwrap();
        assert_eq!(
            String::from_utf8(output).unwrap(),
            r#"{{"a\"b",NULL},{"c\\d","e"}}"#
        );

        let fields = vec![
            Field {
                name: "id".into(),
                kind: Kind::Integer,
            },
            Field {
                name: "tags".into(),
                kind: Kind::Array(Box::new(Kind::Text)),
            },
            Field {
                name: "blob".into(),
                kind: Kind::Bytes,
            },
            Field {
                name: "gone".into(),
                kind: Kind::Text,
            },
        ];
        let value: Value =
            serde_json::from_str(r#"{"id": 1, "tags": ["x y", "q\"uote"], "blob": "AAE="}"#)
                .unwrap();
        let mut output = Vec::new();
        write_record_literal(&fields, &value, &mut output).unwrap();
        assert_eq!(
            String::from_utf8(output).unwrap(),
            r#"("1","{""x y"",""q\\""uote""}","\\x0001",)"#
        );
    }
}
