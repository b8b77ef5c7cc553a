//! [`QueryStream`]: one query's rows, streamed from the socket into batches.
//!
//! The exchange, with the round trips it costs:
//!
//! 1. `Parse` + `Describe` + `Flush`: the server checks the SQL and reports the
//!    parameter and column types (1 trip; one more per level of nesting when a
//!    column has a type outside the built-in table, looked up in `pg_type`).
//! 2. `Bind` with per-column result formats (binary for `bytea`, text otherwise) and
//!    `Execute`:
//!    - default, streaming: `Execute` without a row limit and `Sync` in the same
//!      write; the whole result then flows in one trip, and TCP flow control holds
//!      the server back whenever the consumer is slower (constant trips in N);
//!    - with a fetch size F: `Execute(F)` + `Flush`, and another `Execute(F)` each
//!      time the server reports `PortalSuspended`, then `Sync` (⌊N/F⌋ + 3 trips).
//!
//! The rows themselves are read by `crate::rows`, straight out of the read buffer into a reused
//! [`Batch`]; memory is one read buffer plus one batch, whatever the row count.

use std::sync::Arc;

use sluice_core::{Batch, BatchSource, Chunk, Encoding, Error, Schema};

use crate::connection::statements::Prepared;
use crate::connection::Connection;
use crate::lob::LobInline;
use crate::rows::RowStream;
pub use crate::rows::{LARGE_ROW_BYTES, PIECE_BYTES};
use crate::types::{self, Oid};

/// How to run a query.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Values for `$1`, `$2`, … in order, as text the server converts to each
    /// parameter's type (as psql does); `None` is SQL NULL. Default: none.
    pub params: Vec<Option<String>>,
    /// Rows per round trip through a portal; `None` (the default) streams the whole
    /// result from one `Execute`.
    pub fetch_size: Option<u32>,
    /// Read every `oid` column as a large object and hand over its bytes in place
    /// of the OID, in the same query (see [`crate::lob`]). Default: false.
    pub lob_inline: bool,
    /// Ask for the binary result format where it is the binary form of
    /// [`sluice_core::value`] (`types::sends_binary`) and mark those columns
    /// [`Encoding::Binary`]; not with `lob_inline`, whose rewritten rows are
    /// text. Default: false.
    pub binary_values: bool,
    /// Ask for every column in the binary result format and mark them all
    /// [`Encoding::Native`], when every column's type is a built-in one
    /// (`types::portable_binary`); otherwise as without it. Takes precedence
    /// over `binary_values`; not with `lob_inline`. Default: false.
    pub native_values: bool,
    /// Keep the statement prepared on the session and reuse it the next time
    /// the same SQL runs there, so a repeated query costs one round trip, not
    /// two (see `connection::statements`). Not with `lob_inline`, whose rows
    /// come from a statement of its own. Default: false, the unnamed statement.
    pub reuse_statement: bool,
}

/// A running query; read it through [`BatchSource::next_batch`] (or, with large
/// objects inline, [`BatchSource::next_chunk`]).
#[derive(Debug)]
pub struct QueryStream {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    /// The rows as the server sends them.
    Rows(RowStream),
    /// Rows of the rewritten query, reassembled around their large objects.
    LargeObjects(LobInline),
}

impl QueryStream {
    /// Prepares `sql`, binds `options.params` and starts the result flowing.
    ///
    /// Errors the server reports here (syntax, unknown table, wrong parameter count
    /// or type) come back with their SQLSTATE and position; the connection is then
    /// dropped.
    pub async fn start(
        mut connection: Connection,
        sql: &str,
        options: QueryOptions,
    ) -> Result<QueryStream, Error> {
        connection.cancel_asked().clear();
        let reuse = options.reuse_statement && !options.lob_inline;
        let (described, statement) = match connection.statements.get(sql).filter(|_| reuse) {
            Some(prepared) => cached(&mut connection, &prepared, &options).await?,
            None => describe(&mut connection, sql, &options, reuse).await?,
        };
        let Described { oids, mut schema } = described;
        let lob_inline = options.lob_inline && oids.contains(&crate::lob::OID);
        if lob_inline {
            crate::lob::prepare(&mut connection, sql, &oids).await?;
            schema = Arc::new(crate::lob::rewritten_schema(Arc::unwrap_or_clone(schema)));
        } else if options.native_values && oids.iter().all(|oid| types::portable_binary(*oid)) {
            schema = Arc::new(all_native(Arc::unwrap_or_clone(schema)));
        } else if options.binary_values {
            schema = Arc::new(binary_where_possible(Arc::unwrap_or_clone(schema), &oids));
        }
        let rows = RowStream::bind(
            connection,
            &statement,
            schema,
            &options.params,
            options.fetch_size,
        )
        .await?;
        let inner = match lob_inline {
            true => Inner::LargeObjects(LobInline::new(rows, &oids)),
            false => Inner::Rows(rows),
        };
        Ok(QueryStream { inner })
    }

    fn rows(&self) -> &RowStream {
        match &self.inner {
            Inner::Rows(rows) => rows,
            Inner::LargeObjects(objects) => objects.rows(),
        }
    }

    /// The server's completion tag (e.g. `SELECT 1000`) once the result is complete.
    pub fn command_tag(&self) -> Option<&str> {
        self.rows().command_tag()
    }

    /// The connection, once the result has been read to the end.
    pub fn into_connection(self) -> Option<Connection> {
        let rows = match self.inner {
            Inner::Rows(rows) => rows,
            Inner::LargeObjects(objects) => objects.into_rows(),
        };
        rows.into_connection()
    }

    /// The connection, for its cancel token or meter.
    pub fn connection(&self) -> &Connection {
        self.rows().connection()
    }
}

impl BatchSource for QueryStream {
    fn schema(&self) -> &Schema {
        match &self.inner {
            Inner::Rows(rows) => rows.schema(),
            Inner::LargeObjects(objects) => objects.schema(),
        }
    }

    async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
        match &mut self.inner {
            Inner::Rows(rows) => rows.next_batch().await,
            Inner::LargeObjects(objects) => objects.next_batch().await,
        }
    }

    async fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        match &mut self.inner {
            Inner::Rows(rows) => rows.next_chunk().await,
            Inner::LargeObjects(objects) => objects.next_chunk().await,
        }
    }
}

/// `schema` with the columns whose type's binary result format is the binary
/// form of [`sluice_core::value`] marked [`Encoding::Binary`]: PostgreSQL sends
/// those values exactly in that form, so rows are still copied verbatim.
fn binary_where_possible(schema: Schema, oids: &[Oid]) -> Schema {
    let columns = schema
        .columns
        .into_iter()
        .zip(oids)
        .map(|(column, oid)| match types::sends_binary(*oid) {
            true => column.with_encoding(Encoding::Binary),
            false => column,
        })
        .collect();
    Schema { columns }
}

/// `schema` with every column marked [`Encoding::Native`]: PostgreSQL's own
/// binary form of each type, for a PostgreSQL target to take unread.
fn all_native(schema: Schema) -> Schema {
    let columns = schema
        .columns
        .into_iter()
        .map(|column| column.with_encoding(Encoding::Native))
        .collect();
    Schema { columns }
}

/// A statement's result columns: their type OIDs and the schema they make
/// (shared with the session's statement cache, so a repeated query copies
/// nothing).
struct Described {
    oids: Arc<[Oid]>,
    schema: Arc<Schema>,
}

/// A statement the session keeps prepared: nothing to ask the server. Also
/// returns the statement's name.
async fn cached(
    connection: &mut Connection,
    prepared: &Prepared,
    options: &QueryOptions,
) -> Result<(Described, String), Error> {
    check_parameter_count(connection, prepared.parameters, options).await?;
    let described = Described {
        oids: prepared.oids.clone(),
        schema: prepared.schema.clone(),
    };
    Ok((described, prepared.name.clone()))
}

/// Prepares and describes `sql` (as a statement the session keeps, when
/// `reuse` and the cache has room; else as the unnamed statement), checks the
/// parameter count and looks up the result columns' types; after an error the
/// exchange is ended. Also returns the statement's name (empty: unnamed).
async fn describe(
    connection: &mut Connection,
    sql: &str,
    options: &QueryOptions,
    reuse: bool,
) -> Result<(Described, String), Error> {
    let name = match reuse {
        true => connection.statements.next_name().unwrap_or_default(),
        false => String::new(),
    };
    let description = match connection.prepare(&name, sql).await {
        Ok(description) => description,
        Err(error) if error.kind() == sluice_core::ErrorKind::Database => {
            return Err(connection.abort_exchange(error).await)
        }
        Err(error) => return Err(error),
    };
    check_parameter_count(connection, description.parameters, options).await?;
    let oids: Arc<[Oid]> = description.columns.iter().map(|(_, oid, _)| *oid).collect();
    let catalog = match connection.resolve_types(&oids).await {
        Ok(catalog) => catalog,
        Err(error) => return Err(connection.abort_exchange(error).await),
    };
    let described = Described {
        oids,
        schema: Arc::new(types::schema_of(&description.columns, &catalog)),
    };
    if !name.is_empty() {
        let prepared = Prepared {
            name: name.clone(),
            parameters: description.parameters,
            oids: described.oids.clone(),
            schema: described.schema.clone(),
        };
        connection.statements.insert(sql, prepared);
    }
    Ok((described, name))
}

/// Refuses a number of values that is not the statement's number of
/// parameters, ending the exchange.
async fn check_parameter_count(
    connection: &mut Connection,
    parameter_count: usize,
    options: &QueryOptions,
) -> Result<(), Error> {
    if options.params.len() != parameter_count {
        let message = format!(
            "the query has {parameter_count} parameter{} but {} value{} given",
            if parameter_count == 1 { "" } else { "s" },
            options.params.len(),
            if options.params.len() == 1 {
                " was"
            } else {
                "s were"
            },
        );
        return Err(connection.abort_exchange(Error::config(message)).await);
    }
    Ok(())
}
