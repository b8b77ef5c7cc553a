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
//! Faults act in the reading thread of each direction: every chunk read is
//! first scanned for the faults' triggers (`fault::live`), the bytes before a
//! trigger are passed on, then the fault acts. A cut or reset decided by a
//! reader whose writer holds bytes back is queued behind those bytes, so the
//! peer gets exactly what came before it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::fault::live::{abort_on_close, Act, Closing, Cursor, LiveFaults};
use crate::fault::{Action, FaultList, Trigger};
use crate::observe::Observer;
use crate::proxy::Slot;
use crate::shaping::{sleep_until, Schedule, Shaping};

/// Bytes read from a socket at once.
const CHUNK: usize = 64 * 1024;
/// Chunks queued per direction before the reader waits: bounds memory while a
/// large delay holds data back.
const QUEUE: usize = 256;
/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection as the report sees it.
pub(crate) struct Tracked {
    pub(crate) id: u64,
    pub(crate) client: SocketAddr,
    pub(crate) observer: Mutex<Observer>,
}

impl Tracked {
    fn observe(&self, bytes: &[u8], upward: bool) {
        let mut observer = self.observer.lock().expect("observer");
        if upward {
            observer.from_client(bytes);
        } else {
            observer.from_server(bytes);
        }
    }
}

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

/// Starts the threads of an admitted client; `slot` is given back when the last
/// of them ends.
pub(crate) fn start(client: TcpStream, setup: Setup, slot: Slot) -> io::Result<()> {
    let slot = Arc::new(slot);
    spawn("sluice-proxy-to-server", slot.clone(), move |slot| {
        run(client, &setup, slot)
    })?;
    Ok(())
}

/// Starts a named thread holding the connection's `slot` until `body` returns.
fn spawn(
    name: &str,
    slot: Arc<Slot>,
    body: impl FnOnce(&Arc<Slot>) + Send + 'static,
) -> io::Result<()> {
    thread::Builder::new().name(name.into()).spawn(move || {
        // The sockets `body` owns are closed when it returns, before the slot
        // is given back (when the last thread drops it).
        body(&slot);
        drop(slot);
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
fn run(client: TcpStream, setup: &Setup, slot: &Arc<Slot>) {
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
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let tracked = slot.shared().track(|id| Tracked {
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
    if spawn("sluice-proxy-to-client", slot.clone(), move |slot| {
        downward.run(slot)
    })
    .is_err()
    {
        // Dropping both sockets closes the connection on both sides.
        return;
    }
    upward.run(slot);
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
    fn run(self, slot: &Arc<Slot>) {
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
        if spawn(name, slot.clone(), move |_| {
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
    /// Passes bytes on; false when the other side is gone.
    fn forward(&mut self, bytes: &[u8], arrived: Instant) -> bool {
        match self {
            Sink::Socket(to) => {
                let written = to.write_all(bytes).is_ok();
                if !written {
                    close_after_failed_write(to);
                }
                written
            }
            Sink::Queue(sender) => sender.send(Item::Bytes(arrived, bytes.to_vec())).is_ok(),
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

    /// The stream ended: passes the end on (FIN). A writer does so once it
    /// has delivered everything queued, when the sender is dropped.
    fn end(self, live: &LiveFaults, upward: bool) {
        if let Sink::Socket(to) = self {
            live.end_stream(&to, upward);
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
                Ok(0) | Err(_) => return self.sink.end(&live, upward),
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
        self.sink.forward(bytes, *arrived)
    }
}

/// The other side is gone: stop reading this one too.
fn stop_reading(from: &TcpStream) {
    let _ = from.shutdown(Shutdown::Read);
}

/// Closes a socket a write to failed, both ways, so the thread reading it (the
/// other direction) stops too.
fn close_after_failed_write(to: &TcpStream) {
    let _ = to.shutdown(Shutdown::Both);
}

/// Ends the connection on both sides at once (a direction could not start).
fn close_both(from: &TcpStream, to: &TcpStream) {
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Delivers one direction's chunks at their scheduled times, in order; closes
/// the connection where a fault said to, forwards the end of the stream, and
/// on a failed write closes the socket both ways so the reader on the other
/// side stops too.
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
        sleep_until(schedule.deliver_at(arrived, bytes.len()));
        if live.closed() {
            return;
        }
        if to.write_all(&bytes).is_err() {
            close_after_failed_write(&to);
            return;
        }
    }
    live.end_stream(&to, upward);
}
