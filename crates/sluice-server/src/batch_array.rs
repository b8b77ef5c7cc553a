//! The JSON form of `POST /queries/{name}/batch`: a body that is one JSON array
//! of calls (`Content-Type: application/json`) instead of NDJSON lines, answered
//! with one JSON array of results. It is what clients generated from the
//! OpenAPI document send and parse: NDJSON is not a media type they know.
//!
//! The array is read whole (at most [`MAX_HELD_BODY_BYTES`], within the
//! route's `max_body`), because a call cannot be run before the array is known
//! to be one, and before a database session is taken; then each element is handed to the pipeline as the line it would
//! have been, numbered from 1 as lines are. NDJSON bodies stream and are the
//! form for large batches. The results are the NDJSON form's lines framed as an
//! array, whose closing `]` is sent only when the batch ended well: a cut
//! response never parses.

use std::io;

use axum::http::{header, HeaderMap};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use serde_json::value::RawValue;

#[cfg(doc)]
use crate::body::MAX_HELD_BODY_BYTES;
use crate::body::{read_whole, Cut};
use crate::error::AppError;

/// How a batch's calls arrive, and so how its results are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyForm {
    /// NDJSON lines, streamed; results as NDJSON lines.
    Lines,
    /// One JSON array, read whole; results as one JSON array.
    Array,
}

impl BodyForm {
    /// `Array` for `Content-Type: application/json`, `Lines` for anything else
    /// (the NDJSON form never needed the header).
    pub fn of(headers: &HeaderMap) -> BodyForm {
        let media = headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .map(|media| media.trim().to_ascii_lowercase());
        match media.as_deref() {
            Some("application/json") => BodyForm::Array,
            _ => BodyForm::Lines,
        }
    }

    /// The response's media type.
    pub fn media_type(self) -> &'static str {
        match self {
            BodyForm::Lines => "application/x-ndjson",
            BodyForm::Array => "application/json",
        }
    }
}

/// Reads a JSON-array body whole and returns its elements as NDJSON lines.
pub async fn array_as_lines(
    body: BoxStream<'static, io::Result<Bytes>>,
    cut: &Cut,
) -> Result<BoxStream<'static, io::Result<Bytes>>, AppError> {
    let whole = read_whole(body, cut).await?;
    let lines = lines_of(&whole)?;
    Ok(futures_util::stream::once(async move { Ok(Bytes::from(lines)) }).boxed())
}

/// The elements of a JSON array, one per line. Each element's own text is
/// kept (no number passes through a float); its line breaks, which valid JSON
/// has only between tokens, become spaces.
fn lines_of(body: &[u8]) -> Result<Vec<u8>, AppError> {
    let elements: Vec<&RawValue> = serde_json::from_slice(body).map_err(|error| {
        AppError::bad_request(format!(
            "a batch body of type application/json is one JSON array of calls: {error}"
        ))
    })?;
    let mut lines = Vec::with_capacity(body.len() + elements.len());
    for element in elements {
        lines.extend(element.get().bytes().map(|byte| match byte {
            b'\n' | b'\r' => b' ',
            other => other,
        }));
        lines.push(b'\n');
    }
    Ok(lines)
}

/// The results' NDJSON chunks (whole lines) framed as one JSON array: `[`
/// before the first, `,` between, and `]` once they end; a chunk that is an
/// error (the batch did not end well) ends the body in it, the array unclosed.
pub fn framed_as_array(
    chunks: impl Stream<Item = io::Result<Bytes>> + Send + 'static,
) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    let state = (chunks.boxed(), Framing::default(), false);
    futures_util::stream::unfold(state, move |(mut chunks, mut framing, ended)| async move {
        if ended {
            return None;
        }
        let (item, ended) = match chunks.next().await {
            Some(Ok(chunk)) => (Ok(framing.frame(&chunk)), false),
            Some(Err(error)) => (Err(error), true),
            None => (Ok(framing.end()), true),
        };
        Some((item, (chunks, framing, ended)))
    })
    // A body may be polled again after its end (the compression layer does).
    .fuse()
}

/// Whether the array has been opened.
#[derive(Default)]
struct Framing {
    opened: bool,
}

impl Framing {
    fn frame(&mut self, chunk: &[u8]) -> Bytes {
        let mut framed = Vec::with_capacity(chunk.len() + 64);
        for line in chunk
            .split(|&byte| byte == b'\n')
            .filter(|line| !line.is_empty())
        {
            framed.push(if self.opened { b',' } else { b'[' });
            self.opened = true;
            framed.extend_from_slice(line);
            framed.push(b'\n');
        }
        framed.into()
    }

    fn end(&self) -> Bytes {
        Bytes::from_static(if self.opened { b"]\n" } else { b"[]\n" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_become_lines_with_their_own_text() {
        let lines = lines_of(b"[[1, 9007199254740993],\n {\"a\":\n \"x\\ny\"}, 7]").unwrap();
        assert_eq!(
            String::from_utf8(lines).unwrap(),
            "[1, 9007199254740993]\n{\"a\":  \"x\\ny\"}\n7\n"
        );
        assert!(lines_of(b"{\"a\": 1}").is_err());
        assert!(lines_of(b"[1,").is_err());
        assert_eq!(lines_of(b"[]").unwrap(), b"");
    }

    #[tokio::test]
    async fn results_close_only_when_the_batch_completed() {
        let run = |chunks: Vec<io::Result<&'static [u8]>>| async move {
            let chunks =
                futures_util::stream::iter(chunks.into_iter().map(|chunk| chunk.map(Bytes::from)));
            let framed: Vec<_> = framed_as_array(chunks).collect().await;
            framed
        };
        let whole = run(vec![
            Ok(b"{\"line\":1}\n{\"line\":2}\n"),
            Ok(b"{\"line\":3}\n"),
        ])
        .await;
        let text: Vec<u8> = whole
            .iter()
            .flat_map(|chunk| chunk.as_ref().unwrap().to_vec())
            .collect();
        let parsed: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(parsed.as_array().unwrap().len(), 3);
        let empty = run(vec![]).await;
        assert_eq!(empty[0].as_ref().unwrap().as_ref(), b"[]\n");
        let cut = run(vec![Ok(b"{\"line\":1}\n"), Err(io::Error::other("cut"))]).await;
        assert_eq!(cut.len(), 2);
        assert!(cut.last().unwrap().is_err());
    }
}
