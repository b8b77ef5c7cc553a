//! [`describe_table`]: a table's columns as an import and `--create` see
//! them, read from `information_schema`.

use sluice_core::load::TableInfo;
use sluice_core::{Column, DecimalShape, Error, Kind};

use crate::connection::Connection;
use crate::sql::{identifier, literal};

/// Reads the table's columns and their kinds from `information_schema`, with
/// the limits their types declare (`DECIMAL(p,s)`'s digits, `VARCHAR(n)`'s
/// characters), which an import checks every value against
/// (`sluice_core::load`). The schema shows a table's columns to anyone with a
/// privilege on it (`INSERT` alone will do). `table` is read by the one
/// grammar of names, and text that is none is refused before anything is asked.
pub async fn describe_table(connection: &mut Connection, table: &str) -> Result<TableInfo, Error> {
    let table_name = connection.server().dialect().table_name(table)?;
    let (schema, name) = (table_name.schema(), table_name.table());
    let schema_sql = schema.map_or("DATABASE()".to_owned(), literal);
    // MariaDB stores JSON as LONGTEXT with a json_valid() check; MySQL has the type.
    let json_check = if connection.server().mariadb {
        "EXISTS (SELECT 1 FROM information_schema.CHECK_CONSTRAINTS k \
                  WHERE k.CONSTRAINT_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME \
                    AND k.CHECK_CLAUSE = CONCAT('json_valid(`', c.COLUMN_NAME, '`)'))"
    } else {
        "0"
    };
    let sql = format!(
        "SELECT c.TABLE_SCHEMA, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.COLUMN_DEFAULT, c.EXTRA, \
                {json_check}, c.IS_NULLABLE, \
                (SELECT k.ORDINAL_POSITION FROM information_schema.KEY_COLUMN_USAGE k \
                 WHERE k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME \
                   AND k.COLUMN_NAME = c.COLUMN_NAME AND k.CONSTRAINT_NAME = 'PRIMARY'), \
                c.NUMERIC_PRECISION, c.NUMERIC_SCALE, c.CHARACTER_MAXIMUM_LENGTH \
         FROM information_schema.COLUMNS c \
         WHERE c.TABLE_SCHEMA = {schema_sql} AND c.TABLE_NAME = {} \
         ORDER BY c.ORDINAL_POSITION",
        literal(name)
    );
    let rows = connection.simple_query(&sql).await?.rows;
    if rows.is_empty() {
        return Err(Error::config(format!("table {table:?} does not exist")));
    }
    let text = |row: &[Option<Vec<u8>>], index: usize| -> String {
        row.get(index)
            .and_then(Option::as_ref)
            .map(|value| String::from_utf8_lossy(value).into_owned())
            .unwrap_or_default()
    };
    let mut info = TableInfo {
        name: format!("{}.{}", identifier(&text(&rows[0], 0)), identifier(name)),
        ..TableInfo::default()
    };
    let mut key: Vec<(u64, String)> = Vec::new();
    for row in &rows {
        let extra = text(row, 5).to_ascii_lowercase();
        if extra.contains("generated") || extra.contains("virtual") || extra.contains("persistent")
        {
            continue;
        }
        let column = text(row, 1);
        let default = row.get(4).and_then(Option::as_ref);
        // MariaDB shows an implicit DEFAULT NULL as the text NULL.
        if default.is_some_and(|value| value.as_slice() != b"NULL")
            || extra.contains("auto_increment")
        {
            info.defaulted.push(column.clone());
        }
        if text(row, 7) == "NO" {
            info.not_null.push(column.clone());
        }
        if let Ok(place) = text(row, 8).parse::<u64>() {
            key.push((place, column.clone()));
        }
        let column_type = text(row, 3);
        info.declared_types.push(column_type.clone());
        let data_type = text(row, 2).to_ascii_lowercase();
        let number = |index: usize| text(row, index).parse::<u32>().ok();
        let decimal = match (number(9), number(10)) {
            (Some(precision), Some(scale))
                if matches!(data_type.as_str(), "decimal" | "numeric") =>
            {
                Some(DecimalShape {
                    precision: u16::try_from(precision).unwrap_or(u16::MAX),
                    scale: i16::try_from(scale).unwrap_or(i16::MAX),
                })
            }
            _ => None,
        };
        // A CHAR(n)'s trailing spaces mean nothing: it drops them when read.
        let length = number(11).filter(|_| data_type == "varchar");
        info.columns.push(
            Column::new(
                column,
                kind_of(&data_type, text(row, 6) == "1"),
                column_type,
            )
            .with_decimal(decimal)
            .with_length(length),
        );
    }
    key.sort_unstable();
    info.primary_key = key.into_iter().map(|(_, column)| column).collect();
    Ok(info)
}

/// A column's kind from its `DATA_TYPE`.
fn kind_of(data_type: &str, json: bool) -> Kind {
    match data_type.to_ascii_lowercase().as_str() {
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" | "year" => {
            Kind::Integer
        }
        "decimal" | "numeric" => Kind::Decimal,
        "float" | "double" | "real" => Kind::Float,
        "date" => Kind::Date,
        "datetime" => Kind::Timestamp,
        "timestamp" => Kind::TimestampTz,
        "time" => Kind::Interval,
        "json" => Kind::Json,
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => Kind::Bytes,
        "longtext" if json => Kind::Json,
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" | "enum" | "set" => {
            Kind::Text
        }
        _ => Kind::Other,
    }
}
