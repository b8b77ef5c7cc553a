//! A table of a SQLite file in the load vocabulary ([`TableInfo`]): its
//! columns, which refuse NULL and which form the primary key, for a copy out
//! of SQLite that creates its target table (`sluice copy --create`). Read from
//! `pragma_table_info` on the file opened read-only; generated columns, which
//! that pragma leaves out, are left out here too.

use std::path::Path;

use rusqlite::OpenFlags;
use sluice_core::load::TableInfo;
use sluice_core::{Column, Error, ErrorKind, Kind};

use crate::dialect::SQLITE;
use crate::kind::kind_of_declared;

/// Describes `table` (`name`, `schema.name`, parts optionally `"quoted"`:
/// the one grammar of names, [`sluice_core::connect::TableName`]) of the file
/// at `path`. Blocking: run it off the async threads.
pub fn describe_table(path: &Path, table: &str) -> Result<TableInfo, Error> {
    let table_name = SQLITE.table_name(table)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let connection = rusqlite::Connection::open_with_flags(path, flags).map_err(|error| {
        Error::new(
            ErrorKind::Connect,
            format!("cannot open SQLite database {}: {error}", path.display()),
        )
    })?;
    let failed = |error: rusqlite::Error| Error::new(ErrorKind::Database, error.to_string());
    let mut statement = connection
        .prepare(
            "select name, type, \"notnull\", dflt_value is not null, pk \
             from pragma_table_info(?1, ?2) order by cid",
        )
        .map_err(failed)?;
    let schema = table_name.schema().unwrap_or("main");
    let rows = statement
        .query_map([table_name.table(), schema], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, bool>(2)?,
                row.get::<_, bool>(3)?,
                row.get::<_, u32>(4)?,
            ))
        })
        .map_err(failed)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?;
    if rows.is_empty() {
        return Err(Error::config(format!("table {table:?} does not exist")));
    }
    let mut info = TableInfo {
        name: table_name.to_string(),
        ..TableInfo::default()
    };
    let mut key = Vec::new();
    for (column, declared, not_null, has_default, place) in rows {
        let kind = kind_of_declared(&declared).unwrap_or(Kind::Text);
        if has_default {
            info.defaulted.push(column.clone());
        }
        if not_null {
            info.not_null.push(column.clone());
        }
        if place > 0 {
            key.push((place, column.clone()));
        }
        info.columns
            .push(Column::new(column, kind, declared.to_ascii_lowercase()));
        info.declared_types.push(declared);
    }
    key.sort_unstable();
    info.primary_key = key.into_iter().map(|(_, column)| column).collect();
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_described_with_its_keys_and_nullability() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("t.db");
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute_batch(
                "create table \"Odd\"\"Name\" (a integer not null, b varchar(40), \
                 c numeric(12,2) default 0, d text, primary key (b, a));",
            )
            .unwrap();
        drop(connection);
        let info = describe_table(&path, "\"Odd\"\"Name\"").unwrap();
        assert_eq!(info.name, "\"Odd\"\"Name\"");
        let names: Vec<_> = info.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(info.columns[2].kind, Kind::Decimal);
        assert_eq!(info.primary_key, ["b", "a"]);
        assert_eq!(info.not_null, ["a"]);
        assert_eq!(info.defaulted, ["c"]);
        assert_eq!(info.declared_type("b"), Some("varchar(40)"));
        let missing = describe_table(&path, "main.nope").unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::Config);
        assert_eq!(missing.to_string(), "table \"main.nope\" does not exist");
        for text in ["a.b.c", "\"Odd\"\"Name\" union select 1"] {
            let refused = describe_table(&path, text).unwrap_err();
            assert_eq!(
                refused.to_string(),
                format!("{text:?} is not a table name (table or schema.table)")
            );
        }
    }
}
