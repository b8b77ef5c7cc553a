//! # sluice-server
//!
//! `sluice serve`'s HTTP front end: it streams **named SQL queries** to clients
//! as NDJSON, JSON, CSV, Arrow or Parquet, in memory bounded by configuration
//! rather than by result size or client speed, cancelling a query on the
//! database as soon as its client goes away, and never letting a failed stream
//! look complete. The policy (configuration, tokens, limits, the databases, the
//! request log and metrics) is `sluice-gateway`'s, which Arrow Flight shares;
//! this crate is what HTTP adds.
//!
//! - `uri`: the query string and the `{name}` in routes, decoded strictly;
//! - `stream`: a result as a response body, its endings, its log line;
//! - `ingest`: `POST /tables/{name}`, bulk import of a request body;
//! - `batch`: `POST /queries/{name}/batch`, many calls of a named query, pipelined
//!   (`batch_array`: its JSON-array form);
//! - `app`: routes and handlers over the gateway's state; `error`: the error
//!   responses; `auth`: the bearer token from the `Authorization` header, and
//!   the `Host` check; `openapi`: `/openapi.json`;
//! - `server`: the accept loop and graceful shutdown; `reload`: the router of
//!   the configuration in force; `connection`: one connection, its timeouts and
//!   its reset on a cut body;
//! - [`demo`]: the zero-setup SQLite demo.
//!
//! Only what the CLI uses is public: [`demo`] and the few items re-exported
//! below; the rest is the server's own.
#![warn(missing_docs)]

mod app;
mod auth;
mod batch;
mod batch_array;
mod body;
mod connection;
pub mod demo;
mod error;
mod ingest;
mod openapi;
mod reload;
mod server;
mod stream;
mod uri;

pub use app::app;
pub use error::AppError;
pub use reload::LiveApp;
pub use server::serve;
