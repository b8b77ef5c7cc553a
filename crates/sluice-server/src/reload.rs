//! The router of the configuration in force.
//!
//! [`LiveApp`] is the gateway's [`Live`] state (which a reload replaces,
//! SIGHUP for `sluice serve`) with the HTTP router made from it: the router is
//! made again, once, for the first request after a reload. Requests in flight
//! finish on the state they started with: a stream is never cut by a reload.

use std::sync::{Arc, Mutex};

use axum::Router;
use sluice_gateway::{AppState, Config, Live, Reloaded};

use crate::app::app;

/// The state and router that new requests get; cheap to clone.
#[derive(Clone)]
pub struct LiveApp {
    live: Live,
    /// The router of the state it was made for.
    router: Arc<Mutex<(AppState, Router)>>,
}

impl From<AppState> for LiveApp {
    fn from(state: AppState) -> LiveApp {
        LiveApp::new(Live::new(state))
    }
}

impl From<Live> for LiveApp {
    fn from(live: Live) -> LiveApp {
        LiveApp::new(live)
    }
}

impl LiveApp {
    /// Serves `live`'s state over HTTP.
    pub fn new(live: Live) -> LiveApp {
        let state = live.state();
        let router = app(state.clone());
        LiveApp {
            live,
            router: Arc::new(Mutex::new((state, router))),
        }
    }

    /// The state new requests get.
    pub fn state(&self) -> AppState {
        self.live.state()
    }

    /// The gateway's live state, which other front ends share.
    pub fn live(&self) -> &Live {
        &self.live
    }

    /// The router new requests go through, made for the state in force.
    pub fn router(&self) -> Router {
        let state = self.live.state();
        let mut cached = self
            .router
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if !cached.0.is(&state) {
            *cached = (state.clone(), app(state));
        }
        cached.1.clone()
    }

    /// [`Live::reload`]: the next request gets the new configuration's router.
    pub async fn reload(&self, config: Config) -> Result<Reloaded, Vec<String>> {
        self.live.reload(config).await
    }
}
