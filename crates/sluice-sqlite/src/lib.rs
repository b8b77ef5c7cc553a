//! # sluice-sqlite
//!
//! A SQLite [`sluice_core::BatchSource`], so SQLite files stream through the same
//! encoders and the same HTTP gateway as PostgreSQL.
//!
//! SQLite's C API blocks, so each query runs on its own thread ([`SqliteStream`]):
//! rusqlite steps the statement, converts every value into sluice's canonical form
//! (see [`sluice_core::value`]) and hands full batches to the async side through a
//! bounded channel. A slow reader therefore holds the statement back instead of
//! filling memory, and when the reader goes away (the stream is dropped) the
//! statement is interrupted.
//!
//! - [`kind`]: declared column types to [`sluice_core::Kind`]s;
//! - [`describe`]: a table's columns, keys and nullability;
//! - [`convert`]: SQLite values to canonical bytes;
//! - [`stream`]: the thread, the channel and cancellation;
//! - [`gateway`]: a file behind the gateway's database trait, served read-only;
//! - [`driver`]: `sqlite:` URLs for front ends that open databases by URL;
//! - [`demo`]: the demo's database, the one SQLite file sluice writes.
#![warn(missing_docs)]

pub mod convert;
pub mod demo;
pub mod describe;
mod dialect;
pub mod driver;
pub mod gateway;
pub mod kind;
pub mod stream;

pub use driver::SqliteDriver;
pub use stream::{Param, SqliteOptions, SqliteStream};
