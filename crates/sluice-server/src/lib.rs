//! # sluice-server
//!
//! `sluice serve`: an HTTP gateway that streams **named SQL queries** to clients
//! as NDJSON, JSON or CSV, in memory bounded by configuration rather than by result
//! size or client speed, cancelling a query on the database as soon as its client
//! goes away, and never letting a failed stream look complete.
//!
//! - [`config`]: the TOML file (databases, named queries with typed parameters,
//!   limits, tokens), checked before the port opens;
//! - parameters: typed and parsed by `sluice_formats::Signature`; `uri`: the query
//!   string and the `{name}` in routes, decoded strictly;
//! - `db`: the configured databases, each a `sluice_core::database::Database`
//!   implemented by its own crate, and queries in flight;
//! - `stream`: a result as a response body, its endings, its log line;
//! - `ingest`: `POST /tables/{name}`, bulk import of a request body;
//! - `batch`: `POST /queries/{name}/batch`, many calls of a named query, pipelined;
//! - `app`: routes and handlers over the shared `state`; `error`: the error
//!   responses; `auth`: bearer tokens and the `Host` check; [`metrics`]:
//!   Prometheus; `openapi`: `/openapi.json`;
//! - `checks`: start-up checks of named queries and `[sql]` against the databases;
//! - `server`: the listener, the loopback rule and graceful shutdown;
//!   `accepting`: the open-files limit, each listener's connection cap and
//!   its back-off when `accept` fails;
//!   `reload`: the configuration replaced while serving (SIGHUP);
//!   `connection`: one connection, its timeouts and its reset on a cut body;
//!   `tls`: HTTPS, its certificate and the certificate's reload;
//! - [`demo`]: the zero-setup SQLite demo.
//!
//! Only what the CLI and the Flight listener use is public: the three modules
//! above that are links, and the few items re-exported below; the rest is the
//! server's own.
#![warn(missing_docs)]

mod accepting;
mod app;
mod auth;
mod batch;
mod body;
mod checks;
pub mod config;
mod connection;
mod db;
pub mod demo;
mod error;
mod ingest;
pub mod metrics;
mod openapi;
mod reload;
mod server;
mod state;
mod stream;
mod throttle;
mod tls;
mod uri;

pub use accepting::{
    cap_for, open_files_limit, raise_open_files_limit, AcceptBackoff, ConnectionSlots, OpenFiles,
    Slot,
};
pub use app::{app, AppState};
pub use auth::Credential;
pub use checks::check_when_reachable;
pub use config::{Config, ConfigError};
pub use connection::Timeouts;
pub use db::Reading;
pub use error::AppError;
pub use reload::LiveApp;
pub use server::{bind, effective_listen, serve};
pub use stream::{hand_over, NotTaken, RequestContext, Timing};
pub use tls::{ServerTls, TlsError, TlsFile, TlsFiles};
