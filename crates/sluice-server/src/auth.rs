//! Bearer tokens: who may run which named query, who may run ad-hoc SQL (scope
//! `sql`) and who may write (scope `write`: `POST /tables/{name}`, and batches of
//! named queries that write).
//!
//! Only SHA-256 hashes of tokens are held. A presented token is hashed and compared
//! with **every** configured hash in constant time, so neither the comparison nor
//! the number of comparisons depends on how close a guess is. 401 means "no valid
//! token" (missing, malformed or unknown); 403 means "a valid token that lacks the
//! right". With no tokens configured, named queries are open and the server only
//! listens on loopback (see [`crate::server`]).

use axum::http::{header, HeaderMap};
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

#[cfg(test)]
mod tests {
    use super::*;

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
