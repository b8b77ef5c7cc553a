//! [`Proxy`]: accept clients, connect each to the upstream server, and move bytes
//! both ways through a [`Schedule`], observing them on the way.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::observe::Observer;
use crate::report::{findings, ConnectionReport, Report};
use crate::shaping::{sleep_until, Schedule, Shaping};

/// Bytes read from a socket at once.
const CHUNK: usize = 64 * 1024;
/// Chunks queued per direction before the reader waits: bounds memory while a
/// large delay holds data back.
const QUEUE: usize = 256;

struct Tracked {
    id: u64,
    client: SocketAddr,
    observer: Mutex<Observer>,
}

#[derive(Default)]
struct Shared {
    connections: Mutex<Vec<Arc<Tracked>>>,
    next_id: AtomicU64,
    stopping: AtomicBool,
}

/// A proxy to start.
#[derive(Debug, Clone)]
pub struct Proxy {
    listen: String,
    upstream: String,
    shaping: Shaping,
}

/// A running proxy.
pub struct ProxyHandle {
    address: SocketAddr,
    shared: Arc<Shared>,
}

impl Proxy {
    /// A proxy listening on `listen` (e.g. `127.0.0.1:6432`, port 0 for any)
    /// forwarding to `upstream` with `shaping` applied.
    pub fn new(listen: &str, upstream: &str, shaping: Shaping) -> Proxy {
        Proxy {
            listen: listen.to_owned(),
            upstream: upstream.to_owned(),
            shaping,
        }
    }

    /// Binds and starts accepting in the background.
    pub fn start(self) -> io::Result<ProxyHandle> {
        let listener = TcpListener::bind(&self.listen)?;
        let address = listener.local_addr()?;
        let upstream: SocketAddr =
            self.upstream.to_socket_addrs()?.next().ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "upstream address not found")
            })?;
        let shared = Arc::new(Shared::default());
        let accepting = shared.clone();
        let shaping = self.shaping;
        thread::Builder::new()
            .name("sluice-proxy-accept".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if accepting.stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let shared = accepting.clone();
                    let _ = thread::Builder::new()
                        .name("sluice-proxy-connection".into())
                        .spawn(move || serve(client, upstream, shaping, shared));
                }
            })?;
        Ok(ProxyHandle { address, shared })
    }
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
                .filter_map(|tracked| {
                    let observer = tracked.observer.lock().expect("observer");
                    if observer.cancel_request {
                        return None;
                    }
                    let mut statements: Vec<_> = observer.stats.values().cloned().collect();
                    statements.sort_by(|a, b| {
                        b.round_trips
                            .cmp(&a.round_trips)
                            .then(a.statement.cmp(&b.statement))
                    });
                    Some(ConnectionReport {
                        id: tracked.id,
                        client: tracked.client.to_string(),
                        round_trips: observer.round_trips,
                        bytes_to_server: observer.bytes_to_server,
                        bytes_to_client: observer.bytes_to_client,
                        readable: !observer.opaque,
                        findings: findings(
                            &statements,
                            observer.small_fetches,
                            observer.fetch_size,
                            observer.suspensions,
                            observer.function_calls,
                        ),
                        statements,
                    })
                })
                .collect(),
        }
    }

    /// Forgets everything seen so far (connections still open keep flowing).
    pub fn reset(&self) {
        self.shared.connections.lock().expect("proxy state").clear();
    }

    /// Stops accepting new clients; open connections run to their end.
    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_millis(200));
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(client: TcpStream, upstream: SocketAddr, shaping: Shaping, shared: Arc<Shared>) {
    let Ok(client_address) = client.peer_addr() else {
        return;
    };
    let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(10)) else {
        // Nothing to forward to: close the client's side at once.
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let tracked = Arc::new(Tracked {
        id: shared.next_id.fetch_add(1, Ordering::SeqCst) + 1,
        client: client_address,
        observer: Mutex::new(Observer::new()),
    });
    shared
        .connections
        .lock()
        .expect("proxy state")
        .push(tracked.clone());
    let seed = tracked.id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let pipes = [
        (client.try_clone(), server.try_clone(), true, seed),
        (server.try_clone(), client.try_clone(), false, seed ^ 0xa5a5),
    ];
    let mut threads = Vec::new();
    for (from, to, upward, seed) in pipes {
        let (Ok(from), Ok(to)) = (from, to) else {
            return;
        };
        let tracked = tracked.clone();
        let (sender, receiver) = sync_channel::<(Instant, Vec<u8>)>(QUEUE);
        let reader_to = to.try_clone();
        threads.push(thread::spawn(move || {
            read_side(from, reader_to.ok(), sender, &tracked, upward)
        }));
        threads.push(thread::spawn(move || {
            write_side(to, receiver, Schedule::new(shaping, seed))
        }));
    }
    for thread in threads {
        let _ = thread.join();
    }
}

/// Reads one direction, observes it and queues it with its arrival time.
fn read_side(
    mut from: TcpStream,
    to: Option<TcpStream>,
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
                {
                    let mut observer = tracked.observer.lock().expect("observer");
                    if upward {
                        observer.from_client(&buffer[..count]);
                    } else {
                        observer.from_server(&buffer[..count]);
                    }
                }
                if sender.send((arrived, buffer[..count].to_vec())).is_err() {
                    // The other side is gone: stop reading this one too.
                    let _ = from.shutdown(Shutdown::Read);
                    break;
                }
            }
        }
    }
    drop(sender);
    // The writer forwards the end (FIN) once everything queued is delivered.
    drop(to);
}

/// Delivers one direction's chunks at their scheduled times, in order; forwards
/// the end of the stream, and on a failed write closes both sockets so the
/// reader on the other side stops too.
fn write_side(mut to: TcpStream, receiver: Receiver<(Instant, Vec<u8>)>, mut schedule: Schedule) {
    for (arrived, bytes) in receiver {
        let at = schedule.deliver_at(arrived, bytes.len());
        sleep_until(at);
        if to.write_all(&bytes).is_err() {
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
