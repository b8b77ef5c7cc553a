//! A TCP relay for tests of databases `sluice proxy` cannot stand in front of
//! (it speaks PostgreSQL only): it copies bytes both ways between each client
//! and the real server, and stalls a connection on purpose once the server, or
//! the client, has sent it a given number of bytes: from then on nothing is
//! forwarded either way, and the sockets stay open, as on a network that went
//! silent. Every connection counts its own bytes, so a second one (a `KILL
//! QUERY` after the stall) gets through while it stays under the limit.
//! Dropping the relay closes every connection.
//!
//! Given several upstreams it is also the tiniest load balancer: round robin,
//! one upstream per connection, each choice recorded ([`Relay::chosen`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

/// When a connection stops forwarding: after this many bytes from one side
/// (`None`: never for that side).
#[derive(Debug, Clone, Copy, Default)]
pub struct StallAfter {
    /// Bytes the server sent.
    pub from_server: Option<u64>,
    /// Bytes the client sent.
    pub from_client: Option<u64>,
}

impl StallAfter {
    /// Stalls once the server sent `bytes` on the connection.
    pub fn server_bytes(bytes: u64) -> StallAfter {
        StallAfter {
            from_server: Some(bytes),
            from_client: None,
        }
    }

    /// Stalls once the client sent `bytes` on the connection.
    pub fn client_bytes(bytes: u64) -> StallAfter {
        StallAfter {
            from_server: None,
            from_client: Some(bytes),
        }
    }
}

/// A running relay; its tasks and sockets end when it is dropped.
pub struct Relay {
    address: SocketAddr,
    chosen: Arc<Mutex<Vec<usize>>>,
    _runtime: Runtime,
}

impl Relay {
    /// Listens on a free loopback port and relays to `upstream`
    /// (`host:port`), stalling each connection as `stall` says.
    pub fn start(upstream: &str, stall: StallAfter) -> Relay {
        Relay::spawn(vec![upstream.to_owned()], stall)
    }

    /// Listens on a free loopback port and relays each new connection to the
    /// next of `upstreams` in turn, never stalling.
    pub fn round_robin(upstreams: Vec<String>) -> Relay {
        Relay::spawn(upstreams, StallAfter::default())
    }

    fn spawn(upstreams: Vec<String>, stall: StallAfter) -> Relay {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let address = listener.local_addr().unwrap();
        let chosen = Arc::new(Mutex::new(Vec::new()));
        let choices = chosen.clone();
        runtime.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let next = {
                    let mut choices = choices.lock().unwrap();
                    let next = choices.len() % upstreams.len();
                    choices.push(next);
                    next
                };
                tokio::spawn(relay(client, upstreams[next].clone(), stall));
            }
        });
        Relay {
            address,
            chosen,
            _runtime: runtime,
        }
    }

    /// For each connection accepted so far, in order, the index of the
    /// upstream it went to.
    pub fn chosen(&self) -> Vec<usize> {
        self.chosen.lock().unwrap().clone()
    }

    /// The address clients connect to (`127.0.0.1:PORT`).
    pub fn address(&self) -> String {
        self.address.to_string()
    }
}

/// Relays one client until either side closes, or for ever once stalled.
async fn relay(client: TcpStream, upstream: String, stall: StallAfter) {
    let Ok(server) = TcpStream::connect(&upstream).await else {
        return;
    };
    let stalled = Arc::new(AtomicBool::new(false));
    let (client_reader, client_writer) = client.into_split();
    let (server_reader, server_writer) = server.into_split();
    let up = forward(
        client_reader,
        server_writer,
        stall.from_client,
        stalled.clone(),
    );
    let down = forward(server_reader, client_writer, stall.from_server, stalled);
    tokio::join!(up, down);
}

/// Copies one direction, passing at most `limit` bytes; once it or the other
/// direction reached its limit, holds everything (the halves stay open).
async fn forward(
    mut reader: OwnedReadHalf,
    mut writer: OwnedWriteHalf,
    limit: Option<u64>,
    stalled: Arc<AtomicBool>,
) {
    let mut passed = 0u64;
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let Ok(read) = reader.read(&mut chunk).await else {
            return;
        };
        if read == 0 {
            let _ = writer.shutdown().await;
            return;
        }
        let allowed = limit.map_or(read as u64, |limit| (limit - passed).min(read as u64));
        let pass = if stalled.load(Ordering::SeqCst) {
            0
        } else {
            allowed as usize
        };
        if writer.write_all(&chunk[..pass]).await.is_err() {
            return;
        }
        passed += pass as u64;
        if pass < read {
            stalled.store(true, Ordering::SeqCst);
            // Keep both halves open and forward nothing more, either way.
            std::future::pending::<()>().await;
        }
    }
}
