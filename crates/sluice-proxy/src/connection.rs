//! One admitted client: its connection to the server and the threads moving its
//! bytes both ways, observed on the way.
//!
//! Threads per connection, the fewest blocking sockets allow without losing the
//! delay's precision:
//!
//! - **two** when nothing is shaped (no delay, jitter or bandwidth cap): one per
//!   direction, each reading, observing and writing in turn;
//! - **four** when something is: a reader and a writer per direction. The reader
//!   must be blocked in `read` when bytes arrive, to stamp them with their arrival
//!   time, while the writer sleeps until an earlier chunk's delivery time; and the
//!   directions cannot share a writer, because either side's write may block (a
//!   client not reading its results) while the other direction must keep flowing.
//!
//! The first thread connects to the server itself, so the acceptor never waits
//! for the server, and no thread is spent only on watching the others.
//!
//! Every thread holds the connection's [`Lease`]: its place among the open
//! connections, given back when the last thread ends. A thread that panics
//! closes both sockets as it unwinds ([`CloseOnPanic`]), so the others, blocked
//! on those sockets, end too and the place is given back: a bug costs one
//! connection, never a slot for good.
//!
//! Faults act in the reading thread of each direction: every chunk read is
//! first scanned for the faults' triggers (`fault::live`), the bytes before a
//! trigger are passed on, then the fault acts. A cut or reset decided by a
//! reader whose writer holds bytes back is queued behind those bytes, so the
//! peer gets exactly what came before it.
//!
//! A side's close ends the connection whatever a fault holds back: the
//! client's at once, dropping what is held (its session on the server must not
//! outlive it), the server's once what it sent is delivered, without waiting
//! for its delay. The reader of each side sees its close when it reads; a
//! thread waiting on a fault's time looks for it every few milliseconds
//! (`LiveFaults::watch`), so neither a delay nor a stall nor a full queue keeps
//! a connection's slot after its client has gone.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::fault::live::{abort_on_close, Act, Closing, Cursor, LiveFaults, POLL};
use crate::fault::{Action, FaultList, Trigger};
use crate::observe::Observer;
use crate::shaping::{Schedule, Shaping};
use crate::shared::{Shared, Slot, Tracked};

/// Bytes read from a socket at once.
const CHUNK: usize = 64 * 1024;
/// Chunks queued per direction before the reader waits: bounds memory while a
/// large delay holds data back.
const QUEUE: usize = 256;
/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What every admitted connection starts with.
#[derive(Clone)]
pub(crate) struct Setup {
    /// The server.
    pub(crate) upstream: SocketAddr,
    /// The proxy's delay, jitter and bandwidth.
    pub(crate) shaping: Shaping,
    /// The faults in force.
    pub(crate) faults: Arc<FaultList>,
}

/// What every thread of one connection holds: copies of its sockets, for a
/// thread that panics to close, and its place among the open connections.
pub(crate) struct Lease {
    // Declared first, so dropped first: the sockets are closed before the
    // slot is given back, and a new client never finds the server still
    // holding the old one's connection.
    sockets: Mutex<Vec<TcpStream>>,
    slot: Slot,
}

impl Lease {
    /// The lease of a connection from `client`, holding `slot`.
    fn new(slot: Slot, client: &TcpStream) -> io::Result<Lease> {
        Ok(Lease {
            sockets: Mutex::new(vec![client.try_clone()?]),
            slot,
        })
    }

    /// Keeps a copy of `socket` (the server's), to close on a panic.
    fn keep(&self, socket: &TcpStream) -> io::Result<()> {
        let copy = socket.try_clone()?;
        self.sockets().push(copy);
        Ok(())
    }

    /// Shuts every socket down both ways: the connection's threads, blocked
    /// reading or writing them, wake and end.
    fn close_all(&self) {
        for socket in self.sockets().iter() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    /// The sockets, even if a thread panicked while holding them: closing
    /// them is what a panic calls for.
    fn sockets(&self) -> std::sync::MutexGuard<'_, Vec<TcpStream>> {
        self.sockets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The proxy's shared state.
    fn shared(&self) -> &Shared {
        self.slot.shared()
    }
}

/// Closes a connection whose thread panics: dropped as the thread unwinds, it
/// shuts both sockets down. Without it the other threads would wait on their
/// sockets for good, holding the connection's slot, and the client would
/// wait for an answer that never comes.
struct CloseOnPanic<'a>(&'a Lease);

impl Drop for CloseOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.close_all();
        }
    }
}

/// Starts the threads of an admitted client; `slot` is given back when the last
/// of them ends.
pub(crate) fn start(client: TcpStream, setup: Setup, slot: Slot) -> io::Result<()> {
    let lease = Arc::new(Lease::new(slot, &client)?);
    spawn("sluice-proxy-to-server", lease, move |lease| {
        run(client, &setup, lease)
    })?;
    Ok(())
}

/// Starts a named thread holding the connection's `lease` until `body`
/// returns, or closing the connection if `body` panics.
fn spawn(
    name: &str,
    lease: Arc<Lease>,
    body: impl FnOnce(&Arc<Lease>) + Send + 'static,
) -> io::Result<()> {
    thread::Builder::new().name(name.into()).spawn(move || {
        let guard = CloseOnPanic(&lease);
        // The sockets `body` owns are closed when it returns, before the slot
        // is given back (when the last thread drops the lease).
        body(&lease);
        drop(guard);
        drop(lease);
    })?;
    Ok(())
}

/// A cut or reset without a trigger ends a new client's connection before
/// the server is reached.
fn closed_at_once(client: &TcpStream, faults: &FaultList) -> bool {
    let Some(entry) = faults.claim_first(|fault| {
        fault.trigger == Trigger::Now && matches!(fault.action, Action::Cut | Action::Reset)
    }) else {
        return false;
    };
    if entry.fault.action == Action::Reset {
        abort_on_close(client);
    } else {
        let _ = client.shutdown(Shutdown::Both);
    }
    true
}

/// Connects to the server, then moves the client's bytes to it on this thread
/// and starts the other direction's.
fn run(client: TcpStream, setup: &Setup, lease: &Arc<Lease>) {
    let Ok(client_address) = client.peer_addr() else {
        return;
    };
    if closed_at_once(&client, &setup.faults) {
        return;
    }
    let Ok(server) = TcpStream::connect_timeout(&setup.upstream, CONNECT_TIMEOUT) else {
        // Nothing to forward to: close the client's side at once.
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    if lease.keep(&server).is_err() {
        // A connection a panic could not close is not started.
        return close_both(&client, &server);
    }
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let tracked = lease.shared().track(|id| Tracked {
        id,
        client: client_address,
        observer: Mutex::new(Observer::new()),
    });
    let seed = tracked.id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let (Ok(client_writer), Ok(server_reader), Ok(live)) = (
        client.try_clone(),
        server.try_clone(),
        LiveFaults::new(setup.faults.clone(), &client, &server),
    ) else {
        return;
    };
    let live = Arc::new(live);
    let base = setup.shaping.one_way();
    let upward = Direction {
        from: client,
        to: server,
        schedule: Schedule::new(live.link(base, true), seed),
        tracked: tracked.clone(),
        cursor: Cursor::new(live.clone(), true),
    };
    let downward = Direction {
        from: server_reader,
        to: client_writer,
        schedule: Schedule::new(live.link(base, false), seed ^ 0xa5a5),
        tracked,
        cursor: Cursor::new(live, false),
    };
    if spawn("sluice-proxy-to-client", lease.clone(), move |lease| {
        downward.run(lease)
    })
    .is_err()
    {
        // Dropping both sockets closes the connection on both sides.
        return;
    }
    upward.run(lease);
}

/// One direction of a connection.
struct Direction {
    from: TcpStream,
    to: TcpStream,
    schedule: Schedule,
    tracked: Arc<Tracked>,
    /// The faults, from this direction (which way it goes included).
    cursor: Cursor,
}

impl Direction {
    /// Moves bytes until either side ends: inline when nothing is shaped,
    /// otherwise through a writer thread of its own.
    fn run(self, lease: &Arc<Lease>) {
        let Direction {
            from,
            to,
            schedule,
            tracked,
            cursor,
        } = self;
        if !schedule.holds_back() {
            return Pump::new(Sink::Socket(to), cursor, tracked).run(from);
        }
        let (sender, receiver) = sync_channel::<Item>(QUEUE);
        let upward = cursor.upward();
        let name = if upward {
            "sluice-proxy-to-server-writer"
        } else {
            "sluice-proxy-to-client-writer"
        };
        let Ok(writer_to) = to.try_clone() else {
            return close_both(&from, &to);
        };
        let live = cursor.live().clone();
        if spawn(name, lease.clone(), move |_| {
            write_side(writer_to, receiver, schedule, &live, upward)
        })
        .is_err()
        {
            // The other direction's threads hold these sockets too: shut them
            // down, or those threads would wait for bytes that never come.
            return close_both(&from, &to);
        }
        drop(to);
        Pump::new(Sink::Queue(sender), cursor, tracked).run(from);
    }
}

/// Where one direction's bytes go once read and observed.
enum Sink {
    /// Straight to the socket: nothing is held back, so no queue.
    Socket(TcpStream),
    /// To the direction's writer thread, stamped with their arrival time.
    Queue(SyncSender<Item>),
}

/// What a reader hands its writer.
enum Item {
    /// Bytes and when they arrived.
    Bytes(Instant, Vec<u8>),
    /// A fault ends the connection once the bytes before are delivered.
    Close(Closing),
}

impl Sink {
    /// Passes bytes on; false when the other side is gone, or the connection
    /// closed while the queue was full.
    fn forward(&mut self, bytes: &[u8], arrived: Instant, live: &LiveFaults) -> bool {
        let sender = match self {
            Sink::Socket(to) => return write_or_close(to, bytes),
            Sink::Queue(sender) => sender,
        };
        let mut item = Item::Bytes(arrived, bytes.to_vec());
        loop {
            match sender.try_send(item) {
                Ok(()) => return true,
                Err(TrySendError::Disconnected(_)) => return false,
                // The writer holds the queue's worth back: wait for room,
                // watching the sockets meanwhile.
                Err(TrySendError::Full(again)) => item = again,
            }
            thread::sleep(POLL);
            live.watch();
            if live.closed() {
                return false;
            }
        }
    }

    /// Ends the connection for a fault: at once, or after what is queued.
    fn close(self, closing: Closing, live: &LiveFaults) {
        match self {
            Sink::Socket(_) => live.close(closing),
            Sink::Queue(sender) => {
                let _ = sender.send(Item::Close(closing));
            }
        }
    }

    /// The server's stream ended: passes the end on to the client (FIN). A
    /// writer does so once it has delivered everything queued, when the
    /// sender is dropped.
    fn end(self, live: &LiveFaults) {
        if let Sink::Socket(to) = self {
            live.end_stream(&to, false);
        }
    }
}

/// One direction's reading side: reads, applies faults, observes, passes on.
struct Pump {
    sink: Sink,
    cursor: Cursor,
    tracked: Arc<Tracked>,
}

impl Pump {
    fn new(sink: Sink, cursor: Cursor, tracked: Arc<Tracked>) -> Pump {
        Pump {
            sink,
            cursor,
            tracked,
        }
    }

    /// Moves bytes from `from` until either side ends or a fault closes the
    /// connection.
    fn run(mut self, mut from: TcpStream) {
        let live = self.cursor.live().clone();
        let upward = self.cursor.upward();
        let mut buffer = vec![0u8; CHUNK];
        loop {
            let count = match from.read(&mut buffer) {
                Ok(0) | Err(_) if upward => return live.client_left(),
                Ok(0) | Err(_) => {
                    live.server_left();
                    return self.sink.end(&live);
                }
                Ok(count) => count,
            };
            let mut arrived = Instant::now();
            let chunk = &buffer[..count];
            let mut position = 0;
            for event in self.cursor.scan(chunk) {
                if !self.pass(&chunk[position..event.at], &mut arrived) {
                    return stop_reading(&from);
                }
                position = event.at;
                if let Act::Close(closing) = live.fire(&event) {
                    return self.sink.close(closing, &live);
                }
            }
            if !self.pass(&chunk[position..], &mut arrived) {
                return stop_reading(&from);
            }
        }
    }

    /// Passes `bytes` on once no stall holds this direction (bytes held by a
    /// stall arrive when it ends); false when the connection is over.
    fn pass(&mut self, bytes: &[u8], arrived: &mut Instant) -> bool {
        if bytes.is_empty() {
            return true;
        }
        let live = self.cursor.live();
        let upward = self.cursor.upward();
        if live.wait_while_stalled(upward) {
            *arrived = Instant::now();
        }
        if live.closed() {
            return false;
        }
        self.tracked.observe(bytes, upward);
        self.sink.forward(bytes, *arrived, live)
    }
}

/// The other side is gone: stop reading this one too.
fn stop_reading(from: &TcpStream) {
    let _ = from.shutdown(Shutdown::Read);
}

/// Writes `bytes` to `to`; if that fails, closes `to` both ways, so the thread
/// reading it (the other direction) stops too. False when the write failed.
fn write_or_close(to: &mut TcpStream, bytes: &[u8]) -> bool {
    #[cfg(test)]
    tests::panic_on_purpose(bytes);
    let written = to.write_all(bytes).is_ok();
    if !written {
        let _ = to.shutdown(Shutdown::Both);
    }
    written
}

/// Ends the connection on both sides at once (a direction could not start).
fn close_both(from: &TcpStream, to: &TcpStream) {
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Delivers one direction's chunks at their scheduled times, in order; closes
/// the connection where a fault said to, forwards the end of the stream, and
/// on a failed write closes the socket both ways so the reader on the other
/// side stops too. Once the server has closed its side, chunks for the client
/// go at once and those for the server not at all.
fn write_side(
    mut to: TcpStream,
    receiver: Receiver<Item>,
    mut schedule: Schedule,
    live: &LiveFaults,
    upward: bool,
) {
    for item in receiver {
        let (arrived, bytes) = match item {
            Item::Bytes(arrived, bytes) => (arrived, bytes),
            Item::Close(closing) => return live.close(closing),
        };
        live.wait_until(schedule.deliver_at(arrived, bytes.len()));
        if live.closed() || (upward && live.server_closed()) {
            return;
        }
        if !write_or_close(&mut to, &bytes) {
            return;
        }
    }
    live.end_stream(&to, upward);
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    use sluice_core::Meter;
    use sluice_postgres::config::Target;
    use sluice_postgres::tls::TlsSettings;
    use sluice_postgres::{Config, Connection};
    use sluice_testkit::TestDb;

    use crate::{Proxy, Shaping, DEFAULT_MAX_CONNECTIONS};

    /// Bytes that make the thread writing them on panic, standing for any bug
    /// in a connection's threads.
    const PANIC_ON_PURPOSE: &[u8] = b"sluice-proxy test: panic on purpose";

    /// Panics when `bytes` hold [`PANIC_ON_PURPOSE`].
    pub(super) fn panic_on_purpose(bytes: &[u8]) {
        if bytes
            .windows(PANIC_ON_PURPOSE.len())
            .any(|window| window == PANIC_ON_PURPOSE)
        {
            panic!("a connection's thread panics on purpose");
        }
    }

    /// Polls until the proxy reports no open connection, or 10 s pass;
    /// returns the last count.
    fn open_connections_settle(proxy: &crate::ProxyHandle) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let open = proxy.report().open_connections;
            if open == 0 || Instant::now() >= deadline {
                return open;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[tokio::test]
    async fn a_panicking_connection_thread_closes_both_sides_and_frees_its_slot() {
        let db = TestDb::new();
        let mut config: Config = db.url().parse().unwrap();
        let Target::Tcp(host, port) = config.targets[0].clone() else {
            panic!("the test server is reached over TCP");
        };
        config.tls = TlsSettings::disabled();
        // The bytes to the server written inline, then by a writer thread.
        let shaped = Shaping {
            rtt: Duration::from_millis(2),
            ..Shaping::default()
        };
        for shaping in [Shaping::default(), shaped] {
            let proxy = Proxy::new("127.0.0.1:0", &format!("{host}:{port}"), shaping)
                .start()
                .unwrap();
            // More panics than the limit: one slot kept by each would leave
            // none for the clients after them.
            for attempt in 0..DEFAULT_MAX_CONNECTIONS + 8 {
                let mut client = TcpStream::connect(proxy.address()).unwrap();
                client
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                client.write_all(PANIC_ON_PURPOSE).unwrap();
                let mut answer = Vec::new();
                let end = client.read_to_end(&mut answer);
                assert!(
                    end.is_ok()
                        || end.as_ref().unwrap_err().kind() == std::io::ErrorKind::ConnectionReset,
                    "{shaping:?}, attempt {attempt}: the connection is closed, not left \
                     hanging: {end:?}"
                );
                assert!(
                    answer.is_empty(),
                    "{shaping:?}, attempt {attempt}: closed, not refused: {:?}",
                    String::from_utf8_lossy(&answer)
                );
            }
            assert_eq!(open_connections_settle(&proxy), 0, "{shaping:?}");
            // Every slot is free again: the limit's worth of clients at once.
            config.targets = vec![Target::Tcp("127.0.0.1".into(), proxy.address().port())];
            let mut sessions = Vec::new();
            for _ in 0..DEFAULT_MAX_CONNECTIONS {
                let session = Connection::connect(&config, &Meter::new()).await;
                sessions.push(session.unwrap_or_else(|error| panic!("{shaping:?}: {error}")));
            }
            for session in sessions {
                session.close().await;
            }
        }
    }
}
