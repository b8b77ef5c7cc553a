//! The byte stream under a connection and the protocol's packet framing.
//!
//! Every packet is a 3-byte little-endian length, a sequence number and the
//! payload; a payload of 16 MiB − 1 bytes or more continues in the next packet.
//! Packets are read into one buffer and parsed in place, so a result row is
//! copied once, from the buffer into a batch. Commands reset the sequence; each
//! packet of an exchange takes the next number.
//!
//! Every wait on the socket after the login (`flush`, `fill`, the goodbye) is
//! bounded by the session's wait limit, when one is set
//! ([`sluice_core::WaitLimit`], shared with PostgreSQL): a server, or a
//! network, that stops moving bytes fails the work instead of hanging it.

use std::time::Duration;

use std::sync::Arc;

use bytes::{Buf, BytesMut};
use sluice_core::{Error, ErrorKind, Meter, Socket, WaitLimit};
use sluice_tls::Transport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::Target;

/// The largest payload one packet carries; longer ones continue.
pub(crate) const MAX_PAYLOAD: usize = 0xFF_FFFF;

/// How much is asked of the socket per read.
const READ_CHUNK: usize = 256 * 1024;

/// Opens a socket to `target` within `timeout`.
pub(crate) async fn open_socket(target: &Target, timeout: Duration) -> Result<Socket, Error> {
    match target {
        Target::Tcp(host, port) => Socket::tcp(host, *port, target, timeout).await,
        Target::Unix(path) => Socket::unix(path, target, timeout).await,
    }
}

/// A metered socket, plain or inside TLS, with the read buffer, the packet
/// sequence and the limit on each wait.
#[derive(Debug)]
pub(crate) struct Wire {
    stream: Transport,
    read_buffer: BytesMut,
    write_buffer: Vec<u8>,
    sequence: u8,
    /// The server at the other end, as errors name it.
    target: Target,
    /// How long one wait may see nothing move; spent once one timed out.
    wait_limit: WaitLimit,
}

/// A packet at the front of the read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// Payload bytes in this packet.
    pub(crate) length: usize,
    /// Whether the payload continues in the next packet.
    pub(crate) continued: bool,
}

impl Wire {
    pub(crate) fn new(socket: Socket, meter: &Meter, target: &Target) -> Wire {
        Wire {
            stream: Transport::Plain(meter.wrap(socket)),
            read_buffer: BytesMut::with_capacity(READ_CHUNK),
            write_buffer: Vec::with_capacity(8 * 1024),
            sequence: 0,
            target: target.clone(),
            wait_limit: WaitLimit::default(),
        }
    }

    /// The server at the other end.
    pub(crate) fn target(&self) -> &Target {
        &self.target
    }

    /// Bounds every later wait on the server (see [`WaitLimit::set`]).
    pub(crate) fn set_wait_timeout(&mut self, timeout: Option<Duration>) {
        self.wait_limit.set(timeout);
    }

    /// Whether a wait timed out: the connection is given up.
    pub(crate) fn is_spent(&self) -> bool {
        self.wait_limit.is_spent()
    }

    pub(crate) fn meter(&self) -> &Meter {
        self.stream.meter()
    }

    /// Moves the session into TLS: the handshake on the plain socket, after
    /// the client's `SSLRequest` packet was flushed. The packet sequence goes
    /// on (the login response that follows inside TLS takes the next number).
    pub(crate) async fn start_tls(
        self,
        client: &Arc<rustls::ClientConfig>,
        target: &Target,
    ) -> Result<Wire, Error> {
        let Transport::Plain(stream) = self.stream else {
            return Err(Error::protocol("TLS asked for twice on one connection"));
        };
        if !self.read_buffer.is_empty() {
            // Bytes before the handshake would be outside TLS: a server (or a
            // man in the middle) must not slip them in.
            return Err(Error::protocol(
                "the server sent data before the TLS handshake",
            ));
        }
        let name = match target {
            Target::Tcp(host, _) => sluice_tls::server_name(Some(host))?,
            Target::Unix(_) => sluice_tls::server_name(None)?,
        };
        let keywords = &crate::tls::KEYWORDS;
        let stream = sluice_tls::handshake(stream, client, name, target, keywords).await?;
        Ok(Wire { stream, ..self })
    }

    /// The protocol and cipher on TLS (`TLSv1_3 TLS13_AES_256_GCM_SHA384`),
    /// `None` on a plain socket.
    pub(crate) fn encryption(&self) -> Option<String> {
        self.stream.encryption()
    }

    /// Starts a command: its first packet is number 0.
    pub(crate) fn start_command(&mut self) {
        self.sequence = 0;
    }

    /// Queues one payload as packets (split at 16 MiB − 1), numbered on.
    pub(crate) fn queue(&mut self, payload: &[u8]) {
        let mut rest = payload;
        loop {
            let length = rest.len().min(MAX_PAYLOAD);
            let header = (length as u32).to_le_bytes();
            self.write_buffer.extend_from_slice(&header[..3]);
            self.write_buffer.push(self.sequence);
            self.sequence = self.sequence.wrapping_add(1);
            self.write_buffer.extend_from_slice(&rest[..length]);
            rest = &rest[length..];
            // A payload of exactly a multiple of the limit ends with an empty packet.
            if length < MAX_PAYLOAD {
                return;
            }
        }
    }

    /// Queues a payload built by `build`, without a copy of its own.
    pub(crate) fn queue_with(&mut self, build: impl FnOnce(&mut Vec<u8>)) {
        let mut payload = std::mem::take(&mut self.write_buffer);
        let start = payload.len();
        payload.extend_from_slice(&[0; 4]);
        build(&mut payload);
        let length = payload.len() - start - 4;
        if length < MAX_PAYLOAD {
            let header = (length as u32).to_le_bytes();
            payload[start..start + 3].copy_from_slice(&header[..3]);
            payload[start + 3] = self.sequence;
            self.sequence = self.sequence.wrapping_add(1);
            self.write_buffer = payload;
        } else {
            // Rare (a statement over 16 MiB): frame it again in pieces.
            let body = payload.split_off(start + 4);
            payload.truncate(start);
            self.write_buffer = payload;
            self.queue(&body);
        }
    }

    /// Queues a command built by `build` (one of `crate::protocol`'s
    /// writers): its first packet is number 0.
    pub(crate) fn queue_command(&mut self, build: impl FnOnce(&mut Vec<u8>)) {
        self.start_command();
        self.queue_with(build);
    }

    /// Writes what is queued. Each write is a wait of its own: a slow link
    /// that keeps taking bytes is not a stalled one.
    pub(crate) async fn flush(&mut self) -> Result<(), Error> {
        let Wire {
            stream,
            write_buffer,
            target,
            wait_limit,
            ..
        } = self;
        let mut sent = 0;
        while sent < write_buffer.len() {
            let write = async {
                match stream.write(&write_buffer[sent..]).await {
                    Ok(0) => Err(lost()),
                    Ok(written) => Ok(written),
                    Err(error) => Err(Error::io(error)),
                }
            };
            sent += wait_limit.run(target, write).await?;
        }
        write_buffer.clear();
        // TLS may hold the last records back until flushed.
        let flush = async { stream.flush().await.map_err(Error::io) };
        wait_limit.run(target, flush).await
    }

    /// Reads more bytes from the socket; the server closing is an error.
    pub(crate) async fn fill(&mut self) -> Result<(), Error> {
        let Wire {
            stream,
            read_buffer,
            target,
            wait_limit,
            ..
        } = self;
        read_buffer.reserve(READ_CHUNK);
        let read = async {
            match stream.read_buf(read_buffer).await {
                Ok(0) => Err(lost()),
                Ok(_) => Ok(()),
                Err(error) => Err(Error::io(error)),
            }
        };
        wait_limit.run(target, read).await
    }

    /// The header of the packet at the front of the buffer, once it is whole.
    pub(crate) fn front(&self) -> Option<Header> {
        let buffer = &self.read_buffer;
        if buffer.len() < 4 {
            return None;
        }
        let length =
            usize::from(buffer[0]) | usize::from(buffer[1]) << 8 | usize::from(buffer[2]) << 16;
        (buffer.len() >= 4 + length).then_some(Header {
            length,
            continued: length == MAX_PAYLOAD,
        })
    }

    /// The payload length of the packet at the front, once its header is
    /// buffered (its payload may not be).
    pub(crate) fn peek_length(&self) -> Option<usize> {
        let buffer = &self.read_buffer;
        (buffer.len() >= 4).then(|| {
            usize::from(buffer[0]) | usize::from(buffer[1]) << 8 | usize::from(buffer[2]) << 16
        })
    }

    /// The payload of the whole packet at the front (see [`Wire::front`]).
    pub(crate) fn front_payload(&self, header: Header) -> &[u8] {
        &self.read_buffer[4..4 + header.length]
    }

    /// Drops the front packet, taking its sequence number.
    pub(crate) fn consume(&mut self, header: Header) {
        self.sequence = self.read_buffer[3].wrapping_add(1);
        self.read_buffer.advance(4 + header.length);
    }

    /// The bytes buffered, from the front: inside a packet being read in
    /// pieces (a row over 16 MiB), they are the payload's next bytes.
    pub(crate) fn buffered(&self) -> &[u8] {
        &self.read_buffer
    }

    /// Drops `length` bytes of a packet being read in pieces.
    pub(crate) fn discard(&mut self, length: usize) {
        self.read_buffer.advance(length);
    }

    /// Takes the header at the front (4 bytes must be buffered) of a packet
    /// to be read in pieces: its payload's length; the sequence moves on.
    pub(crate) fn take_header(&mut self) -> usize {
        let buffer = &self.read_buffer;
        let length =
            usize::from(buffer[0]) | usize::from(buffer[1]) << 8 | usize::from(buffer[2]) << 16;
        self.sequence = buffer[3].wrapping_add(1);
        self.read_buffer.advance(4);
        length
    }

    /// Reads one whole logical payload (joining continued packets), waiting
    /// for the socket as needed. For control packets, not the row hot path.
    pub(crate) async fn read_payload(&mut self) -> Result<Vec<u8>, Error> {
        let mut payload = Vec::new();
        loop {
            let header = loop {
                match self.front() {
                    Some(header) => break header,
                    None => self.fill().await?,
                }
            };
            payload.extend_from_slice(self.front_payload(header));
            self.consume(header);
            if !header.continued {
                return Ok(payload);
            }
        }
    }

    /// Closes the socket after sending what is queued. On a spent connection
    /// nothing waits: the socket is only dropped.
    pub(crate) async fn shutdown(&mut self) {
        let _ = self.flush().await;
        let Wire {
            stream,
            target,
            wait_limit,
            ..
        } = self;
        let close = async { stream.shutdown().await.map_err(Error::io) };
        let _ = wait_limit.run(target, close).await;
    }

    /// Whether the socket of an idle session is still quiet, found without
    /// waiting: a server that ended the session (`wait_timeout`, a restart)
    /// has closed it, or sent a last error packet first (MySQL 8), and a
    /// session must not be reused then. Polled once with a waker that does
    /// nothing: only what has already arrived is seen.
    pub(crate) fn check_idle(&mut self) -> Result<(), Error> {
        sluice_core::socket::check_idle(&mut self.stream, !self.read_buffer.is_empty())
    }
}

/// The server closed the connection.
fn lost() -> Error {
    Error::new(
        ErrorKind::Closed,
        "connection to the database was lost: the server closed it",
    )
}
