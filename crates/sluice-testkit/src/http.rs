//! One plain HTTP/1.1 exchange, for tests of small JSON APIs on loopback
//! (the proxy's control API) where a full HTTP client would be more than the
//! test needs.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

/// Sends `method path` with `body` (as `application/json`, when given) on a
/// connection of its own and returns the status and the response body.
///
/// # Panics
///
/// If the server cannot be reached or its answer is no HTTP response.
pub fn http_exchange(
    address: impl ToSocketAddrs,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("sluice-testkit: connect for HTTP");
    let body = body.unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("sluice-testkit: send the HTTP request");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .expect("sluice-testkit: read the HTTP response");
    let status = answer
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("sluice-testkit: not an HTTP response: {answer:?}"));
    let (_, content) = answer.split_once("\r\n\r\n").unwrap_or_default();
    (status, content.to_owned())
}
