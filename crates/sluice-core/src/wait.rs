//! [`WaitLimit`]: the wait timeout of a session (see
//! [`crate::connect::Session::set_wait_timeout`]), one implementation for every
//! database crate, so that each gives a silent server up the same way and with
//! the same words.
//!
//! A database crate runs every wait on its socket (for bytes to read, for room
//! to write) through [`WaitLimit::run`]. Each wait is bounded on its own, so a
//! slow link that keeps moving bytes is never cut, however long the whole
//! exchange takes.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use crate::{Error, Stalled};

/// How long one wait on the server may see nothing move, and whether a wait
/// already timed out, which spends the connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitLimit {
    /// `None`: wait for ever.
    limit: Option<Duration>,
    /// The limit that ran out, once one did.
    spent: Option<Duration>,
}

impl WaitLimit {
    /// Bounds the waits from now on by `limit` (`None` or zero: no bound). A
    /// connection already spent stays spent.
    pub fn set(&mut self, limit: Option<Duration>) {
        self.limit = limit.filter(|limit| !limit.is_zero());
    }

    /// Whether a wait timed out: the connection must not be used again (what
    /// was half sent or half read is unknown), nor returned to a pool.
    pub fn is_spent(&self) -> bool {
        self.spent.is_some()
    }

    /// Runs `wait` (one wait on the socket) within the limit; `target` names
    /// the server in the error. Once a wait timed out, every later one fails
    /// at once, a rollback or a goodbye included, rather than waiting again on
    /// a server already given up.
    pub async fn run<T>(
        &mut self,
        target: &(dyn Display + Sync),
        wait: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        if let Some(after) = self.spent {
            return Err(Stalled { after }.into_error(target));
        }
        let Some(limit) = self.limit else {
            return wait.await;
        };
        match tokio::time::timeout(limit, wait).await {
            Ok(result) => result,
            Err(_) => {
                self.spent = Some(limit);
                Err(Stalled { after: limit }.into_error(target))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[tokio::test]
    async fn a_wait_over_the_limit_spends_the_connection() {
        let mut wait = WaitLimit::default();
        wait.set(Some(Duration::from_millis(50)));
        assert_eq!(wait.run(&"db:1", async { Ok(7) }).await.unwrap(), 7);
        let stalled = wait
            .run(&"db:1", std::future::pending::<Result<(), Error>>())
            .await
            .unwrap_err();
        assert_eq!(stalled.kind(), ErrorKind::Closed);
        assert_eq!(
            Stalled::of(&stalled),
            Some(&Stalled {
                after: Duration::from_millis(50)
            })
        );
        assert!(wait.is_spent());
        // Spent: even a wait that would finish at once is not started.
        let again = wait.run(&"db:1", async { Ok(()) }).await.unwrap_err();
        assert_eq!(again.to_string(), stalled.to_string());
    }

    #[tokio::test]
    async fn no_limit_or_zero_waits_for_ever() {
        for limit in [None, Some(Duration::ZERO)] {
            let mut wait = WaitLimit::default();
            wait.set(limit);
            let slow = async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok(())
            };
            wait.run(&"db:1", slow).await.unwrap();
            assert!(!wait.is_spent());
        }
    }
}
