//! [`MariaDbSession`]: core's [`Session`] on one MariaDB or MySQL
//! connection, of its own (the CLI's commands, through [`crate::driver`]) or
//! taken from a gateway's pool ([`crate::gateway`]); each operation is this
//! crate's own ([`QueryStream`] for exports, `describe` and `import` for
//! loads, [`PreparedCalls`] for calls).

use std::sync::Arc;
use std::time::Duration;

use sluice_core::connect::{
    Calls, Canceller, Dialect, Export, ExportOptions, ImportRequest, Session,
};
use sluice_core::database::{BoxFuture, Param, Query};
use sluice_core::load::{ImportSummary, Scope, TableInfo, TableSetup};
use sluice_core::{Error, ErrorKind, RowError};

use crate::calls::PreparedCalls;
use crate::ddl::{begin_load, end_load, LoadUnit};
use crate::describe::describe_table;
use crate::dialect::param_text;
use crate::import::{import_rows, locate_in_rows};
use crate::pool::PooledSlot;
use crate::{CancelToken, Config, Connection, QueryOptions, QueryStream};

/// Stops a session's statement with `KILL QUERY` from a second session.
struct MariaDbCanceller {
    token: CancelToken,
}

impl Canceller for MariaDbCanceller {
    fn cancel(&self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.token.cancel())
    }
}

/// A session on a connection of its own, for one command.
pub(crate) struct MariaDbSession {
    connection: Connection,
    config: Arc<Config>,
    /// The meter's round trips when the session was taken.
    start: u64,
    /// The pool slot the connection returns to, for a gateway's session.
    slot: Option<PooledSlot>,
    /// The load's unit of work ([`Session::begin_load`]) while one is open:
    /// imports join its transaction.
    load: Option<LoadUnit>,
    /// The wait timeout set on the connection, for the canceller's own waits.
    wait_timeout: Option<Duration>,
}

impl MariaDbSession {
    pub(crate) fn direct(connection: Connection, config: Arc<Config>) -> MariaDbSession {
        MariaDbSession {
            start: connection.meter().snapshot().round_trips,
            connection,
            config,
            slot: None,
            load: None,
            wait_timeout: None,
        }
    }

    /// A session taken from `slot`, its round trips counted from `start`.
    /// Closed, it goes back to the slot; dropped without that (an error, a
    /// client gone), the slot stays empty and the pool discards it.
    pub(crate) fn pooled(
        connection: Connection,
        config: Arc<Config>,
        slot: PooledSlot,
        start: u64,
    ) -> MariaDbSession {
        MariaDbSession {
            connection,
            config,
            start,
            slot: Some(slot),
            load: None,
            wait_timeout: None,
        }
    }

    /// The transaction an import runs in: the load's, when one is open.
    fn scope(&self) -> Scope {
        if self.load.is_some() {
            Scope::Caller
        } else {
            Scope::Own
        }
    }
}

/// Ends `connection`'s use: back into its pool slot, or closed. A connection
/// given up as stalled is closed (without waiting) and its slot left empty,
/// so the pool discards it.
async fn finish(connection: Connection, slot: Option<PooledSlot>) {
    match slot {
        Some(mut slot) if !connection.is_spent() => slot.connection = Some(connection),
        _ => connection.close().await,
    }
}

impl Session for MariaDbSession {
    fn dialect(&self) -> Dialect {
        self.connection.server().dialect()
    }

    fn round_trips(&self) -> u64 {
        self.connection.meter().snapshot().round_trips - self.start
    }

    fn facts(&self) -> Vec<(&'static str, String)> {
        let server = self.connection.server();
        vec![
            ("server", server.description()),
            ("max_allowed_packet", server.max_allowed_packet.to_string()),
            ("imports", server.import_path().to_owned()),
            ("calls", server.calls_path().to_owned()),
        ]
    }

    fn encryption(&self) -> Option<String> {
        self.connection.encryption()
    }

    fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.connection.notices)
    }

    fn canceller(&self) -> Arc<dyn Canceller> {
        Arc::new(MariaDbCanceller {
            token: CancelToken::new(
                (*self.config).clone(),
                self.connection.server().connection_id,
            )
            .with_wait_timeout(self.wait_timeout),
        })
    }

    fn set_wait_timeout(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        self.connection.set_wait_timeout(timeout);
        self.wait_timeout = timeout;
        Ok(())
    }

    fn export(
        self: Box<Self>,
        sql: String,
        options: ExportOptions,
    ) -> BoxFuture<'static, Result<Box<dyn Export>, Error>> {
        Box::pin(async move {
            if options.inline_large_objects {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "{} has no large objects to inline (BLOB values come with their rows)",
                        self.connection.server().dialect()
                    ),
                ));
            }
            let options = QueryOptions {
                params: options.params,
                fetch_size: options.fetch_size,
                zero_dates: self.config.zero_dates,
                binary_values: options.binary_values,
            };
            let stream = QueryStream::start(self.connection, &sql, options).await?;
            let slot = self.slot;
            Ok(Query::export(stream, |stream: QueryStream| {
                let ended: BoxFuture<'static, ()> = Box::pin(async move {
                    // No connection back: the query did not end cleanly, so a
                    // pooled session's slot stays empty and the pool discards it.
                    if let Some(connection) = stream.into_connection() {
                        finish(connection, slot).await;
                    }
                });
                ended
            }))
        })
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
            if self.load.is_some() {
                return Err(Error::config("a load is under way on this session already"));
            }
            let (info, unit) = begin_load(&mut self.connection, table, setup).await?;
            self.load = Some(unit);
            Ok(info)
        })
    }

    fn end_load(&mut self, commit: bool) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            let Some(unit) = self.load.take() else {
                return Err(Error::config("no load is under way on this session"));
            };
            end_load(&mut self.connection, unit, commit).await
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
            let calls =
                PreparedCalls::prepare(&mut self.connection, sql, self.config.zero_dates).await?;
            let calls: Box<dyn Calls + 'a> = Box::new(calls);
            Ok(calls)
        })
    }

    fn param_spelling(&self) -> fn(&Param) -> Option<String> {
        param_text
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut connection = self.connection;
            if let Some(unit) = self.load {
                // A load left open is abandoned, not committed (its table dropped
                // if it made one): a pooled connection goes back without a transaction.
                let _ = end_load(&mut connection, unit, false).await;
            }
            finish(connection, self.slot).await;
        })
    }
}
