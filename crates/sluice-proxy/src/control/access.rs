//! Who may use the control API: [`Access`] checks every request before it
//! is served, and [`ControlToken`] is the token it may ask for.
//!
//! The API listens on loopback, but loopback is no boundary for a web page
//! open in a browser on the same machine: it can send requests there, and
//! with DNS rebinding read the answers. So requests that only a page would
//! send are refused (see [`Access::check`]), and a token can be required.

use sluice_core::host::{is_loopback, parse_authority, Host};
use std::fmt;
use std::str::FromStr;

use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The token the control API asks for (`Authorization: Bearer TOKEN`), kept
/// only as its SHA-256 hash and never printed.
#[derive(Clone)]
pub struct ControlToken {
    sha256: [u8; 32],
}

impl ControlToken {
    /// Whether `presented` is the token: compared in constant time, hashes
    /// of equal length, so the time taken says nothing about how close a
    /// guess came, nor about the token's length.
    pub(crate) fn matches(&self, presented: &[u8]) -> bool {
        let hash: [u8; 32] = Sha256::digest(presented).into();
        bool::from(self.sha256.ct_eq(&hash))
    }
}

/// A control token that could not be presented as given: empty, or with
/// whitespace or control characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlTokenError;

impl fmt::Display for ControlTokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a control token is one or more characters, none of them spaces or control \
             characters",
        )
    }
}

impl std::error::Error for ControlTokenError {}

impl FromStr for ControlToken {
    type Err = ControlTokenError;

    /// A token as given: at least one character, none of them whitespace or
    /// control characters (it must fit in a header as sent).
    fn from_str(text: &str) -> Result<ControlToken, ControlTokenError> {
        if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ControlTokenError);
        }
        Ok(ControlToken {
            sha256: Sha256::digest(text.as_bytes()).into(),
        })
    }
}

impl fmt::Debug for ControlToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ControlToken(…)")
    }
}

/// What the control API checks before every request; see [`Access::check`].
pub(crate) struct Access {
    token: Option<ControlToken>,
    /// The API may listen beyond loopback: a `Host` naming any IP address is
    /// accepted too.
    remote: bool,
}

/// A request refused: the status and the JSON error saying why.
#[derive(Debug)]
pub(crate) struct Refusal {
    status: StatusCode,
    message: String,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = Json(json!({ "error": self.message }));
        if self.status == StatusCode::UNAUTHORIZED {
            let challenge = [(header::WWW_AUTHENTICATE, "Bearer")];
            return (self.status, challenge, body).into_response();
        }
        (self.status, body).into_response()
    }
}

impl Access {
    /// Requests need `token` when one is given; `remote`: the API may listen
    /// beyond loopback.
    pub(crate) fn new(token: Option<ControlToken>, remote: bool) -> Access {
        Access { token, remote }
    }

    /// Lets a request through, or says why not. A web page in a browser on
    /// this machine reaches a loopback port too, so the API refuses what only
    /// a page would send:
    ///
    /// - without a token, a `Host` that is not this machine's (403): DNS
    ///   rebinding (see [`host_allowed`]);
    /// - an `Origin` other than the API's own (403): a page of another site,
    ///   sending a simple request that needs no CORS preflight;
    /// - with a token, a request without it (401);
    /// - a body that is not `application/json` (415): the types a page can
    ///   send without a preflight (`text/plain`, forms) are all refused, and
    ///   the API answers no preflight.
    pub(crate) fn check(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
    ) -> Result<(), Refusal> {
        if self.token.is_none() {
            self.check_host(uri, headers)?;
        }
        check_origin(headers)?;
        self.check_token(headers)?;
        check_body_type(method, headers)
    }

    /// The request names this machine (a request naming no host at all,
    /// HTTP/1.0, is never a browser's and passes).
    fn check_host(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        let named = headers
            .get(header::HOST)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
            .into_iter()
            .chain(uri.authority().map(|authority| authority.to_string()));
        let served = if self.remote {
            "localhost or an IP address"
        } else {
            "localhost or a loopback address"
        };
        for host in named {
            if !host_allowed(&host, self.remote) {
                return Err(Refusal::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "Host {host:?} is not served: without a control token the control API \
                         only answers requests addressed to {served} (a defence against DNS \
                         rebinding)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// With a token set: `Authorization: Bearer TOKEN`.
    fn check_token(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| bearer(value.as_bytes()));
        match presented {
            Some(presented) if token.matches(presented) => Ok(()),
            _ => Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "the control API needs its token: Authorization: Bearer TOKEN \
                 (the one given with --control-token)",
            )),
        }
    }
}

/// The token of an `Authorization: Bearer TOKEN` value (the scheme in any
/// case).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let space = value.iter().position(|&byte| byte == b' ')?;
    let (scheme, token) = value.split_at(space);
    let token = token.trim_ascii();
    (scheme.eq_ignore_ascii_case(b"bearer") && !token.is_empty()).then_some(token)
}

/// A page of `evil.example` whose name is re-pointed at 127.0.0.1 (DNS
/// rebinding) sends requests the browser believes go to `evil.example`, with
/// `Host: evil.example`. So only names no DNS answer can re-point are
/// accepted: `localhost` and loopback addresses (`127.0.0.0/8`, `[::1]`),
/// with or without a port, in any case; and when the API may listen beyond
/// loopback, any IP address (an address is never rebound; a name may be).
fn host_allowed(host: &str, remote: bool) -> bool {
    match parse_authority(host) {
        Some(Host::Name(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(Host::Address(address)) => remote || is_loopback(address),
        None => false,
    }
}

/// A browser names the site a request comes from in `Origin`. The only one
/// accepted is the API's own (`http://` or `https://` and the `Host`
/// requested): a page of another site is refused even when its request
/// needs no CORS preflight. Requests without `Origin` (curl, scripts) pass.
fn check_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    // Bytes, not text: a header need not be UTF-8.
    let origin = origin.as_bytes();
    let own = headers.get(header::HOST).is_some_and(|host| {
        [&b"http://"[..], b"https://"].iter().any(|scheme| {
            origin.len() == scheme.len() + host.len()
                && origin[..scheme.len()].eq_ignore_ascii_case(scheme)
                && origin[scheme.len()..].eq_ignore_ascii_case(host.as_bytes())
        })
    });
    if own {
        return Ok(());
    }
    let origin = String::from_utf8_lossy(origin);
    Err(Refusal::new(
        StatusCode::FORBIDDEN,
        format!(
            "Origin {origin:?} is refused: the control API answers no web page of another \
             site"
        ),
    ))
}

/// A request with a body (and every `POST`) must send it as
/// `application/json` (parameters such as `charset` aside).
fn check_body_type(method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
    let has_body = method == Method::POST
        || headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() != b"0");
    if !has_body {
        return Ok(());
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media_type| media_type.trim().eq_ignore_ascii_case("application/json"));
    if json {
        return Ok(());
    }
    Err(Refusal::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "the body must be JSON, sent with Content-Type: application/json",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_this_machine_are_accepted_as_host() {
        for host in [
            "localhost",
            "LocalHost:6433",
            "localhost.:6433",
            "127.0.0.1",
            "127.0.0.1:6433",
            "127.0.0.2:9",
            "[::1]",
            "[::1]:6433",
            "[::ffff:127.0.0.1]:6433",
        ] {
            assert!(host_allowed(host, false), "{host}");
            assert!(host_allowed(host, true), "{host}");
        }
        for host in [
            "evil.example:6433",
            "evil.example",
            "localhost.evil.example",
            "app.localhost",
            "::1",
            "[::1",
            "[::1]x",
            "localhost:http",
            "localhost:123456",
            "",
        ] {
            assert!(!host_allowed(host, false), "{host}");
            assert!(!host_allowed(host, true), "{host}");
        }
        for host in ["10.0.0.5:6433", "0.0.0.0", "[2001:db8::1]:6433"] {
            assert!(!host_allowed(host, false), "{host}");
            assert!(host_allowed(host, true), "remote, by address: {host}");
        }
    }

    #[test]
    fn only_the_apis_own_origin_is_accepted() {
        let headers = |host: Option<&str>, origin: &[u8]| {
            let mut headers = HeaderMap::new();
            if let Some(host) = host {
                headers.insert(header::HOST, host.parse().unwrap());
            }
            let origin = axum::http::HeaderValue::from_bytes(origin).unwrap();
            headers.insert(header::ORIGIN, origin);
            headers
        };
        let host = Some("localhost:6433");
        for own in [&b"http://localhost:6433"[..], b"HTTPS://LocalHost:6433"] {
            assert!(check_origin(&headers(host, own)).is_ok());
        }
        for foreign in [
            &b"http://evil.example"[..],
            b"http://localhost:6434",
            b"null",
            // As long as the own origin, a character split by the scheme's end.
            "http:/\u{e9}ocalhost:6433".as_bytes(),
            b"http://localhost:6433\xff",
        ] {
            let refusal = check_origin(&headers(host, foreign)).unwrap_err();
            assert_eq!(refusal.status, StatusCode::FORBIDDEN);
        }
        assert!(check_origin(&headers(None, b"http://localhost")).is_err());
        assert!(check_origin(&HeaderMap::new()).is_ok(), "not a browser");
    }

    #[test]
    fn a_bearer_token_is_read_whatever_the_schemes_case() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Bearer "), None);
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"abc"), None);
    }

    #[test]
    fn the_token_is_compared_whole() {
        let token: ControlToken = "s3cret".parse().unwrap();
        assert!(token.matches(b"s3cret"));
        for wrong in [&b"s3cre"[..], b"s3cret!", b"S3CRET", b""] {
            assert!(!token.matches(wrong));
        }
    }
}
