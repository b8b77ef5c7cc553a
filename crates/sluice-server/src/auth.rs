//! Bearer tokens: who may run which named query, who may run ad-hoc SQL (scope
//! `sql`) and who may write (scope `write`: `POST /tables/{name}`, and batches of
//! named queries that write).
//!
//! Only SHA-256 hashes of tokens are held. A presented token is hashed and compared
//! with **every** configured hash in constant time, so neither the comparison nor
//! the number of comparisons depends on how close a guess is. 401 means "no valid
//! token" (missing, malformed or unknown); 403 means "a valid token that lacks the
//! right". With no tokens configured, named queries are open and the server only
//! listens on loopback (see [`crate::server`]); [`check_host`] then keeps web
//! pages out.

use std::net::{Ipv4Addr, Ipv6Addr};

use axum::http::{header, HeaderMap, Uri};
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::config::{Allowed, TokenConfig};
use crate::error::AppError;

/// What a request needs.
#[derive(Debug, Clone, Copy)]
pub enum Need<'a> {
    /// Running this named query.
    Query(&'a str),
    /// `POST /sql` (scope `sql`).
    Sql,
    /// `POST /tables/{name}` (scope `write`).
    Write,
}

/// The configured tokens.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    tokens: Vec<TokenConfig>,
}

impl Auth {
    /// Checks requests against `tokens`.
    pub fn new(tokens: Vec<TokenConfig>) -> Auth {
        Auth { tokens }
    }

    /// True when tokens are configured.
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The name of the token that allows `need`, `None` when auth is off.
    pub fn check(&self, headers: &HeaderMap, need: Need<'_>) -> Result<Option<String>, AppError> {
        if !self.enabled() {
            return match need {
                Need::Query(_) => Ok(None),
                Need::Sql => Err(AppError::Forbidden(
                    "ad-hoc SQL needs a token with scope \"sql\"".into(),
                )),
                Need::Write => Err(AppError::Forbidden(
                    "writing needs a token with scope \"write\"".into(),
                )),
            };
        }
        let token = self.token(headers)?;
        let allowed = match need {
            Need::Query(name) => match &token.queries {
                Allowed::All => true,
                Allowed::Only(names) => names.iter().any(|allowed| allowed == name),
            },
            Need::Sql => token.scopes.iter().any(|scope| scope == "sql"),
            Need::Write => token.scopes.iter().any(|scope| scope == "write"),
        };
        if allowed {
            Ok(Some(token.name.clone()))
        } else {
            Err(AppError::Forbidden(match need {
                Need::Query(name) => format!("this token may not run query {name:?}"),
                Need::Sql => "this token may not run ad-hoc SQL (scope \"sql\")".into(),
                Need::Write => "this token may not write (scope \"write\")".into(),
            }))
        }
    }

    /// True when the request's token is valid and has `scope` (false when auth is off).
    pub fn has_scope(&self, headers: &HeaderMap, scope: &str) -> bool {
        self.enabled()
            && self
                .token(headers)
                .is_ok_and(|token| token.scopes.iter().any(|given| given == scope))
    }

    /// The configured token the request presents: 401 when there is none.
    fn token(&self, headers: &HeaderMap) -> Result<&TokenConfig, AppError> {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let (scheme, token) = value.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|token| !token.is_empty())
            .ok_or(AppError::Unauthorized)?;
        let hash: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = subtle::Choice::from(0);
        let mut index = 0u32;
        for (position, token) in self.tokens.iter().enumerate() {
            let matches = token.sha256.ct_eq(&hash);
            index.conditional_assign(&(position as u32), matches);
            found |= matches;
        }
        if !bool::from(found) {
            return Err(AppError::Unauthorized);
        }
        Ok(&self.tokens[index as usize])
    }
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
        if !is_local_host(&host) {
            return Err(AppError::Forbidden(format!(
                "Host {host:?} is not served: without tokens this server only answers requests \
                 addressed to localhost or a loopback address (a defence against DNS rebinding)"
            )));
        }
    }
    Ok(())
}

/// `localhost` or a loopback address, with or without a port.
fn is_local_host(host: &str) -> bool {
    let is_port = |text: &str| {
        !text.is_empty() && text.len() <= 5 && text.bytes().all(|byte| byte.is_ascii_digit())
    };
    if let Some(rest) = host.strip_prefix('[') {
        let Some((address, after)) = rest.split_once(']') else {
            return false;
        };
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(is_port);
        return port_ok
            && address.parse::<Ipv6Addr>().is_ok_and(|address| {
                address.is_loopback()
                    || address
                        .to_ipv4_mapped()
                        .is_some_and(|address| address.is_loopback())
            });
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if is_port(port) => name,
        Some(_) => return false,
        None => host,
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<Ipv4Addr>()
            .is_ok_and(|address| address.is_loopback())
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
            assert!(is_local_host(host), "{host}");
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
            assert!(!is_local_host(host), "{host}");
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

    fn token(name: &str, secret: &str, queries: Allowed, scopes: &[&str]) -> TokenConfig {
        TokenConfig {
            name: name.into(),
            sha256: Sha256::digest(secret.as_bytes()).into(),
            queries,
            scopes: scopes.iter().map(|scope| scope.to_string()).collect(),
        }
    }

    fn bearer(secret: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            format!("Bearer {secret}").parse().unwrap(),
        );
        headers
    }

    #[test]
    fn missing_or_unknown_tokens_are_401_and_missing_rights_403() {
        let auth = Auth::new(vec![
            token(
                "reader",
                "reader-secret-0001",
                Allowed::Only(vec!["a".into()]),
                &[],
            ),
            token("admin", "admin-secret-00001", Allowed::All, &["sql"]),
            token("writer", "writer-secret-0001", Allowed::All, &["write"]),
        ]);
        let status = |headers: &HeaderMap, need| {
            auth.check(headers, need)
                .map_err(|error| error.status().as_u16())
        };
        assert_eq!(status(&HeaderMap::new(), Need::Query("a")), Err(401));
        assert_eq!(status(&bearer("guess"), Need::Query("a")), Err(401));
        assert_eq!(
            status(&bearer("reader-secret-0001"), Need::Query("a")),
            Ok(Some("reader".into()))
        );
        assert_eq!(
            status(&bearer("reader-secret-0001"), Need::Query("b")),
            Err(403)
        );
        assert_eq!(status(&bearer("reader-secret-0001"), Need::Sql), Err(403));
        assert_eq!(
            status(&bearer("admin-secret-00001"), Need::Sql),
            Ok(Some("admin".into()))
        );
        assert_eq!(
            status(&bearer("admin-secret-00001"), Need::Query("b")),
            Ok(Some("admin".into()))
        );
        assert_eq!(status(&HeaderMap::new(), Need::Write), Err(401));
        assert_eq!(status(&bearer("admin-secret-00001"), Need::Write), Err(403));
        assert_eq!(
            status(&bearer("writer-secret-0001"), Need::Write),
            Ok(Some("writer".into()))
        );
        assert!(auth.has_scope(&bearer("writer-secret-0001"), "write"));
        assert!(!auth.has_scope(&bearer("admin-secret-00001"), "write"));
        assert!(!auth.has_scope(&HeaderMap::new(), "write"));
        assert_eq!(
            Auth::default()
                .check(&HeaderMap::new(), Need::Query("x"))
                .unwrap(),
            None
        );
    }
}
