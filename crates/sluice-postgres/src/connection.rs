//! [`Connection`]: one authenticated session, its buffers and its metered socket.
//!
//! This file owns the socket, startup and authentication; the message exchange
//! every operation of the crate goes through is in two parts: `wire` (encoding
//! requests, moving bytes, framing and decoding answers) and `exchange` (prepare,
//! end an exchange, run a command, small queries). The buffers are private to the two:
//! other modules speak to the server only through the exchange operations.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use sluice_core::{Error, ErrorKind, Meter, MeteredStream};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::config::{Config, Target};
use crate::error::db_error;
use crate::CancelToken;

mod exchange;
mod wire;

pub(crate) use exchange::{tag_count, text_values};
pub(crate) use wire::Received;

/// Free space asked of the read buffer before each socket read.
const READ_CHUNK: usize = 256 * 1024;

/// A TCP or Unix-domain socket.
#[derive(Debug)]
pub enum Socket {
    /// TCP.
    Tcp(TcpStream),
    /// Unix-domain.
    Unix(UnixStream),
}

impl Socket {
    /// Opens a socket to `target`, within `config.connect_timeout`.
    pub async fn open(target: &Target, config: &Config) -> Result<Socket, Error> {
        let connect = async {
            match target {
                Target::Tcp(host, port) => {
                    let stream = TcpStream::connect((host.as_str(), *port)).await?;
                    stream.set_nodelay(true)?;
                    Ok(Socket::Tcp(stream))
                }
                Target::Unix(path) => UnixStream::connect(path).await.map(Socket::Unix),
            }
        };
        match tokio::time::timeout(config.connect_timeout, connect).await {
            Ok(Ok(socket)) => Ok(socket),
            Ok(Err(error)) => Err(Error::new(
                ErrorKind::Connect,
                format!("could not connect to {target}: {error}"),
            )
            .with_source(error)),
            Err(_) => Err(Error::new(
                ErrorKind::Connect,
                format!(
                    "could not connect to {target}: timed out after {:?}",
                    config.connect_timeout
                ),
            )),
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_read(context, buffer),
            Socket::Unix(stream) => Pin::new(stream).poll_read(context, buffer),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_write(context, buffer),
            Socket::Unix(stream) => Pin::new(stream).poll_write(context, buffer),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_flush(context),
            Socket::Unix(stream) => Pin::new(stream).poll_flush(context),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_shutdown(context),
            Socket::Unix(stream) => Pin::new(stream).poll_shutdown(context),
        }
    }
}

/// What the server says of a prepared statement.
#[derive(Debug, Default)]
pub(crate) struct Description {
    /// Number of parameters.
    pub parameters: usize,
    /// The type the server inferred for each parameter.
    pub parameter_types: Vec<crate::types::Oid>,
    /// Result columns: name and type OID.
    pub columns: Vec<(String, crate::types::Oid)>,
}

/// Files an error the server sent while logging in under the kind a caller acts on:
/// refused credentials or an unknown role are authentication failures, anything
/// else (unknown database, too many connections, shutting down) a connection failure.
fn login_error(error: Error) -> Error {
    match error.code() {
        Some(code) if code.starts_with("28") => error.with_kind(ErrorKind::Authentication),
        Some(_) => error.with_kind(ErrorKind::Connect),
        None => error,
    }
}

/// An authenticated session, idle and ready for a query.
#[derive(Debug)]
pub struct Connection {
    stream: MeteredStream<Socket>,
    /// Bytes received and not yet consumed; rows are decoded from it in place.
    read_buffer: BytesMut,
    /// Messages encoded and not yet sent: several leave in one write.
    write_buffer: BytesMut,
    target: Target,
    process_id: i32,
    secret_key: i32,
    server_version: String,
}

impl Connection {
    /// Connects, authenticates (trust, password, MD5 or SCRAM-SHA-256) and waits until
    /// the server is ready. Traffic is counted by `meter` from the first byte.
    pub async fn connect(config: &Config, meter: &Meter) -> Result<Connection, Error> {
        let mut last_error = None;
        for target in &config.targets {
            match Socket::open(target, config).await {
                Ok(socket) => {
                    let mut connection = Connection {
                        stream: meter.wrap(socket),
                        read_buffer: BytesMut::with_capacity(READ_CHUNK),
                        write_buffer: BytesMut::with_capacity(8 * 1024),
                        target: target.clone(),
                        process_id: 0,
                        secret_key: 0,
                        server_version: String::new(),
                    };
                    connection.startup(config).await?;
                    return Ok(connection);
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| Error::config("no host to connect to")))
    }

    async fn startup(&mut self, config: &Config) -> Result<(), Error> {
        let mut parameters: Vec<(&str, &str)> = vec![
            ("user", &config.user),
            ("database", &config.database),
            ("application_name", &config.application_name),
            // Every text form sluice parses assumes UTF-8, ISO dates and the default
            // interval style.
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO"),
            ("IntervalStyle", "postgres"),
            // bytea inside arrays and composites arrives as text: make it hex.
            ("bytea_output", "hex"),
            // Floats as text must round-trip whatever the role's default says (a
            // negative value drops digits): any positive value gives the shortest
            // exact form on PostgreSQL 12+, and 3 the full precision before that.
            ("extra_float_digits", "3"),
        ];
        if let Some(options) = &config.options {
            parameters.push(("options", options));
        }
        for (name, value) in &config.settings {
            parameters.push((name, value));
        }
        frontend::startup_message(parameters.iter().copied(), &mut self.write_buffer)
            .map_err(Error::io)?;
        self.send().await?;
        self.authenticate(config).await?;
        loop {
            match self.read_message().await? {
                Message::BackendKeyData(body) => {
                    self.process_id = body.process_id();
                    self.secret_key = body.secret_key();
                }
                Message::ParameterStatus(body) => {
                    if body.name().map_err(Error::io)? == "server_version" {
                        self.server_version = body.value().map_err(Error::io)?.to_owned();
                    }
                }
                Message::ReadyForQuery(_) => return Ok(()),
                Message::NoticeResponse(_) => {}
                Message::ErrorResponse(body) => return Err(login_error(db_error(&body))),
                _ => return Err(Error::protocol("unexpected message during startup")),
            }
        }
    }

    async fn authenticate(&mut self, config: &Config) -> Result<(), Error> {
        let password = || {
            config.password.as_deref().ok_or_else(|| {
                Error::new(
                    ErrorKind::Authentication,
                    format!(
                        "the server asks user {:?} for a password, but none was given \
                         (put it in the URL or PGPASSWORD)",
                        config.user
                    ),
                )
            })
        };
        match self.read_login_message().await? {
            Message::AuthenticationOk => return Ok(()),
            Message::AuthenticationCleartextPassword => {
                frontend::password_message(password()?, &mut self.write_buffer)
                    .map_err(Error::io)?;
            }
            Message::AuthenticationMd5Password(body) => {
                let hash = md5_hash(config.user.as_bytes(), password()?, body.salt());
                frontend::password_message(hash.as_bytes(), &mut self.write_buffer)
                    .map_err(Error::io)?;
            }
            Message::AuthenticationSasl(body) => {
                let mut mechanisms = body.mechanisms();
                let mut supported = false;
                while let Some(mechanism) =
                    fallible_iterator::FallibleIterator::next(&mut mechanisms).map_err(Error::io)?
                {
                    supported |= mechanism == sasl::SCRAM_SHA_256;
                }
                if !supported {
                    return Err(Error::new(
                        ErrorKind::Authentication,
                        "the server offers no SASL mechanism sluice supports (SCRAM-SHA-256)",
                    ));
                }
                let mut scram =
                    sasl::ScramSha256::new(password()?, sasl::ChannelBinding::unsupported());
                frontend::sasl_initial_response(
                    sasl::SCRAM_SHA_256,
                    scram.message(),
                    &mut self.write_buffer,
                )
                .map_err(Error::io)?;
                self.send().await?;
                match self.read_login_message().await? {
                    Message::AuthenticationSaslContinue(body) => {
                        scram.update(body.data()).map_err(|error| {
                            Error::new(ErrorKind::Authentication, format!("SCRAM: {error}"))
                        })?
                    }
                    _ => return Err(Error::protocol("expected SASL continuation")),
                }
                frontend::sasl_response(scram.message(), &mut self.write_buffer)
                    .map_err(Error::io)?;
                self.send().await?;
                match self.read_login_message().await? {
                    Message::AuthenticationSaslFinal(body) => {
                        scram.finish(body.data()).map_err(|error| {
                            Error::new(ErrorKind::Authentication, format!("SCRAM: {error}"))
                        })?
                    }
                    _ => return Err(Error::protocol("expected SASL final message")),
                }
                return match self.read_login_message().await? {
                    Message::AuthenticationOk => Ok(()),
                    _ => Err(Error::protocol("expected authentication to complete")),
                };
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::Authentication,
                    "the server asks for an authentication method sluice does not support \
                     (supported: trust, password, md5, scram-sha-256)",
                ))
            }
        }
        self.send().await?;
        match self.read_login_message().await? {
            Message::AuthenticationOk => Ok(()),
            _ => Err(Error::protocol("expected authentication to complete")),
        }
    }

    /// The next message while logging in. The server may refuse at any step (too
    /// many clients before it even asks for a password, a wrong password after it):
    /// its `ErrorResponse` becomes the error, with the server's own message and
    /// SQLSTATE, rather than a complaint about an unexpected message.
    async fn read_login_message(&mut self) -> Result<Message, Error> {
        match self.read_message().await.map_err(login_error)? {
            Message::ErrorResponse(body) => Err(login_error(db_error(&body))),
            message => Ok(message),
        }
    }

    /// Checks, without waiting and without a round trip, that an idle session is
    /// still usable: its socket is open and the server has sent nothing unasked
    /// (an idle session only hears from the server when it is being shut down, e.g.
    /// `FATAL 57P01` on a restart). Connection pools call this before reusing a
    /// session; any error means: discard it.
    pub fn check_idle(&mut self) -> Result<(), Error> {
        if !self.read_buffer.is_empty() {
            return Err(Error::protocol("unread data on an idle session"));
        }
        let mut probe = [0u8; 256];
        let read = match self.stream.get_ref() {
            Socket::Tcp(stream) => stream.try_read(&mut probe),
            Socket::Unix(stream) => stream.try_read(&mut probe),
        };
        match read {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Ok(0) => Err(Error::new(
                ErrorKind::Closed,
                "the database server closed the idle connection",
            )),
            Ok(_) => Err(Error::new(
                ErrorKind::Closed,
                "the database server sent a message to an idle session (it is shutting down)",
            )),
            Err(error) => Err(Error::io(error)),
        }
    }

    /// A handle that can cancel this session's running query from elsewhere.
    pub fn cancel_token(&self) -> CancelToken {
        CancelToken::new(self.target.clone(), self.process_id, self.secret_key)
    }

    /// The server's backend process ID (as in `pg_stat_activity.pid`).
    pub fn process_id(&self) -> i32 {
        self.process_id
    }

    /// The server's version string.
    pub fn server_version(&self) -> &str {
        &self.server_version
    }

    /// The meter counting this connection's traffic.
    pub fn meter(&self) -> &Meter {
        self.stream.meter()
    }

    /// Says goodbye and closes the socket.
    pub async fn close(mut self) {
        frontend::terminate(&mut self.write_buffer);
        let _ = self.send().await;
        let _ = self.stream.shutdown().await;
    }
}
