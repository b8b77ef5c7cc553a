//! # sluice-mariadb
//!
//! A MariaDB and MySQL client for streaming, written on `mysql_common`'s
//! packets and authentication plugins (the protocol without I/O, as
//! `postgres-protocol` is for the PostgreSQL crate). It exists beside
//! `mysql_async` because sluice needs what that driver does not give:
//!
//! - every byte through a [`sluice_core::MeteredStream`] at the socket, so
//!   round trips are counted the same way as for PostgreSQL;
//! - rows parsed in place from the socket buffer into a [`sluice_core::Batch`]
//!   (one copy per value, no allocation per row or value);
//! - prepare and execute sent together on MariaDB (one round trip a query),
//!   cursors (`COM_STMT_FETCH`) on the same code path as streaming.
//!
//! One file per operation: [`connection`] (greeting, login, session
//! settings), [`query`] (a result streamed into batches), [`cancel`]
//! (`KILL QUERY` from a second session), `types` (column types to
//! [`sluice_core::Kind`] and values to canonical bytes), [`driver`] (the crate
//! behind `sluice_core::connect`'s traits), [`config`] and [`tls`] (the URL's settings); `protocol` and
//! `wire` hold the packet framing and encodings, `geometry` spatial values.
#![warn(missing_docs)]

pub mod calls;
pub mod cancel;
pub mod config;
pub mod connection;
mod ddl;
mod dialect;
pub mod driver;
mod error;
pub mod gateway;
mod geometry;
pub mod import;
mod large_row;
mod moment;
mod protocol;
pub mod query;
mod sql;
pub mod tls;
mod types;
mod wire;

pub use cancel::CancelToken;
pub use config::Config;
pub use connection::{Connection, ServerInfo};
pub use driver::MariaDbDriver;
pub use query::{QueryOptions, QueryStream};
