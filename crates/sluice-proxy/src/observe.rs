//! Reading the PostgreSQL protocol as it passes, in both directions, without
//! buffering whole messages: [`Splitter`] finds message boundaries across chunk
//! edges, [`Observer`] turns messages into per-statement figures.

use std::collections::HashMap;

use crate::report::StatementStats;

/// Longest prefix of a message body kept for inspection (statement texts).
const KEEP_BYTES: usize = 16 * 1024;

/// Protocol codes of the untyped first messages.
pub(crate) const SSL_REQUEST: u32 = 80_877_103;
pub(crate) const GSS_REQUEST: u32 = 80_877_104;
pub(crate) const CANCEL_REQUEST: u32 = 80_877_102;

/// Splits a byte stream into protocol messages, keeping at most [`KEEP_BYTES`]
/// of each body.
#[derive(Debug)]
pub struct Splitter {
    /// Untyped messages (startup, SSL request) have no type byte.
    untyped: bool,
    header: [u8; 5],
    header_length: usize,
    remaining: usize,
    body: Vec<u8>,
}

/// One message found by a [`Splitter`].
#[derive(Debug)]
pub struct Found<'a> {
    /// The type byte (0 for an untyped message).
    pub tag: u8,
    /// The beginning of the body (all of it when short).
    pub body: &'a [u8],
}

impl Splitter {
    /// A splitter for a stream that starts with `untyped` messages or not.
    pub fn new(untyped: bool) -> Splitter {
        Splitter {
            untyped,
            header: [0; 5],
            header_length: 0,
            remaining: 0,
            body: Vec::new(),
        }
    }

    /// Whether the next message is untyped.
    pub fn set_untyped(&mut self, untyped: bool) {
        self.untyped = untyped;
    }

    fn header_size(&self) -> usize {
        if self.untyped {
            4
        } else {
            5
        }
    }

    /// Feeds bytes; calls `on_message` for each message completed. Returns false
    /// when the stream cannot be PostgreSQL (a nonsense length).
    pub fn feed(
        &mut self,
        mut data: &[u8],
        on_message: &mut dyn FnMut(&mut Splitter, Found<'_>),
    ) -> bool {
        while !data.is_empty() {
            let header_size = self.header_size();
            if self.header_length < header_size {
                let take = (header_size - self.header_length).min(data.len());
                self.header[self.header_length..self.header_length + take]
                    .copy_from_slice(&data[..take]);
                self.header_length += take;
                data = &data[take..];
                if self.header_length < header_size {
                    return true;
                }
                let length_bytes = &self.header[header_size - 4..header_size];
                let length =
                    u32::from_be_bytes(length_bytes.try_into().expect("four bytes")) as usize;
                if !(4..=(1 << 30) + 5).contains(&length) {
                    return false;
                }
                self.remaining = length - 4;
                self.body.clear();
            }
            let take = self.remaining.min(data.len());
            let keep = take.min(KEEP_BYTES.saturating_sub(self.body.len()));
            self.body.extend_from_slice(&data[..keep]);
            self.remaining -= take;
            data = &data[take..];
            if self.remaining == 0 {
                let tag = if self.untyped { 0 } else { self.header[0] };
                self.header_length = 0;
                let body = std::mem::take(&mut self.body);
                on_message(self, Found { tag, body: &body });
                self.body = body;
            }
        }
        true
    }
}

/// A NUL-terminated string at the start of `bytes`, and what follows it.
fn c_string(bytes: &[u8]) -> (String, &[u8]) {
    match bytes.iter().position(|&byte| byte == 0) {
        Some(end) => (
            String::from_utf8_lossy(&bytes[..end]).into_owned(),
            &bytes[end + 1..],
        ),
        None => (String::from_utf8_lossy(bytes).into_owned(), &[]),
    }
}

/// Statement text as grouped in reports: white space folded, at most 300 characters.
pub fn normalize(text: &str) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match folded.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &folded[..cut]),
        None => folded,
    }
}

/// Label for traffic before any statement (startup and authentication).
pub const SETUP: &str = "(connection setup)";

/// What one connection's protocol shows.
#[derive(Debug, Default)]
pub struct Observer {
    /// Set once the connection switched to TLS (or is otherwise unreadable):
    /// bytes still flow and are counted, statements are not.
    pub opaque: bool,
    /// The connection was a cancel request.
    pub cancel_request: bool,
    awaiting_encryption_answer: bool,
    client_spoke: bool,
    statements: HashMap<String, String>,
    portals: HashMap<String, String>,
    /// The statement the next round trip is for.
    pending: Option<String>,
    /// The statement the client last ran (for bytes it sends next).
    current: Option<String>,
    /// Statements run and not yet fully answered, in order: rows are theirs.
    answering: std::collections::VecDeque<(String, bool)>,
    /// The portal of the last `Execute`, and whether the server suspended it
    /// (hit its row limit): the next `Execute` of it continues, not re-runs.
    last_portal: Option<String>,
    suspended: bool,
    /// Figures per statement text.
    pub stats: HashMap<String, StatementStats>,
    /// Round trips of this connection.
    pub round_trips: u64,
    /// Bytes from client to server.
    pub bytes_to_server: u64,
    /// Bytes from server to client.
    pub bytes_to_client: u64,
    /// `Execute` messages with a row limit below 1,000 (small fetch batches).
    pub small_fetches: u64,
    /// The row limit of the last small fetch.
    pub fetch_size: u32,
    /// `PortalSuspended` answers (a fetch stopped at its row limit).
    pub suspensions: u64,
    /// Fast-path function calls (how libpq's `lo_read` reaches the server).
    pub function_calls: u64,
    client: Option<Splitter>,
    server: Option<Splitter>,
}

impl Observer {
    /// A fresh connection.
    pub fn new() -> Observer {
        Observer {
            client: Some(Splitter::new(true)),
            server: Some(Splitter::new(false)),
            ..Observer::default()
        }
    }

    fn entry(&mut self, text: Option<&String>) -> &mut StatementStats {
        let key = text.cloned().unwrap_or_else(|| SETUP.to_owned());
        self.stats
            .entry(key.clone())
            .or_insert_with(|| StatementStats {
                statement: key,
                ..StatementStats::default()
            })
    }

    /// Bytes the client sent.
    pub fn from_client(&mut self, data: &[u8]) {
        self.bytes_to_server += data.len() as u64;
        self.client_spoke = true;
        if !self.opaque {
            let mut splitter = self.client.take().expect("client splitter");
            let readable = splitter.feed(data, &mut |splitter, found| {
                self.client_message(splitter, found)
            });
            self.client = Some(splitter);
            self.opaque |= !readable;
        }
        let pending = self.pending.clone().or_else(|| self.current.clone());
        self.entry(pending.as_ref()).bytes_to_server += data.len() as u64;
    }

    fn client_message(&mut self, splitter: &mut Splitter, found: Found<'_>) {
        let body = found.body;
        match found.tag {
            0 => {
                let code = body
                    .get(..4)
                    .map(|code| u32::from_be_bytes(code.try_into().expect("four bytes")))
                    .unwrap_or(0);
                match code {
                    SSL_REQUEST | GSS_REQUEST => {
                        // One byte answers; the client then starts again, untyped.
                        self.awaiting_encryption_answer = true;
                    }
                    CANCEL_REQUEST => self.cancel_request = true,
                    _ => splitter.set_untyped(false),
                }
            }
            b'Q' => {
                let (text, _) = c_string(body);
                self.execute(normalize(&text), true);
            }
            b'P' => {
                let (name, rest) = c_string(body);
                let (text, _) = c_string(rest);
                let text = normalize(&text);
                self.statements.insert(name, text.clone());
                self.pending.get_or_insert(text);
            }
            b'B' => {
                let (portal, rest) = c_string(body);
                let (statement, _) = c_string(rest);
                if let Some(text) = self.statements.get(&statement).cloned() {
                    self.portals.insert(portal, text);
                }
            }
            b'E' => {
                let (portal, rest) = c_string(body);
                let max_rows = rest
                    .get(..4)
                    .map(|rows| u32::from_be_bytes(rows.try_into().expect("four bytes")))
                    .unwrap_or(0);
                if (1..1000).contains(&max_rows) {
                    self.small_fetches += 1;
                    self.fetch_size = max_rows;
                }
                let text = self
                    .portals
                    .get(&portal)
                    .cloned()
                    .unwrap_or_else(|| "(unknown portal)".into());
                if self.suspended && self.last_portal.as_deref() == Some(portal.as_str()) {
                    // Fetching more of the same result: one more trip, not one more run.
                    self.suspended = false;
                    self.answer_for(text, false);
                } else {
                    self.execute(text, false);
                }
                self.last_portal = Some(portal);
            }
            b'F' => {
                let oid = body
                    .get(..4)
                    .map(|oid| u32::from_be_bytes(oid.try_into().expect("four bytes")))
                    .unwrap_or(0);
                self.function_calls += 1;
                self.execute(format!("(fast-path function call, oid {oid})"), true);
            }
            _ => {}
        }
    }

    fn execute(&mut self, text: String, simple: bool) {
        self.entry(Some(&text)).executions += 1;
        self.answer_for(text, simple);
    }

    /// Notes that answers for `text` are owed (`simple`: a simple query, answered
    /// up to its ReadyForQuery; otherwise one Execute, up to its completion).
    fn answer_for(&mut self, text: String, simple: bool) {
        self.answering.push_back((text.clone(), simple));
        self.pending = Some(text.clone());
        self.current = Some(text);
    }

    /// Bytes the server sent.
    pub fn from_server(&mut self, mut data: &[u8]) {
        self.bytes_to_client += data.len() as u64;
        if self.client_spoke {
            self.client_spoke = false;
            self.round_trips += 1;
            let pending = self.pending.take().or_else(|| self.current.clone());
            self.entry(pending.as_ref()).round_trips += 1;
        }
        let answering = self.answering.front().map(|(text, _)| text.clone());
        let current = answering.or_else(|| self.current.clone());
        self.entry(current.as_ref()).bytes_to_client += data.len() as u64;
        if self.opaque {
            return;
        }
        if self.awaiting_encryption_answer && !data.is_empty() {
            self.awaiting_encryption_answer = false;
            if data[0] != b'N' {
                // Encrypted from here on: pass it through untouched, unread.
                self.opaque = true;
                return;
            }
            data = &data[1..];
        }
        let mut splitter = self.server.take().expect("server splitter");
        let mut events = Vec::new();
        let readable = splitter.feed(data, &mut |_, found| {
            if matches!(found.tag, b'D' | b's' | b'C' | b'I' | b'E' | b'Z') {
                events.push(found.tag);
            }
        });
        self.server = Some(splitter);
        self.opaque |= !readable;
        for tag in events {
            let front = self.answering.front().cloned();
            match (tag, front) {
                (b'D', front) => {
                    let text = front.map(|(text, _)| text).or_else(|| self.current.clone());
                    self.entry(text.as_ref()).rows += 1;
                }
                (b's', front) => {
                    self.suspensions += 1;
                    self.suspended = true;
                    if matches!(front, Some((_, false))) {
                        self.answering.pop_front();
                    }
                }
                (b'C' | b'I' | b'E', Some((_, false))) => {
                    self.answering.pop_front();
                }
                (b'Z', _) => {
                    // Executes skipped after an error end here, as does a simple query.
                    while matches!(self.answering.front(), Some((_, false))) {
                        self.answering.pop_front();
                    }
                    if matches!(self.answering.front(), Some((_, true))) {
                        self.answering.pop_front();
                    }
                }
                _ => {}
            }
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

    #[test]
    fn messages_split_across_chunks_are_found() {
        let mut stream = message(b'Q', b"select 1\0");
        stream.extend(message(b'Q', b"select   2\0"));
        let mut splitter = Splitter::new(false);
        let mut seen = Vec::new();
        for byte in &stream {
            splitter.feed(std::slice::from_ref(byte), &mut |_, found| {
                seen.push((found.tag, c_string(found.body).0))
            });
        }
        assert_eq!(
            seen,
            [
                (b'Q', "select 1".to_string()),
                (b'Q', "select   2".to_string())
            ]
        );
    }

    #[test]
    fn round_trips_are_attributed_to_statements() {
        let mut observer = Observer::new();
        let mut startup = Vec::new();
        startup.extend_from_slice(&12u32.to_be_bytes());
        startup.extend_from_slice(&196_608u32.to_be_bytes());
        startup.extend_from_slice(b"u\0\0\0");
        observer.from_client(&startup);
        observer.from_server(&message(b'Z', b"I"));
        for _ in 0..3 {
            observer.from_client(&message(b'Q', b"insert into t values (1)\0"));
            let mut answer = message(b'C', b"INSERT 0 1\0");
            answer.extend(message(b'Z', b"I"));
            observer.from_server(&answer);
        }
        observer.from_client(&message(b'Q', b"select g from generate_series(1, 2) g\0"));
        let mut answer = message(b'D', b"\0\x01\0\0\0\x011");
        answer.extend(message(b'D', b"\0\x01\0\0\0\x012"));
        observer.from_server(&answer);
        assert_eq!(observer.round_trips, 5);
        assert_eq!(observer.stats[SETUP].round_trips, 1);
        let insert = &observer.stats["insert into t values (1)"];
        assert_eq!((insert.executions, insert.round_trips), (3, 3));
        assert_eq!(
            observer.stats["select g from generate_series(1, 2) g"].rows,
            2
        );
    }

    #[test]
    fn tls_makes_the_stream_opaque() {
        let mut observer = Observer::new();
        let mut request = 8u32.to_be_bytes().to_vec();
        request.extend_from_slice(&SSL_REQUEST.to_be_bytes());
        observer.from_client(&request);
        observer.from_server(b"S");
        observer.from_client(b"\x16\x03\x01 random tls bytes");
        assert!(observer.opaque);
        assert_eq!(observer.round_trips, 1);
    }
}
