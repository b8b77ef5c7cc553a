//! Large objects inline: `--lob inline` hands over each large object's bytes in
//! place of its OID, inside the same query, at a constant number of round trips.
//!
//! The locator pattern the seeds warn about (fetch the row, then call
//! `lo_open`/`loread` per object: two or more round trips per row) is replaced by
//! one rewritten query. Each object is read on the server in 1 MiB pieces by a
//! lateral subquery, so the result carries one row per piece:
//!
//! ```sql
//! select q.<columns…>, p.sluice_column, p.sluice_offset, p.sluice_piece
//! from (<query>) as q(<names>)
//! left join lateral (
//!   select 3 as sluice_column, o as sluice_offset, lo_get(q.c3, o, 1048576) as sluice_piece
//!   from generate_series(0, greatest(<size of q.c3> - 1, 0), 1048576) as o
//!   where q.c3 is not null
//!   union all …                                  -- one branch per large-object column
//! ) as p on true
//! ```
//!
//! A new original row begins where the pieces stop continuing the previous ones
//! (a lower column, an offset back at 0, or a row without objects), so no row
//! number is needed. `LobInline`, a source wrapped around the rewritten query's
//! rows, reassembles the pieces into the original rows and hands each
//! row over value by value ([`sluice_core::Chunk`]), so an object of any size, even
//! beyond `bytea`'s 1 GB limit, streams through in bounded memory. Every `oid`
//! column of the query is taken to hold large-object references.

use std::collections::VecDeque;

use postgres_protocol::message::backend::Message;
use sluice_core::{Batch, BatchSource, Chunk, Column, Error, Kind, Schema};

use crate::connection::Connection;
use crate::error::db_error;
use crate::rows::RowStream;
use crate::types::Oid;
use postgres_protocol::escape::escape_identifier;

/// The `oid` type, whose columns `--lob inline` reads as large objects.
pub const OID: Oid = 26;

/// Bytes of a large object read per piece.
const PIECE: u32 = 1024 * 1024;

/// The query that returns the pieces of every large object of `sql`'s rows.
pub(crate) fn rewrite(sql: &str, column_oids: &[Oid]) -> String {
    let names: Vec<String> = (1..=column_oids.len())
        .map(|index| escape_identifier(&format!("sluice_c{index}")))
        .collect();
    let branches: Vec<String> = column_oids
        .iter()
        .enumerate()
        .filter(|(_, oid)| **oid == OID)
        .map(|(index, _)| {
            let column = format!("q.{}", names[index]);
            format!(
                "select {index}::int4 as sluice_column, o as sluice_offset, \
                 pg_catalog.lo_get({column}, o, {PIECE}) as sluice_piece \
                 from pg_catalog.generate_series(0::int8, greatest(pg_catalog.lo_lseek64(\
                 pg_catalog.lo_open({column}, 262144), 0, 2) - 1, 0), {PIECE}) as o \
                 where {column} is not null"
            )
        })
        .collect();
    let columns: Vec<String> = names.iter().map(|name| format!("q.{name}")).collect();
    format!(
        "select {}, p.sluice_column, p.sluice_offset, p.sluice_piece \
         from ({sql}\n) as q({}) \
         left join lateral ({}) as p on true",
        columns.join(", "),
        names.join(", "),
        branches.join(" union all ")
    )
}

/// A step of a reassembled row, waiting to be handed over.
#[derive(Debug, Clone)]
enum Pending {
    RowStart,
    /// A value of another column of the row, taken when it was queued (the
    /// next row's values may already have replaced the stored ones).
    Stored(usize, Option<Vec<u8>>),
    /// A large-object column without an object (NULL).
    Null(usize),
    ValueStart(usize),
    /// The piece in row `row` of the current batch.
    Piece {
        column: usize,
        row: usize,
    },
    ValueEnd(usize),
    RowEnd,
}

/// Reassembly state of a query run with large objects inline.
#[derive(Debug)]
struct LobPlan {
    /// For each user column, whether it holds large objects.
    lob_columns: Vec<bool>,
    pending: VecDeque<Pending>,
    /// Values of the current row's other columns.
    stored: Vec<Option<Vec<u8>>>,
    /// Whether a row is under way, and the column and offset of its last piece
    /// (`None`: the row has no objects).
    in_row: bool,
    last_piece: Option<(usize, u64)>,
    /// The large-object column whose pieces are flowing.
    open: Option<usize>,
    /// The next user column to hand over.
    next_column: usize,
    /// The next row of the current batch to read.
    cursor: usize,
    finished: bool,
    /// The stored value last handed over (a chunk borrows it).
    handed: Option<Vec<u8>>,
}

impl LobPlan {
    fn new(column_oids: &[Oid]) -> LobPlan {
        LobPlan {
            lob_columns: column_oids.iter().map(|oid| *oid == OID).collect(),
            pending: VecDeque::new(),
            stored: vec![None; column_oids.len()],
            in_row: false,
            last_piece: None,
            open: None,
            next_column: 0,
            cursor: 0,
            finished: false,
            handed: None,
        }
    }

    /// Queues the columns before `until` that have not been handed over yet.
    fn catch_up(&mut self, until: usize) {
        while self.next_column < until {
            let column = self.next_column;
            self.pending.push_back(if self.lob_columns[column] {
                Pending::Null(column)
            } else {
                Pending::Stored(column, self.stored[column].clone())
            });
            self.next_column += 1;
        }
    }

    fn close_value(&mut self) {
        if let Some(column) = self.open.take() {
            self.pending.push_back(Pending::ValueEnd(column));
            self.next_column = column + 1;
        }
    }

    fn close_row(&mut self) {
        if self.in_row {
            self.close_value();
            self.catch_up(self.lob_columns.len());
            self.pending.push_back(Pending::RowEnd);
            self.in_row = false;
        }
    }

    /// Reads internal row `index` of `batch` (user columns…, sluice_column,
    /// sluice_offset, sluice_piece) into pending steps.
    fn read(&mut self, batch: &Batch, index: usize) -> Result<(), Error> {
        let row = batch.row(index);
        let users = self.lob_columns.len();
        let number = |bytes: Option<&[u8]>| -> Result<Option<u64>, Error> {
            bytes
                .map(|bytes| {
                    std::str::from_utf8(bytes)
                        .ok()
                        .and_then(|text| text.parse().ok())
                        .ok_or_else(|| Error::protocol("bad large-object piece position"))
                })
                .transpose()
        };
        let piece = match (number(row.get(users))?, number(row.get(users + 1))?) {
            (Some(column), Some(offset)) => Some((column as usize, offset)),
            _ => None,
        };
        let continues = match (self.last_piece, piece) {
            (Some((last_column, last_offset)), Some((column, offset))) => {
                column > last_column || (column == last_column && offset > last_offset)
            }
            _ => false,
        };
        if !self.in_row || !continues {
            self.close_row();
            for column in 0..users {
                self.stored[column] = row.get(column).map(<[u8]>::to_vec);
            }
            self.next_column = 0;
            self.in_row = true;
            self.pending.push_back(Pending::RowStart);
        }
        self.last_piece = piece;
        let Some((column, _)) = piece else {
            // No large object in this row at all.
            return Ok(());
        };
        if self.open != Some(column) {
            self.close_value();
            self.catch_up(column);
            self.pending.push_back(Pending::ValueStart(column));
            self.open = Some(column);
        }
        self.pending
            .push_back(Pending::Piece { column, row: index });
        Ok(())
    }
}

/// Replaces the unnamed statement, just described, by the rewritten query;
/// after an error the exchange is ended.
pub(crate) async fn prepare(
    connection: &mut Connection,
    sql: &str,
    column_oids: &[Oid],
) -> Result<(), Error> {
    connection.encode_parse("", &rewrite(sql, column_oids))?;
    connection.encode_flush();
    connection.send().await?;
    match connection.read_message().await? {
        Message::ParseComplete => Ok(()),
        Message::ErrorResponse(body) => Err(connection.abort_exchange(db_error(&body)).await),
        _ => Err(Error::protocol("unexpected message while preparing")),
    }
}

/// The columns of the rewritten query given the user's: theirs (the OID
/// columns as the server's text), then the piece columns.
pub(crate) fn rewritten_schema(mut user: Schema) -> Schema {
    let column = |name: &str, kind: Kind, type_name: &str| Column::new(name, kind, type_name);
    user.columns.extend([
        column("sluice_column", Kind::Integer, "int4"),
        column("sluice_offset", Kind::Integer, "int8"),
        column("sluice_piece", Kind::Bytes, "bytea"),
    ]);
    user
}

/// The rows of the rewritten query, handed over as the user's rows value by
/// value, each large object in its pieces.
#[derive(Debug)]
pub(crate) struct LobInline {
    rows: RowStream,
    /// The user's columns, large-object columns as bytes.
    schema: Schema,
    plan: LobPlan,
}

impl LobInline {
    /// Wraps the rows of the rewritten query of a query with these column types.
    pub(crate) fn new(rows: RowStream, column_oids: &[Oid]) -> LobInline {
        let mut schema = Schema {
            columns: rows.schema().columns[..column_oids.len()].to_vec(),
        };
        for (column, oid) in schema.columns.iter_mut().zip(column_oids) {
            if *oid == OID {
                column.kind = Kind::Bytes;
                column.type_name = "lo".into();
            }
        }
        LobInline {
            rows,
            schema,
            plan: LobPlan::new(column_oids),
        }
    }

    /// The rows underneath.
    pub(crate) fn rows(&self) -> &RowStream {
        &self.rows
    }

    /// The rows underneath, for their connection.
    pub(crate) fn into_rows(self) -> RowStream {
        self.rows
    }

    /// Turns a pending step into the chunk it stands for.
    fn hand_over(&mut self, step: Pending) -> Chunk<'_> {
        match step {
            Pending::RowStart => Chunk::RowStart,
            Pending::Stored(column, value) => {
                self.plan.handed = value;
                Chunk::Value {
                    column,
                    value: self.plan.handed.as_deref(),
                }
            }
            Pending::Null(column) => Chunk::Value {
                column,
                value: None,
            },
            Pending::ValueStart(column) => Chunk::ValueStart { column },
            Pending::Piece { column, row } => {
                let piece = self.plan.lob_columns.len() + 2;
                Chunk::Piece {
                    column,
                    bytes: self.rows.current_batch().row(row).get(piece).unwrap_or(&[]),
                }
            }
            Pending::ValueEnd(column) => Chunk::ValueEnd { column },
            Pending::RowEnd => Chunk::RowEnd,
        }
    }
}

impl BatchSource for LobInline {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
        Err(Error::config(
            "large objects inline are handed over value by value: read them with next_chunk",
        ))
    }

    async fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        loop {
            if let Some(step) = self.plan.pending.pop_front() {
                return Ok(Some(self.hand_over(step)));
            }
            if self.plan.cursor < self.rows.current_batch().num_rows() {
                let index = self.plan.cursor;
                self.plan.cursor += 1;
                self.plan.read(self.rows.current_batch(), index)?;
                continue;
            }
            if self.plan.finished {
                return Ok(None);
            }
            match self.rows.next_batch().await? {
                Some(_) => self.plan.cursor = 0,
                None => {
                    self.plan.close_row();
                    self.plan.finished = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rewrite_reads_every_oid_column_in_pieces() {
        let sql = rewrite("select id, doc from files", &[23, OID]);
        assert!(
            sql.contains("from (select id, doc from files\n) as q(\"sluice_c1\", \"sluice_c2\")"),
            "{sql}"
        );
        assert!(sql.contains("select 1::int4 as sluice_column"), "{sql}");
        assert!(!sql.contains("select 0::int4"), "{sql}");
        assert!(sql.contains("lo_get(q.\"sluice_c2\", o, 1048576)"), "{sql}");
    }
}
