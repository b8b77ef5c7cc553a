//! [`Connection`]: one logged-in session, from the server's greeting through
//! authentication to the session settings sluice relies on.
//!
//! Connecting costs the greeting, the login (one more exchange per
//! authentication step the server asks for) and one pipelined exchange that
//! sets the session and reads what it may do:
//!
//! - `time_zone = '+00:00'`: `TIMESTAMP` values arrive in UTC and are written
//!   with their offset;
//! - `net_write_timeout` and `net_read_timeout` of a year: a streaming server
//!   otherwise drops a reader slower than 60 s per packet, and the rows it had
//!   not sent would be missing from an output that looks complete;
//! - `@@max_allowed_packet`, `@@local_infile` and the server's capabilities
//!   choose how imports and calls travel.
//!
//! Statements sluice runs for itself go through the text protocol here
//! (`simple_query`, `exchange`: several in one round trip); prepared
//! statements are `crate::statement`'s, and the bytes of every packet
//! `crate::protocol`'s.

use mysql_common::auth::plugins::{AuthProc, ChallengeResponsePlugin, Context as AuthContext};
use mysql_common::constants::{CapabilityFlags, MariadbCapabilities};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{
    AuthPlugin, AuthSwitchRequest, HandshakePacket, HandshakeResponse, SslRequest,
};
use mysql_common::proto::{MyDeserialize, MySerialize};
use sluice_core::connect::Dialect;
use sluice_core::{Error, ErrorKind, Meter};

use std::sync::Arc;

use crate::config::{Config, Target};
use crate::dialect::{dialect_of_version, MARIADB};
use crate::error::{server_error, unexpected};
use crate::protocol::{read_lenenc_int, text_row, write_query, OkPacket, COM_QUIT};
use crate::tls::SslMode;
use crate::wire::{open_socket, Wire};

/// What the client asks for, intersected with what the server offers.
fn wanted_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_DEPRECATE_EOF
        | CapabilityFlags::CLIENT_LOCAL_FILES
        | CapabilityFlags::CLIENT_CONNECT_ATTRS
}

/// MariaDB's own extensions sluice uses: bulk execution of one statement for
/// many parameter sets, and column metadata that marks JSON columns.
fn wanted_mariadb_capabilities() -> MariadbCapabilities {
    MariadbCapabilities::MARIADB_CLIENT_STMT_BULK_OPERATIONS
        | MariadbCapabilities::MARIADB_CLIENT_EXTENDED_METADATA
}

/// The largest packet sluice accepts from the server (the protocol's limit).
const MAX_PACKET: u32 = 1 << 30;

/// What the server is and what it lets this session do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// The version string (`10.11.6-MariaDB-0+deb12u1`, `8.0.36`).
    pub version: String,
    /// MariaDB rather than MySQL ([`ServerInfo::dialect`], from the version).
    pub mariadb: bool,
    /// The session's id, as `KILL QUERY` and the process list name it.
    pub connection_id: u32,
    /// The largest packet the server accepts.
    pub max_allowed_packet: u64,
    /// Whether `LOAD DATA LOCAL INFILE` is allowed.
    pub local_infile: bool,
    /// Whether one `COM_STMT_BULK_EXECUTE` can carry many parameter sets.
    pub bulk_execute: bool,
    /// Whether column metadata says which columns hold JSON.
    pub extended_metadata: bool,
}

impl ServerInfo {
    /// How imports send rows on this server.
    pub fn import_path(&self) -> &'static str {
        if self.local_infile {
            "LOAD DATA LOCAL INFILE (local_infile is ON)"
        } else {
            "multi-row INSERTs (local_infile is OFF)"
        }
    }

    /// How a statement without rows runs for many parameter sets here.
    pub fn calls_path(&self) -> &'static str {
        if self.bulk_execute {
            "one COM_STMT_BULK_EXECUTE per window of parameter sets"
        } else {
            "prepared executes sent back to back"
        }
    }

    /// The product and version (`10.11.6-MariaDB-0+deb12u1`, `MySQL 8.0.36`).
    pub fn description(&self) -> String {
        let name = self.dialect().name();
        if self.version.contains(name) {
            self.version.clone()
        } else {
            format!("{name} {}", self.version)
        }
    }

    /// MariaDB or MySQL, as the version says.
    pub fn dialect(&self) -> Dialect {
        dialect_of_version(&self.version)
    }
}

/// A logged-in session.
#[derive(Debug)]
pub struct Connection {
    pub(crate) wire: Wire,
    pub(crate) capabilities: CapabilityFlags,
    server: ServerInfo,
    /// Settings queued to travel with the next command, whose answers (OK
    /// packets) are read before that command's.
    unanswered_settings: usize,
    /// What the user should hear about paths taken (see `Session::take_notices`).
    pub(crate) notices: Vec<String>,
}

/// The answer to a statement run with the text protocol.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TextResult {
    /// Rows, each value as the server's text (`None` for NULL).
    pub rows: Vec<Vec<Option<Vec<u8>>>>,
    /// Rows changed, for a statement without a result.
    pub affected_rows: u64,
    /// The server's summary of what a statement did (`Records: 3
    /// Duplicates: 1  Warnings: 0`), when it gives one.
    pub info: String,
}

impl Connection {
    /// Connects to `config`'s server and logs in, counting round trips on `meter`.
    pub async fn connect(config: &Config, meter: &Meter) -> Result<Connection, Error> {
        let login = async {
            let tls = config
                .tls
                .client
                .as_ref()
                .filter(|_| config.target.is_tcp());
            let mut connection = match Connection::open(config, meter, tls).await? {
                Opened::LoggedIn(connection) => connection,
                // As the mysql client's PREFERRED: a server whose TLS cannot
                // be agreed on is used without it.
                Opened::HandshakeFailed(_) if config.tls.mode == SslMode::Preferred => {
                    match Connection::open(config, meter, None).await? {
                        Opened::LoggedIn(connection) => connection,
                        Opened::HandshakeFailed(error) => return Err(error),
                    }
                }
                Opened::HandshakeFailed(error) => return Err(error),
            };
            connection.set_up_session().await?;
            Ok::<_, Error>(connection)
        };
        match tokio::time::timeout(config.connect_timeout, login).await {
            Ok(result) => result.map_err(|error| in_connect(error, &config.target)),
            Err(_) => Err(Error::new(
                ErrorKind::Connect,
                format!(
                    "could not connect to {}: no login within {:?}",
                    config.target, config.connect_timeout
                ),
            )),
        }
    }

    /// Opens a socket, reads the greeting, moves into TLS with `tls` when the
    /// server offers it, and logs in.
    async fn open(
        config: &Config,
        meter: &Meter,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> Result<Opened, Error> {
        let socket = open_socket(&config.target, config.connect_timeout).await?;
        let mut wire = Wire::new(socket, meter, &config.target);
        let greeting = wire.read_payload().await?;
        let handshake = read_greeting(&greeting)?;
        let mut capabilities = wanted_capabilities() & handshake.capabilities();
        if config.database.is_some() {
            // The login response says so when it names a database, and a
            // server reading TLS's two-packet login takes the capabilities of
            // the first (the TLS request): they must already say it there.
            capabilities |= CapabilityFlags::CLIENT_CONNECT_WITH_DB;
        }
        let mariadb_capabilities =
            wanted_mariadb_capabilities() & handshake.mariadb_ext_capabilities();
        let offers_tls = handshake
            .capabilities()
            .contains(CapabilityFlags::CLIENT_SSL);
        match tls {
            Some(client) if offers_tls => {
                capabilities |= CapabilityFlags::CLIENT_SSL;
                let request = SslRequest::new(capabilities, MAX_PACKET, UTF8MB4_GENERAL_CI)
                    .with_mariadb_capabilities(mariadb_capabilities);
                let mut payload = Vec::new();
                request.serialize(&mut payload);
                // The greeting was packet 0: the request is packet 1.
                wire.queue(&payload);
                wire.flush().await?;
                wire = match wire.start_tls(client, &config.target).await {
                    Ok(wire) => wire,
                    Err(error) => return Ok(Opened::HandshakeFailed(error)),
                };
            }
            Some(_) if config.tls.mode != SslMode::Preferred => {
                return Err(Error::new(
                    ErrorKind::Connect,
                    format!(
                        "{} does not accept TLS connections, but ssl-mode={} requires TLS",
                        config.target,
                        config.tls.mode.name()
                    ),
                ))
            }
            _ => {}
        }
        let connection =
            Connection::log_in(wire, config, &handshake, capabilities, mariadb_capabilities)
                .await?;
        Ok(Opened::LoggedIn(connection))
    }

    /// What the server is.
    pub fn server(&self) -> &ServerInfo {
        &self.server
    }

    /// Where the session is connected.
    pub fn target(&self) -> &Target {
        self.wire.target()
    }

    /// How the connection is encrypted (`TLSv1_3 TLS13_AES_256_GCM_SHA384`),
    /// or `None` when it is not.
    pub fn encryption(&self) -> Option<String> {
        self.wire.encryption()
    }

    /// The meter counting this connection's traffic.
    pub fn meter(&self) -> &Meter {
        self.wire.meter()
    }

    /// Gives the server up once a wait on it (for an answer, or for room to
    /// send) sees nothing move for `timeout`; `None` (the default) waits for
    /// ever. A wait that times out fails with an [`ErrorKind::Closed`] error
    /// carrying [`sluice_core::Stalled`], and so does every later one: the
    /// connection is spent.
    pub fn set_wait_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.wire.set_wait_timeout(timeout);
    }

    /// Whether a wait timed out ([`Connection::set_wait_timeout`]): the
    /// connection must not be used again, nor pooled.
    pub fn is_spent(&self) -> bool {
        self.wire.is_spent()
    }

    /// Ends the session politely (`COM_QUIT`) and closes the socket (a
    /// connection given up as stalled is only dropped).
    pub async fn close(mut self) {
        self.wire.queue_command(|payload| payload.push(COM_QUIT));
        self.wire.shutdown().await;
    }

    async fn log_in(
        wire: Wire,
        config: &Config,
        handshake: &HandshakePacket<'_>,
        capabilities: CapabilityFlags,
        mariadb_capabilities: MariadbCapabilities,
    ) -> Result<Connection, Error> {
        // MariaDB 10 and 11 prefix their version with "5.5.5-" for old clients.
        let version = handshake.server_version_str();
        let version = version
            .strip_prefix("5.5.5-")
            .unwrap_or(&version)
            .to_owned();
        let mut connection = Connection {
            wire,
            capabilities,
            server: ServerInfo {
                mariadb: dialect_of_version(&version) == MARIADB,
                version,
                connection_id: handshake.connection_id(),
                max_allowed_packet: 0,
                local_infile: false,
                bulk_execute: mariadb_capabilities
                    .contains(MariadbCapabilities::MARIADB_CLIENT_STMT_BULK_OPERATIONS),
                extended_metadata: mariadb_capabilities
                    .contains(MariadbCapabilities::MARIADB_CLIENT_EXTENDED_METADATA),
            },
            unanswered_settings: 0,
            notices: Vec::new(),
        };
        connection
            .authenticate(config, handshake, mariadb_capabilities)
            .await?;
        Ok(connection)
    }

    /// Sends the handshake response and answers the server's challenges until
    /// it says OK.
    async fn authenticate(
        &mut self,
        config: &Config,
        handshake: &HandshakePacket<'_>,
        mariadb_capabilities: MariadbCapabilities,
    ) -> Result<(), Error> {
        let mut plugin = handshake
            .auth_plugin()
            .unwrap_or(AuthPlugin::MysqlNativePassword)
            .into_owned();
        let mut scramble = handshake.nonce();
        let mut procedure = start_plugin(&plugin)?;
        let first = self.challenge(&mut procedure, config, &scramble, &scramble)?;
        let attributes = [("program_name".to_owned(), "sluice".to_owned())].into();
        let response = HandshakeResponse::new(
            Some(first.unwrap_or_default()),
            handshake.server_version_parsed().unwrap_or((5, 5, 3)),
            Some(config.user.as_bytes()),
            config.database.as_deref().map(str::as_bytes),
            Some(plugin.clone()),
            self.capabilities,
            Some(attributes),
            MAX_PACKET,
        )
        .with_mariadb_ext_capabilities(mariadb_capabilities);
        let mut payload = Vec::new();
        response.serialize(&mut payload);
        // The greeting was packet 0: the response is packet 1.
        self.wire.queue(&payload);
        loop {
            self.wire.flush().await?;
            let answer = self.wire.read_payload().await?;
            match answer.first() {
                Some(0x00) => return Ok(()),
                // Any error while logging in is the login's refusal.
                Some(0xFF) => {
                    return Err(server_error(&answer, self.capabilities)
                        .with_kind(ErrorKind::Authentication))
                }
                Some(0xFE) => {
                    let switch = AuthSwitchRequest::deserialize((), &mut ParseBuf(&answer))
                        .map_err(|error| {
                            Error::protocol(format!("unreadable auth switch: {error}"))
                        })?;
                    plugin = switch.auth_plugin().into_owned();
                    scramble = switch.plugin_data().to_vec();
                    procedure = start_plugin(&plugin)?;
                    let reply = self.challenge(&mut procedure, config, &scramble, &scramble)?;
                    self.wire.queue(&reply.unwrap_or_default());
                }
                Some(0x01) => {
                    if let Some(reply) =
                        self.challenge(&mut procedure, config, &scramble, &answer[1..])?
                    {
                        self.wire.queue(&reply);
                    }
                }
                _ => return Err(unexpected("a login answer", &answer)),
            }
        }
    }

    /// One step of the plugin's challenge-response: the packet to send, if any.
    fn challenge(
        &self,
        procedure: &mut AuthProc,
        config: &Config,
        scramble: &[u8],
        challenge: &[u8],
    ) -> Result<Option<Vec<u8>>, Error> {
        let context = Credentials {
            password: config.password.as_deref().unwrap_or("").as_bytes(),
            scramble,
            local_socket: matches!(self.wire.target(), Target::Unix(_)),
            tls: self.wire.encryption().is_some(),
        };
        procedure
            .run(context, challenge)
            .map(|response| response.data().map(<[u8]>::to_vec))
            .map_err(|error| {
                Error::new(
                    ErrorKind::Authentication,
                    format!("logging in as {:?} failed: {error}", config.user),
                )
            })
    }

    /// Sets the session up and reads its limits, in one exchange.
    async fn set_up_session(&mut self) -> Result<(), Error> {
        self.queue_query(
            "SET time_zone = '+00:00', net_write_timeout = 31536000, net_read_timeout = 31536000",
        );
        self.queue_query("SELECT @@max_allowed_packet, @@local_infile");
        self.wire.flush().await?;
        self.read_text_result().await?;
        let limits = self.read_text_result().await?;
        let row = limits
            .rows
            .first()
            .ok_or_else(|| Error::protocol("the server answered no row for its settings"))?;
        let number = |index: usize| -> u64 {
            row.get(index)
                .and_then(Option::as_ref)
                .and_then(|text| std::str::from_utf8(text).ok()?.parse().ok())
                .unwrap_or(0)
        };
        self.server.max_allowed_packet = number(0);
        self.server.local_infile = number(1) == 1;
        Ok(())
    }

    /// Queues a statement without a result (`SET …`) to be sent with the next
    /// command, in the same round trip; its answer is read by
    /// `Connection::read_settings_answers` before that command's.
    pub fn queue_setting(&mut self, sql: &str) {
        self.queue_query(sql);
        self.unanswered_settings += 1;
    }

    /// Reads the answers to the queued settings; the first failure is returned
    /// once all have been read, so the session stays in step.
    pub(crate) async fn read_settings_answers(&mut self) -> Result<(), Error> {
        let mut first_failure = None;
        while self.unanswered_settings > 0 {
            self.unanswered_settings -= 1;
            if let Err(error) = self.read_text_result().await {
                if error.kind() != ErrorKind::Database {
                    return Err(error);
                }
                first_failure.get_or_insert(error);
            }
        }
        first_failure.map_or(Ok(()), Err)
    }

    /// Queues `sql` as a text-protocol query (`COM_QUERY`).
    pub(crate) fn queue_query(&mut self, sql: &str) {
        self.wire.queue_command(|payload| write_query(sql, payload));
    }

    /// Runs one statement with the text protocol and reads all of its answer:
    /// for sluice's own small statements, never for results of unknown size.
    pub async fn simple_query(&mut self, sql: &str) -> Result<TextResult, Error> {
        self.queue_query(sql);
        self.wire.flush().await?;
        let settings = self.read_settings_answers().await;
        let result = self.read_text_result().await;
        settings.and(result)
    }

    /// Reads the answer to one queued text-protocol query.
    pub(crate) async fn read_text_result(&mut self) -> Result<TextResult, Error> {
        let first = self.wire.read_payload().await?;
        let columns = match first.first() {
            Some(0x00) => {
                let ok = OkPacket::parse(&first)?;
                return Ok(TextResult {
                    rows: Vec::new(),
                    affected_rows: ok.affected_rows,
                    info: String::from_utf8_lossy(ok.info).into_owned(),
                });
            }
            Some(0xFF) => return Err(server_error(&first, self.capabilities)),
            Some(0xFB) => return Err(self.unexpected_answer("a query", &first).await),
            _ => read_lenenc_int(&mut &first[..])?,
        };
        for _ in 0..columns {
            self.wire.read_payload().await?;
        }
        if !self.deprecate_eof() {
            self.wire.read_payload().await?;
        }
        let mut rows = Vec::new();
        loop {
            let packet = self.wire.read_payload().await?;
            match packet.first() {
                Some(0xFE) if packet.len() < 0xFF_FFFF => {
                    return Ok(TextResult {
                        rows,
                        ..TextResult::default()
                    })
                }
                Some(0xFF) => return Err(server_error(&packet, self.capabilities)),
                _ => rows.push(text_row(&packet, columns)?),
            }
        }
    }

    /// Sends `sql` (after any queued settings) and returns the first packet of
    /// its answer as it is, for exchanges that go on from there (`LOAD DATA
    /// LOCAL` asks for its file).
    pub(crate) async fn simple_query_head(&mut self, sql: &str) -> Result<Vec<u8>, Error> {
        self.queue_query(sql);
        self.wire.flush().await?;
        let settings = self.read_settings_answers().await;
        let head = self.wire.read_payload().await;
        settings?;
        head
    }

    /// Sends `statements` in one round trip and reads each one's answer, so
    /// a failure is known by statement. Errors the server reported are
    /// answers (the session stays in step); anything else ends the exchange.
    pub(crate) async fn exchange(
        &mut self,
        statements: &[String],
    ) -> Result<Vec<Result<TextResult, Error>>, Error> {
        for statement in statements {
            self.queue_query(statement);
        }
        self.wire.flush().await?;
        let mut answers = Vec::with_capacity(statements.len());
        for _ in statements {
            match self.read_text_result().await {
                Err(error) if error.as_db_error().is_none() => return Err(error),
                answer => answers.push(answer),
            }
        }
        Ok(answers)
    }

    /// Whether result sets end with an OK packet instead of EOF packets.
    pub(crate) fn deprecate_eof(&self) -> bool {
        self.capabilities
            .contains(CapabilityFlags::CLIENT_DEPRECATE_EOF)
    }
}

/// What a connection attempt came to.
enum Opened {
    LoggedIn(Connection),
    /// The server agreed to TLS but the handshake failed (the socket is spent).
    HandshakeFailed(Error),
}

/// The server's greeting, or its refusal to talk (too many connections, a
/// blocked host), or a protocol older than 4.1.
fn read_greeting(greeting: &[u8]) -> Result<HandshakePacket<'_>, Error> {
    if greeting.first() == Some(&0xFF) {
        return Err(server_error(greeting, CapabilityFlags::empty()).with_kind(ErrorKind::Connect));
    }
    let handshake = HandshakePacket::deserialize((), &mut ParseBuf(greeting))
        .map_err(|error| Error::protocol(format!("unreadable server greeting: {error}")))?;
    if !handshake
        .capabilities()
        .contains(CapabilityFlags::CLIENT_PROTOCOL_41)
    {
        return Err(Error::new(
            ErrorKind::Connect,
            "the server speaks a protocol older than MySQL 4.1",
        ));
    }
    Ok(handshake)
}

/// `utf8mb4_general_ci`, the collation the login asks for (as
/// `HandshakeResponse` does for servers from 5.5.3 on).
const UTF8MB4_GENERAL_CI: u8 = 45;

/// An authentication plugin's procedure, or a clear error for one sluice lacks.
fn start_plugin(plugin: &AuthPlugin<'_>) -> Result<AuthProc, Error> {
    plugin.init().map_err(|_| {
        Error::new(
            ErrorKind::Authentication,
            format!(
                "the server asks for the authentication plugin {:?}, which sluice does not speak",
                String::from_utf8_lossy(plugin.as_bytes())
            ),
        )
    })
}

/// What the authentication plugins need to know.
struct Credentials<'a> {
    password: &'a [u8],
    scramble: &'a [u8],
    local_socket: bool,
    /// On TLS, `caching_sha2_password` may send the password itself.
    tls: bool,
}

impl AuthContext for Credentials<'_> {
    fn pass(&self) -> &[u8] {
        self.password
    }

    fn is_ipc_transport(&self) -> bool {
        self.local_socket
    }

    fn is_tls_transport(&self) -> bool {
        self.tls
    }

    fn scramble(&self) -> &[u8] {
        self.scramble
    }

    fn server_key_pem(&self) -> Option<&[u8]> {
        None
    }
}

/// An error while connecting, filed as a connection failure naming the server
/// (a refused login stays an authentication failure).
fn in_connect(error: Error, target: &Target) -> Error {
    match error.kind() {
        ErrorKind::Connect | ErrorKind::Config => error,
        ErrorKind::Authentication => Error::new(
            ErrorKind::Authentication,
            format!("{target} refused the login: {error}"),
        ),
        _ => Error::new(
            ErrorKind::Connect,
            format!("could not connect to {target}: {error}"),
        ),
    }
}

impl Connection {
    /// The error for `answer`, which does not belong where it arrived (in
    /// answer to `what`). A request for a local file (`0xFB`, what `LOAD DATA
    /// LOCAL INFILE` makes a server send) is refused as the protocol expects —
    /// an empty packet, no file — and the server's answer to that is read, so
    /// nothing of the exchange is left for the next command: sluice sends rows
    /// only to the `LOAD DATA` statements of its own imports, never a file a
    /// server names.
    pub(crate) async fn unexpected_answer(&mut self, what: &str, answer: &[u8]) -> Error {
        if answer.first() != Some(&0xFB) {
            return unexpected(what, answer);
        }
        let file = String::from_utf8_lossy(&answer[1..]).into_owned();
        self.wire.queue(&[]);
        if self.wire.flush().await.is_ok() {
            let _ = self.wire.read_payload().await;
        }
        local_file_refused(&file, what)
    }
}

/// A server asked for a local file where sluice offered none.
fn local_file_refused(file: &str, what: &str) -> Error {
    Error::new(
        ErrorKind::Protocol,
        format!(
            "the server asked for the local file {file:?} in answer to {what}; refused \
             (sluice sends no file a server asks for): the server is misbehaving or is not \
             the MariaDB/MySQL server you meant"
        ),
    )
}

impl Connection {
    /// Checks, without a round trip, that an idle pooled session can be
    /// reused: nothing left unanswered, and the server has neither closed it
    /// nor sent anything since.
    pub(crate) fn check_idle(&mut self) -> Result<(), Error> {
        if self.unanswered_settings > 0 {
            return Err(Error::protocol("an idle session with settings unanswered"));
        }
        self.wire.check_idle()
    }
}
