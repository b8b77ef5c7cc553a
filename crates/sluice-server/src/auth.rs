//! What HTTP adds to the gateway's bearer tokens ([`sluice_gateway::Auth`]):
//! reading the token from the `Authorization` header, and, when no tokens are
//! configured and the server listens on loopback (see [`crate::server`]),
//! [`check_host`], which keeps web pages out.

use axum::http::{header, HeaderMap, Uri};
use sluice_gateway::{Auth, Credential, GatewayError, Grant, Need};

use crate::error::AppError;

/// The bearer token an HTTP request presents in its `Authorization` header.
pub fn credential(headers: &HeaderMap) -> Credential<'_> {
    Credential::from_authorization(
        headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok()),
    )
}

/// [`Auth::admit`] for an HTTP request's headers.
pub fn admit(auth: &Auth, headers: &HeaderMap, need: Need<'_>) -> Result<Option<Grant>, AppError> {
    Ok(auth.admit(credential(headers), need)?)
}

/// Without tokens, anything that reaches the (loopback-only) listener may run
/// named queries. That includes web pages in a local browser: a page of
/// `evil.example` whose DNS name is re-pointed at 127.0.0.1 (DNS rebinding) sends
/// requests the browser believes go to `evil.example` — with `Host:
/// evil.example`. So only names of this machine are accepted: `localhost` and
/// loopback addresses (`127.0.0.0/8`, `[::1]`; the listen address is one of them
/// whenever there are no tokens), with any port, case-insensitively. A request
/// naming no host at all (HTTP/1.0; never a browser) passes.
pub fn check_host(headers: &HeaderMap, uri: &Uri) -> Result<(), AppError> {
    let named = headers
        .get(header::HOST)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        .into_iter()
        .chain(
            uri.authority()
                .map(|authority| authority.as_str().to_owned()),
        );
    for host in named {
        if !sluice_core::host::is_local(&host) {
            return Err(GatewayError::Forbidden(format!(
                "Host {host:?} is not served: without tokens this server only answers requests \
                 addressed to localhost or a loopback address (a defence against DNS rebinding)"
            ))
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_host_names_are_accepted() {
        for host in [
            "localhost",
            "LocalHost:8080",
            "localhost.:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.0.0.2:9",
            "[::1]",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:8080",
        ] {
            assert!(sluice_core::host::is_local(host), "{host}");
        }
        for host in [
            "evil.example:8080",
            "evil.example",
            "localhost.evil.example",
            "app.localhost",
            "10.0.0.5:8080",
            "0.0.0.0:8080",
            "::1",
            "[::1",
            "[::1]x",
            "[::2]:8080",
            "localhost:http",
            "localhost:123456",
            "",
        ] {
            assert!(!sluice_core::host::is_local(host), "{host}");
        }
        let mut headers = HeaderMap::new();
        assert!(check_host(&headers, &"/health".parse().unwrap()).is_ok());
        assert!(check_host(&headers, &"http://evil.example/health".parse().unwrap()).is_err());
        headers.insert(header::HOST, "evil.example:8080".parse().unwrap());
        let error = check_host(&headers, &"/health".parse().unwrap()).unwrap_err();
        assert_eq!(error.status().as_u16(), 403);
        assert!(error.to_string().contains("evil.example:8080"), "{error}");
        headers.insert(header::HOST, "localhost:8080".parse().unwrap());
        assert!(check_host(&headers, &"/health".parse().unwrap()).is_ok());
    }
}
