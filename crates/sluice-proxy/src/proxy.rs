//! [`Proxy`]: the listener. It admits clients up to a limit of open connections,
//! hands each admitted one to threads of its own ([`crate::connection`]) and turns
//! the others away in the protocol's words ([`crate::refusal`]); [`ProxyHandle`]
//! reports what it saw.
//!
//! The acceptor is one thread running a single-threaded async runtime: accepting
//! needs no timing precision, and a refused client may take seconds to send its
//! startup message, which an async task waits for at the cost of a socket, not of
//! a thread. Only admitted connections get threads.

use std::io;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};

use crate::connection::{self, Tracked};
use crate::refusal::{self, Refusal};
use crate::report::{findings, sort_by_round_trips, ConnectionReport, Observed, Report};
use crate::shaping::Shaping;

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

/// State shared by the acceptor, the connections' threads and the handle.
pub(crate) struct Shared {
    connections: Mutex<Vec<Arc<Tracked>>>,
    next_id: AtomicU64,
    /// Client connections open now (admitted and not yet fully closed).
    open: AtomicUsize,
    max_connections: usize,
    /// Clients turned away since the start (or the last reset).
    refused: AtomicU64,
    /// The added round-trip time, for the report's waiting figures.
    rtt: Duration,
    stop: Notify,
}

impl Shared {
    /// Takes a place among the open connections, if one is free.
    fn take_slot(self: &Arc<Self>) -> Option<Slot> {
        self.open
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |open| {
                (open < self.max_connections).then_some(open + 1)
            })
            .ok()
            .map(|_| Slot(self.clone()))
    }

    /// Records a new connection and gives it its sequence number.
    pub(crate) fn track(&self, tracked: impl FnOnce(u64) -> Tracked) -> Arc<Tracked> {
        let tracked = Arc::new(tracked(self.next_id.fetch_add(1, Ordering::SeqCst) + 1));
        self.connections
            .lock()
            .expect("proxy state")
            .push(tracked.clone());
        tracked
    }

    /// Counts a client turned away.
    pub(crate) fn count_refusal(&self) {
        self.refused.fetch_add(1, Ordering::SeqCst);
    }
}

/// A place among the open connections, held by every thread of one connection:
/// it is given back when the last of them ends, after the connection's sockets
/// (to the client and to the server) are closed.
pub(crate) struct Slot(Arc<Shared>);

impl Slot {
    /// The proxy's shared state.
    pub(crate) fn shared(&self) -> &Shared {
        &self.0
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A proxy to start.
#[derive(Debug, Clone)]
pub struct Proxy {
    listen: String,
    upstream: String,
    shaping: Shaping,
    max_connections: usize,
}

/// A running proxy.
pub struct ProxyHandle {
    address: SocketAddr,
    shared: Arc<Shared>,
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
        }
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

    /// Binds and starts accepting in the background.
    pub fn start(self) -> io::Result<ProxyHandle> {
        let listener = TcpListener::bind(&self.listen)?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let upstream: SocketAddr =
            self.upstream.to_socket_addrs()?.next().ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "upstream address not found")
            })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let shared = Arc::new(Shared {
            connections: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            max_connections: self.max_connections,
            refused: AtomicU64::new(0),
            rtt: self.shaping.rtt,
            stop: Notify::new(),
        });
        let acceptor = Acceptor {
            shared: shared.clone(),
            upstream,
            shaping: self.shaping,
            refusals: Arc::new(Semaphore::new(REFUSALS_AT_ONCE)),
        };
        thread::Builder::new()
            .name("sluice-proxy-accept".into())
            .spawn(move || runtime.block_on(acceptor.run(listener)))?;
        Ok(ProxyHandle { address, shared })
    }
}

/// The accepting side: admits or refuses each new client.
struct Acceptor {
    shared: Arc<Shared>,
    upstream: SocketAddr,
    shaping: Shaping,
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
        if let Err(error) = connection::start(client, self.upstream, self.shaping, slot) {
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
                let upstream = self.upstream;
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

    /// What the proxy has seen so far.
    pub fn report(&self) -> Report {
        let connections = self.shared.connections.lock().expect("proxy state").clone();
        Report {
            connections: connections
                .iter()
                .filter_map(|tracked| connection_report(tracked, self.shared.rtt))
                .collect(),
            open_connections: self.shared.open.load(Ordering::SeqCst),
            max_connections: self.shared.max_connections,
            refused_connections: self.shared.refused.load(Ordering::SeqCst),
            rtt: self.shared.rtt,
        }
    }

    /// Forgets everything seen so far, refusals included (connections still open
    /// keep flowing).
    pub fn reset(&self) {
        self.shared.connections.lock().expect("proxy state").clear();
        self.shared.refused.store(0, Ordering::SeqCst);
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
    let observer = tracked.observer.lock().expect("observer");
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
