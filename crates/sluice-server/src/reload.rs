//! The configuration replaced while serving (`sluice serve` does it on SIGHUP).
//!
//! [`LiveApp`] holds the state and router that new requests get; a reload
//! builds the next state from the new configuration
//! ([`AppState::reconfigured`]: unchanged databases keep their pools, tokens
//! their running limits), runs the start-up checks against it, and only then
//! swaps it in. A configuration that does not load or whose checks find a
//! problem is refused and the old one keeps serving. Requests in flight finish
//! on the state they started with: a stream is never cut by a reload.
//!
//! What is bound when the server starts stays until a restart: the listening
//! address, TLS files (reloaded on their own, [`crate::tls`]), worker threads,
//! the connection timeouts, the shutdown grace and `[flight]` (its queries and
//! tokens do follow the reload). A reload that changes one of
//! them says so ([`Reloaded::needs_restart`]).

use std::sync::{Arc, RwLock};

use axum::Router;

use crate::app::{app, AppState};
use crate::config::Config;

/// The state and router that new requests get; cheap to clone.
#[derive(Clone)]
pub struct LiveApp {
    current: Arc<RwLock<(AppState, Router)>>,
}

/// What a reload did.
#[derive(Debug, Default)]
pub struct Reloaded {
    /// Settings that changed but apply only after a restart.
    pub needs_restart: Vec<&'static str>,
    /// Databases that did not answer: their checks run once they do, and what
    /// they find is logged.
    pub unreachable: Vec<String>,
}

impl From<AppState> for LiveApp {
    fn from(state: AppState) -> LiveApp {
        LiveApp::new(state)
    }
}

impl LiveApp {
    /// Serves `state`.
    pub fn new(state: AppState) -> LiveApp {
        let router = app(state.clone());
        LiveApp {
            current: Arc::new(RwLock::new((state, router))),
        }
    }

    /// The state new requests get.
    pub fn state(&self) -> AppState {
        self.read().0.clone()
    }

    /// The router new requests go through.
    pub fn router(&self) -> Router {
        self.read().1.clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, (AppState, Router)> {
        self.current
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Replaces the configuration with `config` once its checks pass; `Err`
    /// lists the problems (each naming the file, line and key), and the old
    /// configuration stays.
    pub async fn reload(&self, config: Config) -> Result<Reloaded, Vec<String>> {
        let old = self.state();
        let needs_restart = restart_only_changes(old.config(), &config);
        let next = old.reconfigured(config);
        let report = next.check_databases().await;
        if !report.problems.is_empty() {
            return Err(report.problems.iter().map(ToString::to_string).collect());
        }
        report.check_unreachable_later(&next);
        let router = app(next.clone());
        *self
            .current
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = (next, router);
        Ok(Reloaded {
            needs_restart,
            unreachable: report.unreachable,
        })
    }
}

/// The `[server]` settings bound at start that differ between `old` and `new`.
fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if old.listen != new.listen {
        changed.push("listen");
    }
    if old.tls != new.tls {
        changed.push("tls_cert/tls_key");
    }
    if old.threads != new.threads {
        changed.push("threads");
    }
    if old.header_read_timeout != new.header_read_timeout {
        changed.push("header_read_timeout");
    }
    if old.keep_alive_timeout != new.keep_alive_timeout {
        changed.push("keep_alive_timeout");
    }
    if old.shutdown_grace != new.shutdown_grace {
        changed.push("shutdown_grace");
    }
    if old.flight != new.flight {
        changed.push("[flight]");
    }
    changed
}
