//! Bearer tokens: who may run which named query, who may run ad-hoc SQL (scope
//! `sql`) and who may write (scope `write`: `POST /tables/{name}`, and batches of
//! named queries that write).
//!
//! Only SHA-256 hashes of tokens are held. A presented token is hashed and compared
//! with **every** configured hash in constant time, so neither the comparison nor
//! the number of comparisons depends on how close a guess is. 401 means "no valid
//! token" (missing, malformed or unknown); 403 means "a valid token that lacks the
//! right". With no tokens configured, named queries are open and the server only
//! listens on loopback (a front end's business: HTTP's also keeps web pages out
//! by their `Host`).
//!
//! A token that allows the request also admits it past its limits
//! ([`crate::throttle`]): the [`Grant`] holds the request's slot until it ends.

use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use std::sync::Arc;

use crate::config::TokenConfig;
use crate::error::GatewayError;
use crate::throttle::{Slot, Throttle};

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

/// The configured tokens, each with the running state of its limits.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    tokens: Vec<TokenConfig>,
    throttles: Vec<Arc<Throttle>>,
}

/// A request let through by a token: the token's name, for the log, and the
/// request's slot among the token's concurrent requests.
#[derive(Debug)]
pub struct Grant {
    /// The token's name.
    pub name: String,
    /// Held until the request has ended.
    pub slot: Slot,
}

impl Auth {
    /// Checks requests against `tokens`, their limits' state fresh.
    pub fn new(tokens: Vec<TokenConfig>) -> Auth {
        Auth::default().carried_over(tokens)
    }

    /// The tokens of a reloaded configuration: a token of the same name and
    /// limits keeps its running state (its requests in flight still count, its
    /// bucket is not refilled by the reload); others start afresh.
    pub fn carried_over(&self, tokens: Vec<TokenConfig>) -> Auth {
        let throttles = tokens
            .iter()
            .map(|token| {
                self.tokens
                    .iter()
                    .position(|old| old.name == token.name && old.limits == token.limits)
                    .map(|index| self.throttles[index].clone())
                    .unwrap_or_else(|| Arc::new(Throttle::new(token.limits)))
            })
            .collect();
        Auth { tokens, throttles }
    }

    /// True when tokens are configured.
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The grant of the token that allows `need` (401 without one, 403 when it
    /// does not allow it, 429 when it is over its limits); `None` when auth is off.
    pub fn admit(
        &self,
        credential: Credential<'_>,
        need: Need<'_>,
    ) -> Result<Option<Grant>, GatewayError> {
        if !self.enabled() {
            return match need {
                Need::Query(_) => Ok(None),
                Need::Sql => Err(GatewayError::Forbidden(
                    "ad-hoc SQL needs a token with scope \"sql\"".into(),
                )),
                Need::Write => Err(GatewayError::Forbidden(
                    "writing needs a token with scope \"write\"".into(),
                )),
            };
        }
        let (index, token) = self.token(credential)?;
        let allowed = match need {
            Need::Query(name) => token.queries.includes(name),
            Need::Sql => token.scopes.iter().any(|scope| scope == "sql"),
            Need::Write => token.scopes.iter().any(|scope| scope == "write"),
        };
        if allowed {
            let slot = self.throttles[index].admit(&token.name)?;
            Ok(Some(Grant {
                name: token.name.clone(),
                slot,
            }))
        } else {
            Err(GatewayError::Forbidden(match need {
                Need::Query(name) => format!("this token may not run query {name:?}"),
                Need::Sql => "this token may not run ad-hoc SQL (scope \"sql\")".into(),
                Need::Write => "this token may not write (scope \"write\")".into(),
            }))
        }
    }

    /// True when `credential` is a valid token with `scope` (false when auth is off).
    pub fn has_scope(&self, credential: Credential<'_>, scope: &str) -> bool {
        self.enabled()
            && self
                .token(credential)
                .is_ok_and(|(_, token)| token.scopes.iter().any(|given| given == scope))
    }

    /// The configured token the request presents, and its position: 401 when
    /// there is none.
    fn token(&self, credential: Credential<'_>) -> Result<(usize, &TokenConfig), GatewayError> {
        let presented = credential.token.ok_or(GatewayError::Unauthorized)?;
        let hash: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = subtle::Choice::from(0);
        let mut index = 0u32;
        for (position, token) in self.tokens.iter().enumerate() {
            let matches = token.sha256.ct_eq(&hash);
            index.conditional_assign(&(position as u32), matches);
            found |= matches;
        }
        if !bool::from(found) {
            return Err(GatewayError::Unauthorized);
        }
        Ok((index as usize, &self.tokens[index as usize]))
    }
}

/// The bearer token a request presents, however its front end carried it:
/// HTTP's `Authorization` header, gRPC's `authorization` metadata. The policy
/// reads only this, so no front end speaks another's vocabulary.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credential<'a> {
    token: Option<&'a str>,
}

impl<'a> Credential<'a> {
    /// From an `Authorization` value, `Bearer <token>` (the scheme in any case).
    pub fn from_authorization(value: Option<&'a str>) -> Credential<'a> {
        let token = value
            .and_then(|value| {
                let (scheme, token) = value.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|token| !token.is_empty());
        Credential { token }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Allowed;
    use crate::Class;

    #[test]
    fn a_credential_is_a_bearer_token_however_it_was_carried() {
        fn token(value: Option<&str>) -> Option<&str> {
            Credential::from_authorization(value).token
        }
        assert_eq!(token(Some("Bearer abc")), Some("abc"));
        assert_eq!(token(Some("bearer  abc ")), Some("abc"));
        assert_eq!(token(Some("Basic abc")), None);
        assert_eq!(token(Some("Bearer ")), None);
        assert_eq!(token(Some("abc")), None);
        assert_eq!(token(None), None);
    }

    fn token(name: &str, secret: &str, queries: Allowed, scopes: &[&str]) -> TokenConfig {
        TokenConfig {
            name: name.into(),
            sha256: Sha256::digest(secret.as_bytes()).into(),
            queries,
            scopes: scopes.iter().map(|scope| scope.to_string()).collect(),
            limits: crate::throttle::TokenLimits::default(),
        }
    }

    fn bearer(secret: &str) -> Credential<'_> {
        Credential {
            token: Some(secret),
        }
    }

    fn anonymous() -> Credential<'static> {
        Credential::default()
    }

    #[test]
    fn a_reload_keeps_the_running_limits_of_unchanged_tokens() {
        let limited = |name: &str, secret: &str, max: usize| TokenConfig {
            limits: crate::throttle::TokenLimits {
                max_concurrent: Some(max),
                ..Default::default()
            },
            ..token(name, secret, Allowed::All, &[])
        };
        let auth = Auth::new(vec![limited("a", "a-secret-000000001", 1)]);
        let held = auth.admit(bearer("a-secret-000000001"), Need::Query("q"));
        assert!(held.is_ok());
        // Same name and limits: the request in flight still counts.
        let same = auth.carried_over(vec![limited("a", "a-secret-000000001", 1)]);
        let refused = same.admit(bearer("a-secret-000000001"), Need::Query("q"));
        assert_eq!(refused.unwrap_err().class(), Class::Exhausted);
        // New limits start afresh.
        let raised = auth.carried_over(vec![limited("a", "a-secret-000000001", 2)]);
        assert!(raised
            .admit(bearer("a-secret-000000001"), Need::Query("q"))
            .is_ok());
        drop(held);
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
        let class = |credential: Credential<'_>, need| {
            auth.admit(credential, need)
                .map(|grant| grant.map(|grant| grant.name))
                .map_err(|error| error.class())
        };
        assert_eq!(
            class(anonymous(), Need::Query("a")),
            Err(Class::Unauthenticated)
        );
        assert_eq!(
            class(bearer("guess"), Need::Query("a")),
            Err(Class::Unauthenticated)
        );
        assert_eq!(
            class(bearer("reader-secret-0001"), Need::Query("a")),
            Ok(Some("reader".into()))
        );
        assert_eq!(
            class(bearer("reader-secret-0001"), Need::Query("b")),
            Err(Class::Forbidden)
        );
        assert_eq!(
            class(bearer("reader-secret-0001"), Need::Sql),
            Err(Class::Forbidden)
        );
        assert_eq!(
            class(bearer("admin-secret-00001"), Need::Sql),
            Ok(Some("admin".into()))
        );
        assert_eq!(
            class(bearer("admin-secret-00001"), Need::Query("b")),
            Ok(Some("admin".into()))
        );
        assert_eq!(class(anonymous(), Need::Write), Err(Class::Unauthenticated));
        assert_eq!(
            class(bearer("admin-secret-00001"), Need::Write),
            Err(Class::Forbidden)
        );
        assert_eq!(
            class(bearer("writer-secret-0001"), Need::Write),
            Ok(Some("writer".into()))
        );
        assert!(auth.has_scope(bearer("writer-secret-0001"), "write"));
        assert!(!auth.has_scope(bearer("admin-secret-00001"), "write"));
        assert!(!auth.has_scope(anonymous(), "write"));
        assert!(Auth::default()
            .admit(anonymous(), Need::Query("x"))
            .unwrap()
            .is_none());
    }
}
