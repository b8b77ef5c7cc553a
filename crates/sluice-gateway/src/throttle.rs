//! Per-token admission: at most `max_concurrent` requests of one token in
//! flight, and at most `rate` requests per second on average with bursts of
//! `burst` (a token bucket). A request over either is refused before it touches
//! a database, with 429 and `Retry-After`, so one busy client cannot take every
//! pooled connection from the others.
//!
//! A request holds its [`Slot`] until it has ended, its body included: a stream
//! of five minutes counts for five minutes. The bucket is checked after the
//! slot, so a request refused for concurrency spends none of the token's rate.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::GatewayError;

/// A token's limits as configured; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TokenLimits {
    /// Requests of the token in flight at once.
    pub max_concurrent: Option<usize>,
    /// Requests per second, on average.
    pub rate: Option<f64>,
    /// Requests that may arrive at once after a quiet spell (default: the rate
    /// rounded up, at least 1).
    pub burst: Option<u32>,
}

/// The running state of one token's limits.
#[derive(Debug)]
pub struct Throttle {
    slots: Option<(Arc<Semaphore>, usize)>,
    bucket: Option<Mutex<Bucket>>,
}

/// Held by a request for as long as it runs; dropping it frees its slot.
#[derive(Debug)]
pub struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
}

#[derive(Debug)]
struct Bucket {
    rate: f64,
    capacity: f64,
    available: f64,
    updated: Instant,
}

impl Bucket {
    /// Takes one request's worth, or says how long until there is one.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.available = (self.available + elapsed * self.rate).min(self.capacity);
        self.updated = now;
        if self.available >= 1.0 {
            self.available -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.available) / self.rate))
        }
    }
}

impl Throttle {
    /// The state for `limits`, full: a new token may burst at once.
    pub fn new(limits: TokenLimits) -> Throttle {
        let bucket = limits.rate.map(|rate| {
            let capacity = f64::from(limits.burst.unwrap_or_else(|| default_burst(rate)));
            Mutex::new(Bucket {
                rate,
                capacity,
                available: capacity,
                updated: Instant::now(),
            })
        });
        Throttle {
            slots: limits
                .max_concurrent
                .map(|max| (Arc::new(Semaphore::new(max)), max)),
            bucket,
        }
    }

    /// Admits one request of `token`, or refuses it with 429.
    pub fn admit(&self, token: &str) -> Result<Slot, GatewayError> {
        let permit = match &self.slots {
            Some((semaphore, max)) => {
                Some(semaphore.clone().try_acquire_owned().map_err(|_| {
                    GatewayError::TooManyRequests {
                        message: format!(
                            "token {token:?} already has {max} requests running (max_concurrent); \
                         retry when one has ended"
                        ),
                        retry_after: 1,
                    }
                })?)
            }
            None => None,
        };
        if let Some(bucket) = &self.bucket {
            let mut bucket = bucket.lock().unwrap_or_else(|poison| poison.into_inner());
            let rate = bucket.rate;
            bucket.take(Instant::now()).map_err(|wait| {
                GatewayError::TooManyRequests {
                    message: format!(
                        "token {token:?} is over its rate of {rate} requests per second"
                    ),
                    // Whole seconds, rounded up: retrying sooner would be refused.
                    retry_after: wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
                }
            })?;
        }
        Ok(Slot { _permit: permit })
    }
}

/// The burst a rate allows when none is configured.
pub fn default_burst(rate: f64) -> u32 {
    rate.ceil().clamp(1.0, f64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_after(error: GatewayError) -> u64 {
        match error {
            GatewayError::TooManyRequests { retry_after, .. } => retry_after,
            other => panic!("expected 429, got {other:?}"),
        }
    }

    #[test]
    fn concurrent_requests_beyond_the_limit_wait_for_a_slot() {
        let throttle = Throttle::new(TokenLimits {
            max_concurrent: Some(2),
            ..TokenLimits::default()
        });
        let first = throttle.admit("t").unwrap();
        let _second = throttle.admit("t").unwrap();
        assert_eq!(refused_after(throttle.admit("t").unwrap_err()), 1);
        drop(first);
        throttle.admit("t").unwrap();
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let mut bucket = Bucket {
            rate: 2.0,
            capacity: 3.0,
            available: 3.0,
            updated: Instant::now(),
        };
        let start = bucket.updated;
        for _ in 0..3 {
            bucket.take(start).unwrap();
        }
        let wait = bucket.take(start).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        // Half a second later one more request's worth has come back, not two.
        let later = start + Duration::from_millis(500);
        bucket.take(later).unwrap();
        assert!(bucket.take(later).is_err());
        // A long quiet spell refills to the burst, no further.
        let much_later = later + Duration::from_secs(60);
        for _ in 0..3 {
            bucket.take(much_later).unwrap();
        }
        assert!(bucket.take(much_later).is_err());
    }

    #[test]
    fn a_slow_rate_says_how_many_seconds_to_wait() {
        let throttle = Throttle::new(TokenLimits {
            rate: Some(0.25),
            ..TokenLimits::default()
        });
        throttle.admit("t").unwrap();
        let retry_after = refused_after(throttle.admit("t").unwrap_err());
        assert!((3..=4).contains(&retry_after), "{retry_after}");
    }
}
