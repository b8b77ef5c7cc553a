//! The exchanges every operation of the crate is built from: prepare a
//! statement, end an exchange (`Sync`, then read to `ReadyForQuery`) whatever
//! happened in it, run a command, and the small row-returning queries used for
//! catalogs and session settings.
//!
//! Each costs one round trip: requests are encoded (see [`super::wire`]) and
//! leave in one write before the answers are read.

use std::collections::HashSet;

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::Message;
use sluice_core::{Error, ErrorKind};

use super::frames::{tag_count, text_row, text_values};
use super::{Connection, Description};
use crate::error::db_error;
use crate::types::{builtin, parse_catalog_rows, references, Catalog, Oid, CATALOG_QUERY};

impl Connection {
    /// Reads messages until `ReadyForQuery`, returning the first error seen. Used to
    /// bring the session back to idle after a failure.
    pub(crate) async fn drain_until_ready(&mut self) -> Result<(), Error> {
        let mut first_error = None;
        loop {
            match self.read_message().await? {
                Message::ReadyForQuery(_) => break,
                Message::ErrorResponse(body) => {
                    first_error.get_or_insert_with(|| db_error(&body));
                }
                _ => {}
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Ends the extended-protocol exchange under way: `Sync`, then everything up
    /// to `ReadyForQuery`. Returns the first error the server reports.
    pub(crate) async fn sync_and_drain(&mut self) -> Result<(), Error> {
        self.encode_sync();
        self.send().await?;
        self.drain_until_ready().await
    }

    /// Ends the exchange under way whatever `outcome` it had, leaving the session
    /// idle; `outcome`'s own error comes first, then any error of ending it.
    pub(crate) async fn end_exchange<T>(&mut self, outcome: Result<T, Error>) -> Result<T, Error> {
        let ended = self.sync_and_drain().await;
        let value = outcome?;
        ended?;
        Ok(value)
    }

    /// Ends a failed exchange and returns the error that failed it.
    pub(crate) async fn abort_exchange(&mut self, error: Error) -> Error {
        let _ = self.sync_and_drain().await;
        error
    }

    /// Parses `sql` as statement `name` (empty: the unnamed one) and describes it,
    /// in one round trip and without ending the exchange: after an error the
    /// caller must send `Sync`, as after success it must bind or sync.
    pub(crate) async fn prepare(&mut self, name: &str, sql: &str) -> Result<Description, Error> {
        self.encode_parse(name, sql)?;
        self.encode_describe_statement(name)?;
        self.encode_flush();
        self.send().await?;
        let mut description = Description::default();
        loop {
            match self.read_message().await? {
                Message::ParseComplete
                | Message::NoticeResponse(_)
                | Message::ParameterStatus(_) => {}
                Message::ParameterDescription(body) => {
                    description.parameter_types = body.parameters().collect().map_err(Error::io)?;
                    description.parameters = description.parameter_types.len();
                }
                Message::RowDescription(body) => {
                    let mut fields = body.fields();
                    while let Some(field) = fields.next().map_err(Error::io)? {
                        description.columns.push((
                            field.name().to_owned(),
                            field.type_oid(),
                            field.type_modifier(),
                        ));
                    }
                    return Ok(description);
                }
                Message::NoData => return Ok(description),
                Message::ErrorResponse(body) => return Err(db_error(&body)),
                _ => return Err(Error::protocol("unexpected message while preparing")),
            }
        }
    }

    /// Parses `sql` as the unnamed statement and returns the type OID the server
    /// inferred for each of its parameters (`$1` first) and the schema of its
    /// result (types outside the built-in table looked up in the catalog in the
    /// same exchange), leaving the session idle. Nothing runs: this checks SQL
    /// and learns its shape without side effects.
    pub async fn describe(
        &mut self,
        sql: &str,
    ) -> Result<(Vec<crate::types::Oid>, sluice_core::Schema), Error> {
        let described = match self.prepare("", sql).await {
            // The connection itself failed: there is no exchange to end.
            Err(error) if error.kind() != ErrorKind::Database => return Err(error),
            described => described,
        };
        let described = match described {
            Ok(description) => {
                let oids: Vec<_> = description.columns.iter().map(|column| column.1).collect();
                self.resolve_types(&oids).await.map(|catalog| {
                    let schema = crate::types::schema_of(&description.columns, &catalog);
                    (description.parameter_types, schema)
                })
            }
            Err(error) => Err(error),
        };
        self.end_exchange(described).await
    }

    /// Reads a command's answers up to `ReadyForQuery` and returns the row count
    /// of its (last) completion tag (`INSERT 0 5` → 5), or the first error.
    pub(crate) async fn command_result(&mut self) -> Result<u64, Error> {
        let mut count = 0;
        let mut error = None;
        loop {
            match self.read_message().await? {
                Message::CommandComplete(body) => {
                    let tag = body.tag().map_err(Error::io)?;
                    count = tag_count(tag).unwrap_or(0);
                }
                Message::ErrorResponse(body) => {
                    error.get_or_insert_with(|| db_error(&body));
                }
                Message::ReadyForQuery(_) => break,
                _ => {}
            }
        }
        error.map_or(Ok(count), Err)
    }

    /// Runs SQL that returns no rows through the simple protocol and returns the
    /// row count of its (last) completion tag, or the server's first error.
    pub(crate) async fn simple_command(&mut self, sql: &str) -> Result<u64, Error> {
        self.encode_query(sql)?;
        self.send().await?;
        self.command_result().await
    }

    /// Runs SQL through the simple query protocol and returns the rows of its last
    /// statement as text (NULL as `None`). Meant for short catalog and session
    /// commands, not for results of unbounded size.
    pub async fn simple_query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, Error> {
        self.encode_query(sql)?;
        self.send().await?;
        let mut rows = Vec::new();
        let mut error = None;
        loop {
            match self.read_message().await? {
                Message::RowDescription(_) => rows.clear(),
                Message::DataRow(body) => rows.push(text_row(&body)?),
                Message::ErrorResponse(body) => {
                    error.get_or_insert_with(|| db_error(&body));
                }
                Message::ReadyForQuery(_) => break,
                _ => {}
            }
        }
        error.map_or(Ok(rows), Err)
    }

    /// Runs a small query with text parameters (`None` is NULL) and returns its
    /// rows as text, leaving the session idle. For catalog look-ups and the like,
    /// not for results of unbounded size.
    pub async fn query_rows(
        &mut self,
        sql: &str,
        params: &[Option<&str>],
    ) -> Result<Vec<Vec<Option<String>>>, Error> {
        self.extended_rows("", sql, params, true).await
    }

    /// The extended-protocol exchange behind [`Connection::query_rows`]. With
    /// `sync` false it runs inside an exchange the caller has open (a named
    /// `statement` keeps the caller's unnamed one alive) and leaves ending it,
    /// also after an error, to the caller.
    pub(crate) async fn extended_rows(
        &mut self,
        statement: &str,
        sql: &str,
        params: &[Option<&str>],
        sync: bool,
    ) -> Result<Vec<Vec<Option<String>>>, Error> {
        self.encode_parse(statement, sql)?;
        self.encode_bind(statement, [0], text_values(params), [0])?;
        self.encode_execute(0)?;
        if !statement.is_empty() {
            self.encode_close_statement(statement)?;
        }
        if sync {
            self.encode_sync();
        } else {
            self.encode_flush();
        }
        self.send().await?;
        let mut rows = Vec::new();
        let mut error = None;
        loop {
            match self.read_message().await? {
                Message::DataRow(body) => rows.push(text_row(&body)?),
                Message::ErrorResponse(body) => {
                    let failure = db_error(&body);
                    if !sync {
                        return Err(failure);
                    }
                    error.get_or_insert(failure);
                }
                Message::CloseComplete if !sync => break,
                Message::CommandComplete(_) if !sync && statement.is_empty() => break,
                Message::ReadyForQuery(_) if sync => break,
                _ => {}
            }
        }
        error.map_or(Ok(rows), Err)
    }
}

impl Connection {
    /// Looks up every OID outside the built-in table, and the types those refer to,
    /// with one catalog query per level of nesting. Runs inside the caller's exchange
    /// (no `Sync`), through a named statement so an unnamed one survives.
    pub(crate) async fn resolve_types(&mut self, oids: &[Oid]) -> Result<Catalog, Error> {
        let mut catalog = Catalog::new();
        let mut wanted: HashSet<Oid> = oids
            .iter()
            .copied()
            .filter(|oid| builtin(*oid).is_none())
            .collect();
        while !wanted.is_empty() {
            let list = wanted
                .iter()
                .map(|oid| oid.to_string())
                .collect::<Vec<_>>()
                .join(",");
            let array = format!("{{{list}}}");
            let rows = self
                .extended_rows("sluice_type_catalog", CATALOG_QUERY, &[Some(&array)], false)
                .await?;
            let found = parse_catalog_rows(rows)?;
            let mut next = HashSet::new();
            for (oid, entry) in found {
                for reference in references(&entry) {
                    if builtin(reference).is_none()
                        && !catalog.contains_key(&reference)
                        && !wanted.contains(&reference)
                    {
                        next.insert(reference);
                    }
                }
                catalog.insert(oid, entry);
            }
            next.retain(|oid| !catalog.contains_key(oid));
            wanted = next;
        }
        Ok(catalog)
    }
}
