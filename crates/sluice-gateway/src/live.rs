//! The configuration replaced while serving (`sluice serve` does it on SIGHUP).
//!
//! [`Live`] holds the state that new requests get, whichever front end they
//! come through; a reload
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

use crate::config::Config;
use crate::state::AppState;

/// The state that new requests get; cheap to clone, shared by the front ends.
#[derive(Clone)]
pub struct Live {
    current: Arc<RwLock<AppState>>,
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

impl From<AppState> for Live {
    fn from(state: AppState) -> Live {
        Live::new(state)
    }
}

impl Live {
    /// Serves `state`.
    pub fn new(state: AppState) -> Live {
        Live {
            current: Arc::new(RwLock::new(state)),
        }
    }

    /// The state new requests get.
    pub fn state(&self) -> AppState {
        self.current
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
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
        *self
            .current
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = next;
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
