//! The snapshots this replica holds open for its plans, and who may hold how
//! many.
//!
//! A split plan's parts read in a snapshot exported by a coordinating session
//! (`sluice_core::split`); the snapshot exists only while that session's
//! transaction is open, and a part can join it only while it exists. So the
//! coordinator is kept here for the plan's whole life: any part may be read
//! again, any number of times, and every read is the same snapshot's rows —
//! which is what engines that retry tasks, speculate, or run a second action
//! over one lazily planned DataFrame (Spark, Dask) need. A plan lives until
//! `[flight] plan_timeout`, until its client releases it (`DoAction`
//! `CancelFlightInfo` or `release`), or until a new plan needs its place and
//! every one of its parts has been read at least once (the oldest such plan
//! goes first). Parts redeemed on another replica are not seen here: a plan
//! spread over replicas is held until its timeout or release.
//!
//! The price is the database's: an open snapshot keeps VACUUM from removing
//! rows deleted after it began, for as long as the plan lives.
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
    /// Parts not yet read here.
    unread: BTreeSet<usize>,
    /// When the plan took its place: the snapshot's age.
    since: Instant,
    until: Instant,
}

impl Held {
    /// Held, and every part read at least once: the first to give way.
    fn fully_read(&self) -> bool {
        self.coordinator.is_some() && self.unread.is_empty()
    }
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
                "this token already holds {cap} plans with parts not yet read \
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
            entry.unread = (0..parts).collect();
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
    /// `planning` until [`Reservation::hold`] sets the plan's own time. A cap
    /// that is reached gives way by releasing the oldest plan in its reach
    /// whose parts have all been read; with none, the plan is refused.
    pub fn reserve(
        &self,
        plan: u64,
        claim: &Claim<'_>,
        planning: Duration,
        tracker: &TaskTracker,
    ) -> Result<Reservation, Full> {
        let mut held = self.lock();
        let giving_way = room(&held, claim)?;
        let released: Vec<(u64, Held)> = giving_way
            .into_iter()
            .filter_map(|plan| held.remove(&plan).map(|entry| (plan, entry)))
            .collect();
        let now = Instant::now();
        let entry = Held {
            coordinator: None,
            owner: claim.owner.map(str::to_owned),
            database: claim.database.to_owned(),
            unread: BTreeSet::new(),
            since: now,
            until: now + planning,
        };
        held.insert(plan, entry);
        drop(held);
        for (old, entry) in released {
            tracing::info!(
                plan = old,
                "a new plan needed the place of this fully read plan: its snapshot is released"
            );
            entry.close(tracker);
        }
        Ok(Reservation {
            plans: self.clone(),
            plan,
            filled: false,
        })
    }

    /// Records that part `index` of `plan` was read here (it may be read
    /// again while the plan lives).
    pub fn read(&self, plan: u64, index: usize) {
        if let Some(entry) = self.lock().get_mut(&plan) {
            entry.unread.remove(&index);
        }
    }

    /// Releases `plan` early, for its owner (`caller` is the asking token's
    /// name; without tokens anyone may): `Ok(false)` when it was not held
    /// (released already, timed out, or never split).
    pub fn release(
        &self,
        plan: u64,
        caller: Option<&str>,
        tracker: &TaskTracker,
    ) -> Result<bool, NotOwner> {
        let entry = {
            let mut held = self.lock();
            match held.get(&plan) {
                None => return Ok(false),
                Some(entry) if entry.owner.as_deref() != caller => return Err(NotOwner),
                Some(_) => held.remove(&plan),
            }
        };
        if let Some(entry) = entry {
            tracing::debug!(
                plan,
                "the client released the plan: its snapshot is released"
            );
            entry.close(tracker);
        }
        Ok(true)
    }

    /// How many plans are held and how long the oldest has held its snapshot.
    pub fn live(&self) -> (usize, Duration) {
        let held = self.lock();
        let oldest = held.values().map(|entry| entry.since).min();
        (
            held.len(),
            oldest.map_or(Duration::ZERO, |since| since.elapsed()),
        )
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
                parts_never_read = entry.unread.len(),
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

/// A plan's release asked for by a token other than the one that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotOwner;

/// Which held plans a cap counts.
type Within<'a> = dyn Fn(&Held) -> bool + 'a;

/// The plans that must give way for `claim` to take a place, or the cap that
/// cannot make room: for each cap reached, the oldest fully read plan in its
/// reach (server, token, database).
fn room(held: &HashMap<u64, Held>, claim: &Claim<'_>) -> Result<Vec<u64>, Full> {
    let caps: [(usize, Full, &Within); 3] = [
        (MAX_HELD_PLANS, Full::Server(MAX_HELD_PLANS), &|_| true),
        (claim.per_token, Full::Token(claim.per_token), &|entry| {
            entry.owner.as_deref() == claim.owner
        }),
        (
            claim.per_database,
            Full::Database(claim.per_database),
            &|entry| entry.database == claim.database,
        ),
    ];
    let mut giving_way: Vec<u64> = Vec::new();
    for (cap, full, within) in caps {
        let staying = |(plan, entry): &(&u64, &Held)| !giving_way.contains(plan) && within(entry);
        if held.iter().filter(staying).count() < cap {
            continue;
        }
        let oldest = held
            .iter()
            .filter(staying)
            .filter(|(_, entry)| entry.fully_read())
            .min_by_key(|(_, entry)| entry.since)
            .map(|(plan, _)| *plan);
        giving_way.push(oldest.ok_or(full)?);
    }
    Ok(giving_way)
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

    fn tracker() -> TaskTracker {
        TaskTracker::new()
    }

    /// A session that is never used: a held plan's coordinator, for the
    /// bookkeeping tests (closing one does nothing).
    struct Idle;

    impl Session for Idle {
        fn round_trips(&self) -> u64 {
            0
        }

        fn canceller(&self) -> std::sync::Arc<dyn sluice_core::connect::Canceller> {
            std::sync::Arc::new(Idle)
        }

        fn export(
            self: Box<Self>,
            _sql: String,
            _options: sluice_core::connect::ExportOptions,
        ) -> sluice_core::database::BoxFuture<
            'static,
            Result<Box<dyn sluice_core::connect::Export>, sluice_core::Error>,
        > {
            unreachable!("a held coordinator exports nothing")
        }

        fn close(self: Box<Self>) -> sluice_core::database::BoxFuture<'static, ()> {
            Box::pin(async {})
        }

        fn dialect(&self) -> sluice_core::connect::Dialect {
            sluice_core::connect::Dialect::new(
                "nothing",
                sluice_core::connect::Family::new("nothing"),
            )
        }
    }

    impl sluice_core::connect::Canceller for Idle {
        fn cancel(&self) -> sluice_core::database::BoxFuture<'_, Result<(), sluice_core::Error>> {
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn a_cap_gives_way_to_the_oldest_fully_read_plan_only() {
        let plans = Plans::default();
        let claim = claim(Some("a"), "main");
        for plan in [1, 2] {
            plans
                .reserve(plan, &claim, PLANNING, &tracker())
                .unwrap()
                .hold(Box::new(Idle), 2, PLANNING);
        }
        // Parts read, and read again, keep the plan: its snapshot is held.
        plans.read(1, 0);
        plans.read(1, 0);
        assert_eq!(plans.len(), 2);
        let refused = plans.reserve(3, &claim, PLANNING, &tracker());
        assert_eq!(refused.err(), Some(Full::Token(2)));
        // Once every part of plan 1 was read, a new plan takes its place;
        // plan 2, not fully read, stays.
        plans.read(1, 1);
        let _planning = plans.reserve(3, &claim, PLANNING, &tracker()).unwrap();
        assert_eq!(plans.len(), 2);
        assert_eq!(plans.release(1, Some("a"), &tracker()), Ok(false));
        assert_eq!(plans.release(2, Some("a"), &tracker()), Ok(true));
    }

    #[tokio::test]
    async fn only_the_owner_releases_a_plan() {
        let plans = Plans::default();
        plans
            .reserve(1, &claim(Some("a"), "main"), PLANNING, &tracker())
            .unwrap()
            .hold(Box::new(Idle), 1, PLANNING);
        assert_eq!(plans.release(1, Some("b"), &tracker()), Err(NotOwner));
        assert_eq!(plans.release(1, None, &tracker()), Err(NotOwner));
        assert_eq!(plans.live().0, 1);
        assert_eq!(plans.release(1, Some("a"), &tracker()), Ok(true));
        assert_eq!(plans.live(), (0, Duration::ZERO));
    }

    #[tokio::test]
    async fn each_token_and_each_database_has_its_own_cap() {
        let plans = Plans::default();
        let a1 = plans
            .reserve(1, &claim(Some("a"), "main"), PLANNING, &tracker())
            .unwrap();
        let _a2 = plans
            .reserve(2, &claim(Some("a"), "main"), PLANNING, &tracker())
            .unwrap();
        let refused = plans.reserve(3, &claim(Some("a"), "main"), PLANNING, &tracker());
        assert_eq!(refused.err(), Some(Full::Token(2)));
        // Another token still plans, up to the database's share.
        let _b1 = plans
            .reserve(4, &claim(Some("b"), "main"), PLANNING, &tracker())
            .unwrap();
        let refused = plans.reserve(5, &claim(Some("b"), "main"), PLANNING, &tracker());
        assert_eq!(refused.err(), Some(Full::Database(3)));
        // ...and on another database.
        let _b2 = plans
            .reserve(6, &claim(Some("b"), "other"), PLANNING, &tracker())
            .unwrap();
        // A plan that failed gives its place back.
        drop(a1);
        assert!(plans
            .reserve(7, &claim(Some("a"), "main"), PLANNING, &tracker())
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
            kept.push(plans.reserve(plan, &claim, PLANNING, &tracker()).unwrap());
        }
        let refused = plans.reserve(999, &claim(Some("new"), "other"), PLANNING, &tracker());
        assert_eq!(refused.err(), Some(Full::Server(MAX_HELD_PLANS)));
    }
}
