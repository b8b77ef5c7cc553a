//! Which target column each source column of a copy fills, and how its values
//! get there: columns matched by name, each pair of kinds judged once, before
//! any row moves. Almost always the kinds are equal and values go as they are;
//! where they differ, either the target reads the source's canonical text
//! itself (an integer into a `numeric`, text into anything it parses), or the
//! value is rewritten (into JSON by the format crate's own renderer, a boolean
//! into a digit), or the pair is refused with the column named. Values in
//! the source database's own binary form ([`Encoding::Native`]) go only into
//! a column of the same type, which the target then reads as they are.
//! Also the columns of the table `--create` makes of the source ([`spec_of`]).

use sluice_core::connect::Dialect;
use sluice_core::load::{ColumnSpec, Convert, Fill, TableInfo, TableSpec};
use sluice_core::{Column, Encoding, Error, Kind, Schema};
use sluice_formats::json_value::write_value;
use sluice_formats::JsonOptions;

/// The target columns a copy fills, in source column order, and how.
pub struct Mapping {
    /// The target's columns, one per source column.
    pub columns: Vec<Column>,
    /// How each is filled.
    pub fills: Vec<Fill>,
}

/// Matches `source`'s columns to `table`'s by name (exactly, else ignoring
/// ASCII case when that finds one column), refusing a source column the
/// target lacks, a pair of kinds that cannot meet, and a target column that
/// must be filled and is not.
pub fn map(source: &Schema, table: &TableInfo) -> Result<Mapping, Error> {
    let mut mapping = Mapping {
        columns: Vec::new(),
        fills: Vec::new(),
    };
    for (index, column) in source.columns.iter().enumerate() {
        let target = find(table, &column.name)?;
        if mapping
            .columns
            .iter()
            .any(|taken| taken.name == target.name)
        {
            return Err(Error::config(format!(
                "two source columns go into the target's column {:?}: name them apart",
                target.name
            )));
        }
        let misfit = |why: &str| {
            Error::config(format!(
                "column {:?}: the source's {} values cannot go into the target's {} column ({why})",
                column.name, column.type_name, target.type_name
            ))
        };
        if column.encoding == Encoding::Native {
            if column.type_name != target.type_name {
                return Err(misfit(
                    "they come in the source's binary form of its own type",
                ));
            }
            mapping
                .columns
                .push(target.clone().with_encoding(Encoding::Native));
            mapping.fills.push(Fill {
                source: index,
                convert: None,
            });
            continue;
        }
        let convert = conversion(&column.kind, &target.kind).map_err(misfit)?;
        mapping.columns.push(target.clone());
        mapping.fills.push(Fill {
            source: index,
            convert,
        });
    }
    if let Some(missing) = table.columns.iter().find(|column| {
        table.not_null.contains(&column.name)
            && !table.defaulted.contains(&column.name)
            && !mapping
                .columns
                .iter()
                .any(|filled| filled.name == column.name)
    }) {
        return Err(Error::config(format!(
            "the target's column {:?} is NOT NULL without a default, and the source has no such column",
            missing.name
        )));
    }
    Ok(mapping)
}

/// The target column named `name`.
fn find<'t>(table: &'t TableInfo, name: &str) -> Result<&'t Column, Error> {
    if let Some(column) = table.columns.iter().find(|column| column.name == name) {
        return Ok(column);
    }
    let mut folded = table
        .columns
        .iter()
        .filter(|column| column.name.eq_ignore_ascii_case(name));
    match (folded.next(), folded.next()) {
        (Some(column), None) => Ok(column),
        _ => Err(Error::config(format!(
            "the target table {} has no column {name:?} to write",
            table.name
        ))),
    }
}

/// How a value of kind `from` becomes one of kind `to`: `None` as it is,
/// `Some` rewritten; `Err` why it cannot.
fn conversion(from: &Kind, to: &Kind) -> Result<Option<Convert>, &'static str> {
    use Kind::*;
    let as_is = Ok(None);
    match (from, to) {
        _ if from == to => as_is,
        // Raw bytes are no text: a target that reads text would get them mangled.
        (Bytes, _) => Err("bytes go only into a binary column"),
        // Text's own bytes, as a cast to bytes would give them.
        (Text | Other | Json, Bytes) => as_is,
        (_, Bytes) => Err("only text goes into a binary column"),
        // A document as its text; text as the document it holds (the target checks it).
        (Text | Other, Json) => as_is,
        (_, Json) => Ok(Some(json_of(from.clone()))),
        // Every canonical form is readable text.
        (_, Text | Other) => as_is,
        // Text in another kind's spelling: the target parses it, and a value
        // it cannot read fails with its row and column.
        (Text | Other, _) => as_is,
        (Bool, Integer | Float | Decimal) => Ok(Some(Box::new(bool_digit) as Convert)),
        (Integer, Bool) => as_is,
        (Integer | Float | Decimal, Integer | Float | Decimal) => as_is,
        (Date, Timestamp | TimestampTz) => as_is,
        (Timestamp | TimestampTz, Timestamp | TimestampTz) => as_is,
        (Time | TimeTz | Interval, Time | TimeTz | Interval) => as_is,
        (Array(_), Array(_)) | (Composite(_), Composite(_)) => as_is,
        _ => Err("their kinds do not meet"),
    }
}

/// Renders a value of `kind` as JSON, as sluice's JSON output does (arrays as
/// arrays, composites as objects, timestamps in ISO 8601, bytes in base64).
fn json_of(kind: Kind) -> Convert {
    Box::new(move |value, output| {
        write_value(&kind, value, &JsonOptions::default(), output);
        Ok(())
    })
}

/// A boolean (`t`/`f`) as the digit a number column takes.
fn bool_digit(value: &[u8], output: &mut Vec<u8>) -> Result<(), String> {
    match value {
        b"t" => output.push(b'1'),
        b"f" => output.push(b'0'),
        _ => {
            return Err(format!(
                "{:?} is not a boolean",
                String::from_utf8_lossy(value)
            ))
        }
    }
    Ok(())
}

/// The table `--create` makes: the result's columns, with NOT NULL, declared
/// types and the primary key of the source table when there is one.
pub fn spec_of(schema: &Schema, described: Option<&TableInfo>, dialect: Dialect) -> TableSpec {
    let columns = schema
        .columns
        .iter()
        .map(|column| ColumnSpec {
            column: column.clone(),
            declared_type: described
                .and_then(|table| table.declared_type(&column.name))
                .map(str::to_owned),
            not_null: described.is_some_and(|table| table.not_null.contains(&column.name)),
        })
        .collect();
    let primary_key = described
        .map(|table| table.primary_key.clone())
        .filter(|key| {
            key.iter()
                .all(|name| schema.columns.iter().any(|column| &column.name == name))
        })
        .unwrap_or_default();
    TableSpec {
        columns,
        primary_key,
        dialect,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(columns: Vec<Column>, not_null: &[&str], defaulted: &[&str]) -> TableInfo {
        TableInfo {
            name: "\"t\"".into(),
            columns,
            not_null: not_null.iter().map(|name| name.to_string()).collect(),
            defaulted: defaulted.iter().map(|name| name.to_string()).collect(),
            ..TableInfo::default()
        }
    }

    fn schema(columns: Vec<Column>) -> Schema {
        Schema { columns }
    }

    fn converted(mapping: &Mapping, index: usize, value: &[u8]) -> Result<String, String> {
        let mut output = Vec::new();
        match &mapping.fills[index].convert {
            None => output.extend_from_slice(value),
            Some(convert) => convert(value, &mut output)?,
        }
        Ok(String::from_utf8(output).unwrap())
    }

    #[test]
    fn columns_match_by_name_in_source_order_with_kinds_bridged() {
        let target = table(
            vec![
                Column::new("id", Kind::Integer, "int8"),
                Column::new("tags", Kind::Json, "jsonb"),
                Column::new("paid", Kind::Integer, "int4"),
                Column::new("note", Kind::Text, "text"),
            ],
            &["id", "note"],
            &["note"],
        );
        let source = schema(vec![
            Column::new("PAID", Kind::Bool, "bool"),
            Column::new("id", Kind::Integer, "int4"),
            Column::new("tags", Kind::Array(Box::new(Kind::Text)), "_text"),
        ]);
        let mapping = map(&source, &target).unwrap();
        let names: Vec<_> = mapping.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["paid", "id", "tags"]);
        let sources: Vec<_> = mapping.fills.iter().map(|fill| fill.source).collect();
        assert_eq!(sources, [0, 1, 2]);
        assert_eq!(converted(&mapping, 0, b"t").unwrap(), "1");
        assert!(converted(&mapping, 0, b"x")
            .unwrap_err()
            .contains("not a boolean"));
        assert!(mapping.fills[1].convert.is_none());
        assert_eq!(
            converted(&mapping, 2, b"{a,\"b c\",NULL}").unwrap(),
            "[\"a\",\"b c\",null]"
        );
    }

    #[test]
    fn misfits_are_refused_by_column_before_any_row() {
        let target = table(
            vec![
                Column::new("id", Kind::Integer, "int8"),
                Column::new("must", Kind::Text, "text"),
            ],
            &["id", "must"],
            &[],
        );
        let message =
            |source: Vec<Column>| map(&schema(source), &target).err().unwrap().to_string();
        assert_eq!(
            message(vec![Column::new("doc", Kind::Json, "jsonb")]),
            "the target table \"t\" has no column \"doc\" to write"
        );
        assert_eq!(
            message(vec![Column::new("id", Kind::Json, "jsonb")]),
            "column \"id\": the source's jsonb values cannot go into the target's int8 column \
             (their kinds do not meet)"
        );
        assert_eq!(
            message(vec![Column::new("must", Kind::Bytes, "bytea")]),
            "column \"must\": the source's bytea values cannot go into the target's text column \
             (bytes go only into a binary column)"
        );
        assert_eq!(
            message(vec![Column::new("id", Kind::Integer, "int4")]),
            "the target's column \"must\" is NOT NULL without a default, and the source has no such column"
        );
    }
}
