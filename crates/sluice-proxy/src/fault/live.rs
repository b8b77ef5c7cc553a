//! The faults of one open connection: [`LiveFaults`], shared by the threads of
//! both directions, and a [`Cursor`] per direction that finds, in each chunk
//! read, the offsets where a fault acts.
//!
//! The connection's threads ask the cursor about every chunk before passing
//! it on, forward the bytes before each [`Event`], then [`LiveFaults::fire`]
//! it. Counting starts when a connection first sees a fault, so a fault added
//! at run time counts an open connection's rows from then on. Latency and
//! bandwidth are decided when a connection opens (they choose how many
//! threads it gets); the other faults act on open connections too.
//!
//! No fault keeps a connection (its slot among the proxy's connections, and
//! its session on the server) open after a side has closed: every thread that
//! waits on a fault's time (a delay, a stall, a full queue) looks every
//! [`POLL`] whether either socket was closed by its peer ([`LiveFaults::watch`]),
//! bytes not yet read notwithstanding. When the client closes, the connection
//! ends at once ([`LiveFaults::client_left`]): what it sent that is still held
//! back is dropped and the server's side is closed, so its session ends. When
//! the server closes ([`LiveFaults::server_left`]), what it sent is delivered
//! without waiting out its delay, then the client's side is closed. Only a
//! slow close holds a close back, for its delay: that is what it is for.

use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::framing::{Framer, Handshake};
use super::registry::{Entry, FaultList};
use super::spec::{Action, Trigger};
use crate::shaping::{sleep_until, Link};

/// How often a stalled, delayed or slowly closing thread looks whether its
/// fault was removed, or a side closed, meanwhile.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// How a fault ends a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closing {
    /// Both sides closed in order (FIN).
    Cut,
    /// Both sides aborted (RST).
    Reset,
}

/// What a thread does after firing an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    /// Go on forwarding (a stall, if any, is waited out before the next bytes).
    Go,
    /// End the connection this way, once what came before is delivered.
    Close(Closing),
}

const OPEN: u8 = 0;
const CUT: u8 = 1;
const RESET: u8 = 2;

/// A fault as one connection follows it.
struct Armed {
    entry: Arc<Entry>,
    /// Bytes or messages counted towards its trigger on this connection.
    count: AtomicU64,
    /// Its trigger was reached on this connection.
    triggered: AtomicBool,
    /// Whether it acts on this connection (decided once: a `once` fault acts
    /// on the first connection that claims it).
    acts: Mutex<Option<bool>>,
}

impl Armed {
    fn new(entry: Arc<Entry>) -> Armed {
        Armed {
            entry,
            count: AtomicU64::new(0),
            triggered: AtomicBool::new(false),
            acts: Mutex::new(None),
        }
    }

    fn acts(&self) -> bool {
        *self
            .acts
            .lock()
            .expect("fault decision")
            .get_or_insert_with(|| self.entry.claim())
    }

    /// Where in a chunk of `length` bytes going `upward` the fault's trigger
    /// is reached, given the chunk's message starts; latched, so it is found
    /// once per connection.
    fn position(&self, length: usize, starts: &[(u8, usize)], upward: bool) -> Option<usize> {
        let fault = &self.entry.fault;
        let acting = matches!(
            fault.action,
            Action::Cut | Action::Reset | Action::Stall { .. }
        );
        if !acting || self.triggered.load(Ordering::SeqCst) || !self.entry.live() {
            return None;
        }
        let at = match fault.trigger {
            Trigger::Now => Some(0),
            Trigger::AfterBytes(n) if fault.direction.covers(upward) => {
                let before = self.count.fetch_add(length as u64, Ordering::SeqCst);
                (before..=before + length as u64)
                    .contains(&n)
                    .then(|| (n - before) as usize)
            }
            Trigger::AfterBytes(_) => None,
            Trigger::AtDataRow(k) if !upward => self.kth(k, starts),
            Trigger::AtCopyData(k) => self.kth(k, starts),
            Trigger::AtStatement(k) if upward => self.kth(k, starts),
            Trigger::AtDataRow(_) | Trigger::AtStatement(_) => None,
        }?;
        (!self.triggered.swap(true, Ordering::SeqCst)).then_some(at)
    }

    /// The message types its trigger counts (none for the others).
    fn counted_tags(&self) -> &'static [u8] {
        match self.entry.fault.trigger {
            Trigger::AtDataRow(_) => b"D",
            Trigger::AtCopyData(_) => b"d",
            Trigger::AtStatement(_) => b"QEF",
            Trigger::Now | Trigger::AfterBytes(_) => b"",
        }
    }

    /// The offset of the K-th message with one of `tags`, counting on from
    /// earlier chunks.
    fn kth(&self, k: u64, starts: &[(u8, usize)]) -> Option<usize> {
        let tags = self.counted_tags();
        starts
            .iter()
            .filter(|(tag, _)| tags.contains(tag))
            .find(|_| self.count.fetch_add(1, Ordering::SeqCst) + 1 == k)
            .map(|&(_, offset)| offset)
    }
}

/// A fault's trigger reached at an offset of a chunk.
pub(crate) struct Event {
    /// Bytes of the chunk to forward before it.
    pub(crate) at: usize,
    fault: Arc<Armed>,
}

/// A stall in force.
struct Stall {
    entry: Arc<Entry>,
    until: Option<Instant>,
}

impl Stall {
    /// Its time is up, or its fault was removed.
    fn over(&self, now: Instant) -> bool {
        self.entry.removed() || self.until.is_some_and(|until| until <= now)
    }

    fn holds(&self, upward: bool, now: Instant) -> bool {
        self.entry.fault.direction.covers(upward) && !self.over(now)
    }
}

/// The faults of one connection.
pub(crate) struct LiveFaults {
    list: Arc<FaultList>,
    /// The list's version when `armed` was built, and the faults it held.
    armed: Mutex<(u64, Vec<Arc<Armed>>)>,
    stalls: Mutex<Vec<Stall>>,
    closing: AtomicU8,
    /// The server closed its side: what it sent no longer waits for its delay.
    server_closed: AtomicBool,
    handshake: Arc<Handshake>,
    /// Copies of both sockets, so whichever thread fires can close both.
    client: TcpStream,
    server: TcpStream,
}

impl LiveFaults {
    /// The faults of a connection between `client` and `server` (copies of
    /// the sockets are kept until the connection's threads are done).
    pub(crate) fn new(
        list: Arc<FaultList>,
        client: &TcpStream,
        server: &TcpStream,
    ) -> std::io::Result<LiveFaults> {
        Ok(LiveFaults {
            list,
            armed: Mutex::new((u64::MAX, Vec::new())),
            stalls: Mutex::new(Vec::new()),
            closing: AtomicU8::new(OPEN),
            server_closed: AtomicBool::new(false),
            handshake: Arc::default(),
            client: client.try_clone()?,
            server: server.try_clone()?,
        })
    }

    /// The faults in force, as this connection follows them.
    fn armed(&self) -> Vec<Arc<Armed>> {
        let version = self.list.version();
        let mut armed = self.armed.lock().expect("armed faults");
        if armed.0 != version {
            let entries = self.list.entries();
            let faults = entries
                .into_iter()
                .map(|entry| {
                    armed
                        .1
                        .iter()
                        .find(|kept| kept.entry.id == entry.id)
                        .cloned()
                        .unwrap_or_else(|| Arc::new(Armed::new(entry)))
                })
                .collect();
            *armed = (version, faults);
        }
        armed.1.clone()
    }

    /// One way's link: `base` (the proxy's shaping) with the latency and
    /// bandwidth faults for that way added.
    pub(crate) fn link(&self, base: Link, upward: bool) -> Link {
        let mut link = base;
        for armed in self.armed() {
            let fault = armed.entry.fault;
            if !fault.direction.covers(upward) {
                continue;
            }
            match fault.action {
                Action::Latency { delay, jitter } if armed.acts() => {
                    link.delay += delay;
                    link.jitter += jitter;
                }
                Action::Bandwidth { rate } if armed.acts() => {
                    link.bandwidth = Some(link.bandwidth.map_or(rate, |cap| cap.min(rate)));
                }
                _ => {}
            }
        }
        link
    }

    /// Acts on a reached trigger: starts a stall, or says how to close.
    pub(crate) fn fire(&self, event: &Event) -> Act {
        let armed = &event.fault;
        if !armed.acts() {
            return Act::Go;
        }
        match armed.entry.fault.action {
            Action::Stall { duration } => {
                let until = duration.map(|duration| Instant::now() + duration);
                let stall = Stall {
                    entry: armed.entry.clone(),
                    until,
                };
                self.stalls.lock().expect("stalls").push(stall);
                Act::Go
            }
            Action::Cut => Act::Close(Closing::Cut),
            Action::Reset => Act::Close(Closing::Reset),
            _ => Act::Go,
        }
    }

    /// Waits while a stall holds the way given, or until the connection
    /// closes or the server has closed its side; returns whether it waited.
    pub(crate) fn wait_while_stalled(&self, upward: bool) -> bool {
        let mut waited = false;
        loop {
            let now = Instant::now();
            let wait = {
                let mut stalls = self.stalls.lock().expect("stalls");
                stalls.retain(|stall| !stall.over(now));
                stalls
                    .iter()
                    .filter(|stall| stall.holds(upward, now))
                    .map(|stall| stall.until.map_or(POLL, |until| until - now))
                    .max()
            };
            match wait {
                Some(wait) if !self.hurried() => std::thread::sleep(wait.min(POLL)),
                _ => return waited,
            }
            self.watch();
            waited = true;
        }
    }

    /// Sleeps until `deadline` (when a held-back chunk is due), unless the
    /// connection closes or the server closes its side first.
    pub(crate) fn wait_until(&self, deadline: Instant) {
        loop {
            let now = Instant::now();
            if now >= deadline || self.hurried() {
                return;
            }
            if deadline - now <= POLL {
                return sleep_until(deadline);
            }
            std::thread::sleep(POLL);
            self.watch();
        }
    }

    /// Whether a wait on a fault's time should end now: the connection is
    /// closed, or the server closed its side.
    pub(crate) fn hurried(&self) -> bool {
        self.closed() || self.server_closed()
    }

    /// Looks, without reading, whether either peer closed its side: the
    /// client leaving ends the connection ([`LiveFaults::client_left`]); the
    /// server leaving is noted ([`LiveFaults::server_left`]).
    pub(crate) fn watch(&self) {
        if hung_up(&self.client) {
            self.client_left();
        } else if hung_up(&self.server) {
            self.server_left();
        }
    }

    /// The client closed its side: after a slow close's delay for the way up,
    /// if one is in force, the connection ends at once, what is still held
    /// back either way dropped, and the server's side closed, so its session
    /// ends.
    pub(crate) fn client_left(&self) {
        self.hold_close(true);
        self.close(Closing::Cut);
    }

    /// The server closed its side: what it sent is delivered without waiting
    /// for its delay (and what the client sent is dropped).
    pub(crate) fn server_left(&self) {
        self.server_closed.store(true, Ordering::SeqCst);
    }

    /// Whether the server closed its side.
    pub(crate) fn server_closed(&self) -> bool {
        self.server_closed.load(Ordering::SeqCst)
    }

    /// Whether a fault closed the connection.
    pub(crate) fn closed(&self) -> bool {
        self.closing.load(Ordering::SeqCst) != OPEN
    }

    /// Ends the connection on both sides: `Cut` closes them in order; `Reset`
    /// makes the last close of each socket send a RST. A reset wakes the
    /// threads' reads without sending anything (shutting reading down sends
    /// no segment), so no FIN goes out before the RST.
    pub(crate) fn close(&self, closing: Closing) {
        let state = match closing {
            Closing::Cut => CUT,
            Closing::Reset => RESET,
        };
        if self
            .closing
            .compare_exchange(OPEN, state, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return;
        }
        for socket in [&self.client, &self.server] {
            match closing {
                Closing::Cut => {
                    let _ = socket.shutdown(Shutdown::Both);
                }
                Closing::Reset => {
                    abort_on_close(socket);
                    let _ = socket.shutdown(Shutdown::Read);
                }
            }
        }
    }

    /// Passes the end of one way's stream (FIN) on to `to`, after the delay of
    /// a slow-close fault for that way, and not at all when the connection is
    /// being reset.
    pub(crate) fn end_stream(&self, to: &TcpStream, upward: bool) {
        self.hold_close(upward);
        if self.closing.load(Ordering::SeqCst) != RESET {
            let _ = to.shutdown(Shutdown::Write);
        }
    }

    /// Waits out a slow close for the way given, if one is in force (until
    /// it is removed or the connection closes).
    fn hold_close(&self, upward: bool) {
        let slow = self
            .armed()
            .into_iter()
            .find_map(|armed| match armed.entry.fault.action {
                Action::SlowClose { delay }
                    if armed.entry.fault.direction.covers(upward) && armed.acts() =>
                {
                    Some((armed.entry.clone(), delay))
                }
                _ => None,
            });
        if let Some((entry, delay)) = slow {
            let until = Instant::now() + delay;
            while Instant::now() < until && !entry.removed() && !self.closed() {
                std::thread::sleep((until - Instant::now()).min(POLL));
            }
        }
    }
}

/// Whether the peer of `socket` has closed its side, or the connection is
/// gone, looked at without reading: on Linux, bytes not yet read do not hide
/// it (`POLLRDHUP`).
fn hung_up(socket: &TcpStream) -> bool {
    #[cfg(target_os = "linux")]
    const CLOSED: libc::c_short = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR;
    #[cfg(not(target_os = "linux"))]
    const CLOSED: libc::c_short = libc::POLLHUP | libc::POLLERR;
    let mut poll = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: CLOSED,
        revents: 0,
    };
    // SAFETY: one pollfd of a descriptor this connection owns, polled without
    // waiting.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & CLOSED != 0
}

/// Makes closing `socket` abort the connection with a RST (SO_LINGER 0).
pub(crate) fn abort_on_close(socket: &TcpStream) {
    let _ = socket2::SockRef::from(socket).set_linger(Some(Duration::ZERO));
}

/// One direction's view of the connection's faults.
pub(crate) struct Cursor {
    live: Arc<LiveFaults>,
    framer: Framer,
    upward: bool,
    starts: Vec<(u8, usize)>,
}

impl Cursor {
    /// The cursor of one direction (`upward`: client to server).
    pub(crate) fn new(live: Arc<LiveFaults>, upward: bool) -> Cursor {
        let framer = Framer::new(upward, live.handshake.clone());
        Cursor {
            live,
            framer,
            upward,
            starts: Vec::new(),
        }
    }

    /// The connection's faults.
    pub(crate) fn live(&self) -> &Arc<LiveFaults> {
        &self.live
    }

    /// Which way this cursor looks.
    pub(crate) fn upward(&self) -> bool {
        self.upward
    }

    /// The triggers reached in `chunk`, by offset (ties by the faults' order).
    pub(crate) fn scan(&mut self, chunk: &[u8]) -> Vec<Event> {
        let armed = self.live.armed();
        // Only the starts a trigger counts are kept: most chunks are rows,
        // and most proxies count none.
        let mut tags = Vec::new();
        for fault in &armed {
            tags.extend_from_slice(fault.counted_tags());
        }
        self.starts.clear();
        self.framer.starts(chunk, &tags, &mut self.starts);
        let mut events: Vec<Event> = armed
            .into_iter()
            .filter_map(|fault| {
                let at = fault.position(chunk.len(), &self.starts, self.upward)?;
                Some(Event { at, fault })
            })
            .collect();
        events.sort_by_key(|event| (event.at, event.fault.entry.id));
        events
    }
}
