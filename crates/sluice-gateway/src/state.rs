//! [`AppState`]: what every request shares, whichever front end it came through — the configuration, the databases,
//! the tokens, the shutdown signal and the tasks still cancelling queries — and
//! the health check over the databases. Handlers take it; it knows no routes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_core::Schema;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::{Auth, Credential, Need};
use crate::config::{Config, QueryConfig, SqlConfig};
use crate::db::{Database, StartError};
use crate::error::GatewayError;
use crate::request::RequestContext;

/// Everything the handlers share; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    databases: BTreeMap<String, Database>,
    auth: Auth,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    /// Each named query's result columns, as its database described them when
    /// the start-up checks prepared it (missing until they have).
    described: Mutex<HashMap<String, Arc<Schema>>>,
}

impl AppState {
    /// State for `config`. No connection is made yet.
    pub fn new(config: Config) -> AppState {
        crate::metrics::handle();
        let databases = config
            .databases
            .iter()
            .map(|(name, database)| (name.clone(), Database::new(database)))
            .collect();
        AppState::assemble(
            config,
            databases,
            &Auth::default(),
            CancellationToken::new(),
            TaskTracker::new(),
        )
    }

    /// The state of `config` over `databases`, its tokens carrying over what
    /// `previous` knew of them, sharing `shutdown` and `tracker`.
    fn assemble(
        config: Config,
        databases: BTreeMap<String, Database>,
        previous: &Auth,
        shutdown: CancellationToken,
        tracker: TaskTracker,
    ) -> AppState {
        AppState {
            inner: Arc::new(Inner {
                auth: previous.carried_over(config.tokens.clone()),
                config,
                databases,
                shutdown,
                tracker,
                described: Mutex::default(),
            }),
        }
    }

    /// State for a reloaded `config`, sharing this one's shutdown signal and
    /// cancel tasks: a database whose settings are unchanged keeps its pool
    /// (and its idle connections), a token its running limits; the rest is new.
    /// Requests in flight keep what they hold of the old state.
    pub fn reconfigured(&self, config: Config) -> AppState {
        let databases = config
            .databases
            .iter()
            .map(|(name, database)| {
                let kept = self
                    .inner
                    .databases
                    .get(name)
                    .filter(|_| {
                        self.inner.config.databases[name].fingerprint == database.fingerprint
                    })
                    .cloned();
                (
                    name.clone(),
                    kept.unwrap_or_else(|| Database::new(database)),
                )
            })
            .collect();
        AppState::assemble(
            config,
            databases,
            &self.inner.auth,
            self.inner.shutdown.clone(),
            self.inner.tracker.clone(),
        )
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Named query `name`'s result columns, once the start-up checks have
    /// prepared it on a database that can describe them.
    pub fn described_columns(&self, name: &str) -> Option<Arc<Schema>> {
        self.described().get(name).cloned()
    }

    pub(crate) fn set_described_columns(&self, name: &str, columns: Schema) {
        self.described().insert(name.to_owned(), Arc::new(columns));
    }

    fn described(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Schema>>> {
        // The map is replaced whole per entry: a panic cannot leave it half written.
        self.inner
            .described
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Cancelled when the shutdown grace period is over: streams still running abort.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }

    /// Tracks the cancel requests sent for abandoned queries.
    pub fn tracker(&self) -> TaskTracker {
        self.inner.tracker.clone()
    }

    /// True when bearer tokens are configured.
    pub fn auth_enabled(&self) -> bool {
        self.inner.auth.enabled()
    }

    /// The bearer tokens.
    pub fn auth(&self) -> &Auth {
        &self.inner.auth
    }

    /// True when at least one configured database may be written to (SQLite is
    /// served read-only).
    pub fn has_writable_database(&self) -> bool {
        self.inner
            .databases
            .values()
            .any(|database| !database.kind().read_only())
    }

    /// The databases by their configured names.
    pub fn databases(&self) -> impl Iterator<Item = (&String, &Database)> {
        self.inner.databases.iter()
    }

    /// True when `other` is this very state (not a reloaded one): a front end
    /// keeps what it derives from a state until the state is replaced.
    pub fn is(&self, other: &AppState) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The configured database `name` (an internal error when there is none:
    /// the configuration names only databases it has).
    pub fn database(&self, name: &str) -> Result<&Database, GatewayError> {
        self.inner
            .databases
            .get(name)
            .ok_or_else(|| GatewayError::Internal(format!("no database {name:?}")))
    }

    /// The named query `name`, once the request's token may run it (its grant
    /// recorded in `context`). An unknown name is "not found" for everyone,
    /// but only after the token check, so tokens reveal nothing.
    pub fn admit_query(
        &self,
        credential: Credential<'_>,
        name: &str,
        context: &mut RequestContext,
    ) -> Result<&QueryConfig, GatewayError> {
        let grant = self.auth().admit(credential, Need::Query(name))?;
        let Some(query) = self.config().queries.get(name) else {
            return Err(GatewayError::NotFound(format!("no query named {name:?}")));
        };
        context.admit(grant);
        Ok(query)
    }

    /// `[sql]`, once the request's token may run ad-hoc SQL (its grant
    /// recorded in `context`); `None`, before any token check, when ad-hoc SQL
    /// is off (each front end says so its own way).
    pub fn admit_sql(
        &self,
        credential: Credential<'_>,
        context: &mut RequestContext,
    ) -> Result<Option<&SqlConfig>, GatewayError> {
        let Some(sql) = &self.config().sql else {
            return Ok(None);
        };
        context.admit(self.auth().admit(credential, Need::Sql)?);
        Ok(Some(sql))
    }
}

impl AppState {
    /// Runs `select 1` on every database (at most 5 s each): whether all are
    /// usable, and each one's status (`ok`, `busy`, `unavailable`, `timeout`).
    /// A database whose every session is in use is `busy` at once: the check
    /// never queues for a session (`pool_wait`), so clients holding them all
    /// cannot slow it down.
    pub async fn health(&self) -> (bool, BTreeMap<String, &'static str>) {
        let mut healthy = true;
        let mut statuses = BTreeMap::new();
        for (name, database) in &self.inner.databases {
            let usage = database.usage();
            if usage.in_use >= usage.size {
                statuses.insert(name.clone(), "busy");
                continue;
            }
            let status = match tokio::time::timeout(Duration::from_secs(5), database.check()).await
            {
                Ok(Ok(())) => "ok",
                // Busy is not broken: every connection is streaming.
                Ok(Err(StartError::Busy)) => "busy",
                Ok(Err(error)) => {
                    tracing::warn!(database = %name, error = ?error, "health check failed");
                    healthy = false;
                    "unavailable"
                }
                Err(_) => {
                    healthy = false;
                    "timeout"
                }
            };
            statuses.insert(name.clone(), status);
        }
        (healthy, statuses)
    }
}
