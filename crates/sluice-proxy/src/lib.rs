//! # sluice-proxy
//!
//! A TCP proxy for PostgreSQL that puts a network between client and server on
//! one machine, and watches the protocol go by:
//!
//! - [`shaping`]: delay (half each way), jitter and a bandwidth cap, applied to
//!   every chunk of bytes in order, with sub-millisecond precision;
//! - [`observe`]: reads the PostgreSQL protocol in both directions (never changing
//!   a byte) to count round trips, bytes, executions and rows per statement
//!   [`fingerprint`] and per connection; [`patterns`] follows a connection's
//!   statements for N+1 queries and chatty sessions, and [`report`] names
//!   what wastes round trips, with the fix;
//! - [`Proxy`]: the listener tying them together, with a [`Report`] on demand;
//!   it admits at most [`DEFAULT_MAX_CONNECTIONS`] clients at once (or the
//!   limit set with [`Proxy::max_connections`]) and refuses the others with a
//!   PostgreSQL error, without reaching the server;
//! - [`fault`]: network failures on purpose (cut a connection at its K-th
//!   `DataRow`, stall it, reset it, refuse new ones, …), given when the proxy
//!   starts or changed at run time through [`ProxyHandle::faults`] or the HTTP
//!   control API (`control`).
//!
//! Connections use plain threads and blocking sockets rather than async I/O
//! because delays of a fraction of a millisecond need a sleeping thread's
//! precision; async timers tick in whole milliseconds. An open connection costs
//! two threads, four when bytes are delayed or rate-limited (see the
//! `connection` module); the connection limit bounds the total.
#![warn(missing_docs)]

mod connection;
mod control;
pub mod fault;
pub mod fingerprint;
pub mod observe;
pub mod patterns;
mod proxy;
mod refusal;
pub mod report;
pub mod shaping;
mod shared;

pub use control::{ControlToken, ControlTokenError};
pub use fault::spec::MAX_DURATION as MAX_FAULT_DURATION;
pub use fault::{Fault, FaultList};
pub use proxy::{Proxy, ProxyHandle, StartError, DEFAULT_MAX_CONNECTIONS};
pub use report::{Finding, FindingKind, Report, StatementStats};
pub use shaping::Shaping;
