//! [`Transport`]: the byte stream under a connection, the metered socket plain
//! or inside TLS, and the [`handshake`] that turns one into the other.
//!
//! The meter sits on the socket, under TLS, so the handshake's round trips
//! count as connect trips and every byte counted is a byte on the wire.

use std::fmt::Display;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use rustls::{CertificateError, ClientConfig};
use sluice_core::{Error, ErrorKind, Meter, MeteredStream, Socket};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::client::TlsStream;

use crate::Keywords;

/// A connection's stream.
#[derive(Debug)]
pub enum Transport {
    /// Unencrypted.
    Plain(MeteredStream<Socket>),
    /// TLS over the metered socket (boxed: the TLS state is large).
    Tls(Box<TlsStream<MeteredStream<Socket>>>),
}

/// The name a server's certificate is checked against: `host`, or for a
/// Unix-domain socket `localhost` (as libpq does).
pub fn server_name(host: Option<&str>) -> Result<ServerName<'static>, Error> {
    let host = host.unwrap_or("localhost");
    ServerName::try_from(host.to_owned())
        .map_err(|_| Error::config(format!("{host:?} is not a host name TLS can check")))
}

/// Performs the TLS handshake over `stream` with `client`, checking the
/// certificate against `name`; `target` names the server and `keywords` the
/// settings to change in the error, which is a connection error.
pub async fn handshake(
    stream: MeteredStream<Socket>,
    client: &Arc<ClientConfig>,
    name: ServerName<'static>,
    target: &(dyn Display + Sync),
    keywords: &Keywords,
) -> Result<Transport, Error> {
    let connector = tokio_rustls::TlsConnector::from(client.clone());
    match connector.connect(name, stream).await {
        Ok(tls) => Ok(Transport::Tls(Box::new(tls))),
        Err(error) => Err(handshake_error(target, &error, keywords)),
    }
}

/// One line naming the host and, for a certificate rustls refused, why.
fn handshake_error(target: &(dyn Display + Sync), error: &io::Error, keywords: &Keywords) -> Error {
    let why = match error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(certificate)) => {
            format!(
                "the server's certificate was refused: {}",
                certificate_reason(certificate, keywords)
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

fn certificate_reason(error: &CertificateError, keywords: &Keywords) -> String {
    match error {
        // A root of the same name but another key fails the signature.
        CertificateError::UnknownIssuer | CertificateError::BadSignature => {
            format!(
                "it is not signed by a trusted root (check {})",
                keywords.roots
            )
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!("{error} ({})", keywords.name_check)
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            format!("it has expired ({error})")
        }
        other => other.to_string(),
    }
}

impl Transport {
    /// The meter counting the socket's traffic.
    pub fn meter(&self) -> &Meter {
        match self {
            Transport::Plain(stream) => stream.meter(),
            Transport::Tls(stream) => stream.get_ref().0.meter(),
        }
    }

    /// `TLSv1_3 TLS13_AES_256_GCM_SHA384`-style: the protocol and cipher, or
    /// `None` on a plain connection.
    pub fn encryption(&self) -> Option<String> {
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
    pub fn server_certificate(&self) -> Option<&[u8]> {
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
