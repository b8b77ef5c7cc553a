//! Waiting for what another process or thread will do: a condition checked
//! again and again until it holds or a limit passes. Limits are generous, so
//! that a loaded machine makes a passing test slower, never a failing one.

use std::time::{Duration, Instant};

/// How often a condition is checked again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Checks `condition` until it holds (`true`) or `limit` has passed without it
/// (`false`); it is checked once more at the limit.
pub fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Checks `condition` until it holds; panics naming `what` once `limit` has
/// passed without it.
pub fn wait_until(what: &str, limit: Duration, condition: impl FnMut() -> bool) {
    assert!(
        eventually(limit, condition),
        "waited {limit:?} for {what} in vain"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_is_checked_until_it_holds_or_the_limit_passes() {
        let mut checks = 0;
        assert!(eventually(Duration::from_secs(5), || {
            checks += 1;
            checks == 3
        }));
        assert_eq!(checks, 3);
        let started = Instant::now();
        assert!(!eventually(Duration::from_millis(100), || false));
        assert!(started.elapsed() >= Duration::from_millis(100));
    }

    #[test]
    #[should_panic(expected = "for the sky to fall in vain")]
    fn waiting_in_vain_names_what_was_awaited() {
        wait_until("the sky to fall", Duration::from_millis(50), || false);
    }
}
