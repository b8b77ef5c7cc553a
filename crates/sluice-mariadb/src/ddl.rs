//! A copy's unit of work on MariaDB and MySQL (`sluice copy`): the target
//! table created (`--create`) and emptied (`--truncate`) before the rows go
//! in, so that a failed copy leaves the target as it was.
//!
//! DDL commits on its own here (an implicit commit before and after `CREATE
//! TABLE` and `TRUNCATE`), so the unit cannot be one transaction the way it is
//! in PostgreSQL:
//!
//! - the table is created first, on its own, and dropped again when the copy
//!   fails (its rows went into the transaction that failed, so it is empty:
//!   nothing of anyone else's is lost);
//! - emptying is a `DELETE` inside the transaction rather than a `TRUNCATE`,
//!   so a failed copy gives the rows back;
//! - the rows then go in that transaction, committed or rolled back whole.
//!
//! The table a copy creates takes its columns from the source's result: a
//! MariaDB or MySQL table's own declared types, a query's or any other
//! database's kinds mapped by [`mapped_type`]'s table.

use sluice_core::load::{ColumnSpec, TableInfo, TableSetup, TableSpec};
use sluice_core::{DecimalShape, Error, Kind};

use crate::connection::Connection;
use crate::describe::describe_table;
use crate::dialect::MARIADB;
use crate::sql::identifier;

/// What ending a unit must undo.
#[derive(Debug, Default)]
pub(crate) struct LoadUnit {
    /// The table the unit created (its `CREATE` committed already), to drop
    /// if the unit fails.
    created: Option<String>,
}

/// Begins the unit: creates the table (committed at once, see the module
/// docs), describes it, starts the transaction and empties the table in it.
/// On failure everything done is undone and nothing is left begun.
pub(crate) async fn begin_load(
    connection: &mut Connection,
    table: &str,
    setup: &TableSetup,
) -> Result<(TableInfo, LoadUnit), Error> {
    let mut unit = LoadUnit::default();
    if let Some(spec) = &setup.create {
        connection.simple_query(&create_table(table, spec)?).await?;
        unit.created = Some(MARIADB.table_name(table)?.to_string());
    }
    let begun = async {
        let info = describe_table(connection, table).await?;
        connection.queue_setting("START TRANSACTION");
        if setup.empty {
            // TRUNCATE would commit on its own; a DELETE is rolled back with the copy.
            connection
                .simple_query(&format!("DELETE FROM {}", info.name))
                .await?;
        }
        Ok(info)
    }
    .await;
    match begun {
        Ok(info) => Ok((info, unit)),
        Err(error) => {
            let _ = end_load(connection, unit, false).await;
            Err(error)
        }
    }
}

/// Ends the unit: commits it, or rolls it back and drops the table it created.
/// A commit that fails is undone the same way.
pub(crate) async fn end_load(
    connection: &mut Connection,
    unit: LoadUnit,
    commit: bool,
) -> Result<(), Error> {
    let ended = if commit {
        match connection.simple_query("COMMIT").await {
            Ok(_) => return Ok(()),
            Err(error) => Err(error),
        }
    } else {
        Ok(())
    };
    let rolled_back = connection.simple_query("ROLLBACK").await.map(drop);
    if let Some(table) = unit.created {
        connection
            .simple_query(&format!("DROP TABLE IF EXISTS {table}"))
            .await?;
    }
    ended.and(rolled_back)
}

/// The `CREATE TABLE` for `spec`, named `table`. Every column says `NULL` or
/// `NOT NULL`: left unsaid, a `TIMESTAMP` column could become `NOT NULL` with
/// a default of the current time (`explicit_defaults_for_timestamp` off).
pub(crate) fn create_table(table: &str, spec: &TableSpec) -> Result<String, Error> {
    let own = MARIADB.shares_types_with(spec.dialect);
    let mut parts: Vec<String> = spec
        .columns
        .iter()
        .map(|column| {
            let keyed = spec.primary_key.contains(&column.column.name);
            format!(
                "{} {} {}",
                identifier(&column.column.name),
                column_type(column, own, keyed),
                if column.not_null { "NOT NULL" } else { "NULL" }
            )
        })
        .collect();
    if !spec.primary_key.is_empty() {
        let keys: Vec<String> = spec.primary_key.iter().map(|key| identifier(key)).collect();
        parts.push(format!("PRIMARY KEY ({})", keys.join(", ")));
    }
    Ok(format!(
        "CREATE TABLE {} ({})",
        MARIADB.table_name(table)?,
        parts.join(", ")
    ))
}

/// A column's type: a MariaDB or MySQL table's own declaration, else mapped.
fn column_type(spec: &ColumnSpec, own: bool, keyed: bool) -> String {
    let column = &spec.column;
    match (&spec.declared_type, own) {
        // MariaDB declares a JSON column as LONGTEXT with a check; JSON keeps the check.
        (Some(_), true) if column.kind == Kind::Json => "JSON".into(),
        (Some(declared), true) => declared.clone(),
        _ => mapped_type(&column.kind, column.decimal, keyed),
    }
}

/// The MariaDB type a column of `kind` becomes (docs/src/types.md).
/// A key column cannot be a `LONGTEXT` or `LONGBLOB` (a key needs a length),
/// so text and bytes in the primary key take 255 characters or bytes.
pub(crate) fn mapped_type(kind: &Kind, decimal: Option<DecimalShape>, keyed: bool) -> String {
    match kind {
        Kind::Bool => "BOOLEAN".into(),
        Kind::Integer => "BIGINT".into(),
        Kind::Float => "DOUBLE".into(),
        Kind::Decimal => decimal_type(decimal),
        Kind::Text | Kind::TimeTz | Kind::Other if keyed => "VARCHAR(255)".into(),
        Kind::Text | Kind::TimeTz | Kind::Other => "LONGTEXT".into(),
        Kind::Bytes if keyed => "VARBINARY(255)".into(),
        Kind::Bytes => "LONGBLOB".into(),
        Kind::Date => "DATE".into(),
        Kind::Time | Kind::Interval => "TIME(6)".into(),
        // DATETIME rather than TIMESTAMP, whose range ends in 2038: a moment
        // with an offset is stored as its UTC wall time (see the import's
        // conversions), a timestamp without one as it is.
        Kind::Timestamp | Kind::TimestampTz => "DATETIME(6)".into(),
        Kind::Json | Kind::Array(_) | Kind::Composite(_) => "JSON".into(),
    }
}

/// `DECIMAL(p,s)` as declared when MariaDB can hold it (65 digits, 30 after
/// the point); the widest it has otherwise (an unconstrained `numeric`).
fn decimal_type(shape: Option<DecimalShape>) -> String {
    match shape {
        Some(DecimalShape { precision, scale })
            if (1..=65).contains(&precision)
                && (0..=30).contains(&scale)
                && scale as u16 <= precision =>
        {
            format!("DECIMAL({precision},{scale})")
        }
        _ => "DECIMAL(65,30)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::MYSQL;
    use sluice_core::connect::{Dialect, Family};
    use sluice_core::Column;

    fn column(name: &str, kind: Kind, declared: Option<&str>, not_null: bool) -> ColumnSpec {
        ColumnSpec {
            column: Column::new(name, kind, "x"),
            declared_type: declared.map(str::to_owned),
            not_null,
        }
    }

    #[test]
    fn another_database_s_kinds_are_mapped_and_keys_get_a_length() {
        let mut amount = column("amount", Kind::Decimal, Some("numeric(12,2)"), false);
        amount.column = amount.column.with_decimal(Some(DecimalShape {
            precision: 12,
            scale: 2,
        }));
        let spec = TableSpec {
            columns: vec![
                column("code", Kind::Text, Some("text"), true),
                amount,
                column("at", Kind::TimestampTz, None, false),
                column("tags", Kind::Array(Box::new(Kind::Integer)), None, false),
                column("big", Kind::Decimal, None, false),
            ],
            primary_key: vec!["code".into()],
            dialect: Dialect::new("PostgreSQL", Family::new("PostgreSQL")),
        };
        assert_eq!(
            create_table("shop.t", &spec).unwrap(),
            "CREATE TABLE `shop`.`t` (`code` VARCHAR(255) NOT NULL, \
             `amount` DECIMAL(12,2) NULL, `at` DATETIME(6) NULL, `tags` JSON NULL, \
             `big` DECIMAL(65,30) NULL, PRIMARY KEY (`code`))"
        );
    }

    #[test]
    fn a_mariadb_table_keeps_its_declared_types() {
        let spec = TableSpec {
            columns: vec![
                column("id", Kind::Integer, Some("int(10) unsigned"), true),
                column("doc", Kind::Json, Some("longtext"), false),
                column("state", Kind::Text, Some("enum('a','b')"), false),
            ],
            primary_key: vec!["id".into()],
            dialect: MARIADB,
        };
        assert_eq!(
            create_table("t", &spec).unwrap(),
            "CREATE TABLE `t` (`id` int(10) unsigned NOT NULL, `doc` JSON NULL, \
             `state` enum('a','b') NULL, PRIMARY KEY (`id`))"
        );
    }

    #[test]
    fn a_mysql_table_keeps_its_declared_types_too() {
        let spec = TableSpec {
            columns: vec![column("id", Kind::Integer, Some("bigint unsigned"), true)],
            primary_key: vec![],
            dialect: MYSQL,
        };
        assert_eq!(
            create_table("t", &spec).unwrap(),
            "CREATE TABLE `t` (`id` bigint unsigned NOT NULL)"
        );
        // The name is read by the one grammar of names, and quoted again.
        assert_eq!(
            create_table("`my.db`.`we``ird`", &spec).unwrap(),
            "CREATE TABLE `my.db`.`we``ird` (`id` bigint unsigned NOT NULL)"
        );
        for refused in ["t (x int); drop table t; --", "a.b.c", "\"t\""] {
            assert!(create_table(refused, &spec).is_err(), "{refused:?}");
        }
    }
}
