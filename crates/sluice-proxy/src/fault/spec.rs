//! [`Fault`]: what can go wrong on purpose, and its one textual spelling, the
//! same on the command line (`--fault`) and in the control API's JSON.
//!
//! A spec is an action followed by `:`-separated options, in any order:
//!
//! ```text
//! cut[:TRIGGER]                     close both sides (FIN)
//! reset[:TRIGGER]                   close both sides with a TCP RST
//! stall[:duration=D][:TRIGGER]      stop forwarding for D (none: until removed)
//! slow-close:delay=D                hold each side's close (FIN) back for D
//! latency:delay=D[:jitter=J]        add D (± J/2) one way
//! bandwidth:rate=R                  cap the rate one way (100mbit, 10MB)
//! refuse                            answer new clients with a PostgreSQL error
//!
//! TRIGGER: after-bytes=N | at-data-row=K | at-copy-data=K | at-statement=K
//!          (none: at once)
//! and any of: upstream | downstream | both     (default both)
//!             once | every                     (default every)
//! ```
//!
//! `after-bytes=N` lets N bytes through first; `at-data-row=K` (and the other
//! `at-` triggers) acts just before the K-th message of its kind, so the peer
//! gets the K−1 before it whole. `upstream` is client to server, `downstream`
//! server to client: the direction `after-bytes` counts, and the one a stall,
//! latency, bandwidth cap or slow close applies to. `once`: the first
//! connection the fault acts on uses it up; `every`: it acts on every
//! connection. Durations are spelled as everywhere in sluice (`500ms`, `2s`).
//!
//! Every duration and size is bounded: durations at most [`MAX_DURATION`]
//! (1h), `after-bytes` at most [`MAX_AFTER_BYTES`] (1 TB), `rate` at most
//! [`MAX_RATE`] (100gbit). Beyond them a value is a slip, not a test, and
//! (for durations) would overflow the clock's arithmetic in every connection.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use sluice_core::parse_duration;

use crate::shaping::parse_bandwidth;

/// One fault: an action, when it happens, which way, and how often.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fault {
    /// What happens.
    pub action: Action,
    /// When it happens on a connection.
    pub trigger: Trigger,
    /// Which way it counts and acts.
    pub direction: Direction,
    /// On one connection or on every one.
    pub scope: Scope,
}

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Closes both sides in an orderly way (FIN).
    Cut,
    /// Aborts both sides with a TCP RST.
    Reset,
    /// Stops forwarding for `duration`; `None` until the fault is removed.
    Stall {
        /// How long.
        duration: Option<Duration>,
    },
    /// Holds a side's close (FIN) back for `delay` before passing it on.
    SlowClose {
        /// How long.
        delay: Duration,
    },
    /// Adds a one-way delay (on top of the proxy's `--rtt`).
    Latency {
        /// The delay.
        delay: Duration,
        /// Each chunk's delay varies by up to ± half of this.
        jitter: Duration,
    },
    /// Caps the rate one way, in bytes per second.
    Bandwidth {
        /// Bytes per second.
        rate: u64,
    },
    /// Answers new clients with a PostgreSQL error instead of a session.
    Refuse,
}

/// When a fault acts on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// At once: when a connection opens, or an open one next moves bytes.
    Now,
    /// Once this many bytes have passed (in the fault's direction).
    AfterBytes(u64),
    /// Just before the K-th `DataRow` (server to client).
    AtDataRow(u64),
    /// Just before the K-th `CopyData` (either way).
    AtCopyData(u64),
    /// Just before the K-th statement the client runs: a simple `Query`, an
    /// `Execute` or a fast-path function call.
    AtStatement(u64),
}

/// Which way a fault counts and acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to server.
    Upstream,
    /// Server to client.
    Downstream,
    /// Both.
    Both,
}

impl Direction {
    /// Whether it covers the way given (`upward`: client to server).
    pub fn covers(self, upward: bool) -> bool {
        match self {
            Direction::Both => true,
            Direction::Upstream => upward,
            Direction::Downstream => !upward,
        }
    }
}

/// How many connections a fault acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every connection (default).
    Every,
    /// The first connection it acts on; it is then spent.
    Once,
}

/// The longest duration, delay or jitter a fault takes.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// [`MAX_DURATION`] as spelled in errors.
const MAX_DURATION_SPELLED: &str = "1h";
/// The most bytes `after-bytes` lets through first: 1 TB.
pub const MAX_AFTER_BYTES: u64 = 1_000_000_000_000;
/// The fastest `rate`, in bytes per second: 100gbit.
pub const MAX_RATE: u64 = 12_500_000_000;

/// A spec that is not a fault, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The spec as given.
    pub spec: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fault {:?}: {}", self.spec, self.reason)
    }
}

impl std::error::Error for SpecError {}

/// The options of a spec, as read before the action checks them.
#[derive(Default)]
struct Options {
    trigger: Option<Trigger>,
    direction: Option<Direction>,
    scope: Option<Scope>,
    duration: Option<Duration>,
    delay: Option<Duration>,
    jitter: Option<Duration>,
    rate: Option<u64>,
}

impl FromStr for Fault {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Fault, SpecError> {
        let error = |reason: String| SpecError {
            spec: spec.to_owned(),
            reason,
        };
        let mut parts = spec.trim().split(':');
        let name = parts.next().unwrap_or_default();
        let mut options = Options::default();
        for part in parts {
            options.read(part).map_err(error)?;
        }
        build(name, options).map_err(error)
    }
}

impl Options {
    /// Reads one `key=value` or bare word; each may be given once.
    fn read(&mut self, part: &str) -> Result<(), String> {
        let (key, value) = match part.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value.trim())),
            None => (part.trim(), None),
        };
        let twice = || format!("{key} is given twice");
        match (key, value) {
            ("upstream" | "downstream" | "both", None) => {
                let direction = match key {
                    "upstream" => Direction::Upstream,
                    "downstream" => Direction::Downstream,
                    _ => Direction::Both,
                };
                set(&mut self.direction, direction, "a direction is given twice")
            }
            ("once" | "every", None) => {
                let scope = if key == "once" {
                    Scope::Once
                } else {
                    Scope::Every
                };
                set(&mut self.scope, scope, "once or every is given twice")
            }
            ("after-bytes", Some(value)) => {
                let trigger = Trigger::AfterBytes(byte_count(key, value)?);
                set(&mut self.trigger, trigger, "one trigger per fault")
            }
            ("at-data-row" | "at-copy-data" | "at-statement", Some(value)) => {
                let k = count(key, value, 1)?;
                let trigger = match key {
                    "at-data-row" => Trigger::AtDataRow(k),
                    "at-copy-data" => Trigger::AtCopyData(k),
                    _ => Trigger::AtStatement(k),
                };
                set(&mut self.trigger, trigger, "one trigger per fault")
            }
            ("duration", Some(value)) => set(&mut self.duration, duration(key, value)?, &twice()),
            ("delay", Some(value)) => set(&mut self.delay, duration(key, value)?, &twice()),
            ("jitter", Some(value)) => set(&mut self.jitter, duration(key, value)?, &twice()),
            ("rate", Some(value)) => set(&mut self.rate, rate(value)?, &twice()),
            (_, None) if KEYS.contains(&key) => Err(format!("{key} needs a value ({key}=…)")),
            _ => Err(format!(
                "unknown option {part:?} (options: {}, {})",
                KEYS.join("=…, "),
                WORDS.join(", ")
            )),
        }
    }
}

/// The options that take a value, and the bare words.
const KEYS: &[&str] = &[
    "after-bytes",
    "at-data-row",
    "at-copy-data",
    "at-statement",
    "duration",
    "delay",
    "jitter",
    "rate",
];
const WORDS: &[&str] = &["upstream", "downstream", "both", "once", "every"];

/// The actions, as spelled.
const ACTIONS: &str = "cut, reset, stall, slow-close, latency, bandwidth, refuse";

fn set<T>(slot: &mut Option<T>, value: T, twice: &str) -> Result<(), String> {
    if slot.is_some() {
        return Err(twice.to_owned());
    }
    *slot = Some(value);
    Ok(())
}

/// A whole number of at least `least`.
fn count(key: &str, value: &str, least: u64) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(number) if number >= least => Ok(number),
        _ if least == 1 => Err(format!("{key}={value}: give a count from 1 (the K-th)")),
        _ => Err(format!("{key}={value}: give a whole number of bytes")),
    }
}

/// A number of bytes, at most [`MAX_AFTER_BYTES`].
fn byte_count(key: &str, value: &str) -> Result<u64, String> {
    let bytes = count(key, value, 0)?;
    if bytes > MAX_AFTER_BYTES {
        return Err(format!(
            "{key}={value} is too many: at most {MAX_AFTER_BYTES} (1 TB)"
        ));
    }
    Ok(bytes)
}

/// A duration, at most [`MAX_DURATION`].
fn duration(key: &str, value: &str) -> Result<Duration, String> {
    let duration = parse_duration(value).map_err(|error| error.to_string())?;
    if duration > MAX_DURATION {
        return Err(format!(
            "{key}={value} is too long: at most {MAX_DURATION_SPELLED}"
        ));
    }
    Ok(duration)
}

/// A rate in bytes per second, at most [`MAX_RATE`].
fn rate(value: &str) -> Result<u64, String> {
    let rate = parse_bandwidth(value)?;
    if rate > MAX_RATE {
        return Err(format!("rate={value} is too fast: at most 100gbit"));
    }
    Ok(rate)
}

/// Checks the options against the action: each action takes its own.
fn build(name: &str, options: Options) -> Result<Fault, String> {
    let Options {
        trigger,
        direction,
        scope,
        duration,
        delay,
        jitter,
        rate,
    } = options;
    let action = match name {
        "cut" => Action::Cut,
        "reset" => Action::Reset,
        "stall" => Action::Stall { duration },
        "slow-close" => Action::SlowClose {
            delay: delay.ok_or("slow-close needs delay=D")?,
        },
        "latency" => Action::Latency {
            delay: delay.ok_or("latency needs delay=D")?,
            jitter: jitter.unwrap_or_default(),
        },
        "bandwidth" => Action::Bandwidth {
            rate: rate.ok_or("bandwidth needs rate=R (e.g. rate=1mbit)")?,
        },
        "refuse" => Action::Refuse,
        "" => return Err(format!("no action (one of {ACTIONS})")),
        other => return Err(format!("unknown action {other:?} (one of {ACTIONS})")),
    };
    let fault = Fault {
        action,
        trigger: trigger.unwrap_or(Trigger::Now),
        direction: direction.unwrap_or(Direction::Both),
        scope: scope.unwrap_or(Scope::Every),
    };
    let given = Given {
        duration: duration.is_some(),
        delay: delay.is_some(),
        jitter: jitter.is_some(),
        rate: rate.is_some(),
        direction: direction.is_some(),
    };
    fault.check(name, &given)?;
    Ok(fault)
}

/// Which of the valued options and the direction a spec gave.
struct Given {
    duration: bool,
    delay: bool,
    jitter: bool,
    rate: bool,
    direction: bool,
}

impl Fault {
    /// Refuses options the action does not use, so a typo never passes as a
    /// fault that silently does something else.
    fn check(&self, name: &str, given: &Given) -> Result<(), String> {
        let (duration, delay, jitter, rate) = match self.action {
            Action::Stall { .. } => (true, false, false, false),
            Action::SlowClose { .. } => (false, true, false, false),
            Action::Latency { .. } => (false, true, true, false),
            Action::Bandwidth { .. } => (false, false, false, true),
            Action::Cut | Action::Reset | Action::Refuse => (false, false, false, false),
        };
        for (allowed, given, key) in [
            (duration, given.duration, "duration"),
            (delay, given.delay, "delay"),
            (jitter, given.jitter, "jitter"),
            (rate, given.rate, "rate"),
        ] {
            if given && !allowed {
                return Err(format!("{name} takes no {key}"));
            }
        }
        let triggered = matches!(
            self.action,
            Action::Cut | Action::Reset | Action::Stall { .. }
        );
        if !triggered && self.trigger != Trigger::Now {
            return Err(format!(
                "{name} takes no trigger: it applies from a connection's start"
            ));
        }
        if given.direction && !self.takes_direction() {
            return Err(match self.action {
                Action::Refuse => "refuse takes no direction".to_owned(),
                _ => format!(
                    "{name} ends both directions: a direction only says which bytes \
                     after-bytes counts"
                ),
            });
        }
        Ok(())
    }

    /// Whether a direction means something for this fault.
    fn takes_direction(&self) -> bool {
        match self.action {
            Action::Cut | Action::Reset => matches!(self.trigger, Trigger::AfterBytes(_)),
            Action::Refuse => false,
            _ => true,
        }
    }
}

impl fmt::Display for Fault {
    /// The canonical spelling, which parses back to the same fault: the
    /// action, its values, the trigger, then a direction and `once` when they
    /// are not the defaults.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.action {
            Action::Cut => f.write_str("cut")?,
            Action::Reset => f.write_str("reset")?,
            Action::Stall { duration } => {
                f.write_str("stall")?;
                if let Some(duration) = duration {
                    write!(f, ":duration={}", Spelled(duration))?;
                }
            }
            Action::SlowClose { delay } => write!(f, "slow-close:delay={}", Spelled(delay))?,
            Action::Latency { delay, jitter } => {
                write!(f, "latency:delay={}", Spelled(delay))?;
                if !jitter.is_zero() {
                    write!(f, ":jitter={}", Spelled(jitter))?;
                }
            }
            Action::Bandwidth { rate } => write!(f, "bandwidth:rate={}", Rate(rate))?,
            Action::Refuse => f.write_str("refuse")?,
        }
        match self.trigger {
            Trigger::Now => {}
            Trigger::AfterBytes(n) => write!(f, ":after-bytes={n}")?,
            Trigger::AtDataRow(k) => write!(f, ":at-data-row={k}")?,
            Trigger::AtCopyData(k) => write!(f, ":at-copy-data={k}")?,
            Trigger::AtStatement(k) => write!(f, ":at-statement={k}")?,
        }
        match self.direction {
            Direction::Both => {}
            Direction::Upstream => f.write_str(":upstream")?,
            Direction::Downstream => f.write_str(":downstream")?,
        }
        if self.scope == Scope::Once {
            f.write_str(":once")?;
        }
        Ok(())
    }
}

/// A duration in the largest unit that keeps it whole (`2s`, `1500ms`, `250us`).
struct Spelled(Duration);

impl fmt::Display for Spelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        for (unit, per) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
            if nanos.is_multiple_of(per) {
                return write!(f, "{}{unit}", nanos / per);
            }
        }
        write!(f, "{nanos}ns")
    }
}

/// A rate in bytes per second, in the largest decimal unit that keeps it whole.
struct Rate(u64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, per) in [("GB", 1_000_000_000), ("MB", 1_000_000), ("KB", 1_000)] {
            if self.0.is_multiple_of(per) {
                return write!(f, "{}{unit}", self.0 / per);
            }
        }
        write!(f, "{}B", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(action: Action, trigger: Trigger) -> Fault {
        Fault {
            action,
            trigger,
            direction: Direction::Both,
            scope: Scope::Every,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn specs_parse_to_faults_and_print_back_canonically() {
        use Action::*;
        use Trigger::*;
        let table = [
            ("cut", fault(Cut, Now), "cut"),
            (
                "cut:after-bytes=1000:downstream",
                Fault {
                    direction: Direction::Downstream,
                    ..fault(Cut, AfterBytes(1000))
                },
                "cut:after-bytes=1000:downstream",
            ),
            (
                "cut:at-data-row=5",
                fault(Cut, AtDataRow(5)),
                "cut:at-data-row=5",
            ),
            (
                " cut:once:at-copy-data=3 ",
                Fault {
                    scope: Scope::Once,
                    ..fault(Cut, AtCopyData(3))
                },
                "cut:at-copy-data=3:once",
            ),
            (
                "cut:at-statement=2:every",
                fault(Cut, AtStatement(2)),
                "cut:at-statement=2",
            ),
            ("reset", fault(Reset, Now), "reset"),
            (
                "reset:after-bytes=0:upstream",
                Fault {
                    direction: Direction::Upstream,
                    ..fault(Reset, AfterBytes(0))
                },
                "reset:after-bytes=0:upstream",
            ),
            (
                "stall:duration=2s",
                fault(
                    Stall {
                        duration: Some(ms(2000)),
                    },
                    Now,
                ),
                "stall:duration=2s",
            ),
            (
                "stall:at-data-row=3:duration=1500ms:downstream",
                Fault {
                    direction: Direction::Downstream,
                    ..fault(
                        Stall {
                            duration: Some(ms(1500)),
                        },
                        AtDataRow(3),
                    )
                },
                "stall:duration=1500ms:at-data-row=3:downstream",
            ),
            ("stall", fault(Stall { duration: None }, Now), "stall"),
            (
                "slow-close:delay=1s",
                fault(SlowClose { delay: ms(1000) }, Now),
                "slow-close:delay=1s",
            ),
            (
                "latency:delay=50ms:jitter=0.5ms:upstream",
                Fault {
                    direction: Direction::Upstream,
                    ..fault(
                        Latency {
                            delay: ms(50),
                            jitter: Duration::from_micros(500),
                        },
                        Now,
                    )
                },
                "latency:delay=50ms:jitter=500us:upstream",
            ),
            (
                "bandwidth:rate=1mbit",
                fault(Bandwidth { rate: 125_000 }, Now),
                "bandwidth:rate=125KB",
            ),
            (
                "refuse:once",
                Fault {
                    scope: Scope::Once,
                    ..fault(Refuse, Now)
                },
                "refuse:once",
            ),
        ];
        for (spec, expected, canonical) in table {
            let parsed: Fault = spec.parse().unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(parsed, expected, "{spec}");
            assert_eq!(parsed.to_string(), canonical, "{spec}");
            assert_eq!(canonical.parse::<Fault>().unwrap(), expected, "{canonical}");
        }
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let table = [
            ("", "no action"),
            ("explode", "unknown action \"explode\""),
            ("cut:at-data-row=0", "at-data-row=0: give a count from 1"),
            ("cut:at-data-row=x", "at-data-row=x: give a count from 1"),
            (
                "cut:after-bytes=-1",
                "after-bytes=-1: give a whole number of bytes",
            ),
            ("cut:at-data-row=1:at-statement=2", "one trigger per fault"),
            ("cut:duration=1s", "cut takes no duration"),
            ("cut:at-data-row=3:upstream", "cut ends both directions"),
            ("stall:duration=30", "give a unit: 30s, 30ms"),
            ("stall:duration=soon", "is not a duration"),
            ("stall:delay=1s", "stall takes no delay"),
            ("stall:upstream:downstream", "a direction is given twice"),
            ("slow-close", "slow-close needs delay=D"),
            (
                "slow-close:delay=1s:at-statement=1",
                "slow-close takes no trigger",
            ),
            ("latency:delay", "delay needs a value"),
            ("latency:jitter=1ms", "latency needs delay=D"),
            ("latency:delay=1ms:delay=2ms", "delay is given twice"),
            ("bandwidth", "bandwidth needs rate=R"),
            ("bandwidth:rate=10 furlongs", "unknown bandwidth unit"),
            ("refuse:upstream", "refuse takes no direction"),
            ("refuse:once:every", "once or every is given twice"),
            ("cut:sometimes", "unknown option \"sometimes\""),
        ];
        for (spec, expected) in table {
            let error = spec.parse::<Fault>().expect_err(spec);
            assert_eq!(error.spec, spec);
            assert!(
                error.reason.contains(expected),
                "{spec}: {:?} should say {expected:?}",
                error.reason
            );
            assert!(error.to_string().starts_with(&format!("fault {spec:?}: ")));
        }
    }

    #[test]
    fn durations_and_sizes_beyond_their_bounds_are_refused_naming_the_field_and_the_bound() {
        let table = [
            (
                "latency:delay=18446744073709551615s",
                "delay=18446744073709551615s is too long: at most 1h",
            ),
            (
                "latency:delay=1ms:jitter=61m",
                "jitter=61m is too long: at most 1h",
            ),
            (
                "stall:duration=3601s",
                "duration=3601s is too long: at most 1h",
            ),
            ("slow-close:delay=2h", "delay=2h is too long: at most 1h"),
            (
                "cut:after-bytes=18446744073709551615",
                "after-bytes=18446744073709551615 is too many: at most 1000000000000 (1 TB)",
            ),
            (
                "bandwidth:rate=1000gbit",
                "rate=1000gbit is too fast: at most 100gbit",
            ),
        ];
        for (spec, expected) in table {
            let error = spec.parse::<Fault>().expect_err(spec);
            assert!(
                error.reason.contains(expected),
                "{spec}: {:?} should say {expected:?}",
                error.reason
            );
        }
        for spec in [
            "latency:delay=1h:jitter=1h",
            "stall:duration=3600s",
            "slow-close:delay=60m",
            "cut:after-bytes=1000000000000",
            "bandwidth:rate=100gbit",
        ] {
            spec.parse::<Fault>()
                .unwrap_or_else(|error| panic!("{spec} is within the bounds: {error}"));
        }
    }
}
