//! [`Socket`]: a TCP or Unix-domain stream to a database server, opened within
//! a timeout, with the one wording of a failure to connect every database
//! crate uses.

use std::fmt::Display;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::{Error, ErrorKind};

/// A TCP or Unix-domain socket.
#[derive(Debug)]
pub enum Socket {
    /// TCP.
    Tcp(TcpStream),
    /// Unix-domain.
    Unix(UnixStream),
}

impl Socket {
    /// Connects to `host`:`port` over TCP, with Nagle's algorithm off (a
    /// protocol's small messages must leave at once), within `timeout`;
    /// `target` names the server in errors.
    pub async fn tcp(
        host: &str,
        port: u16,
        target: &(dyn Display + Sync),
        timeout: Duration,
    ) -> Result<Socket, Error> {
        within(target, timeout, async {
            let stream = TcpStream::connect((host, port)).await?;
            stream.set_nodelay(true)?;
            Ok(Socket::Tcp(stream))
        })
        .await
    }

    /// Connects to the socket file `path` within `timeout`; `target` names the
    /// server in errors.
    pub async fn unix(
        path: &Path,
        target: &(dyn Display + Sync),
        timeout: Duration,
    ) -> Result<Socket, Error> {
        within(target, timeout, async {
            UnixStream::connect(path).await.map(Socket::Unix)
        })
        .await
    }
}

/// For a pooled session about to be reused, without a round trip: an error
/// when the server has closed `stream` or sent something unasked (it is ending
/// the session), or when the session still holds unread data (`buffered`).
/// The read never waits: with nothing to read, the session is fine. (Over
/// TLS, records of TLS's own, such as session tickets, read as nothing.)
pub fn check_idle(stream: &mut (impl AsyncRead + Unpin), buffered: bool) -> Result<(), Error> {
    if buffered {
        return Err(Error::protocol("unread data on an idle session"));
    }
    let mut probe = [0u8; 256];
    let mut probe = ReadBuf::new(&mut probe);
    let mut context = Context::from_waker(std::task::Waker::noop());
    match Pin::new(stream).poll_read(&mut context, &mut probe) {
        Poll::Pending => Ok(()),
        Poll::Ready(Ok(())) if probe.filled().is_empty() => Err(Error::new(
            ErrorKind::Closed,
            "the database server closed the idle connection",
        )),
        Poll::Ready(Ok(())) => Err(Error::new(
            ErrorKind::Closed,
            "the database server sent data to an idle session (it is ending it)",
        )),
        Poll::Ready(Err(error)) if error.kind() == io::ErrorKind::WouldBlock => Ok(()),
        Poll::Ready(Err(error)) => Err(Error::io(error)),
    }
}

/// Runs `connect` within `timeout`, wording a failure as a connection error
/// naming `target`.
async fn within(
    target: &(dyn Display + Sync),
    timeout: Duration,
    connect: impl std::future::Future<Output = io::Result<Socket>>,
) -> Result<Socket, Error> {
    match tokio::time::timeout(timeout, connect).await {
        Ok(Ok(socket)) => Ok(socket),
        Ok(Err(error)) => Err(Error::new(
            ErrorKind::Connect,
            format!("could not connect to {target}: {error}"),
        )
        .with_source(error)),
        Err(_) => Err(Error::new(
            ErrorKind::Connect,
            format!("could not connect to {target}: timed out after {timeout:?}"),
        )),
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_read(context, buffer),
            Socket::Unix(stream) => Pin::new(stream).poll_read(context, buffer),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_write(context, data),
            Socket::Unix(stream) => Pin::new(stream).poll_write(context, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_flush(context),
            Socket::Unix(stream) => Pin::new(stream).poll_flush(context),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(stream) => Pin::new(stream).poll_shutdown(context),
            Socket::Unix(stream) => Pin::new(stream).poll_shutdown(context),
        }
    }
}
