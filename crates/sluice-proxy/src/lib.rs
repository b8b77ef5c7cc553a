//! # sluice-proxy
//!
//! A TCP proxy for PostgreSQL that puts a network between client and server on
//! one machine, and watches the protocol go by:
//!
//! - [`shaping`]: delay (half each way), jitter and a bandwidth cap, applied to
//!   every chunk of bytes in order, with sub-millisecond precision;
//! - [`observe`]: reads the PostgreSQL protocol in both directions (never changing
//!   a byte) to count round trips, bytes, executions and rows per statement text
//!   and per connection, and to name the seeds' anti-patterns;
//! - [`Proxy`]: the listener tying them together, with a [`Report`] on demand.
//!
//! It uses plain threads and blocking sockets rather than async I/O because
//! delays of a fraction of a millisecond need a sleeping thread's precision;
//! async timers tick in whole milliseconds. A proxy serves few connections, so a
//! few threads per connection cost nothing that matters.
#![warn(missing_docs)]

pub mod observe;
mod proxy;
pub mod report;
pub mod shaping;

pub use proxy::{Proxy, ProxyHandle};
pub use report::{Finding, Report, StatementStats};
pub use shaping::Shaping;
