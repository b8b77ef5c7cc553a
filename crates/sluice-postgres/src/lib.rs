//! # sluice-postgres
//!
//! A lean PostgreSQL client for streaming, written on the `postgres-protocol` crate's
//! message codecs. It exists beside tokio-postgres because sluice needs what that
//! driver does not expose:
//!
//! - a result format chosen **per column** (binary for `bytea`, the server's text
//!   output for everything else, so every type, even unknown ones, has a faithful
//!   rendering and CSV matches `COPY` byte for byte);
//! - rows parsed straight from the socket buffer into a [`sluice_core::Batch`],
//!   without a per-row allocation;
//! - portal fetches (`--fetch-size`) and one-execute streaming on the same code path;
//! - every byte through a [`sluice_core::MeteredStream`], so round trips are counted.
//!
//! One file per operation, as in rust-postgres: [`connection`] (startup and
//! authentication), [`query`] (streaming a query's rows), [`copy_in`] and
//! [`import`](mod@import) (bulk loading), [`cancel`], [`types`] (type OIDs to
//! [`sluice_core::Kind`]), [`gateway`] (a pool of sessions behind the gateway's
//! database trait, with [`privileges`]), [`driver`] (the crate behind
//! `sluice_core::connect`'s traits), [`config`] and [`error`].
#![warn(missing_docs)]

pub mod binary_encode;
pub mod cancel;
pub mod config;
pub mod connection;
mod conninfo;
pub mod copy_in;
pub mod copy_in_binary;
mod ddl;
mod dialect;
pub mod driver;
pub mod error;
pub mod gateway;
pub mod import;
pub mod lob;
mod passfile;
pub mod pipeline;
mod pool;
pub mod privileges;
pub mod query;
mod rows;
mod session;
mod split;
pub mod tls;
pub mod types;

pub use cancel::CancelToken;
pub use config::Config;
pub use connection::Connection;
pub use copy_in::CopyIn;
pub use copy_in_binary::CopyInBinary;
pub use driver::PostgresDriver;
pub use import::{describe_table, import_rows, locate_refused_row};
pub use pipeline::{CallOutcome, ParamSet, ParamSource, Pipeline, PipelineSummary, Transaction};
pub use query::{QueryOptions, QueryStream};
