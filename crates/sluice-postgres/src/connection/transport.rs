//! The byte stream under a connection: the metered socket, plain or inside TLS.
//!
//! The meter sits on the socket, under TLS, so the TLS handshake's round trips
//! count as connect trips and every byte counted is a byte on the wire.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use postgres_protocol::message::frontend;
use rustls::pki_types::ServerName;
use sluice_core::{Error, ErrorKind, Meter, MeteredStream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio_rustls::client::TlsStream;

use super::Socket;
use crate::config::Target;

/// A connection's stream.
#[derive(Debug)]
pub(crate) enum Transport {
    /// Unencrypted.
    Plain(MeteredStream<Socket>),
    /// TLS over the metered socket (boxed: the TLS state is large).
    Tls(Box<TlsStream<MeteredStream<Socket>>>),
}

/// What an `SSLRequest` was answered with.
pub(crate) enum Negotiated {
    /// The server speaks TLS: the handshake is done.
    Tls(Transport),
    /// The server does not do TLS: the plain stream, unchanged.
    Refused(MeteredStream<Socket>),
    /// The server agreed, but the handshake failed (the stream is spent).
    Failed(Error),
}

/// `SSLRequest`'s code (PostgreSQL's `NEGOTIATE_SSL_CODE`).
const SSL_REQUEST_CODE: i32 = 80_877_103;

/// Asks the server for TLS on `stream` and, if it agrees, performs the
/// handshake with `client`, checking the certificate against `target`'s name.
pub(crate) async fn negotiate(
    mut stream: MeteredStream<Socket>,
    target: &Target,
    client: &Arc<rustls::ClientConfig>,
) -> Result<Negotiated, Error> {
    let mut request = bytes::BytesMut::with_capacity(8);
    frontend::ssl_request(&mut request);
    debug_assert_eq!(&request[4..8], SSL_REQUEST_CODE.to_be_bytes());
    stream.write_all(&request).await.map_err(Error::io)?;
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer).await.map_err(|error| {
        Error::new(
            ErrorKind::Connect,
            format!("{target} closed the connection when asked for TLS: {error}"),
        )
    })?;
    match answer[0] {
        b'S' => {}
        b'N' => return Ok(Negotiated::Refused(stream)),
        other => {
            return Err(Error::new(
                ErrorKind::Protocol,
                format!("{target} answered the TLS request with {other:#04x}, not S or N"),
            ))
        }
    }
    let name = match target {
        Target::Tcp(host, _) => ServerName::try_from(host.clone())
            .map_err(|_| Error::config(format!("{host:?} is not a host name TLS can check")))?,
        // libpq checks a socket's certificate against "localhost".
        Target::Unix(_) => ServerName::try_from("localhost").expect("a valid name"),
    };
    let connector = tokio_rustls::TlsConnector::from(client.clone());
    Ok(match connector.connect(name, stream).await {
        Ok(tls) => Negotiated::Tls(Transport::Tls(Box::new(tls))),
        Err(error) => Negotiated::Failed(handshake_error(target, &error)),
    })
}

/// One line naming the host and, for a certificate rustls refused, why.
fn handshake_error(target: &Target, error: &io::Error) -> Error {
    let why = match error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(certificate)) => {
            format!(
                "the server's certificate was refused: {}",
                certificate_reason(certificate)
            )
        }
        Some(other) => other.to_string(),
        None => error.to_string(),
    };
    Error::new(
        ErrorKind::Connect,
        format!("TLS handshake with {target} failed: {why}"),
    )
}

fn certificate_reason(error: &rustls::CertificateError) -> String {
    use rustls::CertificateError;
    match error {
        // A root of the same name but another key fails the signature.
        CertificateError::UnknownIssuer | CertificateError::BadSignature => {
            "it is not signed by a trusted root (check sslrootcert)".into()
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!("{error} (sslmode=verify-full checks the host name; verify-ca does not)")
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            format!("it has expired ({error})")
        }
        other => other.to_string(),
    }
}

impl Transport {
    /// The meter counting the socket's traffic.
    pub(crate) fn meter(&self) -> &Meter {
        match self {
            Transport::Plain(stream) => stream.meter(),
            Transport::Tls(stream) => stream.get_ref().0.meter(),
        }
    }

    /// `TLSv1_3 TLS13_AES_256_GCM_SHA384`-style: the protocol and cipher, or
    /// `None` on a plain connection.
    pub(crate) fn encryption(&self) -> Option<String> {
        let Transport::Tls(stream) = self else {
            return None;
        };
        let session = stream.get_ref().1;
        let protocol = session
            .protocol_version()
            .map_or("TLS".to_owned(), |version| format!("{version:?}"));
        let cipher = session
            .negotiated_cipher_suite()
            .map_or(String::new(), |suite| format!(" {:?}", suite.suite()));
        Some(format!("{protocol}{cipher}"))
    }

    /// The server's certificate (DER), on TLS.
    pub(crate) fn server_certificate(&self) -> Option<&[u8]> {
        let Transport::Tls(stream) = self else {
            return None;
        };
        let certificates = stream.get_ref().1.peer_certificates()?;
        certificates.first().map(|certificate| certificate.as_ref())
    }
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(stream) => Pin::new(stream).poll_read(context, buffer),
            Transport::Tls(stream) => Pin::new(stream.as_mut()).poll_read(context, buffer),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(stream) => Pin::new(stream).poll_write(context, buffer),
            Transport::Tls(stream) => Pin::new(stream.as_mut()).poll_write(context, buffer),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(stream) => Pin::new(stream).poll_flush(context),
            Transport::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(context),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(stream) => Pin::new(stream).poll_shutdown(context),
            Transport::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(context),
        }
    }
}
