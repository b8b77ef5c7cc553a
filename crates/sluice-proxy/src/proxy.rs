//! [`Proxy`]: the listener. It admits clients up to a limit of open connections,
//! hands each admitted one to threads of its own ([`crate::connection`]) and turns
//! the others away in the protocol's words ([`crate::refusal`]), as it does every
//! client while a `refuse` fault is in force; [`ProxyHandle`] reports what it saw
//! and edits the faults.
//!
//! The acceptor is one thread running a single-threaded async runtime: accepting
//! needs no timing precision, and a refused client may take seconds to send its
//! startup message, which an async task waits for at the cost of a socket, not of
//! a thread. Only admitted connections get threads. The control API
//! ([`crate::control`]), when asked for, runs on the same runtime.

use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::{Arc, PoisonError};
use std::thread;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::connection::{self, Setup};
use crate::control::{Access, ControlToken};
use crate::fault::{Action, Fault, FaultList};
use crate::refusal::{self, Refusal};
use crate::report::{findings, sort_by_round_trips, ConnectionReport, Observed, Report};
use crate::shaping::Shaping;
use crate::shared::{Shared, Tracked};

/// Open client connections allowed by default: well below PostgreSQL's default
/// `max_connections` (100), so clients going through the proxy cannot use up the
/// server's connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 32;

/// Refused clients answered at once, each waiting (a few seconds at most) for its
/// startup message; beyond this many the answer is sent without waiting, so a
/// flood of clients cannot make the proxy hold a socket for each.
const REFUSALS_AT_ONCE: usize = 256;

/// Pause after a failed `accept` (out of file descriptors, typically), so the
/// acceptor does not spin while connections close and give some back.
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// A proxy to start.
#[derive(Debug, Clone)]
pub struct Proxy {
    listen: String,
    upstream: String,
    shaping: Shaping,
    max_connections: usize,
    faults: Vec<Fault>,
    control: Option<String>,
    remote_control: bool,
    control_token: Option<ControlToken>,
}

/// A running proxy.
pub struct ProxyHandle {
    address: SocketAddr,
    control: Option<SocketAddr>,
    shared: Arc<Shared>,
    faults: Arc<FaultList>,
}

/// Why a proxy could not start.
#[derive(Debug)]
pub enum StartError {
    /// The clients' address could not be bound.
    Listen {
        /// The address asked for.
        address: String,
        /// The system's error.
        error: io::Error,
    },
    /// The server's address did not resolve.
    Upstream {
        /// The address asked for.
        address: String,
        /// The system's error.
        error: io::Error,
    },
    /// The control API's address could not be resolved or bound.
    Control {
        /// The address asked for.
        address: String,
        /// The system's error.
        error: io::Error,
    },
    /// The control API was asked to listen beyond this machine without that
    /// being allowed: anyone who reaches it can change the faults.
    ControlNotLoopback {
        /// The address it resolved to.
        address: SocketAddr,
    },
    /// The runtime or the acceptor's thread could not be started.
    System(io::Error),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Listen { address, error } => {
                write!(f, "cannot listen on {address}: {error}")
            }
            StartError::Upstream { address, error } => {
                write!(f, "upstream {address} not found: {error}")
            }
            StartError::Control { address, error } => {
                write!(f, "cannot serve the control API on {address}: {error}")
            }
            StartError::ControlNotLoopback { address } => write!(
                f,
                "anyone who reaches the control API can change the faults, so it listens \
                 on a loopback address unless told otherwise; {address} is not one"
            ),
            StartError::System(error) => write!(f, "cannot start the proxy: {error}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<StartError> for io::Error {
    fn from(error: StartError) -> io::Error {
        let kind = match &error {
            StartError::Listen { error, .. }
            | StartError::Upstream { error, .. }
            | StartError::Control { error, .. }
            | StartError::System(error) => error.kind(),
            StartError::ControlNotLoopback { .. } => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, error)
    }
}

impl Proxy {
    /// A proxy listening on `listen` (e.g. `127.0.0.1:6432`, port 0 for any)
    /// forwarding to `upstream` with `shaping` applied, admitting at most
    /// [`DEFAULT_MAX_CONNECTIONS`] clients at once.
    pub fn new(listen: &str, upstream: &str, shaping: Shaping) -> Proxy {
        Proxy {
            listen: listen.to_owned(),
            upstream: upstream.to_owned(),
            shaping,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            faults: Vec::new(),
            control: None,
            remote_control: false,
            control_token: None,
        }
    }

    /// Puts `fault` in force from the start (more can be added at run time
    /// through [`ProxyHandle::faults`] or the control API).
    pub fn fault(mut self, fault: Fault) -> Proxy {
        self.faults.push(fault);
        self
    }

    /// Serves the control API (list, add and remove faults over HTTP) on
    /// `address`, which must be a loopback address unless
    /// [`Proxy::allow_remote_control`] says otherwise: anyone who reaches it
    /// can change the faults. Requests a web page would send are refused (a
    /// `Host` naming no loopback address, without a token; an `Origin` of
    /// another site; a body that is not `application/json`).
    pub fn control(mut self, address: &str) -> Proxy {
        self.control = Some(address.to_owned());
        self
    }

    /// Makes the control API ask every request for `token`
    /// (`Authorization: Bearer TOKEN`; 401 without it). With a token, the
    /// `Host` a request names is not checked: the token is the defence.
    pub fn control_token(mut self, token: ControlToken) -> Proxy {
        self.control_token = Some(token);
        self
    }

    /// Lets the control API listen on an address other machines can reach.
    pub fn allow_remote_control(mut self, allow: bool) -> Proxy {
        self.remote_control = allow;
        self
    }

    /// At most `limit` client connections open at once (default
    /// [`DEFAULT_MAX_CONNECTIONS`]). A client beyond it is answered with a
    /// PostgreSQL error (SQLSTATE 53300, too_many_connections) and closed, without
    /// a connection to the server; a cancel request is still passed on. 0 refuses
    /// every client.
    pub fn max_connections(mut self, limit: usize) -> Proxy {
        self.max_connections = limit;
        self
    }

    /// Binds (the control API too, when asked for) and starts accepting in
    /// the background.
    pub fn start(self) -> Result<ProxyHandle, StartError> {
        // The control API's address first: refusing a public one must not
        // depend on the clients' address being free.
        let control = match &self.control {
            Some(control) => Some(bind_control(control, self.remote_control)?),
            None => None,
        };
        let listen_error = |error| StartError::Listen {
            address: self.listen.clone(),
            error,
        };
        let listener = TcpListener::bind(&self.listen).map_err(listen_error)?;
        listener.set_nonblocking(true).map_err(listen_error)?;
        let address = listener.local_addr().map_err(listen_error)?;
        let upstream = resolve(&self.upstream).map_err(|error| StartError::Upstream {
            address: self.upstream.clone(),
            error,
        })?;
        let control_address = match &control {
            Some(listener) => Some(listener.local_addr().map_err(StartError::System)?),
            None => None,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(StartError::System)?;
        let shared = Arc::new(Shared::new(self.max_connections, self.shaping.rtt));
        let faults = Arc::new(FaultList::new());
        for fault in self.faults {
            faults.add(fault);
        }
        let acceptor = Acceptor {
            shared: shared.clone(),
            setup: Setup {
                upstream,
                shaping: self.shaping,
                faults: faults.clone(),
            },
            refusals: Arc::new(Semaphore::new(REFUSALS_AT_ONCE)),
        };
        let control_faults = faults.clone();
        let access = Access::new(self.control_token, self.remote_control);
        thread::Builder::new()
            .name("sluice-proxy-accept".into())
            .spawn(move || {
                runtime.block_on(async move {
                    if let Some(control) = control {
                        tokio::spawn(crate::control::serve(control, control_faults, access));
                    }
                    acceptor.run(listener).await
                })
            })
            .map_err(StartError::System)?;
        Ok(ProxyHandle {
            address,
            control: control_address,
            shared,
            faults,
        })
    }
}

/// The first address `address` resolves to.
fn resolve(address: &str) -> io::Result<SocketAddr> {
    address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address found"))
}

/// Binds the control API's listener, on a loopback address unless `remote`.
fn bind_control(address: &str, remote: bool) -> Result<TcpListener, StartError> {
    let error = |error| StartError::Control {
        address: address.to_owned(),
        error,
    };
    let resolved = resolve(address).map_err(error)?;
    if !remote && !resolved.ip().is_loopback() {
        return Err(StartError::ControlNotLoopback { address: resolved });
    }
    let listener = TcpListener::bind(resolved).map_err(error)?;
    listener.set_nonblocking(true).map_err(error)?;
    Ok(listener)
}

/// The accepting side: admits or refuses each new client.
struct Acceptor {
    shared: Arc<Shared>,
    setup: Setup,
    /// Permits for refusals being answered (see [`REFUSALS_AT_ONCE`]).
    refusals: Arc<Semaphore>,
}

impl Acceptor {
    async fn run(self, listener: TcpListener) {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        loop {
            let accepted = tokio::select! {
                _ = self.shared.stop.notified() => break,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((client, _)) => self.admit_or_refuse(client),
                Err(_) => tokio::time::sleep(ACCEPT_RETRY).await,
            }
        }
    }

    fn admit_or_refuse(&self, client: tokio::net::TcpStream) {
        let refusing = self
            .setup
            .faults
            .claim_first(|fault| fault.action == Action::Refuse);
        if let Some(fault) = refusing {
            self.refuse(client, Refusal::Fault { id: fault.id });
            return;
        }
        let Some(slot) = self.shared.take_slot() else {
            let limit = self.shared.max_connections;
            self.refuse(client, Refusal::TooManyConnections { limit });
            return;
        };
        // The connection's threads use blocking sockets (the same open file as
        // the spare copy, which answers the client if no thread can be had).
        let Ok(client) = client.into_std() else {
            return;
        };
        let (Ok(()), Ok(spare)) = (client.set_nonblocking(false), client.try_clone()) else {
            return;
        };
        if let Err(error) = connection::start(client, self.setup.clone(), slot) {
            let refusal = Refusal::NoThread(error.to_string());
            if let Ok(spare) = into_async(spare) {
                self.refuse(spare, refusal);
            }
        }
    }

    /// Answers a refused client on a task of this thread, or at once when many
    /// refusals are already waiting for their clients.
    fn refuse(&self, client: tokio::net::TcpStream, refusal: Refusal) {
        match self.refusals.clone().try_acquire_owned() {
            Ok(permit) => {
                let shared = self.shared.clone();
                let upstream = self.setup.upstream;
                tokio::spawn(async move {
                    refusal::answer(client, refusal, upstream, &shared).await;
                    drop(permit);
                });
            }
            Err(_) => refusal::answer_at_once(client, &refusal, &self.shared),
        }
    }
}

/// A blocking socket made fit for the async runtime again.
fn into_async(socket: std::net::TcpStream) -> io::Result<tokio::net::TcpStream> {
    socket.set_nonblocking(true)?;
    tokio::net::TcpStream::from_std(socket)
}

impl ProxyHandle {
    /// The address clients connect to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The control API's address, when it was asked for.
    pub fn control_address(&self) -> Option<SocketAddr> {
        self.control
    }

    /// The faults in force: list, add and remove them while the proxy runs.
    pub fn faults(&self) -> &FaultList {
        &self.faults
    }

    /// What the proxy has seen so far.
    pub fn report(&self) -> Report {
        Report {
            connections: self
                .shared
                .connections()
                .iter()
                .filter_map(|tracked| connection_report(tracked, self.shared.rtt))
                .collect(),
            open_connections: self.shared.open_connections(),
            max_connections: self.shared.max_connections,
            refused_connections: self.shared.refused(),
            rtt: self.shared.rtt,
        }
    }

    /// Forgets everything seen so far, refusals included (connections still open
    /// keep flowing).
    pub fn reset(&self) {
        self.shared.forget();
    }

    /// Stops accepting new clients; open connections run to their end.
    pub fn stop(&self) {
        self.shared.stop.notify_one();
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One connection's figures, or `None` for a cancel request (not a session).
fn connection_report(tracked: &Arc<Tracked>, rtt: Duration) -> Option<ConnectionReport> {
    // A connection thread that panicked while observing leaves its figures as
    // they were: still worth reporting, and the report must not panic too.
    let observer = tracked
        .observer
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if observer.cancel_request {
        return None;
    }
    let mut statements: Vec<_> = observer.stats.values().cloned().collect();
    sort_by_round_trips(&mut statements);
    let findings = findings(&Observed {
        statements: &statements,
        small_fetches: observer.small_fetches,
        fetch_size: observer.fetch_size,
        suspensions: observer.suspensions,
        function_calls: observer.function_calls,
        n_plus_ones: observer.patterns.n_plus_ones(),
        session: observer.patterns.session(),
        round_trips: observer.round_trips,
        rtt,
    });
    Some(ConnectionReport {
        id: tracked.id,
        client: tracked.client.to_string(),
        round_trips: observer.round_trips,
        bytes_to_server: observer.bytes_to_server,
        bytes_to_client: observer.bytes_to_client,
        readable: !observer.opaque,
        started: observer.first_seen,
        ended: observer.last_seen,
        findings,
        statements,
    })
}
