//! PostgreSQL's way into TLS: an `SSLRequest` answered `S` or `N`, then the
//! handshake (sluice-tls) on the same socket.

use std::sync::Arc;

use postgres_protocol::message::frontend;
use sluice_core::{Error, ErrorKind, MeteredStream};
pub(crate) use sluice_tls::Transport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Socket;
use crate::config::{Config, Target};

/// What an `SSLRequest` was answered with.
pub(crate) enum Negotiated {
    /// The server speaks TLS: the handshake is done.
    Tls(Transport),
    /// The server does not do TLS: the plain stream, unchanged.
    Refused(MeteredStream<Socket>),
    /// The server agreed, but the handshake failed (the stream is spent).
    Failed(Error),
}

/// `SSLRequest`'s code (PostgreSQL's `NEGOTIATE_SSL_CODE`).
const SSL_REQUEST_CODE: i32 = 80_877_103;

/// Asks the server for TLS on `stream` and, if it agrees, performs the
/// handshake with `client`, checking the certificate against `target`'s name.
pub(crate) async fn negotiate(
    mut stream: MeteredStream<Socket>,
    target: &Target,
    client: &Arc<rustls::ClientConfig>,
) -> Result<Negotiated, Error> {
    let mut request = bytes::BytesMut::with_capacity(8);
    frontend::ssl_request(&mut request);
    debug_assert_eq!(&request[4..8], SSL_REQUEST_CODE.to_be_bytes());
    stream.write_all(&request).await.map_err(Error::io)?;
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer).await.map_err(|error| {
        Error::new(
            ErrorKind::Connect,
            format!("{target} closed the connection when asked for TLS: {error}"),
        )
    })?;
    match answer[0] {
        b'S' => {}
        b'N' => return Ok(Negotiated::Refused(stream)),
        other => {
            return Err(Error::new(
                ErrorKind::Protocol,
                format!("{target} answered the TLS request with {other:#04x}, not S or N"),
            ))
        }
    }
    let name = match target {
        Target::Tcp(host, _) => sluice_tls::server_name(Some(host))?,
        // libpq checks a socket's certificate against "localhost".
        Target::Unix(_) => sluice_tls::server_name(None)?,
    };
    let keywords = &crate::tls::KEYWORDS;
    Ok(
        match sluice_tls::handshake(stream, client, name, target, keywords).await {
            Ok(transport) => Negotiated::Tls(transport),
            Err(error) => Negotiated::Failed(error),
        },
    )
}

/// Opens a socket to `target` within the configured connect timeout.
pub(crate) async fn open_socket(target: &Target, config: &Config) -> Result<Socket, Error> {
    match target {
        Target::Tcp(host, port) => {
            Socket::tcp_with(host, *port, target, config.connect_timeout, &config.tcp).await
        }
        Target::Unix(path) => Socket::unix(path, target, config.connect_timeout).await,
    }
}
