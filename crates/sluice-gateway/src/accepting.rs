//! What a listener may accept, so that no flood of connections — idle ones
//! included — can take the process's file descriptors from the rest of it:
//! the open-files limit raised at start ([`raise_open_files_limit`]), a cap on
//! each listener's open connections ([`ConnectionSlots`], `[server]
//! max_connections`) that leaves a reserve of descriptors for the databases'
//! connections, files and `/health`, and a back-off when `accept` fails
//! anyway ([`AcceptBackoff`]), which logs an episode once rather than every
//! failure.
//!
//! HTTP and Arrow Flight each have a listener and each its own slots, so a
//! flood on one leaves the other answering. Both bind alike ([`bind`]), keep
//! to loopback without tokens ([`effective_listen`]) and time their
//! connections alike ([`Timeouts`]).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::Config;

/// The address to bind: `requested`, except that without tokens only loopback is
/// allowed (an open gateway to a database must not be reachable from the network).
/// The second value is the warning to print: the address was changed, or tokens
/// will cross the network in clear text (`https` false).
pub fn effective_listen(
    requested: SocketAddr,
    auth_enabled: bool,
    https: bool,
) -> (SocketAddr, Option<String>) {
    if requested.ip().is_loopback() || (auth_enabled && https) {
        return (requested, None);
    }
    if auth_enabled {
        // Served as asked (TLS is often terminated by a proxy in front), but
        // said loudly: the tokens cross the network readable.
        return (
            requested,
            Some(format!(
                "WARNING: serving {requested} over plain HTTP: bearer tokens travel in clear text; \
                 give [server] tls_cert and tls_key, or terminate TLS in front of sluice serve \
                 (a reverse proxy or load balancer)"
            )),
        );
    }
    let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), requested.port());
    (
        local,
        Some(format!(
            "no [[tokens]] configured: listening on {local} (localhost only) instead of {requested}; \
             configure tokens to serve other hosts"
        )),
    )
}

/// Connections the kernel queues for `accept` before it refuses more: a burst
/// of clients (a load balancer's pool opening at once) must not be dropped
/// (tokio's `bind` listens with 128).
pub const LISTEN_BACKLOG: u32 = 1024;

/// A listener on `address` with `LISTEN_BACKLOG`.
pub fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match address {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As std's and tokio's own bind do: a restarted server can take its port
    // back while old connections linger in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// How long a connection may wait for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From the connection being accepted, or a kept-alive connection's next
    /// first byte, to the end of the request's head.
    pub header_read: Duration,
    /// Between the end of a response and the next request's first byte.
    pub keep_alive: Duration,
}

impl Timeouts {
    /// The `[server]` timeouts of `config`, for every listener (HTTP and
    /// Flight time their connections alike).
    pub fn of(config: &Config) -> Timeouts {
        Timeouts {
            header_read: config.header_read_timeout,
            keep_alive: config.keep_alive_timeout,
        }
    }
}

/// Descriptors kept out of the listeners' caps: database connections (pools,
/// Flight's plan coordinators), the configuration and certificate files on
/// reload, logs, and a margin.
pub const DESCRIPTOR_RESERVE: u64 = 256;

/// The most connections a listener keeps open when neither the
/// configuration nor the open-files limit says fewer.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// The process's open-files limit, after [`raise_open_files_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    /// The soft limit now in force.
    pub limit: u64,
    /// The soft limit before, when it was raised.
    pub raised_from: Option<u64>,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (the common soft limit
/// of 1,024 is a default for old `select` users, not a policy): a gateway's
/// connections are its file descriptors.
// `rlim_t` is u64 on Linux, not on every platform libc knows.
#[allow(clippy::unnecessary_cast)]
pub fn raise_open_files_limit() -> io::Result<OpenFiles> {
    let mut limits = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given, which lives here.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limits) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let soft = limits.rlim_cur as u64;
    if limits.rlim_cur >= limits.rlim_max {
        return Ok(OpenFiles {
            limit: soft,
            raised_from: None,
        });
    }
    let raised = libc::rlimit {
        rlim_cur: limits.rlim_max,
        rlim_max: limits.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given, which lives here.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(OpenFiles {
        limit: limits.rlim_max as u64,
        raised_from: Some(soft),
    })
}

/// The open-files soft limit in force now (`u64::MAX` when unlimited or not
/// readable).
#[allow(clippy::unnecessary_cast)] // as in raise_open_files_limit
pub fn open_files_limit() -> u64 {
    let mut limits = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: as in raise_open_files_limit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limits) } != 0
        || limits.rlim_cur == libc::RLIM_INFINITY
    {
        return u64::MAX;
    }
    limits.rlim_cur as u64
}

/// The listeners `config` opens: HTTP, and Flight when configured.
pub fn listeners(config: &Config) -> usize {
    1 + usize::from(config.flight.is_some())
}

/// Each listener's cap on open connections: `[server] max_connections` when
/// given, else [`DEFAULT_MAX_CONNECTIONS`]; never more than the listeners'
/// share of `open_files` after [`DESCRIPTOR_RESERVE`] (at least 1).
pub fn connection_cap(configured: Option<usize>, open_files: u64, listeners: usize) -> usize {
    let share = open_files.saturating_sub(DESCRIPTOR_RESERVE) / listeners.max(1) as u64;
    let share = usize::try_from(share).unwrap_or(usize::MAX).max(1);
    configured.unwrap_or(DEFAULT_MAX_CONNECTIONS).min(share)
}

/// `connection_cap` for `config` under the limit in force now.
pub fn cap_for(config: &Config) -> usize {
    connection_cap(
        config.max_connections,
        open_files_limit(),
        listeners(config),
    )
}

/// A listener's connection slots: a connection holds one while open; one
/// accepted when none is free is closed at once and counted.
#[derive(Clone)]
pub struct ConnectionSlots {
    free: Arc<Semaphore>,
    cap: usize,
    listener: &'static str,
}

/// One open connection's slot, given back on drop.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    slots: ConnectionSlots,
}

impl ConnectionSlots {
    /// `cap` slots for `listener` (`http` or `flight`, its metrics label).
    pub fn new(cap: usize, listener: &'static str) -> ConnectionSlots {
        ConnectionSlots {
            free: Arc::new(Semaphore::new(cap)),
            cap,
            listener,
        }
    }

    /// A slot for a connection just accepted, or `None` (counted, and logged
    /// at debug level: a flood would otherwise flood the log) when all are
    /// taken.
    pub fn take(&self) -> Option<Slot> {
        match self.free.clone().try_acquire_owned() {
            Ok(permit) => {
                crate::metrics::connections_open(self.listener, self.open());
                Some(Slot {
                    _permit: permit,
                    slots: self.clone(),
                })
            }
            Err(_) => {
                crate::metrics::connection_refused(self.listener);
                tracing::debug!(
                    listener = self.listener,
                    max_connections = self.cap,
                    "connection refused: the listener has max_connections open"
                );
                None
            }
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.cap - self.free.available_permits()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // The permit is returned after this body; count it out already.
        let open = self.slots.open().saturating_sub(1);
        crate::metrics::connections_open(self.slots.listener, open);
    }
}

/// The shortest and longest pause after a failed `accept`.
const BACKOFF_FIRST: Duration = Duration::from_millis(5);
const BACKOFF_MOST: Duration = Duration::from_secs(1);

/// Pauses a listener whose `accept` fails for want of resources, longer at
/// each failure in a row, and logs each episode twice: when it starts and
/// when accepting works again, with the count.
pub struct AcceptBackoff {
    listener: &'static str,
    episode: Option<Episode>,
}

struct Episode {
    since: Instant,
    failures: u64,
    pause: Duration,
}

impl AcceptBackoff {
    /// A back-off for `listener` (`http` or `flight`).
    pub fn new(listener: &'static str) -> AcceptBackoff {
        AcceptBackoff {
            listener,
            episode: None,
        }
    }

    /// After a failed `accept`: nothing for one connection's own problem (it
    /// was reset while queued); otherwise counts it and pauses.
    pub async fn failed(&mut self, error: io::Error) {
        if let Some(pause) = self.pause_after(error) {
            tokio::time::sleep(pause).await;
        }
    }

    /// How long to pause after `error`: none for one connection's own
    /// problem; otherwise twice the last pause of this episode, up to a
    /// second.
    fn pause_after(&mut self, error: io::Error) -> Option<Duration> {
        use io::ErrorKind;
        if matches!(
            error.kind(),
            ErrorKind::ConnectionAborted
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionRefused
        ) {
            return None;
        }
        crate::metrics::accept_failed(self.listener);
        let episode = self.episode.get_or_insert_with(|| {
            tracing::error!(
                listener = self.listener,
                %error,
                "accepting connections failed; pausing and retrying (logged again when it works)"
            );
            Episode {
                since: Instant::now(),
                failures: 0,
                pause: BACKOFF_FIRST,
            }
        });
        episode.failures += 1;
        let pause = episode.pause;
        episode.pause = (pause * 2).min(BACKOFF_MOST);
        Some(pause)
    }

    /// After a successful `accept`: ends an episode of failures.
    pub fn accepted(&mut self) {
        if let Some(episode) = self.episode.take() {
            tracing::warn!(
                listener = self.listener,
                failures = episode.failures,
                seconds = episode.since.elapsed().as_secs_f64(),
                "accepting connections again"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_tokens_only_loopback_is_served() {
        let any: SocketAddr = "0.0.0.0:9000".parse().unwrap();
        for https in [false, true] {
            let (address, warning) = effective_listen(any, false, https);
            assert_eq!(address, "127.0.0.1:9000".parse().unwrap());
            assert!(warning.unwrap().contains("localhost only"));
        }
        let (address, warning) = effective_listen(any, true, false);
        assert_eq!(address, any);
        assert!(warning
            .unwrap()
            .contains("bearer tokens travel in clear text"));
        // Over HTTPS the tokens are safe: no warning.
        assert_eq!(effective_listen(any, true, true), (any, None));
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(effective_listen(local, false, false), (local, None));
    }

    #[test]
    fn the_cap_leaves_the_reserve_and_shares_the_rest() {
        // Under the common 1,024 limit, two listeners get 384 each.
        assert_eq!(connection_cap(None, 1024, 2), 384);
        assert_eq!(connection_cap(None, 1024, 1), 768);
        // A configured cap is kept when the limit allows it.
        assert_eq!(connection_cap(Some(100), 1024, 2), 100);
        assert_eq!(connection_cap(Some(5000), 1024, 2), 384);
        // A raised limit: the default.
        assert_eq!(connection_cap(None, 1 << 20, 2), DEFAULT_MAX_CONNECTIONS);
        // A limit below the reserve still lets one in.
        assert_eq!(connection_cap(None, 100, 2), 1);
    }

    #[tokio::test]
    async fn a_full_listener_refuses_until_a_slot_is_given_back() {
        let slots = ConnectionSlots::new(2, "test");
        let first = slots.take().unwrap();
        let _second = slots.take().unwrap();
        assert!(slots.take().is_none());
        assert_eq!(slots.open(), 2);
        drop(first);
        assert_eq!(slots.open(), 1);
        assert!(slots.take().is_some());
    }

    #[test]
    fn failures_in_a_row_pause_longer_up_to_a_second() {
        let mut backoff = AcceptBackoff::new("test");
        let emfile = || io::Error::from_raw_os_error(libc::EMFILE);
        let pauses: Vec<u128> = (0..10)
            .map(|_| backoff.pause_after(emfile()).unwrap().as_millis())
            .collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        // One connection's own problem costs no pause and ends nothing.
        let reset = io::Error::from(io::ErrorKind::ConnectionAborted);
        assert_eq!(backoff.pause_after(reset), None);
        backoff.accepted();
        assert_eq!(backoff.pause_after(emfile()), Some(BACKOFF_FIRST));
    }
}
