//! Request bodies within their route's limit (`[server] max_body`, a table's
//! own `max_body`). A body whose `Content-Length` says it is larger is refused
//! with 413 before anything runs; a chunked one is read until it grows past the
//! limit, then ends in an error, which fails the upload (rolled back) or the
//! batch, and [`Overrun`] tells the handler to answer 413 rather than 400.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, HeaderMap};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;

use crate::error::AppError;

/// Set when a body was cut at its limit.
#[derive(Debug, Clone, Default)]
pub struct Overrun {
    happened: Arc<AtomicBool>,
    limit: u64,
}

impl Overrun {
    /// True once the body went past its limit.
    pub fn happened(&self) -> bool {
        self.happened.load(Ordering::Relaxed)
    }

    /// The 413 for this body.
    pub fn error(&self) -> AppError {
        too_large(self.limit)
    }
}

fn too_large(limit: u64) -> AppError {
    AppError::PayloadTooLarge(format!(
        "the body is larger than this route's limit of {limit} bytes (max_body)"
    ))
}

/// The body's bytes, at most `limit` of them; 413 at once when the
/// `Content-Length` is larger.
pub fn limited(
    headers: &HeaderMap,
    body: Body,
    limit: u64,
) -> Result<(BoxStream<'static, io::Result<Bytes>>, Overrun), AppError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit) {
        return Err(too_large(limit));
    }
    let overrun = Overrun {
        happened: Arc::default(),
        limit,
    };
    let flag = overrun.happened.clone();
    let mut seen = 0u64;
    let stream = body
        .into_data_stream()
        .map(move |chunk| {
            let chunk = chunk.map_err(io::Error::other)?;
            seen += chunk.len() as u64;
            if seen > limit {
                flag.store(true, Ordering::Relaxed);
                return Err(io::Error::other(format!(
                    "the body is larger than {limit} bytes"
                )));
            }
            Ok(chunk)
        })
        .boxed();
    Ok((stream, overrun))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_at_once() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, "11".parse().unwrap());
        let Err(error) = limited(&headers, Body::from("0123456789a"), 10) else {
            panic!("a body declared over the limit was let through");
        };
        assert_eq!(error.status().as_u16(), 413);
    }

    #[tokio::test]
    async fn a_chunked_body_is_cut_past_the_limit() {
        let chunks = futures_util::stream::iter(
            ["01234", "56789", "a"].map(|text| Ok::<_, io::Error>(Bytes::from(text))),
        );
        let (mut stream, overrun) =
            limited(&HeaderMap::new(), Body::from_stream(chunks), 10).unwrap();
        assert_eq!(stream.next().await.unwrap().unwrap(), "01234");
        assert_eq!(stream.next().await.unwrap().unwrap(), "56789");
        assert!(!overrun.happened());
        assert!(stream.next().await.unwrap().is_err());
        assert!(overrun.happened());
        assert_eq!(overrun.error().status().as_u16(), 413);
    }
}
