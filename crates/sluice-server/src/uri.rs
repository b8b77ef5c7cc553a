//! What handlers read from the request URI, decoded strictly: the query string
//! ([`QueryPairs`]) and the `{name}` of a route ([`RouteName`]).
//!
//! Query strings are decoded as `application/x-www-form-urlencoded` (pairs split
//! on `&`, name and value on the first `=`, `+` is a space, `%XX` is a byte), as
//! axum's `Query` does, with one difference: bytes that do not form UTF-8 text
//! are an error naming the parameter, not U+FFFD. A text parameter must reach
//! the database as the client sent it or not at all; a silently replaced byte
//! would run the query with a value nobody asked for.
//!
//! Every parameter of this API takes one value: a repeated one is refused
//! with a 400 naming it ([`single`], [`check_known_once`]), never settled by
//! taking the first or the last, which would answer a question the client did
//! not ask (`format=csv&format=json`).
//!
//! Neither extractor lets axum answer for the handler (axum's `Path` would send
//! a plain-text 400 for a name that is not UTF-8): every request reaches its
//! handler, which answers in JSON and logs it.

use std::borrow::Cow;

use axum::extract::{FromRequestParts, MatchedPath};
use axum::http::request::Parts;
use percent_encoding::percent_decode;

use crate::error::AppError;

/// The query string's pairs, in order. As an extractor it never fails the
/// request by itself: handlers take `Result<QueryPairs, AppError>` and report
/// the error after their own checks (authentication first), so it is logged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryPairs(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryPairs {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<QueryPairs, AppError> {
        decode_query(parts.uri.query().unwrap_or("")).map(QueryPairs)
    }
}

/// The `{name}` segment of the matched route (`/queries/{name}`,
/// `/tables/{name}`, …), percent-decoded. A name whose bytes are not UTF-8 is
/// kept as it was sent, still percent-encoded: configured names are identifiers,
/// so it names nothing and the handler answers 404 like for any unknown name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for RouteName {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<RouteName, Self::Rejection> {
        let raw = parts
            .extensions
            .get::<MatchedPath>()
            .and_then(|matched| {
                let index = matched
                    .as_str()
                    .split('/')
                    .position(|segment| segment == "{name}")?;
                parts.uri.path().split('/').nth(index)
            })
            .unwrap_or("");
        let name = percent_decode(raw.as_bytes())
            .decode_utf8()
            .map_or_else(|_| raw.to_owned(), Cow::into_owned);
        Ok(RouteName(name))
    }
}

/// The value of the parameter `name`, if the query string gives it; a 400
/// naming it when it is given more than once.
pub fn single<'a>(pairs: &'a [(String, String)], name: &str) -> Result<Option<&'a str>, AppError> {
    let mut values = pairs
        .iter()
        .filter(|(key, _)| key == name)
        .map(|(_, value)| value.as_str());
    let first = values.next();
    match values.next() {
        Some(_) => Err(given_twice(name)),
        None => Ok(first),
    }
}

/// Checks that every parameter of `pairs` is one of `known` and given once: a
/// 400 naming the first that is not, saying `unknown` (what the route takes)
/// for a parameter it does not know.
pub fn check_known_once(
    pairs: &[(String, String)],
    known: &[&str],
    unknown: &str,
) -> Result<(), AppError> {
    for (index, (key, _)) in pairs.iter().enumerate() {
        if !known.contains(&key.as_str()) {
            return Err(AppError::parameter(key, unknown));
        }
        if pairs[..index].iter().any(|(earlier, _)| earlier == key) {
            return Err(given_twice(key));
        }
    }
    Ok(())
}

fn given_twice(name: &str) -> AppError {
    AppError::parameter(name, "given more than once (it takes one value)")
}

/// Decodes `query` (without its `?`). A name or value whose bytes are not UTF-8
/// is a 400 naming the parameter; a name that is not UTF-8 itself is named as it
/// was sent (still percent-encoded), which is the only faithful spelling of it.
pub fn decode_query(query: &str) -> Result<Vec<(String, String)>, AppError> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (raw_name, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = decode_component(raw_name).ok_or_else(|| {
                AppError::parameter(raw_name, "the name is not valid UTF-8 once decoded")
            })?;
            let value = decode_component(raw_value).ok_or_else(|| {
                AppError::parameter(
                    &name,
                    "the value is not valid UTF-8 once decoded (percent-encode text as UTF-8)",
                )
            })?;
            Ok((name, value))
        })
        .collect()
}

/// One name or value: `+` as a space, `%XX` as a byte, then strict UTF-8.
fn decode_component(raw: &str) -> Option<String> {
    let spaced: Cow<'_, str> = if raw.contains('+') {
        Cow::Owned(raw.replace('+', " "))
    } else {
        Cow::Borrowed(raw)
    };
    percent_decode(spaced.as_bytes())
        .decode_utf8()
        .ok()
        .map(Cow::into_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_gateway::GatewayError;

    fn pairs(query: &str) -> Vec<(String, String)> {
        decode_query(query).unwrap()
    }

    fn rejected(query: &str) -> String {
        match decode_query(query).unwrap_err() {
            AppError::Gateway(GatewayError::BadRequest {
                parameter: Some(parameter),
                ..
            }) => parameter,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pairs_are_decoded_as_forms_are() {
        assert_eq!(
            pairs("a=1&b=x+y&&c&d=%C3%A9%2B&e=%zz&a=2"),
            [
                ("a", "1"),
                ("b", "x y"),
                ("c", ""),
                ("d", "é+"),
                ("e", "%zz"),
                ("a", "2"),
            ]
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
        );
        assert_eq!(pairs(""), []);
        assert_eq!(pairs("k=a=b"), [("k".to_owned(), "a=b".to_owned())]);
    }

    #[test]
    fn a_repeated_parameter_is_refused_naming_it() {
        let repeated = pairs("format=csv&n=1&format=json");
        assert_eq!(single(&repeated, "n").unwrap(), Some("1"));
        assert_eq!(single(&repeated, "complete").unwrap(), None);
        let error = single(&repeated, "format").unwrap_err();
        assert_eq!(error.status().as_u16(), 400);
        assert!(error.to_string().contains("more than once"), "{error}");

        let known = ["transaction"];
        assert!(check_known_once(&pairs("transaction=each"), &known, "?").is_ok());
        for (query, parameter) in [
            ("transaction=each&transaction=single", "transaction"),
            ("transaction=each&colour=red", "colour"),
        ] {
            match check_known_once(&pairs(query), &known, "unknown") {
                Err(AppError::Gateway(GatewayError::BadRequest {
                    parameter: Some(named),
                    ..
                })) => assert_eq!(named, parameter, "{query}"),
                other => panic!("{query}: {other:?}"),
            }
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_name_their_parameter() {
        assert_eq!(rejected("ok=1&name=%FF"), "name");
        assert_eq!(rejected("name=abc%C3"), "name");
        // An encoded surrogate half is not UTF-8 either.
        assert_eq!(rejected("name=%ED%A0%80"), "name");
        assert_eq!(rejected("k%FFy=1"), "k%FFy");
    }
}
