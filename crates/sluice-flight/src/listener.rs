//! Flight's connections: accepted on the listener and, when the gateway serves
//! HTTPS, through the same TLS as HTTP (`[server] tls_cert` and `tls_key`, the
//! same acceptor, so a SIGHUP's new certificate applies to Flight's next
//! handshake too). gRPC needs HTTP/2, which the acceptor offers by ALPN.
//!
//! Handshakes run in tasks of their own, so a client that never finishes one
//! holds nothing but its task, for at most [`HANDSHAKE_TIMEOUT`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use sluice_server::tls::ServerTls;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::either::Either;
use tonic::transport::server::Connected;

/// The longest a TLS handshake may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// One client's connection, plain or TLS (the wrapper is for tonic's
/// [`Connected`], which `Either` cannot implement here).
pub struct Connection(Either<TcpStream, Box<TlsStream<TcpStream>>>);

/// Accepts connections on `listener` (with `tls`, each after its handshake)
/// until the returned stream is dropped.
pub fn incoming(
    listener: TcpListener,
    tls: Option<ServerTls>,
) -> ReceiverStream<io::Result<Connection>> {
    let (sender, receiver) = mpsc::channel(64);
    tokio::spawn(accept(listener, tls, sender));
    ReceiverStream::new(receiver)
}

async fn accept(
    listener: TcpListener,
    tls: Option<ServerTls>,
    sender: mpsc::Sender<io::Result<Connection>>,
) {
    loop {
        let stream = tokio::select! {
            () = sender.closed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors and the like: say so, and pause rather than spin.
                    tracing::warn!(%error, "Flight: accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        match &tls {
            None => {
                if sender
                    .send(Ok(Connection(Either::Left(stream))))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Some(tls) => {
                tokio::spawn(handshake(tls.clone(), stream, sender.clone()));
            }
        }
    }
}

async fn handshake(
    tls: ServerTls,
    stream: TcpStream,
    sender: mpsc::Sender<io::Result<Connection>>,
) {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream)).await {
        Ok(Ok(stream)) => {
            let _ = sender
                .send(Ok(Connection(Either::Right(Box::new(stream)))))
                .await;
        }
        Ok(Err(error)) => {
            tracing::debug!(%error, "Flight: TLS handshake failed");
            sluice_server::metrics::tls_handshake_failed();
        }
        Err(_) => {
            tracing::debug!("Flight: TLS handshake timed out");
            sluice_server::metrics::tls_handshake_failed();
        }
    }
}

impl Connected for Connection {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(context, buffer)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(context, bytes)
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(context)
    }
}
