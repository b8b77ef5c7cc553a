//! Request bodies within their route's limits, of size and of pace.
//!
//! Size: `[server] max_body` (a table's own `max_body`), or what a route holds
//! whole ([`Limit`]). A body whose `Content-Length` says it is larger is refused
//! with 413 before anything runs; a chunked one is read until it grows past the
//! limit, then ends in an error.
//!
//! Pace ([`Pace`], `[server] body_read_timeout` and `min_body_rate`): over each
//! stretch of `body_read_timeout` the server spends waiting for the body's next
//! bytes, the body must bring `min_body_rate` bytes a second on average, and at
//! least one byte; a slower one ends in an error. Only time spent waiting for the
//! client counts: while the database works, or the client is slow to take the
//! response, the body is not read and its clock stands still. Credit does not
//! carry over from one stretch to the next, so a body that came fast at first
//! cannot trickle afterwards.
//!
//! A body cut either way fails the upload (rolled back) or the batch, and
//! [`Cut`] tells the handler to answer 413 or 408 rather than 400.
//!
//! A database session must not wait on a slow client, so routes read their
//! body before they take one where they can: [`read_ahead`] reads the first
//! [`READ_AHEAD_BYTES`] (most bodies whole) before the session is asked for,
//! and [`read_whole`] the bodies a route holds whole anyway.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use sluice_gateway::config::Config;
use tokio::time::{Instant, Sleep};

use crate::error::AppError;

/// Bytes of a streamed body read before a database session is taken: a body
/// that ends within them (most do) has been read whole by then, so its
/// session never waits on the client. The size of the batch pipeline's window
/// of calls in flight, which a streamed body fills anyway.
pub const READ_AHEAD_BYTES: usize = 256 * 1024;

/// The largest body a route may hold whole (a JSON array of calls, or a batch
/// from a token without scope `write`), within `max_body`.
pub const MAX_HELD_BODY_BYTES: u64 = 16 * 1024 * 1024;

/// A body's size limit and the setting it comes from, for the 413's message.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    /// The most bytes.
    pub bytes: u64,
    /// Where the limit comes from, as the message names it.
    pub source: &'static str,
}

impl Limit {
    /// `max_body` (the server's or a table's own).
    pub fn max_body(bytes: u64) -> Limit {
        Limit {
            bytes,
            source: "max_body",
        }
    }

    /// A body held whole before its calls run: [`MAX_HELD_BODY_BYTES`], or
    /// `max_body` when that is smaller.
    pub fn held_whole(max_body: u64) -> Limit {
        match max_body <= MAX_HELD_BODY_BYTES {
            true => Limit::max_body(max_body),
            false => Limit {
                bytes: MAX_HELD_BODY_BYTES,
                source: "a batch body read whole before its calls run: a JSON array, or \
                         NDJSON from a token without scope write; send NDJSON with a token of \
                         scope write to stream more",
            },
        }
    }
}

/// How fast a body must come: over each `window` of waiting for it, at least
/// `min_rate` bytes a second and at least one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// `[server] body_read_timeout`.
    pub window: Duration,
    /// `[server] min_body_rate`, bytes a second.
    pub min_rate: u64,
}

impl Pace {
    /// The configuration's.
    pub fn of(config: &Config) -> Pace {
        Pace {
            window: config.body_read_timeout,
            min_rate: config.min_body_rate,
        }
    }

    /// Bytes each window must bring.
    fn bytes_per_window(self) -> u64 {
        let bytes = self.min_rate as f64 * self.window.as_secs_f64();
        (bytes.ceil() as u64).max(1)
    }
}

const WHOLE: u8 = 0;
const TOO_LARGE: u8 = 1;
const TOO_SLOW: u8 = 2;

/// Whether a body was cut, and why: set by the body's stream, read by the
/// handler to answer.
#[derive(Debug, Clone)]
pub struct Cut {
    reason: Arc<AtomicU8>,
    limit: Limit,
    pace: Pace,
}

impl Cut {
    /// True once the body was cut at its size limit or for its pace.
    pub fn happened(&self) -> bool {
        self.reason.load(Ordering::Relaxed) != WHOLE
    }

    /// True once the body was cut for coming too slowly.
    pub fn too_slow(&self) -> bool {
        self.reason.load(Ordering::Relaxed) == TOO_SLOW
    }

    /// The 413 or 408 for this body (a 413 if it was not cut).
    pub fn error(&self) -> AppError {
        match self.too_slow() {
            true => too_slow(self.pace),
            false => too_large(self.limit),
        }
    }

    /// The answer to a failure reading the body: [`Cut::error`] if it was
    /// cut, else a 400 (the client broke the body off).
    pub fn read_error(&self, error: &io::Error) -> AppError {
        match self.happened() {
            true => self.error(),
            false => AppError::bad_request(format!("the body could not be read: {error}")),
        }
    }

    fn set(&self, reason: u8) {
        self.reason.store(reason, Ordering::Relaxed);
    }
}

fn too_large(limit: Limit) -> AppError {
    AppError::PayloadTooLarge(format!(
        "the body is larger than this route's limit of {} bytes ({})",
        limit.bytes, limit.source
    ))
}

fn too_slow(pace: Pace) -> AppError {
    AppError::RequestTimeout(format!(
        "the body came too slowly: fewer than {} bytes in {:?} of waiting for it \
         (body_read_timeout, min_body_rate = {} bytes a second)",
        pace.bytes_per_window(),
        pace.window,
        pace.min_rate
    ))
}

/// The body's bytes, at most `limit` of them, at `pace`; 413 at once when the
/// `Content-Length` is larger.
pub fn limited(
    headers: &HeaderMap,
    body: Body,
    limit: Limit,
    pace: Pace,
) -> Result<(BoxStream<'static, io::Result<Bytes>>, Cut), AppError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit.bytes) {
        return Err(too_large(limit));
    }
    let cut = Cut {
        reason: Arc::default(),
        limit,
        pace,
    };
    let sized = {
        let cut = cut.clone();
        let mut seen = 0u64;
        body.into_data_stream().map(move |chunk| {
            let chunk = chunk.map_err(io::Error::other)?;
            seen += chunk.len() as u64;
            if seen > limit.bytes {
                cut.set(TOO_LARGE);
                return Err(io::Error::other(format!(
                    "the body is larger than {} bytes",
                    limit.bytes
                )));
            }
            Ok(chunk)
        })
    };
    let paced = Paced::new(sized, pace, cut.clone());
    Ok((paced.boxed(), cut))
}

/// Reads up to `bytes` of `body` (less if it ends first) and gives the body
/// back whole, those bytes in front: called before a session is taken, so the
/// session waits on no client for a body that ended within them.
pub async fn read_ahead(
    mut body: BoxStream<'static, io::Result<Bytes>>,
    bytes: usize,
) -> io::Result<BoxStream<'static, io::Result<Bytes>>> {
    let mut read = Vec::new();
    let mut length = 0;
    while length < bytes {
        match body.next().await {
            Some(chunk) => {
                let chunk = chunk?;
                length += chunk.len();
                read.push(Ok(chunk));
            }
            None => return Ok(futures_util::stream::iter(read).boxed()),
        }
    }
    Ok(futures_util::stream::iter(read).chain(body).boxed())
}

/// Reads the whole body; a failure is answered as [`Cut::read_error`] says.
pub async fn read_whole(
    mut body: BoxStream<'static, io::Result<Bytes>>,
    cut: &Cut,
) -> Result<Vec<u8>, AppError> {
    let mut whole = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|error| cut.read_error(&error))?;
        whole.extend_from_slice(&chunk);
    }
    Ok(whole)
}

/// A body held to its [`Pace`]: the time spent waiting for it is counted in
/// windows, and a window that ends without its bytes ends the body in an error.
struct Paced<S> {
    inner: S,
    pace: Pace,
    cut: Cut,
    /// Waiting time left in the current window.
    window_left: Duration,
    /// Bytes the current window still needs.
    needed: u64,
    /// When the wait under way began, if one is.
    waiting_since: Option<Instant>,
    /// Fires when the current window's waiting time runs out.
    timer: Pin<Box<Sleep>>,
    ended: bool,
}

impl<S> Paced<S> {
    fn new(inner: S, pace: Pace, cut: Cut) -> Paced<S> {
        Paced {
            inner,
            pace,
            cut,
            window_left: pace.window,
            needed: pace.bytes_per_window(),
            waiting_since: None,
            timer: Box::pin(tokio::time::sleep(pace.window)),
            ended: false,
        }
    }

    /// Ends the wait under way at `now`, counting it against the window.
    fn stop_waiting(&mut self, now: Instant) {
        if let Some(since) = self.waiting_since.take() {
            self.window_left = self.window_left.saturating_sub(now - since);
        }
    }

    /// At the end of a window: an error if it lacked its bytes, else the
    /// next window begins.
    fn close_window(&mut self) -> Result<(), io::Error> {
        if self.needed > 0 {
            self.cut.set(TOO_SLOW);
            self.ended = true;
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                too_slow(self.pace).to_string(),
            ));
        }
        self.window_left = self.pace.window;
        self.needed = self.pace.bytes_per_window();
        Ok(())
    }
}

impl<S: Stream<Item = io::Result<Bytes>> + Unpin> Stream for Paced<S> {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        loop {
            if let Poll::Ready(item) = this.inner.poll_next_unpin(context) {
                this.stop_waiting(Instant::now());
                match &item {
                    Some(Ok(chunk)) => {
                        this.needed = this.needed.saturating_sub(chunk.len() as u64);
                        if this.window_left.is_zero() {
                            if let Err(error) = this.close_window() {
                                return Poll::Ready(Some(Err(error)));
                            }
                        }
                    }
                    Some(Err(_)) | None => this.ended = true,
                }
                return Poll::Ready(item);
            }
            let now = Instant::now();
            let since = *this.waiting_since.get_or_insert(now);
            this.timer.as_mut().reset(since + this.window_left);
            if this.timer.as_mut().poll(context).is_pending() {
                return Poll::Pending;
            }
            // The window's waiting time ran out with the body still silent.
            this.stop_waiting(now.max(since + this.window_left));
            if let Err(error) = this.close_window() {
                return Poll::Ready(Some(Err(error)));
            }
            // A new window: wait on, timed afresh.
            this.waiting_since = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RELAXED: Pace = Pace {
        window: Duration::from_secs(3600),
        min_rate: 0,
    };

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_at_once() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, "11".parse().unwrap());
        let Err(error) = limited(
            &headers,
            Body::from("0123456789a"),
            Limit::max_body(10),
            RELAXED,
        ) else {
            panic!("a body declared over the limit was let through");
        };
        assert_eq!(error.status().as_u16(), 413);
    }

    #[tokio::test]
    async fn a_chunked_body_is_cut_past_the_limit() {
        let chunks = futures_util::stream::iter(
            ["01234", "56789", "a"].map(|text| Ok::<_, io::Error>(Bytes::from(text))),
        );
        let (mut stream, cut) = limited(
            &HeaderMap::new(),
            Body::from_stream(chunks),
            Limit::max_body(10),
            RELAXED,
        )
        .unwrap();
        assert_eq!(stream.next().await.unwrap().unwrap(), "01234");
        assert_eq!(stream.next().await.unwrap().unwrap(), "56789");
        assert!(!cut.happened());
        assert!(stream.next().await.unwrap().is_err());
        assert!(cut.happened());
        assert_eq!(cut.error().status().as_u16(), 413);
    }

    /// A body of `pieces`, each sent after its pause.
    fn trickle(pieces: Vec<(u64, &'static str)>) -> Body {
        Body::from_stream(
            futures_util::stream::iter(pieces).then(|(pause, text)| async move {
                tokio::time::sleep(Duration::from_millis(pause)).await;
                Ok::<_, io::Error>(Bytes::from(text))
            }),
        )
    }

    /// The pieces read before the body ended, and whether it was cut for its pace.
    async fn read(body: Body, pace: Pace) -> (usize, bool) {
        let (mut stream, cut) =
            limited(&HeaderMap::new(), body, Limit::max_body(1 << 20), pace).unwrap();
        let mut pieces = 0;
        while let Some(Ok(_)) = stream.next().await {
            pieces += 1;
        }
        assert!(stream.next().await.is_none(), "nothing after the end");
        if cut.happened() {
            assert_eq!(cut.error().status().as_u16(), 408);
        }
        (pieces, cut.too_slow())
    }

    // Real time, in windows long enough that a loaded machine's scheduling
    // (tens of milliseconds) changes no outcome.
    #[tokio::test]
    async fn a_body_slower_than_its_pace_is_cut() {
        // 100 bytes a second over windows of half a second: 50 bytes each.
        let pace = Pace {
            window: Duration::from_millis(500),
            min_rate: 100,
        };
        let line = "[\"nomatch\"]\n";
        // 240 bytes a second, a 12-byte line every 50 ms: fast enough.
        let steady = (0..20).map(|_| (50, line)).collect();
        assert_eq!(read(trickle(steady), pace).await, (20, false));
        // A line a second: cut when the first window ends without its bytes.
        let slow = (0..3).map(|_| (1000, line)).collect();
        assert_eq!(read(trickle(slow), pace).await, (0, true));
        // Silent for a whole window: cut, even without a rate.
        let silent = Pace {
            min_rate: 0,
            ..pace
        };
        assert_eq!(
            read(trickle(vec![(0, line), (100, line), (1500, line)]), silent).await,
            (2, true)
        );
        // A fast start earns no credit for a later trickle.
        let mut burst: Vec<(u64, &str)> = (0..100).map(|_| (0, line)).collect();
        burst.extend((0..3).map(|_| (1000, line)));
        assert_eq!(read(trickle(burst), pace).await, (100, true));
    }

    #[tokio::test]
    async fn time_the_server_is_not_reading_does_not_count() {
        let pace = Pace {
            window: Duration::from_millis(200),
            min_rate: 100,
        };
        let (mut stream, cut) = limited(
            &HeaderMap::new(),
            trickle(vec![(0, "a"), (0, "b")]),
            Limit::max_body(10),
            pace,
        )
        .unwrap();
        assert_eq!(stream.next().await.unwrap().unwrap(), "a");
        // The handler is busy elsewhere for several windows, then reads on.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(stream.next().await.unwrap().unwrap(), "b");
        assert!(stream.next().await.is_none());
        assert!(!cut.happened());
    }

    #[tokio::test]
    async fn reading_ahead_gives_the_whole_body_back() {
        for ahead in [0, 3, 100] {
            let body = futures_util::stream::iter(
                ["ab", "cd", "ef"].map(|text| Ok::<_, io::Error>(Bytes::from(text))),
            )
            .boxed();
            let body = read_ahead(body, ahead).await.unwrap();
            let whole: Vec<Bytes> = body.map(Result::unwrap).collect().await;
            assert_eq!(whole.concat(), b"abcdef", "{ahead}");
        }
    }
}
