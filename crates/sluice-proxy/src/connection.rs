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

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

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

/// Starts the threads of an admitted client; `slot` is given back when the last
/// of them ends.
pub(crate) fn start(
    client: TcpStream,
    upstream: SocketAddr,
    shaping: Shaping,
    slot: Slot,
) -> io::Result<()> {
    let slot = Arc::new(slot);
    spawn("sluice-proxy-to-server", slot.clone(), move |slot| {
        run(client, upstream, shaping, slot)
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

/// Connects to the server, then moves the client's bytes to it on this thread
/// and starts the other direction's.
fn run(client: TcpStream, upstream: SocketAddr, shaping: Shaping, slot: &Arc<Slot>) {
    let Ok(client_address) = client.peer_addr() else {
        return;
    };
    let Ok(server) = TcpStream::connect_timeout(&upstream, CONNECT_TIMEOUT) else {
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
    let (Ok(client_writer), Ok(server_reader)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let upward = Direction {
        from: client,
        to: server,
        upward: true,
        schedule: Schedule::new(shaping, seed),
        tracked: tracked.clone(),
    };
    let downward = Direction {
        from: server_reader,
        to: client_writer,
        upward: false,
        schedule: Schedule::new(shaping, seed ^ 0xa5a5),
        tracked,
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
    /// From the client to the server.
    upward: bool,
    schedule: Schedule,
    tracked: Arc<Tracked>,
}

impl Direction {
    /// Moves bytes until either side ends: inline when nothing is shaped,
    /// otherwise through a writer thread of its own.
    fn run(self, slot: &Arc<Slot>) {
        if !self.schedule.holds_back() {
            return self.relay();
        }
        let (sender, receiver) = sync_channel::<(Instant, Vec<u8>)>(QUEUE);
        let Direction {
            from,
            to,
            upward,
            schedule,
            tracked,
        } = self;
        let name = if upward {
            "sluice-proxy-to-server-writer"
        } else {
            "sluice-proxy-to-client-writer"
        };
        let Ok(writer_to) = to.try_clone() else {
            return close_both(&from, &to);
        };
        if spawn(name, slot.clone(), move |_| {
            write_side(writer_to, receiver, schedule)
        })
        .is_err()
        {
            // The other direction's threads hold these sockets too: shut them
            // down, or those threads would wait for bytes that never come.
            return close_both(&from, &to);
        }
        drop(to);
        read_side(from, sender, &tracked, upward);
    }

    /// Reads, observes and writes in turn: no delay to keep, so no queue.
    fn relay(mut self) {
        let mut buffer = vec![0u8; CHUNK];
        loop {
            let count = match self.from.read(&mut buffer) {
                Ok(0) | Err(_) => {
                    // Forward the end of the stream (FIN).
                    let _ = self.to.shutdown(Shutdown::Write);
                    return;
                }
                Ok(count) => count,
            };
            self.tracked.observe(&buffer[..count], self.upward);
            if self.to.write_all(&buffer[..count]).is_err() {
                close_after_failed_write(&self.to);
                let _ = self.from.shutdown(Shutdown::Read);
                return;
            }
        }
    }
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

/// Reads one direction, observes it and queues it with its arrival time.
fn read_side(
    mut from: TcpStream,
    sender: SyncSender<(Instant, Vec<u8>)>,
    tracked: &Tracked,
    upward: bool,
) {
    let mut buffer = vec![0u8; CHUNK];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(count) => {
                let arrived = Instant::now();
                tracked.observe(&buffer[..count], upward);
                if sender.send((arrived, buffer[..count].to_vec())).is_err() {
                    // The other side is gone: stop reading this one too.
                    let _ = from.shutdown(Shutdown::Read);
                    break;
                }
            }
        }
    }
    // Dropping the sender tells the writer the stream ended: it forwards the end
    // (FIN) once everything queued is delivered.
}

/// Delivers one direction's chunks at their scheduled times, in order; forwards
/// the end of the stream, and on a failed write closes the socket both ways so
/// the reader on the other side stops too.
fn write_side(mut to: TcpStream, receiver: Receiver<(Instant, Vec<u8>)>, mut schedule: Schedule) {
    for (arrived, bytes) in receiver {
        let at = schedule.deliver_at(arrived, bytes.len());
        sleep_until(at);
        if to.write_all(&bytes).is_err() {
            close_after_failed_write(&to);
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
