//! Where each PostgreSQL message starts in a connection's byte stream, one
//! [`Framer`] per direction on [`crate::observe::Splitter`], so faults count
//! `DataRow`s, `CopyData` and statements by message and can act exactly at a
//! message's first byte.
//!
//! The two directions share one [`Handshake`]: a client's `SSLRequest` (or
//! `GSSENCRequest`) is answered by a single byte from the server, not a
//! message, and if the answer is yes both directions turn to TLS, which no
//! one can frame. The client's framer sees the request before it is passed
//! on, so the server's framer always knows to expect the answer.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use crate::observe::{Splitter, CANCEL_REQUEST, GSS_REQUEST, SSL_REQUEST};

/// Message bytes kept by the framer's splitter: an untyped message's code.
const KEEP: usize = 4;

/// How far a connection's opening went, as both directions need to know.
#[derive(Debug, Default)]
pub(crate) struct Handshake(AtomicU8);

const PLAIN: u8 = 0;
const AWAITING_ANSWER: u8 = 1;
const OPAQUE: u8 = 2;

impl Handshake {
    fn get(&self) -> u8 {
        self.0.load(Ordering::SeqCst)
    }

    fn set(&self, state: u8) {
        self.0.store(state, Ordering::SeqCst);
    }
}

/// Finds message starts in one direction.
pub(crate) struct Framer {
    splitter: Splitter,
    upward: bool,
    handshake: Arc<Handshake>,
}

impl Framer {
    /// The framer of one direction (`upward`: client to server).
    pub(crate) fn new(upward: bool, handshake: Arc<Handshake>) -> Framer {
        Framer {
            // The client opens with untyped messages (startup, SSL request).
            splitter: Splitter::keeping(upward, KEEP),
            upward,
            handshake,
        }
    }

    /// Appends to `starts` the type byte and offset of each message starting
    /// in `chunk` whose type is one of `tags` (nothing once the stream is
    /// encrypted or not PostgreSQL). Every chunk must be fed, even when no
    /// tag is wanted, to keep track of where messages start.
    pub(crate) fn starts(&mut self, chunk: &[u8], tags: &[u8], starts: &mut Vec<(u8, usize)>) {
        let mut skip = 0;
        match self.handshake.get() {
            OPAQUE => return,
            AWAITING_ANSWER if !self.upward && !chunk.is_empty() => {
                // The one-byte answer: `N` goes on in plain text.
                let answer = if chunk[0] == b'N' { PLAIN } else { OPAQUE };
                self.handshake.set(answer);
                if answer == OPAQUE {
                    return;
                }
                skip = 1;
            }
            _ => {}
        }
        let handshake = &self.handshake;
        let readable = self.splitter.feed_marking(
            &chunk[skip..],
            &mut |tag, offset| {
                if tags.contains(&tag) {
                    starts.push((tag, offset + skip));
                }
            },
            &mut |splitter, found| {
                if found.tag != 0 {
                    return;
                }
                let code = found.body.get(..4).map_or(0, |code| {
                    u32::from_be_bytes(code.try_into().expect("four bytes"))
                });
                match code {
                    SSL_REQUEST | GSS_REQUEST => handshake.set(AWAITING_ANSWER),
                    // Nothing follows a cancel request.
                    CANCEL_REQUEST => handshake.set(OPAQUE),
                    _ => splitter.set_untyped(false),
                }
            },
        );
        if !readable {
            self.handshake.set(OPAQUE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut bytes = vec![tag];
        bytes.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        bytes.extend_from_slice(body);
        bytes
    }

    fn untyped(code: u32) -> Vec<u8> {
        let mut bytes = 8u32.to_be_bytes().to_vec();
        bytes.extend_from_slice(&code.to_be_bytes());
        bytes
    }

    #[test]
    fn starts_are_found_across_chunks_after_an_ssl_refusal() {
        let handshake = Arc::new(Handshake::default());
        let mut client = Framer::new(true, handshake.clone());
        let mut server = Framer::new(false, handshake);
        let mut starts = Vec::new();
        client.starts(&untyped(SSL_REQUEST), &[0], &mut starts);
        assert_eq!(starts, [(0, 0)]);
        starts.clear();
        let mut answer = b"N".to_vec();
        answer.extend(message(b'D', b"\0\0"));
        answer.extend(message(b'D', b"\0\0"));
        server.starts(&answer, b"D", &mut starts);
        assert_eq!(starts, [(b'D', 1), (b'D', 8)]);
        starts.clear();
        let mut startup = 9u32.to_be_bytes().to_vec();
        startup.extend_from_slice(&196_608u32.to_be_bytes());
        startup.push(0);
        startup.extend(message(b'Q', b"select 1\0"));
        // Split inside the query's length: its start is in the first piece.
        let (first, second) = startup.split_at(12);
        client.starts(first, b"\0Q", &mut starts);
        client.starts(second, b"\0Q", &mut starts);
        assert_eq!(starts, [(0, 0), (b'Q', 9)]);
    }

    #[test]
    fn nothing_is_found_once_tls_is_on() {
        let handshake = Arc::new(Handshake::default());
        let mut client = Framer::new(true, handshake.clone());
        let mut server = Framer::new(false, handshake);
        let mut starts = Vec::new();
        client.starts(&untyped(SSL_REQUEST), b"Q", &mut starts);
        server.starts(b"S\x16\x03\x01", b"Q", &mut starts);
        client.starts(&message(b'Q', b"x\0"), b"Q", &mut starts);
        assert!(starts.is_empty());
    }
}
