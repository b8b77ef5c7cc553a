//! Reading the PostgreSQL protocol as it passes, in both directions, without
//! buffering whole messages: [`Splitter`] finds message boundaries across chunk
//! edges, [`Observer`] turns messages into figures per statement fingerprint
//! (see [`crate::fingerprint`]), keeping one example text of each, and feeds
//! the cross-statement [`Patterns`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::fingerprint::fingerprint;
use crate::patterns::{value_candidates, Patterns};
use crate::report::StatementStats;

/// Longest prefix of a message body kept for inspection (statement texts).
const KEEP_BYTES: usize = 16 * 1024;

/// Protocol codes of the untyped first messages.
pub(crate) const SSL_REQUEST: u32 = 80_877_103;
pub(crate) const GSS_REQUEST: u32 = 80_877_104;
pub(crate) const CANCEL_REQUEST: u32 = 80_877_102;

/// Splits a byte stream into protocol messages, keeping at most `KEEP_BYTES`
/// of each body.
#[derive(Debug)]
pub struct Splitter {
    /// Untyped messages (startup, SSL request) have no type byte.
    untyped: bool,
    header: [u8; 5],
    header_length: usize,
    remaining: usize,
    body: Vec<u8>,
    /// Longest prefix of a body kept ([`KEEP_BYTES`], or a few bytes when only
    /// the boundaries matter).
    keep: usize,
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
        Splitter::keeping(untyped, KEEP_BYTES)
    }

    /// A splitter for finding message boundaries only: it keeps the first
    /// `keep` bytes of each body (enough to tell an untyped message's code).
    pub fn keeping(untyped: bool, keep: usize) -> Splitter {
        Splitter {
            untyped,
            header: [0; 5],
            header_length: 0,
            remaining: 0,
            body: Vec::new(),
            keep,
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
        data: &[u8],
        on_message: &mut dyn FnMut(&mut Splitter, Found<'_>),
    ) -> bool {
        self.feed_marking(data, &mut |_, _| {}, on_message)
    }

    /// As [`Splitter::feed`], and calls `on_start` with the type byte (0 for an
    /// untyped message) and the offset in `data` of each message whose first
    /// byte is in `data`, as soon as that byte is seen: a message can be told
    /// apart before its body has arrived.
    pub fn feed_marking(
        &mut self,
        mut data: &[u8],
        on_start: &mut dyn FnMut(u8, usize),
        on_message: &mut dyn FnMut(&mut Splitter, Found<'_>),
    ) -> bool {
        let total = data.len();
        while !data.is_empty() {
            let header_size = self.header_size();
            if self.header_length == 0 {
                on_start(if self.untyped { 0 } else { data[0] }, total - data.len());
            }
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
            let keep = take.min(self.keep.saturating_sub(self.body.len()));
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

/// A statement as parsed: its fingerprint, the text as sent (white space
/// folded) and the constants in it.
#[derive(Debug, Clone)]
struct Statement {
    fingerprint: String,
    example: String,
    constants: Vec<String>,
}

impl Statement {
    fn new(text: &str) -> Statement {
        let found = fingerprint(text);
        Statement {
            fingerprint: cut(&found.text, FINGERPRINT_CHARACTERS),
            example: normalize(text),
            constants: found.constants,
        }
    }

    /// A pseudo-statement (a fast-path call), its own fingerprint.
    fn labelled(label: String) -> Statement {
        Statement {
            fingerprint: label.clone(),
            example: label,
            constants: Vec::new(),
        }
    }
}

/// Longest fingerprint kept (a statement of many different rows can be long).
const FINGERPRINT_CHARACTERS: usize = 1000;

/// `text` cut to `characters`, marked with `…` if cut.
fn cut(text: &str, characters: usize) -> String {
    match text.char_indices().nth(characters) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A portal: its statement and the values bound to it.
#[derive(Debug, Clone)]
struct Portal {
    statement: Statement,
    values: Vec<String>,
}

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
    statements: HashMap<String, Statement>,
    portals: HashMap<String, Portal>,
    /// The fingerprint the next round trip is for.
    pending: Option<String>,
    /// The fingerprint the client last ran (for bytes it sends next).
    current: Option<String>,
    /// Statements run and not yet fully answered, in order: rows are theirs.
    answering: std::collections::VecDeque<(String, bool)>,
    /// The portal of the last `Execute`, and whether the server suspended it
    /// (hit its row limit): the next `Execute` of it continues, not re-runs.
    last_portal: Option<String>,
    suspended: bool,
    /// Figures per statement fingerprint.
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
    /// N+1 and chatty-session patterns across statements.
    pub patterns: Patterns,
    /// When the first and the last bytes went by.
    pub first_seen: Option<Instant>,
    /// See `first_seen`.
    pub last_seen: Option<Instant>,
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

    /// Time from the first byte to the last.
    pub fn wall_time(&self) -> Duration {
        match (self.first_seen, self.last_seen) {
            (Some(first), Some(last)) => last.saturating_duration_since(first),
            _ => Duration::ZERO,
        }
    }

    fn seen(&mut self) {
        let now = Instant::now();
        self.first_seen.get_or_insert(now);
        self.last_seen = Some(now);
    }

    fn entry(&mut self, key: Option<&String>) -> &mut StatementStats {
        let key = key.cloned().unwrap_or_else(|| SETUP.to_owned());
        self.stats
            .entry(key.clone())
            .or_insert_with(|| StatementStats {
                statement: key.clone(),
                example: key,
                ..StatementStats::default()
            })
    }

    /// Bytes the client sent.
    pub fn from_client(&mut self, data: &[u8]) {
        self.seen();
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
            0 => self.untyped_message(splitter, body),
            b'Q' => {
                let (text, _) = c_string(body);
                let statement = Statement::new(&text);
                let values = statement.constants.clone();
                self.execute(&statement, &values, true);
            }
            b'P' => {
                let (name, rest) = c_string(body);
                let (text, _) = c_string(rest);
                let statement = Statement::new(&text);
                self.entry(Some(&statement.fingerprint)).parses += 1;
                self.pending.get_or_insert(statement.fingerprint.clone());
                self.statements.insert(name, statement);
            }
            b'B' => self.bind(body),
            b'E' => self.execute_portal(body),
            b'F' => {
                let oid = body
                    .get(..4)
                    .map(|oid| u32::from_be_bytes(oid.try_into().expect("four bytes")))
                    .unwrap_or(0);
                self.function_calls += 1;
                let call = Statement::labelled(format!("(fast-path function call, oid {oid})"));
                self.execute(&call, &[], true);
            }
            _ => {}
        }
    }

    /// Startup, SSL and GSS requests, cancel requests.
    fn untyped_message(&mut self, splitter: &mut Splitter, body: &[u8]) {
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

    /// `Bind`: a portal for a statement, with parameter values.
    fn bind(&mut self, body: &[u8]) {
        let (portal, rest) = c_string(body);
        let (name, rest) = c_string(rest);
        if let Some(statement) = self.statements.get(&name).cloned() {
            let mut values = bound_values(rest);
            values.extend(statement.constants.iter().cloned());
            self.portals.insert(portal, Portal { statement, values });
        }
    }

    /// `Execute`: a run of a portal, or more rows of a suspended one.
    fn execute_portal(&mut self, body: &[u8]) {
        let (name, rest) = c_string(body);
        let max_rows = rest
            .get(..4)
            .map(|rows| u32::from_be_bytes(rows.try_into().expect("four bytes")))
            .unwrap_or(0);
        if (1..1000).contains(&max_rows) {
            self.small_fetches += 1;
            self.fetch_size = max_rows;
        }
        let portal = self.portals.get(&name).cloned().unwrap_or_else(|| Portal {
            statement: Statement::labelled("(unknown portal)".into()),
            values: Vec::new(),
        });
        if self.suspended && self.last_portal.as_deref() == Some(name.as_str()) {
            // Fetching more of the same result: one more trip, not one more run.
            self.suspended = false;
            self.answer_for(portal.statement.fingerprint, false);
        } else {
            self.execute(&portal.statement, &portal.values, false);
        }
        self.last_portal = Some(name);
    }

    fn execute(&mut self, statement: &Statement, values: &[String], simple: bool) {
        let entry = self.entry(Some(&statement.fingerprint));
        entry.executions += 1;
        if entry.example == entry.statement && statement.example != entry.statement {
            entry.example.clone_from(&statement.example);
        }
        self.patterns.executed(&statement.fingerprint, values);
        self.answer_for(statement.fingerprint.clone(), simple);
    }

    /// Notes that answers for `fingerprint` are owed (`simple`: a simple query,
    /// answered up to its ReadyForQuery; otherwise one Execute, up to its completion).
    fn answer_for(&mut self, fingerprint: String, simple: bool) {
        self.answering.push_back((fingerprint.clone(), simple));
        self.pending = Some(fingerprint.clone());
        self.current = Some(fingerprint);
    }

    /// Bytes the server sent.
    pub fn from_server(&mut self, mut data: &[u8]) {
        self.seen();
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
        let readable = splitter.feed(data, &mut |_, found| self.server_message(found));
        self.server = Some(splitter);
        self.opaque |= !readable;
    }

    fn server_message(&mut self, found: Found<'_>) {
        let front = self.answering.front().cloned();
        match (found.tag, front) {
            (b'D', front) => {
                let fingerprint = front.map(|(text, _)| text).or_else(|| self.current.clone());
                self.entry(fingerprint.as_ref()).rows += 1;
                if let Some(fingerprint) = fingerprint {
                    self.patterns.row(&fingerprint, found.body);
                }
            }
            (b's', front) => {
                self.suspensions += 1;
                self.suspended = true;
                if matches!(front, Some((_, false))) {
                    self.answering.pop_front();
                }
            }
            (b'C' | b'I' | b'E', front) => {
                self.patterns.result_ended();
                if matches!(front, Some((_, false))) {
                    self.answering.pop_front();
                }
            }
            (b'Z', _) => {
                self.patterns.result_ended();
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

/// The parameter values of a `Bind` body after its portal and statement names:
/// each as text and, if it may be a binary integer, as that integer.
fn bound_values(rest: &[u8]) -> Vec<String> {
    let mut values = Vec::new();
    let Some(formats) = rest
        .get(..2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
    else {
        return values;
    };
    let mut rest = rest.get(2 + 2 * formats..).unwrap_or(&[]);
    let Some(count) = rest.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
        return values;
    };
    rest = &rest[2..];
    for _ in 0..count {
        let Some(length) = rest
            .get(..4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        else {
            break;
        };
        rest = &rest[4..];
        let Ok(length) = usize::try_from(length) else {
            continue; // NULL
        };
        let Some(value) = rest.get(..length) else {
            break;
        };
        values.extend(value_candidates(value));
        rest = &rest[length..];
    }
    values
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
        let insert = &observer.stats["insert into t values ($1)"];
        assert_eq!(insert.example, "insert into t values (1)");
        assert_eq!((insert.executions, insert.round_trips), (3, 3));
        assert_eq!(
            observer.stats["select g from generate_series($1, $2) g"].rows,
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
