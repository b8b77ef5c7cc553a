//! The JSON Schema of a named query's rows, from the columns its database
//! described when the start-up checks prepared it: each column's JSON type as
//! the JSON and NDJSON writers spell its kind (the book's type table), the
//! database's type name as its description, and NULL allowed unless the
//! database said the column never holds one.
//!
//! Formats are left out where a value may fall outside them (a `date` can be
//! `infinity`, a `timestamp` can be BC), because a generated client that
//! parses by format would fail on a value the database really holds.

use serde_json::{json, Map, Value};
use sluice_core::{Column, Kind, Schema};

/// Strings a float or a decimal is written as when it is not a finite number.
const NOT_FINITE: [&str; 3] = ["NaN", "Infinity", "-Infinity"];

/// The schema of one row: an object with a property per column.
pub(super) fn row_schema(columns: &Schema) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for column in &columns.columns {
        // A name that repeats is written twice into one object; a reader keeps
        // the last, which has the same description in every column we know.
        if !properties.contains_key(&column.name) {
            required.push(Value::from(column.name.clone()));
        }
        properties.insert(column.name.clone(), column_schema(column));
    }
    json!({"type": "object", "properties": properties, "required": required})
}

fn column_schema(column: &Column) -> Value {
    let mut schema = kind_schema(&column.kind);
    if column.nullable != Some(false) {
        schema = nullable(schema);
    }
    if let Some(object) = schema.as_object_mut() {
        object.insert("description".into(), json!(column.type_name));
    }
    schema
}

/// `schema` or null.
fn nullable(mut schema: Value) -> Value {
    let Some(object) = schema.as_object_mut() else {
        return schema;
    };
    let only = |key: &str| object.len() == 1 && object.contains_key(key);
    if object.is_empty() {
        // Any value, null included.
    } else if only("type") && object["type"].is_string() {
        object["type"] = json!([object["type"], "null"]);
    } else if only("anyOf") {
        if let Some(alternatives) = object["anyOf"].as_array_mut() {
            alternatives.push(json!({"type": "null"}));
        }
    } else {
        schema = json!({"anyOf": [schema, {"type": "null"}]});
    }
    schema
}

/// A value of `kind` as the JSON writer spells it.
fn kind_schema(kind: &Kind) -> Value {
    match kind {
        Kind::Bool => json!({"type": "boolean"}),
        Kind::Integer => json!({"type": "integer"}),
        Kind::Float | Kind::Decimal => {
            json!({"anyOf": [{"type": "number"}, {"type": "string", "enum": NOT_FINITE}]})
        }
        Kind::Bytes => json!({"type": "string", "contentEncoding": "base64"}),
        // Any JSON document, as the column holds it.
        Kind::Json => json!({}),
        Kind::Array(element) => array_schema(element),
        Kind::Composite(fields) => {
            let properties: Map<String, Value> = fields
                .iter()
                .map(|field| (field.name.clone(), nullable(kind_schema(&field.kind))))
                .collect();
            json!({"type": "object", "properties": properties})
        }
        Kind::Text
        | Kind::Date
        | Kind::Time
        | Kind::TimeTz
        | Kind::Timestamp
        | Kind::TimestampTz
        | Kind::Interval
        | Kind::Other => json!({"type": "string"}),
    }
}

/// Arrays of any dimension: each item is an element, NULL or an array of the
/// next dimension (whose items a schema without recursion cannot say more
/// of; client generators want `items` stated). An array of a type carried as
/// text may be written as its text when its literal cannot be split into
/// elements (`box[]`).
fn array_schema(element: &Kind) -> Value {
    let deeper = json!({"type": "array", "items": {}});
    let items = json!({"anyOf": [nullable(kind_schema(element)), deeper]});
    let array = json!({"type": "array", "items": items});
    match element {
        Kind::Other => json!({"anyOf": [array, {"type": "string"}]}),
        _ => array,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Field;

    fn columns(columns: Vec<Column>) -> Schema {
        Schema { columns }
    }

    #[test]
    fn each_column_is_typed_and_nullable_unless_the_database_says_not() {
        let schema = row_schema(&columns(vec![
            Column::new("id", Kind::Integer, "int8").with_nullable(Some(false)),
            Column::new("amount", Kind::Decimal, "numeric"),
            Column::new("at", Kind::TimestampTz, "timestamptz"),
        ]));
        assert_eq!(schema["required"], json!(["id", "amount", "at"]));
        let properties = &schema["properties"];
        assert_eq!(
            properties["id"],
            json!({"type": "integer", "description": "int8"})
        );
        assert_eq!(
            properties["at"],
            json!({"type": ["string", "null"], "description": "timestamptz"})
        );
        assert_eq!(
            properties["amount"]["anyOf"][2],
            json!({"type": "null"}),
            "{schema}"
        );
    }

    #[test]
    fn arrays_and_composites_nest() {
        let kind = Kind::Array(Box::new(Kind::Composite(vec![Field {
            name: "x".into(),
            kind: Kind::Bool,
        }])));
        let schema = kind_schema(&kind);
        assert_eq!(schema["type"], "array");
        let element = &schema["items"]["anyOf"][0]["anyOf"][0];
        assert_eq!(
            schema["items"]["anyOf"][0]["anyOf"][1],
            json!({"type": "null"})
        );
        assert_eq!(
            element["properties"]["x"],
            json!({"type": ["boolean", "null"]})
        );
    }
}
