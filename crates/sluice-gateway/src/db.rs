//! The databases behind the server: each configured database is a
//! [`sluice_core::database::Database`] implemented by its own crate (pools,
//! session settings, ad-hoc SQL fencing and statement checks live there), and a
//! query in flight is a [`RunningQuery`].
//!
//! Imports (`POST /tables`) and batches of calls (`POST /batch`) hold a
//! [`Session`] of the database's own ([`Database::session`]) and drive it
//! through core's traits too. The server names no database crate: the
//! configuration opens each URL through `sluice-drivers`' registry, and the
//! resulting target builds its own gateway.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::connect::{PoolOptions, Session};
use sluice_core::database::{self, Access, QueryRequest, RunningQuery, Usage};
use sluice_core::BatchSource;
use sluice_formats::Format;

use crate::config::DatabaseConfig;

/// How a query's values are to be read for its response.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    /// The response's format (binary values for the formats that take them).
    pub format: Format,
    /// Large objects in the place of their references (`lob = "inline"`).
    pub inline_large_objects: bool,
}

impl Default for Reading {
    /// NDJSON, references as they are.
    fn default() -> Reading {
        Reading {
            format: Format::Ndjson,
            inline_large_objects: false,
        }
    }
}

pub use sluice_core::database::{Param, Refusal, StartError, StatementProblem};

/// One configured database; clones share its pool.
#[derive(Clone)]
pub struct Database {
    name: String,
    database: Arc<dyn database::Database>,
}

impl Database {
    /// A database with an empty pool; connections are made on first use, so a
    /// database that is down at start only makes requests fail until it is back.
    pub fn new(config: &DatabaseConfig) -> Database {
        let database = config.target.gateway(PoolOptions {
            size: config.pool_size,
            wait: config.pool_wait,
        });
        Database {
            name: config.name.clone(),
            database,
        }
    }

    /// The database's name in the configuration.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the database is, its placeholders and checks.
    pub fn kind(&self) -> &dyn database::Database {
        &*self.database
    }

    /// Sessions (or query slots) in use, their limit, and requests waiting.
    pub fn usage(&self) -> Usage {
        self.database.usage()
    }

    /// Runs `select 1`, read to the end.
    pub async fn check(&self) -> Result<(), StartError> {
        let mut source = self
            .start(
                "select 1",
                Vec::new(),
                Some(Duration::from_secs(2)),
                Access::Named { read_only: true },
                Reading::default(),
            )
            .await?;
        while source
            .next_batch()
            .await
            .map_err(StartError::classify)?
            .is_some()
        {}
        source.complete();
        Ok(())
    }

    /// Starts `sql` with `params` bound, waiting for a session up to the pool's
    /// wait, its values spelled for `format`.
    pub async fn start(
        &self,
        sql: &str,
        params: Vec<Param>,
        statement_timeout: Option<Duration>,
        access: Access<'_>,
        output: Reading,
    ) -> Result<Box<dyn RunningQuery>, StartError> {
        let request = QueryRequest {
            sql,
            params,
            statement_timeout,
            access,
            binary_values: output.format.reads_binary_values(),
            inline_large_objects: output.inline_large_objects,
        };
        self.database.start(request).await
    }

    /// A session held for one request that drives it itself (an import, a
    /// batch of calls), waiting up to the pool's wait for it, with this
    /// statement timeout and, when `read_only`, read-only transactions; `None`
    /// for databases served read-only.
    pub async fn session(
        &self,
        statement_timeout: Option<Duration>,
        read_only: bool,
    ) -> Option<Result<Box<dyn Session>, StartError>> {
        Some(self.database.session(statement_timeout, read_only)?.await)
    }
}
