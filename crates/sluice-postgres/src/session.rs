//! [`PostgresSession`]: core's [`Session`] on one PostgreSQL connection, of
//! its own (the CLI's commands, through [`crate::driver`]) or taken from a
//! gateway's pool ([`crate::gateway`]); each operation is this crate's own
//! ([`QueryStream`] for exports, `import` for loads, [`Pipeline`] for calls).

use std::sync::Arc;
use std::time::Duration;

use sluice_core::calls::{ParamSource, PipelineSummary, Transaction};
use sluice_core::connect::{
    CallReport, Calls, Canceller, Dialect, Export, ExportOptions, ImportRequest, Session,
};
use sluice_core::database::{BoxFuture, Param, Query};
use sluice_core::load::{ImportSummary, TableInfo, TableSetup};
use sluice_core::{Error, RowError, Schema};

use crate::ddl::{begin_load, end_load};
use crate::dialect::{param_text, POSTGRESQL};
use crate::import::{import_rows, locate_in_rows};
use crate::pool::PooledSlot;
use crate::split::{join_snapshot, split_read};
use crate::{describe_table, CancelToken, Config, Connection, Pipeline, QueryOptions, QueryStream};
use sluice_core::load::Scope;
use sluice_core::split::{SplitRead, SplitRequest};

/// Cancels a session's running statement with PostgreSQL's cancel request.
struct PostgresCanceller {
    token: CancelToken,
    config: Arc<Config>,
}

impl Canceller for PostgresCanceller {
    fn cancel(&self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.token.cancel(&self.config))
    }
}

/// A session: a connection of its own for one command, or one taken from a
/// gateway's pool for one request. Closed, a pooled session goes back to its
/// pool; dropped without that (an error, a client gone), it is discarded: its
/// socket closes, so the server rolls back whatever was open.
pub(crate) struct PostgresSession {
    connection: Connection,
    config: Arc<Config>,
    /// The meter's round trips when the session was taken.
    start: u64,
    /// The pool slot the connection returns to, for a pooled session.
    slot: Option<PooledSlot>,
    /// Whether a load's unit of work ([`Session::begin_load`]) is open: its
    /// transaction, which imports join.
    in_load: bool,
    /// The table the open unit created before its transaction (a shared
    /// unit's), to drop if the unit is undone.
    created: Option<String>,
}

impl PostgresSession {
    /// A session on a connection of its own.
    pub(crate) fn direct(connection: Connection, config: Arc<Config>) -> PostgresSession {
        PostgresSession {
            start: connection.meter().snapshot().round_trips,
            connection,
            config,
            slot: None,
            in_load: false,
            created: None,
        }
    }

    /// A session taken from `slot`, its round trips counted from `start` (what
    /// the meter said when the request took it, so settings it needed count).
    pub(crate) fn pooled(
        connection: Connection,
        config: Arc<Config>,
        slot: PooledSlot,
        start: u64,
    ) -> PostgresSession {
        PostgresSession {
            connection,
            config,
            start,
            slot: Some(slot),
            in_load: false,
            created: None,
        }
    }

    /// The transaction an import runs in: the load's, when one is open.
    fn scope(&self) -> Scope {
        if self.in_load {
            Scope::Caller
        } else {
            Scope::Own
        }
    }
}

/// Ends `connection`'s use: back into its pool slot, or closed.
async fn finish(connection: Connection, slot: Option<PooledSlot>) {
    match slot {
        Some(mut slot) => slot.connection = Some(connection),
        None => connection.close().await,
    }
}

impl Session for PostgresSession {
    fn dialect(&self) -> Dialect {
        POSTGRESQL
    }

    fn round_trips(&self) -> u64 {
        self.connection.meter().snapshot().round_trips - self.start
    }

    fn encryption(&self) -> Option<String> {
        self.connection.encryption()
    }

    fn set_wait_timeout(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        self.connection.set_wait_timeout(timeout);
        Ok(())
    }

    fn canceller(&self) -> Arc<dyn Canceller> {
        Arc::new(PostgresCanceller {
            token: self.connection.cancel_token(),
            config: self.config.clone(),
        })
    }

    fn export(
        self: Box<Self>,
        sql: String,
        options: ExportOptions,
    ) -> BoxFuture<'static, Result<Box<dyn Export>, Error>> {
        Box::pin(async move {
            let mut connection = self.connection;
            let in_snapshot = options.snapshot.is_some();
            if let Some(snapshot) = &options.snapshot {
                connection.simple_command(&join_snapshot(snapshot)).await?;
            }
            let options = QueryOptions {
                params: options.params,
                fetch_size: options.fetch_size,
                lob_inline: options.inline_large_objects,
                binary_values: options.binary_values,
                native_values: options.native_values,
                // A CLI export runs its statement once.
                reuse_statement: false,
            };
            let stream = QueryStream::start(connection, &sql, options).await?;
            let slot = self.slot;
            Ok(Query::export(stream, move |stream: QueryStream| {
                let ended: BoxFuture<'static, ()> = Box::pin(async move {
                    // No connection back: the query did not end cleanly, so a
                    // pooled session's slot stays empty and the pool discards it.
                    if let Some(mut connection) = stream.into_connection() {
                        // The snapshot's read-only transaction ends with the read.
                        if in_snapshot && connection.simple_command("rollback").await.is_err() {
                            return;
                        }
                        finish(connection, slot).await;
                    }
                });
                ended
            }))
        })
    }

    fn split_read<'a>(
        &'a mut self,
        request: &'a SplitRequest,
    ) -> BoxFuture<'a, Result<SplitRead, Error>> {
        Box::pin(split_read(&mut self.connection, request))
    }

    fn describe_table<'a>(&'a mut self, table: &'a str) -> BoxFuture<'a, Result<TableInfo, Error>> {
        Box::pin(describe_table(&mut self.connection, table))
    }

    fn begin_load<'a>(
        &'a mut self,
        table: &'a str,
        setup: &'a TableSetup,
    ) -> BoxFuture<'a, Result<TableInfo, Error>> {
        Box::pin(async move {
            if self.in_load {
                return Err(Error::config("a load is under way on this session already"));
            }
            let (info, created) = begin_load(&mut self.connection, table, setup).await?;
            self.in_load = true;
            self.created = created;
            Ok(info)
        })
    }

    fn end_load(&mut self, commit: bool) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            if !std::mem::take(&mut self.in_load) {
                return Err(Error::config("no load is under way on this session"));
            }
            let created = self.created.take();
            end_load(&mut self.connection, commit, created.as_deref()).await
        })
    }

    fn import<'a>(
        &'a mut self,
        request: ImportRequest<'a>,
    ) -> BoxFuture<'a, Result<ImportSummary, Error>> {
        let scope = self.scope();
        Box::pin(import_rows(
            &mut self.connection,
            request.table,
            request.rows,
            request.options,
            request.rejects,
            scope,
        ))
    }

    fn locate_refused_row<'a>(
        &'a mut self,
        request: ImportRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<RowError>, Error>> {
        Box::pin(locate_in_rows(
            &mut self.connection,
            request.table,
            request.rows,
            request.options,
        ))
    }

    fn prepare_calls<'a>(
        &'a mut self,
        sql: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn Calls + 'a>, Error>> {
        Box::pin(async move {
            let pipeline = Pipeline::prepare(&mut self.connection, sql).await?;
            let calls: Box<dyn Calls + 'a> = Box::new(pipeline);
            Ok(calls)
        })
    }

    fn param_spelling(&self) -> fn(&Param) -> Option<String> {
        param_text
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut connection = self.connection;
            if self.in_load {
                // A load left open is abandoned, not committed: a pooled
                // connection goes back without a transaction.
                let _ = end_load(&mut connection, false, self.created.as_deref()).await;
            }
            finish(connection, self.slot).await;
        })
    }
}

impl Calls for Pipeline<'_> {
    fn schema(&self) -> &Schema {
        Pipeline::schema(self)
    }

    fn parameters(&self) -> usize {
        Pipeline::parameters(self)
    }

    fn run<'a>(
        self: Box<Self>,
        source: &'a mut dyn ParamSource,
        mode: Transaction,
        window_bytes: usize,
        report: &'a mut CallReport<'_>,
    ) -> BoxFuture<'a, Result<PipelineSummary, Error>>
    where
        Self: 'a,
    {
        Box::pin((*self).run(source, mode, window_bytes, report))
    }
}
