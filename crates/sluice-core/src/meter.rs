//! Round trips and wire bytes, counted where they happen: at the socket.
//!
//! [`MeteredStream`] wraps any async byte stream. A round trip is counted each time
//! the client reads after having written: the client spoke, then had to wait for the
//! server to answer. Several writes before one read are one trip (that is what
//! pipelining buys), and data the server sends unasked (notices) costs none. Because
//! counting happens below every protocol, each feature reports the same figures and
//! tests can assert counts, which are deterministic where times are not.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

#[derive(Debug, Default)]
struct Counters {
    round_trips: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    wrote_since_last_read: AtomicBool,
}

/// Shared counters of one or more connections; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    counters: Arc<Counters>,
}

/// The counters at one moment; subtract two snapshots to measure an operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MeterSnapshot {
    /// Client writes that were followed by waiting for the server.
    pub round_trips: u64,
    /// Bytes written to the server.
    pub bytes_sent: u64,
    /// Bytes read from the server.
    pub bytes_received: u64,
}

impl std::ops::Sub for MeterSnapshot {
    type Output = MeterSnapshot;

    fn sub(self, earlier: MeterSnapshot) -> MeterSnapshot {
        MeterSnapshot {
            round_trips: self.round_trips - earlier.round_trips,
            bytes_sent: self.bytes_sent - earlier.bytes_sent,
            bytes_received: self.bytes_received - earlier.bytes_received,
        }
    }
}

impl std::ops::Add for MeterSnapshot {
    type Output = MeterSnapshot;

    fn add(self, other: MeterSnapshot) -> MeterSnapshot {
        MeterSnapshot {
            round_trips: self.round_trips + other.round_trips,
            bytes_sent: self.bytes_sent + other.bytes_sent,
            bytes_received: self.bytes_received + other.bytes_received,
        }
    }
}

impl Meter {
    /// A meter at zero.
    pub fn new() -> Meter {
        Meter::default()
    }

    /// The current counts.
    pub fn snapshot(&self) -> MeterSnapshot {
        MeterSnapshot {
            round_trips: self.counters.round_trips.load(Ordering::Relaxed),
            bytes_sent: self.counters.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.counters.bytes_received.load(Ordering::Relaxed),
        }
    }

    /// Wraps `stream` so its traffic is counted by this meter.
    pub fn wrap<S>(&self, stream: S) -> MeteredStream<S> {
        MeteredStream {
            inner: stream,
            meter: self.clone(),
        }
    }

    fn wrote(&self, bytes: usize) {
        self.counters
            .bytes_sent
            .fetch_add(bytes as u64, Ordering::Relaxed);
        self.counters
            .wrote_since_last_read
            .store(true, Ordering::Relaxed);
    }

    fn read(&self, bytes: usize) {
        self.counters
            .bytes_received
            .fetch_add(bytes as u64, Ordering::Relaxed);
        if self
            .counters
            .wrote_since_last_read
            .swap(false, Ordering::Relaxed)
        {
            self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A byte stream whose traffic is counted by a [`Meter`].
#[derive(Debug)]
pub struct MeteredStream<S> {
    inner: S,
    meter: Meter,
}

impl<S> MeteredStream<S> {
    /// The meter counting this stream.
    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for MeteredStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buffer.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(context, buffer);
        let read = buffer.filled().len() - before;
        if read > 0 {
            this.meter.read(read);
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for MeteredStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(context, buffer);
        if let Poll::Ready(Ok(written)) = &result {
            if *written > 0 {
                this.meter.wrote(*written);
            }
        }
        result
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(context)
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(context)
    }
}

/// Peak resident memory of this process so far (Linux `VmHWM`), if the platform tells.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_round_trip_is_a_write_followed_by_a_read() {
        let (client, mut server) = tokio::io::duplex(1024);
        let meter = Meter::new();
        let mut client = meter.wrap(client);
        let mut buffer = [0u8; 16];

        // Two writes before a read: pipelined, one trip.
        client.write_all(b"ab").await.unwrap();
        client.write_all(b"cd").await.unwrap();
        server.read_exact(&mut buffer[..4]).await.unwrap();
        server.write_all(b"12345").await.unwrap();
        client.read_exact(&mut buffer[..2]).await.unwrap();
        // Reading the rest of the same answer costs no further trip.
        client.read_exact(&mut buffer[..3]).await.unwrap();
        assert_eq!(meter.snapshot().round_trips, 1);

        // Unasked data from the server costs none either.
        server.write_all(b"n").await.unwrap();
        client.read_exact(&mut buffer[..1]).await.unwrap();
        assert_eq!(meter.snapshot().round_trips, 1);

        client.write_all(b"e").await.unwrap();
        server.read_exact(&mut buffer[..1]).await.unwrap();
        server.write_all(b"f").await.unwrap();
        client.read_exact(&mut buffer[..1]).await.unwrap();
        let snapshot = meter.snapshot();
        assert_eq!(snapshot.round_trips, 2);
        assert_eq!(snapshot.bytes_sent, 5);
        assert_eq!(snapshot.bytes_received, 7);
    }
}
