//! [`Connection`]: one authenticated session, its buffers and its metered socket.
//!
//! This file owns the socket, startup and authentication; the message exchange
//! every operation of the crate goes through is in three parts: `frames` (encoding
//! requests and framing and decoding answers, without I/O), `wire` (moving bytes
//! between the buffers and the socket, calling `frames`) and `exchange` (prepare,
//! end an exchange, run a command, small queries). The buffers are private to the
//! last two: other modules speak to the server only through the exchange operations.

use std::time::Duration;

use bytes::BytesMut;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::backend::{Message, ParameterStatusBody};
use postgres_protocol::message::frontend;
pub use sluice_core::Socket;
use sluice_core::{Batch, Error, ErrorKind, Meter, WaitLimit};

use crate::passfile::{look_up, Lookup};
use crate::tls::{ChannelBinding, SslMode};
use tokio::io::AsyncWriteExt;

use crate::cancel::CancelAsked;
use crate::config::{Config, SessionAttributes, Target};
use crate::error::db_error;
use crate::CancelToken;

mod exchange;
mod frames;
pub(crate) mod statements;
pub(crate) mod transport;
mod wire;

use transport::{negotiate, open_socket, Negotiated, Transport};

pub(crate) use frames::{tag_count, text_values, Received};

/// Free space asked of the read buffer before each socket read.
const READ_CHUNK: usize = 256 * 1024;

/// The largest batch a session keeps between results (values and field
/// table): a short query's rows fit many times over.
const SPARE_BATCH_BYTES: usize = 256 * 1024;

/// What the server says of a prepared statement.
#[derive(Debug, Default)]
pub(crate) struct Description {
    /// Number of parameters.
    pub parameters: usize,
    /// The type the server inferred for each parameter.
    pub parameter_types: Vec<crate::types::Oid>,
    /// Result columns: name, type OID and type modifier (-1: none), which
    /// holds `numeric(p,s)`'s precision and scale.
    pub columns: Vec<(String, crate::types::Oid, i32)>,
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
    stream: Transport,
    /// Bytes received and not yet consumed; rows are decoded from it in place.
    read_buffer: BytesMut,
    /// Messages encoded and not yet sent: several leave in one write.
    write_buffer: BytesMut,
    target: Target,
    process_id: i32,
    secret_key: i32,
    server_version: String,
    /// The session's `TimeZone`, as the server last reported it.
    time_zone: String,
    /// The session's `IntervalStyle`, likewise.
    interval_style: String,
    /// How long a wait on the server may go without anything moving, and
    /// whether one already timed out (see [`Connection::set_wait_timeout`]).
    wait_limit: WaitLimit,
    /// Statements kept prepared for reuse (the gateway's named queries).
    pub(crate) statements: statements::Statements,
    /// The last finished result's batch, reused by the next result, so that a
    /// pooled session's short queries do not grow a batch from nothing (a
    /// dozen reallocations) every time; see [`Connection::keep_batch`].
    spare_batch: Batch,
    /// Raised by this session's cancel tokens; see [`CancelAsked`].
    cancel_asked: CancelAsked,
}

impl Connection {
    /// Connects, authenticates (trust, password, MD5 or SCRAM-SHA-256, with
    /// channel binding on TLS) and waits until the server is ready, trying each
    /// address in turn (in random order with `load_balance_hosts=random`) until
    /// one accepts and is what `target_session_attrs` asks for. Traffic is
    /// counted by `meter` from the first byte.
    pub async fn connect(config: &Config, meter: &Meter) -> Result<Connection, Error> {
        let mut order: Vec<&Target> = config.targets.iter().collect();
        if config.load_balance_hosts {
            shuffle(&mut order);
        }
        let passes: &[SessionAttributes] = match config.target_session_attrs {
            SessionAttributes::PreferStandby => {
                &[SessionAttributes::Standby, SessionAttributes::Any]
            }
            SessionAttributes::Any => &[SessionAttributes::Any],
            _ => std::slice::from_ref(&config.target_session_attrs),
        };
        let mut last_error = None;
        let mut mismatched = Vec::new();
        for &wanted in passes {
            for &target in &order {
                match Connection::attempt(target, config, meter).await {
                    Ok(mut connection) => {
                        if connection.is(wanted).await? {
                            return Ok(connection);
                        }
                        mismatched.push(target.to_string());
                        connection.close().await;
                    }
                    // The next address may do better; a refused login would not.
                    Err(error) if error.kind() == ErrorKind::Connect => last_error = Some(error),
                    Err(error) => return Err(error),
                }
            }
        }
        if !mismatched.is_empty() {
            let others = last_error.map_or(String::new(), |error| format!("; {error}"));
            return Err(Error::new(
                ErrorKind::Connect,
                format!(
                    "no server matches target_session_attrs={} ({} did not){others}",
                    config.target_session_attrs.name(),
                    mismatched.join(", ")
                ),
            ));
        }
        Err(last_error.unwrap_or_else(|| Error::config("no host to connect to")))
    }

    /// Whether this session is what `wanted` asks for (one query, unless any will do).
    async fn is(&mut self, wanted: SessionAttributes) -> Result<bool, Error> {
        if wanted == SessionAttributes::Any {
            return Ok(true);
        }
        let rows = self
            .simple_query("select pg_is_in_recovery(), current_setting('transaction_read_only')")
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| Error::protocol("no row for the session check"))?;
        let in_recovery = row.first().and_then(Option::as_deref) == Some("t");
        let read_only = row.get(1).and_then(Option::as_deref) == Some("on");
        Ok(match wanted {
            SessionAttributes::ReadWrite => !read_only,
            SessionAttributes::ReadOnly => read_only,
            SessionAttributes::Primary => !in_recovery,
            SessionAttributes::Standby => in_recovery,
            SessionAttributes::Any | SessionAttributes::PreferStandby => true,
        })
    }

    /// One address within `connect_timeout`, from the socket to the server's
    /// first ReadyForQuery: as libpq, the whole login is bounded, so a server
    /// (or a network) that takes the connection and then says nothing is
    /// given up. A connection lost while logging in is a failure to connect
    /// (the next address may do better).
    async fn attempt(target: &Target, config: &Config, meter: &Meter) -> Result<Connection, Error> {
        let limit = config.connect_timeout;
        match tokio::time::timeout(limit, Connection::connect_to(target, config, meter)).await {
            Ok(Err(error)) if error.kind() == ErrorKind::Closed => Err(Error::new(
                ErrorKind::Connect,
                format!("could not connect to {target}: {error}"),
            )
            .with_source(error)),
            Ok(result) => result,
            Err(_) => Err(Error::new(
                ErrorKind::Connect,
                format!(
                    "could not connect to {target}: no complete login within {} \
                     (connect_timeout)",
                    humantime::format_duration(limit)
                ),
            )),
        }
    }

    /// One address, with `sslmode`'s fallbacks: `prefer` goes plain when the
    /// server has no TLS or its handshake fails, `allow` tries TLS when the
    /// server refuses a plain login.
    async fn connect_to(
        target: &Target,
        config: &Config,
        meter: &Meter,
    ) -> Result<Connection, Error> {
        match config.tls.mode {
            SslMode::Disable => Connection::login(target, config, meter, false).await,
            SslMode::Allow => match Connection::login(target, config, meter, false).await {
                Err(error) if refused_without_tls(&error) => {
                    Connection::login(target, config, meter, true).await
                }
                result => result,
            },
            _ => Connection::login(target, config, meter, true).await,
        }
    }

    /// Opens a socket to `target`, asks for TLS when `tls`, and logs in.
    async fn login(
        target: &Target,
        config: &Config,
        meter: &Meter,
        tls: bool,
    ) -> Result<Connection, Error> {
        let socket = meter.wrap(open_socket(target, config).await?);
        let stream = match (&config.tls.client, tls) {
            (Some(client), true) => match negotiate(socket, target, client).await? {
                Negotiated::Tls(transport) => transport,
                Negotiated::Refused(socket) if config.tls.mode.allows_plain() => {
                    Transport::Plain(socket)
                }
                Negotiated::Refused(_) => {
                    return Err(Error::new(
                        ErrorKind::Connect,
                        format!(
                            "{target} does not accept TLS connections, but sslmode={} requires TLS",
                            config.tls.mode.name()
                        ),
                    ))
                }
                // libpq's prefer: a failed handshake is retried without TLS.
                Negotiated::Failed(_) if config.tls.mode == SslMode::Prefer => {
                    Transport::Plain(meter.wrap(open_socket(target, config).await?))
                }
                Negotiated::Failed(error) => return Err(error),
            },
            _ => Transport::Plain(socket),
        };
        let mut connection = Connection {
            stream,
            read_buffer: BytesMut::with_capacity(READ_CHUNK),
            write_buffer: BytesMut::with_capacity(8 * 1024),
            target: target.clone(),
            process_id: 0,
            secret_key: 0,
            server_version: String::new(),
            time_zone: String::new(),
            interval_style: String::new(),
            wait_limit: WaitLimit::default(),
            statements: statements::Statements::default(),
            spare_batch: Batch::default(),
            cancel_asked: CancelAsked::default(),
        };
        connection.startup(config).await?;
        Ok(connection)
    }

    /// An empty batch for rows of `columns` values, with the capacity the
    /// session's last result left.
    pub(crate) fn take_batch(&mut self, columns: usize) -> Batch {
        let mut batch = std::mem::take(&mut self.spare_batch);
        batch.reset(columns);
        batch
    }

    /// Keeps a finished result's batch for the next one, unless it grew past
    /// [`SPARE_BATCH_BYTES`]: an idle pooled session holds no large result.
    pub(crate) fn keep_batch(&mut self, batch: Batch) {
        if batch.capacity_bytes() <= SPARE_BATCH_BYTES {
            self.spare_batch = batch;
        }
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
                // Noted as every message is read (`note_parameter`).
                Message::ParameterStatus(_) => {}
                Message::ReadyForQuery(_) => return Ok(()),
                Message::NoticeResponse(_) => {}
                Message::ErrorResponse(body) => return Err(login_error(db_error(&body))),
                _ => return Err(Error::protocol("unexpected message during startup")),
            }
        }
    }

    async fn authenticate(&mut self, config: &Config) -> Result<(), Error> {
        let message = match self.read_login_message().await? {
            Message::AuthenticationSasl(body) => {
                let mut offered = Vec::new();
                let mut mechanisms = body.mechanisms();
                while let Some(mechanism) =
                    fallible_iterator::FallibleIterator::next(&mut mechanisms).map_err(Error::io)?
                {
                    offered.push(mechanism.to_owned());
                }
                let password = self.password(config)?;
                return self.scram(config, &password, &offered).await;
            }
            Message::AuthenticationOk => None,
            Message::AuthenticationCleartextPassword => Some(self.password(config)?),
            Message::AuthenticationMd5Password(body) => {
                let password = self.password(config)?;
                Some(md5_hash(config.user.as_bytes(), &password, body.salt()).into_bytes())
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::Authentication,
                    "the server asks for an authentication method sluice does not support \
                     (supported: trust, password, md5, scram-sha-256, TLS certificates)",
                ))
            }
        };
        if config.tls.channel_binding == ChannelBinding::Require {
            return Err(Error::new(
                ErrorKind::Authentication,
                "channel_binding=require, but the server authenticated without channel binding \
                 (it needs SCRAM-SHA-256 over TLS)",
            ));
        }
        let Some(message) = message else {
            return Ok(());
        };
        frontend::password_message(&message, &mut self.write_buffer).map_err(Error::io)?;
        self.send().await?;
        match self.read_login_message().await? {
            Message::AuthenticationOk => Ok(()),
            _ => Err(Error::protocol("expected authentication to complete")),
        }
    }

    /// The password the server asked for: the one given, else the password
    /// file's for this host, port, database and user (read only now, when a
    /// server asks: trust and certificate logins never touch the file).
    fn password(&self, config: &Config) -> Result<Vec<u8>, Error> {
        if let Some(password) = &config.password {
            return Ok(password.clone());
        }
        let lookup = match &config.passfile {
            Some(file) => {
                let (host, port) = self.target.host_and_port();
                look_up(file, host, port, &config.database, &config.user)
            }
            None => Lookup::NotFound,
        };
        let ignored = match lookup {
            Lookup::Found(password) => return Ok(password),
            Lookup::Ignored(file) => format!(
                " ({} was not read: it has group or world access; chmod 0600 it)",
                file.display()
            ),
            Lookup::NotFound => String::new(),
        };
        Err(Error::new(
            ErrorKind::Authentication,
            format!(
                "the server asks user {:?} for a password, but none was given{ignored}",
                config.user
            ),
        ))
    }

    /// SCRAM-SHA-256, bound to the TLS channel (`-PLUS`) when on TLS, offered
    /// and not disabled; `channel_binding=require` refuses a login without it.
    async fn scram(
        &mut self,
        config: &Config,
        password: &[u8],
        offered: &[String],
    ) -> Result<(), Error> {
        let plus_offered = offered.iter().any(|name| name == sasl::SCRAM_SHA_256_PLUS);
        let end_point = self
            .stream
            .server_certificate()
            .and_then(crate::tls::server_end_point);
        let (mechanism, binding) = match (config.tls.channel_binding, end_point) {
            (ChannelBinding::Disable, _) => {
                (sasl::SCRAM_SHA_256, sasl::ChannelBinding::unsupported())
            }
            (_, Some(end_point)) if plus_offered => (
                sasl::SCRAM_SHA_256_PLUS,
                sasl::ChannelBinding::tls_server_end_point(end_point),
            ),
            (ChannelBinding::Require, _) => {
                return Err(Error::new(
                    ErrorKind::Authentication,
                    if self.stream.server_certificate().is_none() {
                        "channel_binding=require, but the connection is not TLS".to_owned()
                    } else {
                        "channel_binding=require, but the server does not offer \
                         SCRAM-SHA-256-PLUS for its certificate"
                            .to_owned()
                    },
                ))
            }
            // On TLS the client could bind but the server did not offer it.
            (_, Some(_)) => (sasl::SCRAM_SHA_256, sasl::ChannelBinding::unrequested()),
            (_, None) => (sasl::SCRAM_SHA_256, sasl::ChannelBinding::unsupported()),
        };
        if !offered.iter().any(|name| name == mechanism) {
            return Err(Error::new(
                ErrorKind::Authentication,
                "the server offers no SASL mechanism sluice supports (SCRAM-SHA-256)",
            ));
        }
        let mut scram = sasl::ScramSha256::new(password, binding);
        frontend::sasl_initial_response(mechanism, scram.message(), &mut self.write_buffer)
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
        frontend::sasl_response(scram.message(), &mut self.write_buffer).map_err(Error::io)?;
        self.send().await?;
        match self.read_login_message().await? {
            Message::AuthenticationSaslFinal(body) => {
                scram.finish(body.data()).map_err(|error| {
                    Error::new(ErrorKind::Authentication, format!("SCRAM: {error}"))
                })?
            }
            _ => return Err(Error::protocol("expected SASL final message")),
        }
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
        sluice_core::socket::check_idle(&mut self.stream, !self.read_buffer.is_empty())
    }

    /// A handle that can cancel this session's running query from elsewhere.
    pub fn cancel_token(&self) -> CancelToken {
        CancelToken::new(
            self.target.clone(),
            self.process_id,
            self.secret_key,
            self.stream.encryption().is_some(),
            self.cancel_asked.clone(),
        )
    }

    /// That a cancel was asked for during the statement this session runs
    /// (see [`CancelAsked`]).
    pub(crate) fn cancel_asked(&self) -> &CancelAsked {
        &self.cancel_asked
    }

    /// The server's backend process ID (as in `pg_stat_activity.pid`).
    pub fn process_id(&self) -> i32 {
        self.process_id
    }

    /// The server's version string.
    pub fn server_version(&self) -> &str {
        &self.server_version
    }

    /// The session's `TimeZone` setting (`Etc/UTC`), as the server reports it
    /// at login and after every change; empty before it has.
    pub fn time_zone(&self) -> &str {
        &self.time_zone
    }

    /// The session's `IntervalStyle` (`postgres`), as the server reports it
    /// at login and after every change; empty before it has.
    pub fn interval_style(&self) -> &str {
        &self.interval_style
    }

    /// Keeps the settings the server reports that sluice reads later: its
    /// version, the time zone timestamps without an offset are read in, and
    /// the interval style (which decides what a leading minus means).
    pub(crate) fn note_parameter(&mut self, body: &ParameterStatusBody) -> Result<(), Error> {
        let value = || body.value().map(str::to_owned).map_err(Error::io);
        match body.name().map_err(Error::io)? {
            "server_version" => self.server_version = value()?,
            "TimeZone" => self.time_zone = value()?,
            "IntervalStyle" => self.interval_style = value()?,
            _ => {}
        }
        Ok(())
    }

    /// The TLS protocol and cipher (`TLSv1_3 TLS13_AES_256_GCM_SHA384`), or
    /// `None` for an unencrypted connection.
    pub fn encryption(&self) -> Option<String> {
        self.stream.encryption()
    }

    /// The meter counting this connection's traffic.
    pub fn meter(&self) -> &Meter {
        self.stream.meter()
    }

    /// Gives the server up once a wait on it (for an answer, or for room to
    /// send) sees nothing move for `timeout`; `None` (the default) waits for
    /// ever. A wait that times out fails with an [`ErrorKind::Closed`] error
    /// carrying [`sluice_core::Stalled`], and so does every later one: the
    /// connection is spent.
    pub fn set_wait_timeout(&mut self, timeout: Option<Duration>) {
        self.wait_limit.set(timeout);
    }

    /// Says goodbye and closes the socket (a connection given up as stalled
    /// is only dropped).
    pub async fn close(mut self) {
        frontend::terminate(&mut self.write_buffer);
        let _ = self.send().await;
        let _ = self
            .bounded(async |stream, _, _| stream.shutdown().await.map_err(Error::io))
            .await;
    }
}

/// A plain login the server refused (its `pg_hba.conf` may want TLS), for
/// `sslmode=allow`: as libpq, any refusal is retried with TLS, not only the
/// English wording of one (servers translate their messages).
fn refused_without_tls(error: &Error) -> bool {
    error.code().is_some()
}

/// Fisher–Yates with the standard library's per-process random keys: no
/// random-number crate for a host list of a few entries.
fn shuffle<T>(items: &mut [T]) {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    for index in (1..items.len()).rev() {
        let mut hasher = state.build_hasher();
        hasher.write_usize(index);
        let pick = (hasher.finish() % (index as u64 + 1)) as usize;
        items.swap(index, pick);
    }
}
