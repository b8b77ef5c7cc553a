//! # sluice-server
//!
//! `sluice serve`: an HTTP gateway that streams **named SQL queries** to clients
//! as NDJSON, JSON or CSV, in memory bounded by configuration rather than by result
//! size or client speed, cancelling a query on the database as soon as its client
//! goes away, and never letting a failed stream look complete.
//!
//! - [`config`]: the TOML file (databases, named queries with typed parameters,
//!   limits, tokens), checked before the port opens;
//! - parameters: typed and parsed by `sluice_formats::Signature`; [`uri`]: the query
//!   string and the `{name}` in routes, decoded strictly;
//! - [`db`]: the configured databases, each a `sluice_core::database::Database`
//!   implemented by its own crate, and queries in flight;
//! - [`stream`]: a result as a response body, its endings, its log line;
//! - [`ingest`]: `POST /tables/{name}`, bulk import of a request body;
//! - [`batch`]: `POST /queries/{name}/batch`, many calls of a named query, pipelined;
//! - [`app`](mod@app): routes and handlers over the shared [`state`]; [`error`]: the error responses; [`auth`]:
//!   bearer tokens and the `Host` check; [`metrics`]: Prometheus; [`openapi`]: `/openapi.json`;
//! - [`checks`]: start-up checks of named queries and `[sql]` against the databases;
//! - [`server`]: the listener, the loopback rule and graceful shutdown;
//!   [`accepting`]: the open-files limit, each listener's connection cap and
//!   its back-off when `accept` fails;
//!   [`reload`]: the configuration replaced while serving (SIGHUP);
//!   [`connection`]: one connection, its timeouts and its reset on a cut body;
//!   [`tls`]: HTTPS, its certificate and the certificate's reload;
//! - [`demo`]: the zero-setup SQLite demo.
#![warn(missing_docs)]

pub mod accepting;
pub mod app;
pub mod auth;
pub mod batch;
pub mod body;
pub mod checks;
pub mod config;
pub mod connection;
pub mod db;
pub mod demo;
pub mod error;
pub mod ingest;
pub mod metrics;
pub mod openapi;
pub mod reload;
pub mod server;
pub mod state;
pub mod stream;
pub mod throttle;
pub mod tls;
pub mod uri;

pub use app::{app, AppState};
pub use config::{Config, ConfigError};
pub use error::AppError;
