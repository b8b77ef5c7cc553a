//! Turning away a client the proxy has no room for (or is told to refuse, by a
//! `refuse` fault), the way PostgreSQL itself does: the client's startup message is read (an `SSLRequest` or
//! `GSSENCRequest` before it is answered `N`, no encryption, so the client goes on
//! in plain text and can read the answer), an `ErrorResponse` says why (SQLSTATE
//! 53300, too_many_connections), and the connection is closed. No connection to
//! the server is opened for a refused client.
//!
//! A cancel request is passed on even at the limit: it takes no connection slot
//! of the server's, and refusing it would leave a running query impossible to
//! cancel exactly when every connection is busy.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::observe::{CANCEL_REQUEST, GSS_REQUEST, SSL_REQUEST};
use crate::shared::Shared;

/// How long a refused client may take to send its startup message.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the proxy waits for a refused client to close after the answer:
/// closing first with unread bytes from the client would reset the connection,
/// and the client could lose the answer.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long passing on a cancel request may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest startup message PostgreSQL accepts.
const MAX_STARTUP_LENGTH: usize = 10_000;
/// Encryption requests a client may make before its startup message (GSSAPI,
/// then SSL, as libpq does).
const ENCRYPTION_REQUESTS: usize = 2;

/// Why a client is turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The proxy's limit of open connections is reached.
    TooManyConnections {
        /// The limit.
        limit: usize,
    },
    /// No thread could be started for the connection (the system's error).
    NoThread(String),
    /// A `refuse` fault is in force.
    Fault {
        /// The fault's id.
        id: u64,
    },
}

impl Refusal {
    /// Whether the report counts it: a refusal on purpose (a fault) is the
    /// fault's to count, not the connection limit's.
    fn counted(&self) -> bool {
        !matches!(self, Refusal::Fault { .. })
    }

    /// The PostgreSQL `ErrorResponse` message saying why, at FATAL severity.
    pub(crate) fn error_response(&self) -> Vec<u8> {
        let (code, message, hint) = match self {
            Refusal::TooManyConnections { limit } => (
                "53300",
                format!(
                    "sorry, too many clients already: sluice proxy allows {limit} open connections"
                ),
                Some(
                    "Close a connection made through the proxy, or start the proxy \
                     with a higher connection limit.",
                ),
            ),
            Refusal::NoThread(error) => (
                "53000",
                format!("sluice proxy could not start a thread for this connection: {error}"),
                None,
            ),
            // sqlserver_rejected_establishment_of_sqlconnection: the server
            // (as far as the client can tell) turned the connection down.
            Refusal::Fault { id } => (
                "08004",
                format!("sluice proxy refuses new connections (fault {id}: refuse)"),
                Some("Remove the proxy's refuse fault to let clients in again."),
            ),
        };
        let mut fields = Vec::new();
        let mut field = |tag: u8, value: &str| {
            fields.push(tag);
            fields.extend_from_slice(value.as_bytes());
            fields.push(0);
        };
        field(b'S', "FATAL");
        field(b'V', "FATAL");
        field(b'C', code);
        field(b'M', &message);
        if let Some(hint) = hint {
            field(b'H', hint);
        }
        fields.push(0);
        let mut response = vec![b'E'];
        response.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
        response.extend_from_slice(&fields);
        response
    }
}

/// What a refused client asked for.
enum Request {
    /// A session (its startup message was read).
    Session,
    /// A cancel request, as received.
    Cancel(Vec<u8>),
}

/// Answers a refused client: reads its startup message, then tells it why it is
/// refused and closes; passes a cancel request on to `upstream` instead. Counted
/// in `shared` unless it was a cancel request.
pub(crate) async fn answer(
    mut client: TcpStream,
    refusal: Refusal,
    upstream: SocketAddr,
    shared: &Shared,
) {
    if let Ok(Ok(Request::Cancel(message))) =
        timeout(STARTUP_TIMEOUT, first_request(&mut client)).await
    {
        forward_cancel(&message, upstream).await;
        return;
    }
    // A client that stayed silent or is not speaking PostgreSQL is told as well,
    // as far as it listens.
    if refusal.counted() {
        shared.count_refusal();
    }
    let _ = client.write_all(&refusal.error_response()).await;
    let _ = client.shutdown().await;
    let _ = timeout(CLOSE_TIMEOUT, read_to_end(&mut client)).await;
}

/// Refuses a client without reading from it (too many refusals are waiting):
/// counted, told why as far as its socket takes it, and closed.
pub(crate) fn answer_at_once(client: TcpStream, refusal: &Refusal, shared: &Shared) {
    if refusal.counted() {
        shared.count_refusal();
    }
    let _ = client.try_write(&refusal.error_response());
}

/// Reads up to the client's startup message, answering encryption requests "no".
async fn first_request(client: &mut TcpStream) -> io::Result<Request> {
    for _ in 0..=ENCRYPTION_REQUESTS {
        let message = read_untyped(client).await?;
        let code = u32::from_be_bytes(message[4..8].try_into().expect("four bytes"));
        match code {
            SSL_REQUEST | GSS_REQUEST => client.write_all(b"N").await?,
            CANCEL_REQUEST => return Ok(Request::Cancel(message)),
            _ => return Ok(Request::Session),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "encryption requested again and again",
    ))
}

/// One untyped message (length, then code and body), length included.
async fn read_untyped(client: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut length = [0u8; 4];
    client.read_exact(&mut length).await?;
    let size = u32::from_be_bytes(length) as usize;
    if !(8..=MAX_STARTUP_LENGTH).contains(&size) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a PostgreSQL startup message",
        ));
    }
    let mut message = vec![0u8; size];
    message[..4].copy_from_slice(&length);
    client.read_exact(&mut message[4..]).await?;
    Ok(message)
}

/// Passes a cancel request on on a connection of its own, and waits for the
/// server to close it (which it does once the backend is signalled).
async fn forward_cancel(message: &[u8], upstream: SocketAddr) {
    let forward = async {
        let mut server = TcpStream::connect(upstream).await?;
        server.write_all(message).await?;
        read_to_end(&mut server).await
    };
    let _ = timeout(CANCEL_TIMEOUT, forward).await;
}

/// Reads and drops everything until the other side closes.
async fn read_to_end(socket: &mut (impl AsyncRead + Unpin)) -> io::Result<()> {
    let mut sink = [0u8; 1024];
    while socket.read(&mut sink).await? > 0 {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use postgres_protocol::message::backend::Message;

    #[test]
    fn a_refusal_is_a_fatal_error_response_naming_the_limit() {
        let bytes = Refusal::TooManyConnections { limit: 7 }.error_response();
        let mut buffer = bytes::BytesMut::from(&bytes[..]);
        let Ok(Some(Message::ErrorResponse(body))) = Message::parse(&mut buffer) else {
            panic!("not an ErrorResponse: {bytes:?}");
        };
        assert!(buffer.is_empty(), "one message, nothing after it");
        let mut fields = Vec::new();
        let mut iterator = body.fields();
        while let Some(field) = fallible_iterator::FallibleIterator::next(&mut iterator).unwrap() {
            fields.push((
                field.type_(),
                String::from_utf8_lossy(field.value_bytes()).into_owned(),
            ));
        }
        let value = |tag: u8| {
            fields
                .iter()
                .find(|(field, _)| *field == tag)
                .map(|(_, value)| value.as_str())
        };
        assert_eq!(value(b'S'), Some("FATAL"));
        assert_eq!(value(b'C'), Some("53300"));
        assert!(value(b'M').unwrap().contains("allows 7 open connections"));
    }
}
