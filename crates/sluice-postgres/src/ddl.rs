//! A copy's unit of work on PostgreSQL (`sluice copy`): one transaction in
//! which the target table is created (`--create`) and emptied (`--truncate`)
//! before the rows go in, so that all of it commits together or none of it
//! does. Both are transactional in PostgreSQL: `CREATE TABLE` and `TRUNCATE`
//! roll back with the rows.
//!
//! The table a copy creates takes its columns from the source's result: a
//! PostgreSQL source's own types (`numeric(12,2)`, `varchar(40)`,
//! `timestamptz`, arrays, enums by name), any other source's kinds mapped by
//! [`mapped_type`]'s table.

use postgres_protocol::escape::escape_identifier;
use sluice_core::load::{ColumnSpec, TableInfo, TableSetup, TableSpec};
use sluice_core::{DecimalShape, Error, Kind};

use crate::dialect::POSTGRESQL;
use crate::import::describe_table;
use crate::Connection;

/// How long a session of a shared unit waits for a lock (on a key another
/// session of the unit is writing, most likely) before its statement fails.
pub(crate) const SHARED_LOCK_TIMEOUT: &str = "10s";

/// Begins the unit: `begin`, then the table created and emptied as `setup`
/// says, in one round trip, and the table described. On failure the
/// transaction is rolled back and nothing is left begun. Returns the table,
/// and the name of the table to drop when the unit is undone: one created
/// before the transaction, for a unit other sessions share.
pub(crate) async fn begin_load(
    connection: &mut Connection,
    table: &str,
    setup: &TableSetup,
) -> Result<(TableInfo, Option<String>), Error> {
    let mut statements = vec!["begin".to_owned()];
    let mut created = None;
    if let Some(spec) = &setup.create {
        let create = create_table(table, spec)?;
        if setup.shared {
            // The other sessions must see the table to load it: it is made
            // first, committed, and dropped again if the unit is undone.
            connection.simple_command(&create).await?;
            created = Some(POSTGRESQL.table_name(table)?.to_string());
        } else {
            statements.push(create);
        }
    }
    if setup.shared {
        // Two sessions of one shared unit writing the same key wait on each
        // other's open transaction, and neither commits before the other is
        // done: a wait the server cannot see as a deadlock. Give up instead.
        statements.push(format!("set local lock_timeout = '{SHARED_LOCK_TIMEOUT}'"));
    }
    if setup.empty {
        // Transactional in PostgreSQL, unlike in MariaDB: a failed copy
        // gives the rows back.
        statements.push(format!("truncate {}", POSTGRESQL.table_name(table)?));
    }
    let begun = async {
        connection.simple_command(&statements.join("; ")).await?;
        describe_table(connection, table).await
    }
    .await;
    match begun {
        Ok(info) => Ok((info, created)),
        Err(error) => {
            let _ = end_load(connection, false, created.as_deref()).await;
            Err(error)
        }
    }
}

/// Ends the unit: commits it, or rolls everything back (the created table
/// too, dropping the one `created` before the transaction).
pub(crate) async fn end_load(
    connection: &mut Connection,
    commit: bool,
    created: Option<&str>,
) -> Result<(), Error> {
    let mut sql = String::from(if commit { "commit" } else { "rollback" });
    if let (false, Some(table)) = (commit, created) {
        sql.push_str(&format!("; drop table if exists {table}"));
    }
    connection.simple_command(&sql).await.map(drop)
}

/// The `CREATE TABLE` for `spec`, named `table`.
pub(crate) fn create_table(table: &str, spec: &TableSpec) -> Result<String, Error> {
    let own = POSTGRESQL.shares_types_with(spec.dialect);
    let mut parts: Vec<String> = spec
        .columns
        .iter()
        .map(|column| {
            let mut definition = format!(
                "{} {}",
                escape_identifier(&column.column.name),
                column_type(column, own)
            );
            if column.not_null {
                definition.push_str(" not null");
            }
            definition
        })
        .collect();
    if !spec.primary_key.is_empty() {
        let keys: Vec<String> = spec
            .primary_key
            .iter()
            .map(|key| escape_identifier(key))
            .collect();
        parts.push(format!("primary key ({})", keys.join(", ")));
    }
    Ok(format!(
        "create table {} ({})",
        POSTGRESQL.table_name(table)?,
        parts.join(", ")
    ))
}

/// A column's type: the source's own when it is PostgreSQL (as its table
/// declares it, or a query's type name with a numeric's shape), else mapped.
fn column_type(spec: &ColumnSpec, own: bool) -> String {
    let column = &spec.column;
    match (&spec.declared_type, own) {
        (Some(declared), true) => declared.clone(),
        (None, true) => match (column.type_name.as_str(), column.decimal) {
            ("numeric", Some(shape)) => numeric(shape),
            ("_numeric", Some(shape)) => format!("{}[]", numeric(shape)),
            // A catalog name (`int8`, `_text`, an enum's), quoted because some
            // need it (`"char"` is not `char`).
            (name, _) => escape_identifier(name),
        },
        // 2^64 - 1 does not fit a bigint: an unsigned 64-bit integer takes
        // all 20 digits of a numeric.
        (_, false) if column.kind == Kind::Integer && column.type_name == "bigint unsigned" => {
            "numeric(20,0)".into()
        }
        (_, false) => mapped_type(&column.kind, column.decimal),
    }
}

fn numeric(shape: DecimalShape) -> String {
    format!("numeric({},{})", shape.precision, shape.scale)
}

/// The PostgreSQL type a column of another database's `kind` becomes (the type
/// mappings in docs/src/types.md).
pub(crate) fn mapped_type(kind: &Kind, decimal: Option<DecimalShape>) -> String {
    match kind {
        Kind::Bool => "boolean".into(),
        Kind::Integer => "bigint".into(),
        Kind::Float => "double precision".into(),
        Kind::Decimal => decimal.map_or_else(|| "numeric".into(), numeric),
        Kind::Text | Kind::Other => "text".into(),
        Kind::Bytes => "bytea".into(),
        Kind::Date => "date".into(),
        Kind::Time => "time".into(),
        Kind::TimeTz => "timetz".into(),
        Kind::Timestamp => "timestamp".into(),
        Kind::TimestampTz => "timestamptz".into(),
        Kind::Interval => "interval".into(),
        Kind::Array(element) if !matches!(**element, Kind::Array(_) | Kind::Composite(_)) => {
            format!("{}[]", mapped_type(element, decimal))
        }
        // Documents, and what only a document can hold: nested values.
        Kind::Json | Kind::Array(_) | Kind::Composite(_) => "jsonb".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::connect::{Dialect, Family};
    use sluice_core::Column;

    const MARIADB: Dialect =
        Dialect::new("MariaDB", Family::new("MariaDB and MySQL")).with_identifier_quote('`');

    fn spec(columns: Vec<ColumnSpec>, dialect: Dialect) -> TableSpec {
        TableSpec {
            columns,
            primary_key: vec!["id".into()],
            dialect,
        }
    }

    fn column(name: &str, kind: Kind, type_name: &str, declared: Option<&str>) -> ColumnSpec {
        ColumnSpec {
            column: Column::new(name, kind, type_name),
            declared_type: declared.map(str::to_owned),
            not_null: name == "id",
        }
    }

    #[test]
    fn a_postgresql_source_keeps_its_own_types() {
        let shape = DecimalShape {
            precision: 10,
            scale: 3,
        };
        let mut total = column("total", Kind::Decimal, "numeric", None);
        total.column = total.column.with_decimal(Some(shape));
        let columns = vec![
            column("id", Kind::Integer, "int8", Some("bigint")),
            column("amount", Kind::Decimal, "numeric", Some("numeric(12,2)")),
            column("code", Kind::Text, "char", None),
            total,
        ];
        assert_eq!(
            create_table("t", &spec(columns.clone(), POSTGRESQL)).unwrap(),
            "create table \"t\" (\"id\" bigint not null, \"amount\" numeric(12,2), \
             \"code\" \"char\", \"total\" numeric(10,3), primary key (\"id\"))"
        );
        // The name is read as PostgreSQL reads a name, and quoted again.
        let created = create_table(r#"Shop."Big ""Deal""""#, &spec(columns.clone(), POSTGRESQL));
        assert!(created
            .unwrap()
            .starts_with(r#"create table "shop"."Big ""Deal""" ("#),);
        for refused in ["t (x int); drop table t; --", "a b", "a.b.c.d", "\"open"] {
            assert!(
                create_table(refused, &spec(columns.clone(), POSTGRESQL)).is_err(),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn another_database_s_kinds_are_mapped() {
        let columns = vec![
            column("id", Kind::Integer, "int(11)", Some("int(11)")),
            column("tags", Kind::Array(Box::new(Kind::Text)), "x", None),
            column("doc", Kind::Json, "json", None),
            column("at", Kind::TimestampTz, "timestamp", None),
            column("raw", Kind::Other, "bit(3)", None),
            column("big", Kind::Integer, "bigint unsigned", None),
        ];
        assert_eq!(
            create_table("t", &spec(columns, MARIADB)).unwrap(),
            "create table \"t\" (\"id\" bigint not null, \"tags\" text[], \"doc\" jsonb, \
             \"at\" timestamptz, \"raw\" text, \"big\" numeric(20,0), primary key (\"id\"))"
        );
    }
}
