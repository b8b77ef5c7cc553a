//! The snapshots this replica holds open for its plans, and who may hold how
//! many.
//!
//! A split plan's parts read in a snapshot exported by a coordinating session
//! (`sluice_core::split`); the snapshot exists only while that session's
//! transaction is open, and a part can join it only while it exists. So the
//! coordinator is kept here until every part of the plan has *started* here
//! (joined the snapshot; it then keeps its own copy however long it reads), or
//! until the plan's time is over, whichever comes first. Parts redeemed on
//! another replica are not seen here: a plan spread over replicas holds its
//! snapshot until its timeout.
//!
//! The coordinator is a connection of its own, outside the database's pool,
//! so that a plan of as many parts as the pool has sessions cannot wait on
//! itself. Each held plan is therefore a database connection sitting idle in
//! a transaction, and the room for them is shared: a plan takes its place
//! ([`Plans::reserve`]) before its coordinator connects, within three caps —
//! [`MAX_HELD_PLANS`] on the server, `[flight] max_plans_per_token` per token
//! (so one client cannot take every place for the whole `plan_timeout`), and
//! the database's `pool_size` per database (so plans never keep more
//! connections open beside the pool than the pool itself has, and HTTP's
//! sessions still find room on the server).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_core::connect::Session;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

/// The most plans whose snapshots one server holds at once: each holds a
/// database connection of its own, outside the pools.
pub const MAX_HELD_PLANS: usize = 64;

/// The plans whose snapshots are held (or are being planned), by plan number.
#[derive(Clone, Default)]
pub struct Plans {
    held: Arc<Mutex<HashMap<u64, Held>>>,
}

struct Held {
    /// `None` while the plan is being made.
    coordinator: Option<Box<dyn Session>>,
    /// The token that asked (`None`: no tokens configured).
    owner: Option<String>,
    /// The configured database it reads.
    database: String,
    /// Parts not yet started here.
    waiting: BTreeSet<usize>,
    until: Instant,
}

/// Who asks for a plan, and the caps it is held to.
pub struct Claim<'a> {
    /// The token's name (`None` without tokens).
    pub owner: Option<&'a str>,
    /// The configured database the plan reads.
    pub database: &'a str,
    /// `[flight] max_plans_per_token`.
    pub per_token: usize,
    /// The database's `pool_size`.
    pub per_database: usize,
}

/// Why a plan found no room; each says which cap and its figure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Full {
    /// [`MAX_HELD_PLANS`] are held on this server.
    Server(usize),
    /// The token holds `[flight] max_plans_per_token` plans.
    Token(usize),
    /// The database's `pool_size` plans are held for it.
    Database(usize),
}

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Full::Server(cap) => {
                write!(f, "{cap} plans already hold a snapshot open on this server")
            }
            Full::Token(cap) => write!(
                f,
                "this token already holds {cap} plans whose parts have not all started \
                 ([flight] max_plans_per_token)"
            ),
            Full::Database(cap) => write!(
                f,
                "{cap} plans already hold a snapshot open on this database (at most its pool_size)"
            ),
        }
    }
}

/// A plan's place, taken before its coordinator connects; given up on drop
/// unless [`Reservation::hold`] fills it.
pub struct Reservation {
    plans: Plans,
    plan: u64,
    filled: bool,
}

impl Reservation {
    /// Holds `coordinator` (and so the snapshot) for the plan's `parts` parts,
    /// for at most `timeout`.
    pub fn hold(mut self, coordinator: Box<dyn Session>, parts: usize, timeout: Duration) {
        if let Some(entry) = self.plans.lock().get_mut(&self.plan) {
            entry.coordinator = Some(coordinator);
            entry.waiting = (0..parts).collect();
            entry.until = Instant::now() + timeout;
        }
        self.filled = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.filled {
            self.plans.lock().remove(&self.plan);
        }
    }
}

impl Plans {
    /// Takes a place for `plan` within the caps of `claim`, for at most
    /// `planning` until [`Reservation::hold`] sets the plan's own time.
    pub fn reserve(
        &self,
        plan: u64,
        claim: &Claim<'_>,
        planning: Duration,
    ) -> Result<Reservation, Full> {
        let mut held = self.lock();
        if held.len() >= MAX_HELD_PLANS {
            return Err(Full::Server(MAX_HELD_PLANS));
        }
        let owned = held
            .values()
            .filter(|entry| entry.owner.as_deref() == claim.owner)
            .count();
        if owned >= claim.per_token {
            return Err(Full::Token(claim.per_token));
        }
        let on_database = held
            .values()
            .filter(|entry| entry.database == claim.database)
            .count();
        if on_database >= claim.per_database {
            return Err(Full::Database(claim.per_database));
        }
        let entry = Held {
            coordinator: None,
            owner: claim.owner.map(str::to_owned),
            database: claim.database.to_owned(),
            waiting: BTreeSet::new(),
            until: Instant::now() + planning,
        };
        held.insert(plan, entry);
        Ok(Reservation {
            plans: self.clone(),
            plan,
            filled: false,
        })
    }

    /// Records that part `index` of `plan` joined the snapshot; the last one
    /// releases it (closed by a task `tracker` follows).
    pub fn started(&self, plan: u64, index: usize, tracker: &TaskTracker) {
        let released = {
            let mut held = self.lock();
            let done = held.get_mut(&plan).is_some_and(|entry| {
                entry.waiting.remove(&index);
                entry.waiting.is_empty() && entry.coordinator.is_some()
            });
            done.then(|| held.remove(&plan)).flatten()
        };
        if let Some(entry) = released {
            tracing::debug!(plan, "every part started: the snapshot is released");
            entry.close(tracker);
        }
    }

    /// Plans held now (those being made included).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no plan is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Releases the plans whose time is over.
    pub fn expire(&self, tracker: &TaskTracker) {
        let now = Instant::now();
        let expired: Vec<(u64, Held)> = {
            let mut held = self.lock();
            let numbers: Vec<u64> = held
                .iter()
                .filter(|(_, entry)| entry.until <= now && entry.coordinator.is_some())
                .map(|(plan, _)| *plan)
                .collect();
            numbers
                .into_iter()
                .filter_map(|plan| held.remove(&plan).map(|entry| (plan, entry)))
                .collect()
        };
        for (plan, entry) in expired {
            tracing::info!(
                plan,
                parts_not_started = entry.waiting.len(),
                "plan timed out: its snapshot is released"
            );
            entry.close(tracker);
        }
    }

    /// Releases every plan (at shutdown).
    pub fn release_all(&self, tracker: &TaskTracker) {
        let all: Vec<Held> = self.lock().drain().map(|(_, entry)| entry).collect();
        for entry in all {
            entry.close(tracker);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Held>> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Held {
    /// Ends the coordinator's transaction, and with it the snapshot.
    fn close(self, tracker: &TaskTracker) {
        if let Some(coordinator) = self.coordinator {
            tracker.spawn(coordinator.close());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim<'a>(owner: Option<&'a str>, database: &'a str) -> Claim<'a> {
        Claim {
            owner,
            database,
            per_token: 2,
            per_database: 3,
        }
    }

    const PLANNING: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn each_token_and_each_database_has_its_own_cap() {
        let plans = Plans::default();
        let a1 = plans
            .reserve(1, &claim(Some("a"), "main"), PLANNING)
            .unwrap();
        let _a2 = plans
            .reserve(2, &claim(Some("a"), "main"), PLANNING)
            .unwrap();
        let refused = plans.reserve(3, &claim(Some("a"), "main"), PLANNING);
        assert_eq!(refused.err(), Some(Full::Token(2)));
        // Another token still plans, up to the database's share.
        let _b1 = plans
            .reserve(4, &claim(Some("b"), "main"), PLANNING)
            .unwrap();
        let refused = plans.reserve(5, &claim(Some("b"), "main"), PLANNING);
        assert_eq!(refused.err(), Some(Full::Database(3)));
        // ...and on another database.
        let _b2 = plans
            .reserve(6, &claim(Some("b"), "other"), PLANNING)
            .unwrap();
        // A plan that failed gives its place back.
        drop(a1);
        assert!(plans
            .reserve(7, &claim(Some("a"), "main"), PLANNING)
            .is_ok());
    }

    #[tokio::test]
    async fn the_server_cap_holds_whoever_asks() {
        let plans = Plans::default();
        let mut kept = Vec::new();
        for plan in 0..MAX_HELD_PLANS as u64 {
            let claim = Claim {
                owner: None,
                database: "main",
                per_token: usize::MAX,
                per_database: usize::MAX,
            };
            kept.push(plans.reserve(plan, &claim, PLANNING).unwrap());
        }
        let refused = plans.reserve(999, &claim(Some("new"), "other"), PLANNING);
        assert_eq!(refused.err(), Some(Full::Server(MAX_HELD_PLANS)));
    }
}
