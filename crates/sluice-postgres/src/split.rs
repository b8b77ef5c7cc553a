//! A read split into parts for parallel sessions ([`sluice_core::split`]) on
//! PostgreSQL: one exported snapshot (`pg_export_snapshot()`) that every
//! part's session joins with `SET TRANSACTION SNAPSHOT`, and parts cut either
//! by the table's storage (ranges of `ctid` blocks, which PostgreSQL 14 and
//! later read with a TID range scan, touching only their own pages) or by the
//! values of an integer column of a table or query (`split_by`).
//!
//! Storage ranges need no index and split any table evenly by size, which is
//! what copying a whole table wants; the last range has no upper end, so rows
//! on pages added after the size was read are never missed (the snapshot hides
//! them anyway). Before PostgreSQL 14 the same parts are correct but each
//! scans the whole table.
//!
//! A table is read by the one grammar of names
//! ([`sluice_core::connect::TableName`]) and quoted; its size is looked up,
//! and its parts read, by that one quoted name.

use postgres_protocol::escape::{escape_identifier, escape_literal};
use sluice_core::split::{
    boundaries, value_boundaries, ReadPart, SplitRead, SplitRequest, SplitSource,
};
use sluice_core::Error;

use crate::dialect::POSTGRESQL;
use crate::Connection;

/// Begins the coordinator's snapshot transaction and plans the parts. On
/// failure the transaction is rolled back.
pub(crate) async fn split_read(
    connection: &mut Connection,
    request: &SplitRequest,
) -> Result<SplitRead, Error> {
    let planned = plan(connection, request).await;
    if planned.is_err() {
        let _ = connection.simple_command("rollback").await;
    }
    planned
}

async fn plan(connection: &mut Connection, request: &SplitRequest) -> Result<SplitRead, Error> {
    // Repeatable read: the transaction keeps the one snapshot it exports.
    // The planning reads below lock the table (ACCESS SHARE) until the
    // transaction ends; inside a savepoint rolled back afterwards they let
    // go, so a coordinator held for a plan's whole life (Flight's re-readable
    // parts) keeps the snapshot but does not keep DDL on the table waiting.
    // (A snapshot cannot be exported from inside a savepoint.)
    let rows = connection
        .simple_query(
            "begin isolation level repeatable read read only; select pg_export_snapshot()",
        )
        .await?;
    let snapshot = single_value(rows)?;
    connection
        .simple_command("savepoint sluice_planning")
        .await?;
    let parts = planned_parts(connection, request).await?;
    connection
        .simple_command("rollback to savepoint sluice_planning; release savepoint sluice_planning")
        .await?;
    Ok(SplitRead { snapshot, parts })
}

/// The parts of `request`, read in the snapshot's transaction.
async fn planned_parts(
    connection: &mut Connection,
    request: &SplitRequest,
) -> Result<Vec<ReadPart>, Error> {
    let parts = match (&request.source, &request.split_by) {
        (SplitSource::Table(table), None) => {
            storage_parts(connection, table, request.parts).await?
        }
        (SplitSource::Table(table), Some(column)) => {
            let relation = existing_relation(connection, table).await?;
            let sql = format!("select * from {relation}");
            value_parts(connection, &sql, &[], column, request.parts).await?
        }
        (SplitSource::Query { sql, params }, Some(column)) => {
            value_parts(connection, sql, params, column, request.parts).await?
        }
        (SplitSource::Query { .. }, None) => {
            return Err(Error::config(
                "a query is split by the values of one of its integer columns: name the column",
            ))
        }
    };
    Ok(parts)
}

/// The statement a part's session runs first, to read in `snapshot`.
pub(crate) fn join_snapshot(snapshot: &str) -> String {
    format!(
        "begin isolation level repeatable read read only; set transaction snapshot {}",
        escape_literal(snapshot)
    )
}

fn single_value(rows: Vec<Vec<Option<String>>>) -> Result<String, Error> {
    rows.into_iter()
        .next()
        .and_then(|row| row.into_iter().next().flatten())
        .ok_or_else(|| Error::protocol("expected one value from the server"))
}

/// `table` read by the one grammar of names and quoted, checked to exist:
/// the relation the parts' statements name.
async fn existing_relation(connection: &mut Connection, table: &str) -> Result<String, Error> {
    let relation = POSTGRESQL.table_name(table)?.to_string();
    let rows = connection
        .query_rows("select to_regclass($1) is not null", &[Some(&relation)])
        .await?;
    match single_value(rows)?.as_str() {
        "t" => Ok(relation),
        _ => Err(Error::config(format!("table {table:?} does not exist"))),
    }
}

/// Block ranges of the table's storage, read in the snapshot's transaction.
/// Its size is looked up by the very name the parts' statements read.
async fn storage_parts(
    connection: &mut Connection,
    table: &str,
    parts: usize,
) -> Result<Vec<ReadPart>, Error> {
    let relation = POSTGRESQL.table_name(table)?.to_string();
    let rows = connection
        .query_rows(
            "select c.oid::regclass::text, c.relkind::text, \
             (pg_relation_size(c.oid) / current_setting('block_size')::int8)::text \
             from pg_catalog.pg_class c where c.oid = to_regclass($1)",
            &[Some(&relation)],
        )
        .await?;
    let row = rows
        .into_iter()
        .next()
        .ok_or_else(|| Error::config(format!("table {table:?} does not exist")))?;
    let text = |index: usize| row.get(index).cloned().flatten().unwrap_or_default();
    let (name, kind) = (text(0), text(1));
    // Only these keep their rows in pages of their own: a view has none, a
    // partitioned table's rows sit in its partitions' pages.
    if !matches!(kind.as_str(), "r" | "m" | "t") {
        return Err(Error::config(format!(
            "{name} is not a plain table (a view or a partitioned table): \
             split it by the values of one of its integer columns"
        )));
    }
    let blocks: u64 = text(2)
        .parse()
        .map_err(|_| Error::protocol("unexpected table size from the server"))?;
    Ok(storage_ranges(&relation, &boundaries(blocks, parts)))
}

/// One part per range between `cuts` (block numbers): the first without a
/// lower end, the last without an upper one.
fn storage_ranges(table: &str, cuts: &[u64]) -> Vec<ReadPart> {
    let bound = |block: u64| format!("'({block},0)'::tid");
    ranges(cuts)
        .map(|(low, high)| {
            let conditions: Vec<String> = [
                low.map(|block| format!("ctid >= {}", bound(block))),
                high.map(|block| format!("ctid < {}", bound(block))),
            ]
            .into_iter()
            .flatten()
            .collect();
            let filter = match conditions.is_empty() {
                true => String::new(),
                false => format!(" where {}", conditions.join(" and ")),
            };
            ReadPart {
                sql: format!("select * from {table}{filter}"),
                params: Vec::new(),
            }
        })
        .collect()
}

/// The `(low, high)` ends of the ranges between `cuts`, open at both ends.
fn ranges<T: Copy>(cuts: &[T]) -> impl Iterator<Item = (Option<T>, Option<T>)> + '_ {
    (0..=cuts.len()).map(move |index| {
        let low = index.checked_sub(1).map(|before| cuts[before]);
        (low, cuts.get(index).copied())
    })
}

/// Ranges of `column`'s values in the query's result, from its least and
/// greatest value in the snapshot. Rows whose value is NULL go with the first.
async fn value_parts(
    connection: &mut Connection,
    sql: &str,
    params: &[Option<String>],
    column: &str,
    parts: usize,
) -> Result<Vec<ReadPart>, Error> {
    let column = format!("sluice_part.{}", escape_identifier(column));
    let extent = format!(
        "select min({column})::int8::text, max({column})::int8::text from ({sql}) as sluice_part"
    );
    let values: Vec<Option<&str>> = params.iter().map(Option::as_deref).collect();
    let rows = connection.query_rows(&extent, &values).await?;
    let row = rows.into_iter().next().unwrap_or_default();
    let number = |index: usize| -> Result<Option<i64>, Error> {
        match row.get(index).cloned().flatten() {
            None => Ok(None),
            Some(text) => text
                .parse()
                .map(Some)
                .map_err(|_| Error::protocol("unexpected value range from the server")),
        }
    };
    let cuts = match (number(0)?, number(1)?) {
        (Some(low), Some(high)) => value_boundaries(low, high, parts),
        _ => Vec::new(),
    };
    Ok(value_ranges(sql, params, &column, &cuts))
}

/// One part per range between `cuts` (values), each the query filtered to
/// its range, the range's ends bound as parameters after the query's own.
fn value_ranges(sql: &str, params: &[Option<String>], column: &str, cuts: &[i64]) -> Vec<ReadPart> {
    if cuts.is_empty() {
        return vec![ReadPart {
            sql: sql.to_owned(),
            params: params.to_vec(),
        }];
    }
    ranges(cuts)
        .map(|(low, high)| {
            let mut params = params.to_vec();
            let mut placeholder = |value: i64| {
                params.push(Some(value.to_string()));
                format!("${}::int8", params.len())
            };
            let filter = match (low, high) {
                (None, Some(high)) => {
                    format!("({column} < {} or {column} is null)", placeholder(high))
                }
                (Some(low), Some(high)) => {
                    let low = placeholder(low);
                    format!("{column} >= {low} and {column} < {}", placeholder(high))
                }
                (Some(low), None) => format!("{column} >= {}", placeholder(low)),
                (None, None) => unreachable!("a part between cuts has an end"),
            };
            ReadPart {
                sql: format!("select * from ({sql}) as sluice_part where {filter}"),
                params,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_ranges_cover_every_page_once() {
        let parts = storage_ranges("public.t", &[10, 20]);
        let sql: Vec<&str> = parts.iter().map(|part| part.sql.as_str()).collect();
        assert_eq!(
            sql,
            [
                "select * from public.t where ctid < '(10,0)'::tid",
                "select * from public.t where ctid >= '(10,0)'::tid and ctid < '(20,0)'::tid",
                "select * from public.t where ctid >= '(20,0)'::tid",
            ]
        );
        assert_eq!(storage_ranges("t", &[])[0].sql, "select * from t");
    }

    #[test]
    fn value_ranges_bind_their_ends_after_the_query_parameters() {
        let params = vec![Some("settled".to_owned())];
        let parts = value_ranges(
            "select * from p where s = $1",
            &params,
            "sluice_part.\"id\"",
            &[50],
        );
        assert_eq!(parts.len(), 2);
        assert_eq!(
            parts[0].sql,
            "select * from (select * from p where s = $1) as sluice_part \
             where (sluice_part.\"id\" < $2::int8 or sluice_part.\"id\" is null)"
        );
        assert_eq!(
            parts[0].params,
            vec![Some("settled".to_owned()), Some("50".to_owned())]
        );
        assert_eq!(
            parts[1].sql,
            "select * from (select * from p where s = $1) as sluice_part \
             where sluice_part.\"id\" >= $2::int8"
        );
        let whole = value_ranges("select 1", &[], "c", &[]);
        assert_eq!(
            whole,
            vec![ReadPart {
                sql: "select 1".to_owned(),
                params: vec![]
            }]
        );
    }
}
