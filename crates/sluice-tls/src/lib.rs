//! # sluice-tls
//!
//! TLS from sluice to a database server, on rustls (ring) with no OpenSSL: the
//! part every database crate shares once its own protocol has agreed to TLS.
//!
//! - [`ClientSettings`] → [`client_config`]: which roots to trust, how much of
//!   the server's certificate to check ([`Check`]), a client certificate, a
//!   revocation list; the files are read once, when the settings are built, so
//!   a missing file is a settings error before any connection.
//! - [`Transport`]: the metered socket, plain or inside TLS, under a
//!   connection; [`handshake`] turns one into the other and words a refused
//!   certificate in one line naming the host.
//!
//! How each database asks for TLS (PostgreSQL's `SSLRequest`, MySQL's
//! `CLIENT_SSL` capability) and how its settings are spelled (`sslmode`,
//! `ssl-mode`) stay in the database's crate: [`Keywords`] carries those
//! spellings into this crate's messages.
#![warn(missing_docs)]

mod config;
mod transport;

pub use config::{client_config, Check, ClientSettings, Keywords, Roots};
pub use transport::{handshake, server_name, Transport};
