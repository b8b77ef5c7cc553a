//! [`Socket`]: a TCP or Unix-domain stream to a database server, opened within
//! a timeout, with the one wording of a failure to connect every database
//! crate uses, and TCP keepalive on by default ([`TcpSettings`]).

use std::fmt::Display;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::{Error, ErrorKind};

/// TCP keepalive probes while a connection is idle, so a server that vanished
/// (a crash, a pulled cable, a NAT entry dropped) is noticed rather than waited
/// on for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe. Default: 60 s (the system's own
    /// default is usually two hours).
    pub idle: Duration,
    /// Time between unanswered probes. Default: 10 s.
    pub interval: Duration,
    /// Unanswered probes before the connection is declared dead. Default: 6,
    /// so a vanished server is noticed about two minutes into a silence.
    pub retries: u32,
}

impl Default for Keepalive {
    fn default() -> Keepalive {
        Keepalive {
            idle: Duration::from_secs(60),
            interval: Duration::from_secs(10),
            retries: 6,
        }
    }
}

/// How a TCP connection to a database behaves beyond its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSettings {
    /// Keepalive probes; `None` turns them off. Default: [`Keepalive::default`].
    pub keepalive: Option<Keepalive>,
    /// How long sent data may stay unacknowledged before the connection is
    /// declared dead (`TCP_USER_TIMEOUT`, Linux); `None` (default) leaves the
    /// system's.
    pub user_timeout: Option<Duration>,
}

impl Default for TcpSettings {
    fn default() -> TcpSettings {
        TcpSettings {
            keepalive: Some(Keepalive::default()),
            user_timeout: None,
        }
    }
}

impl TcpSettings {
    /// Applies the settings to a connected stream.
    fn apply(&self, stream: &TcpStream) -> io::Result<()> {
        let socket = socket2::SockRef::from(stream);
        match self.keepalive {
            Some(keepalive) => socket.set_tcp_keepalive(
                &socket2::TcpKeepalive::new()
                    .with_time(keepalive.idle)
                    .with_interval(keepalive.interval)
                    .with_retries(keepalive.retries),
            )?,
            None => socket.set_keepalive(false)?,
        }
        #[cfg(target_os = "linux")]
        if let Some(timeout) = self.user_timeout {
            socket.set_tcp_user_timeout(Some(timeout))?;
        }
        Ok(())
    }
}

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
    /// protocol's small messages must leave at once) and the default
    /// [`TcpSettings`], within `timeout`; `target` names the server in errors.
    pub async fn tcp(
        host: &str,
        port: u16,
        target: &(dyn Display + Sync),
        timeout: Duration,
    ) -> Result<Socket, Error> {
        Socket::tcp_with(host, port, target, timeout, &TcpSettings::default()).await
    }

    /// [`Socket::tcp`] with the given keepalive and user timeout.
    pub async fn tcp_with(
        host: &str,
        port: u16,
        target: &(dyn Display + Sync),
        timeout: Duration,
        settings: &TcpSettings,
    ) -> Result<Socket, Error> {
        within(target, timeout, async {
            let stream = TcpStream::connect((host, port)).await?;
            stream.set_nodelay(true)?;
            settings.apply(&stream)?;
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
