//! # sluice-gateway
//!
//! The policy of `sluice serve`, whichever front end a request comes through:
//! HTTP (`sluice-server`) and Arrow Flight (`sluice-flight`) are two front ends
//! over this crate, each with its own wire, its own statuses and its own error
//! mapping; neither uses the other's types.
//!
//! - [`config`]: the TOML file (databases, named queries with typed parameters,
//!   `[sql]`, limits, tokens, `[flight]`), checked before a port opens; each
//!   key defined once, its reference page generated from that definition;
//! - `auth`: bearer tokens ([`Credential`], however a front end carried it)
//!   and what they allow ([`Need`]); `throttle`: each token's `max_concurrent`
//!   and `rate`;
//! - `db`: the configured databases, each a `sluice_core::database::Database`
//!   implemented by its own crate, and queries starting on them;
//! - `state`: [`AppState`], what every request shares, and admission
//!   ([`AppState::admit_query`], [`AppState::admit_sql`]); `live`: [`Live`],
//!   the state replaced on reload; `checks`: start-up checks of named queries
//!   and `[sql]` against the databases;
//! - `error`: [`GatewayError`], the failures a client can see, and [`Class`],
//!   what each means, which a front end words as its own status;
//! - `request`: one request as the log and [`metrics`] see it, its time
//!   limits, and the hand-over of an answer to a slow or departed client;
//! - `accepting`: the listeners' rules (loopback without tokens, the
//!   open-files limit, connection caps, accept back-off, connection
//!   timeouts); `tls`: the certificate both listeners serve, and its reload.
#![warn(missing_docs)]

mod accepting;
mod auth;
mod checks;
pub mod config;
mod db;
mod error;
mod live;
pub mod metrics;
mod request;
mod state;
mod throttle;
mod tls;

pub use accepting::{
    bind, cap_for, effective_listen, open_files_limit, raise_open_files_limit, AcceptBackoff,
    ConnectionSlots, OpenFiles, Slot, Timeouts, LISTEN_BACKLOG,
};
pub use auth::{Auth, Credential, Grant, Need};
pub use checks::{check_when_reachable, Report as CheckReport};
pub use config::{Config, ConfigError};
pub use db::{Database, Reading, StartError};
pub use error::{is_transient, Class, GatewayError, RETRY_AFTER_SECONDS};
pub use live::{Live, Reloaded};
pub use request::{hand_over, Front, NotTaken, RequestContext, Timing};
pub use state::AppState;
pub use tls::{ServerTls, TlsError, TlsFile, TlsFiles, ALPN_HTTP2};
