//! The state the proxy's parts share ([`Shared`]): the acceptor admits a
//! client into a [`Slot`] among the open connections, the connection's threads
//! record what they see in its [`Tracked`] entry, a refusal counts itself, and
//! the handle reads it all for the report.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::observe::Observer;

/// State shared by the acceptor, the connections' threads and the handle.
pub(crate) struct Shared {
    connections: Mutex<Vec<Arc<Tracked>>>,
    next_id: AtomicU64,
    /// Client connections open now (admitted and not yet fully closed).
    open: AtomicUsize,
    /// Client connections allowed open at once.
    pub(crate) max_connections: usize,
    /// Clients turned away since the start (or the last reset).
    refused: AtomicU64,
    /// The added round-trip time, for the report's waiting figures.
    pub(crate) rtt: Duration,
    /// Told when the proxy is to stop accepting clients.
    pub(crate) stop: Notify,
}

impl Shared {
    /// The state of a proxy that has seen nothing yet.
    pub(crate) fn new(max_connections: usize, rtt: Duration) -> Shared {
        Shared {
            connections: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            max_connections,
            refused: AtomicU64::new(0),
            rtt,
            stop: Notify::new(),
        }
    }

    /// Takes a place among the open connections, if one is free.
    pub(crate) fn take_slot(self: &Arc<Self>) -> Option<Slot> {
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

    /// The connections seen since the start (or the last reset).
    pub(crate) fn connections(&self) -> Vec<Arc<Tracked>> {
        self.connections.lock().expect("proxy state").clone()
    }

    /// Client connections open now.
    pub(crate) fn open_connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Clients turned away since the start (or the last reset).
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::SeqCst)
    }

    /// Forgets the connections seen and the clients turned away (the open
    /// connections keep their slots).
    pub(crate) fn forget(&self) {
        self.connections.lock().expect("proxy state").clear();
        self.refused.store(0, Ordering::SeqCst);
    }
}

/// A place among the open connections, held by every thread of one connection
/// (through its `connection::Lease`): it is given back when the last of them
/// ends, after the connection's sockets (to the client and to the server) are
/// closed.
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

/// A connection as the report sees it.
pub(crate) struct Tracked {
    pub(crate) id: u64,
    pub(crate) client: SocketAddr,
    pub(crate) observer: Mutex<Observer>,
}

impl Tracked {
    /// Observes bytes going to the server (`upward`) or to the client.
    pub(crate) fn observe(&self, bytes: &[u8], upward: bool) {
        let mut observer = self.observer.lock().expect("observer");
        if upward {
            observer.from_client(bytes);
        } else {
            observer.from_server(bytes);
        }
    }
}
