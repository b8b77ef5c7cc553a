//! [`Shaping`]: what the proxy does to the bytes' timing (each direction's
//! `Link`, which latency and bandwidth faults add to), and parsing of the
//! bandwidth spellings (`100mbit`, `10MB`). Delays are spelled as every other
//! duration in sluice, by `sluice_core::parse_duration`.

use std::time::{Duration, Instant};

/// Delay, jitter and bandwidth applied to traffic; each field states its default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Shaping {
    /// Round-trip time added: half on the way to the server, half on the way
    /// back. Default: none.
    pub rtt: Duration,
    /// Each chunk's one-way delay varies uniformly by up to ± half of this.
    /// Default: none.
    pub jitter: Duration,
    /// Bytes per second in each direction; `None` (default) is unlimited.
    pub bandwidth: Option<u64>,
}

impl Shaping {
    /// Whether any byte may be held back: a delay, jitter or a bandwidth cap is
    /// set. Without any, bytes are passed on as they come.
    pub fn holds_back(&self) -> bool {
        self.one_way().holds_back()
    }

    /// What it does to one direction: half the round trip, the jitter and
    /// the bandwidth cap.
    pub(crate) fn one_way(&self) -> Link {
        Link {
            delay: self.rtt / 2,
            jitter: self.jitter,
            bandwidth: self.bandwidth,
        }
    }
}

/// The timing of one direction: the proxy's [`Shaping`], with the latency and
/// bandwidth faults for that direction added.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Link {
    /// One-way delay.
    pub(crate) delay: Duration,
    /// Each chunk's delay varies uniformly by up to ± half of this.
    pub(crate) jitter: Duration,
    /// Bytes per second; `None` is unlimited.
    pub(crate) bandwidth: Option<u64>,
}

impl Link {
    /// Whether any byte may be held back.
    pub(crate) fn holds_back(&self) -> bool {
        !self.delay.is_zero() || !self.jitter.is_zero() || self.bandwidth.is_some()
    }
}

/// Parses a bandwidth such as `100mbit`, `1gbit`, `10MB` (bytes), into bytes per second.
pub fn parse_bandwidth(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a bandwidth (e.g. 100mbit)"))?;
    let bytes_per_second = match unit.trim() {
        "bit" => value / 8.0,
        "kbit" => value * 1e3 / 8.0,
        "mbit" => value * 1e6 / 8.0,
        "gbit" => value * 1e9 / 8.0,
        "B" => value,
        "KB" => value * 1e3,
        "MB" => value * 1e6,
        "GB" => value * 1e9,
        other => {
            return Err(format!(
                "unknown bandwidth unit {other:?} (use bit, kbit, mbit, gbit, B, KB, MB, GB)"
            ))
        }
    };
    if bytes_per_second < 1.0 {
        return Err(format!("bandwidth {text:?} is too small"));
    }
    Ok(bytes_per_second as u64)
}

/// Decides when each chunk of one direction may be delivered.
#[derive(Debug)]
pub(crate) struct Schedule {
    link: Link,
    /// When the link is free again (bandwidth).
    free_at: Instant,
    /// The last delivery time: chunks never overtake each other.
    last: Instant,
    random: u64,
}

impl Schedule {
    pub(crate) fn new(link: Link, seed: u64) -> Schedule {
        let now = Instant::now();
        Schedule {
            link,
            free_at: now,
            last: now,
            random: seed | 1,
        }
    }

    /// Whether any chunk may be delivered later than it arrived.
    pub(crate) fn holds_back(&self) -> bool {
        self.link.holds_back()
    }

    /// A number in [0, 1) from a xorshift generator: jitter needs spread, not secrecy.
    fn next_unit(&mut self) -> f64 {
        self.random ^= self.random << 13;
        self.random ^= self.random >> 7;
        self.random ^= self.random << 17;
        (self.random >> 11) as f64 / (1u64 << 53) as f64
    }

    /// When a chunk of `bytes` that arrived at `arrived` is to be delivered.
    pub(crate) fn deliver_at(&mut self, arrived: Instant, bytes: usize) -> Instant {
        let mut one_way = self.link.delay;
        if !self.link.jitter.is_zero() {
            let offset = (self.next_unit() - 0.5) * self.link.jitter.as_secs_f64();
            one_way = Duration::from_secs_f64((one_way.as_secs_f64() + offset).max(0.0));
        }
        let mut at = arrived + one_way;
        if let Some(rate) = self.link.bandwidth {
            let start = at.max(self.free_at);
            let transmit = Duration::from_secs_f64(bytes as f64 / rate as f64);
            self.free_at = start + transmit;
            at = self.free_at;
        }
        at = at.max(self.last);
        self.last = at;
        at
    }
}

/// Sleeps until `deadline` with better than millisecond precision: the thread
/// sleeps until shortly before, then yields until the moment comes.
pub(crate) fn sleep_until(deadline: Instant) {
    const SPIN: Duration = Duration::from_micros(200);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_parse() {
        assert_eq!(parse_bandwidth("100mbit").unwrap(), 12_500_000);
        assert_eq!(parse_bandwidth("10MB").unwrap(), 10_000_000);
        assert!(parse_bandwidth("10 furlongs").is_err());
    }

    #[test]
    fn chunks_keep_their_order_and_pay_for_their_size() {
        let mut schedule = Schedule::new(
            Shaping {
                rtt: Duration::from_millis(10),
                jitter: Duration::from_millis(8),
                bandwidth: Some(1_000_000),
            }
            .one_way(),
            7,
        );
        let start = Instant::now();
        let mut last = start;
        for _ in 0..100 {
            let at = schedule.deliver_at(start, 1_000);
            assert!(at >= last);
            last = at;
        }
        // 100 kB at 1 MB/s: at least 100 ms after the first byte could leave.
        assert!(last - start >= Duration::from_millis(100));
    }
}
