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
//! One file per operation, as in the PostgreSQL crate: [`connection`]
//! (greeting, login, session settings, text-protocol statements),
//! `statement` (prepared statements: prepare, execute, close), [`query`] (a
//! result streamed into batches, its rows read by `rows` and, over 16 MiB,
//! `large_row`), [`calls`] (one statement for many parameter sets),
//! `describe` (a table's columns), [`import`](mod@import) (bulk loading, one
//! file per way rows travel) and `ddl` (a copy's unit of work), [`cancel`]
//! (`KILL QUERY` from a second session), `types` (column types to
//! [`sluice_core::Kind`] and values to canonical bytes), [`gateway`] (a pool
//! of sessions behind the gateway's database trait: `pool`, with
//! [`privileges`]), `session` (core's `Session` on one connection),
//! [`driver`] (the crate behind `sluice_core::connect`'s traits), [`config`]
//! and [`tls`] (the URL's settings), `dialect`, `error`.
//!
//! The wire protocol is in two files and nowhere else: `wire` frames
//! packets on the socket, `protocol` encodes and decodes their payloads
//! without I/O (commands, OK and EOF packets, rows of the text protocol,
//! column definitions), so that what speaks it from the other end can reuse
//! them; `geometry` reads spatial values.
#![warn(missing_docs)]

pub mod calls;
pub mod cancel;
pub mod config;
pub mod connection;
mod ddl;
mod describe;
mod dialect;
pub mod driver;
mod error;
pub mod gateway;
mod geometry;
pub mod import;
mod large_row;
mod moment;
mod pool;
pub mod privileges;
mod protocol;
pub mod query;
mod rows;
mod session;
mod sql;
mod statement;
pub mod tls;
mod types;
mod wire;

pub use cancel::CancelToken;
pub use config::Config;
pub use connection::{Connection, ServerInfo};
pub use driver::MariaDbDriver;
pub use query::{QueryOptions, QueryStream};
