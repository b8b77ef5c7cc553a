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
//! `CancelFlightInfo` or `release`), until a new plan needs its place and
//! every one of its parts has been read at least once (the oldest such plan
//! goes first), or — while some part was never read — until it has gone
//! `[flight] unread_plan_timeout` with none of its parts being read. Parts
//! redeemed on another replica are not seen here: a plan spread over replicas
//! (`locations`) is held until its timeout or release.
//!
//! The price is the database's: an open snapshot keeps VACUUM from removing
//! rows deleted after it began, for as long as the plan lives.
//!
//! The coordinator is a connection of its own, outside the database's pool,
//! so that a plan of as many parts as the pool has sessions cannot wait on
//! itself. Each held plan is therefore a database connection sitting idle in
//! a transaction, and the room for them is shared: a plan takes its place
//! ([`Plans::reserve`]) before its coordinator connects, within four caps —
//! [`MAX_HELD_PLANS`] on the server, `[flight] max_plans_per_token` per token,
//! the database's `pool_size` per database (so plans never keep more
//! connections open beside the pool than the pool itself has, and HTTP's
//! sessions still find room on the server), and each token's share of a
//! database's places (`Cap::Share`).
//!
//! Why both the share and the unread limit: the caps alone let one token
//! plan `pool_size` times, read nothing, and lock every other client out of
//! the database for `plan_timeout`. The share keeps a place for every other
//! token that may plan there and holds none, so a token is never locked out
//! by others (while the database has at least as many places as such
//! tokens); the unread limit makes holding places cost continuous reading,
//! which covers what the share cannot: clients without tokens (all one
//! client), more tokens than places, and the VACUUM horizon a held snapshot
//! pins. Plans being read, and plans read to the end, are not touched by it:
//! a job reading its parts in waves keeps its plan, and a fully read plan
//! already gives way to any new plan that needs its place.

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
    /// How long it may go with none of its parts being read while some were
    /// never read; `None`: no such limit (its parts are read on other
    /// replicas, unseen here).
    unread_limit: Option<Duration>,
    /// Its parts being read now.
    reading: usize,
    /// When it was made, or a read of one of its parts last ended.
    last_read: Instant,
}

impl Held {
    /// Held, and every part read at least once: the first to give way.
    fn fully_read(&self) -> bool {
        self.coordinator.is_some() && self.unread.is_empty()
    }

    /// When it is released unless one of its parts is read before: at its
    /// timeout, or once it has gone unread for its limit.
    fn released_at(&self) -> Instant {
        let waiting = self.coordinator.is_some() && !self.unread.is_empty() && self.reading == 0;
        match self.unread_limit {
            Some(limit) if waiting => self.until.min(self.last_read + limit),
            _ => self.until,
        }
    }

    /// Ends the coordinator's transaction, and with it the snapshot.
    fn close(self, tracker: &TaskTracker) {
        if let Some(coordinator) = self.coordinator {
            tracker.spawn(coordinator.close());
        }
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
    /// The database's `pool_size`: its plan places.
    pub per_database: usize,
    /// The tokens that may plan on the database (`Config::planners`; none
    /// without tokens): each keeps a place while it holds none.
    pub planners: &'a [&'a str],
}

/// Why a plan found no room; each says which cap and its figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Full {
    /// [`MAX_HELD_PLANS`] are held on this server.
    Server(usize),
    /// The token holds `[flight] max_plans_per_token` plans.
    Token(usize),
    /// The database's `pool_size` plans are held for it.
    Database(usize),
    /// The token holds plans on the database, and its free places are kept
    /// for the other tokens that may plan there and hold none.
    Share {
        /// The database.
        database: String,
        /// The plans this token holds there.
        held: usize,
        /// Its places not held by anyone.
        free: usize,
        /// The other tokens that may plan there and hold none.
        waiting: usize,
    },
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
            Full::Share {
                database,
                held,
                free,
                waiting,
            } => write!(
                f,
                "this token holds {held} plans on database {database:?}; its free plan places \
                 ({free}) are kept for the other tokens that may plan there and hold none \
                 ({waiting}): a token holding plans on a database leaves a place to each of them"
            ),
        }
    }
}

/// A plan refused: the cap it met, and how long until a plan within that
/// cap is released at the latest, unless its parts are read meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The cap.
    pub full: Full,
    /// When to retry.
    pub retry_in: Duration,
}

impl Refused {
    /// [`Refused::retry_in`] in whole seconds, at least one.
    pub fn retry_seconds(&self) -> u64 {
        self.retry_in.as_secs_f64().ceil().max(1.0) as u64
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}; retry in {} s, when the first of those plans is released unless it is being \
             read (sooner when one is released with DoAction CancelFlightInfo or every part of \
             one has been read)",
            self.full,
            self.retry_seconds()
        )
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
    /// for at most `timeout`, and while parts were never read, for at most
    /// `unread_limit` with none being read (`None`: no such limit).
    pub fn hold(
        mut self,
        coordinator: Box<dyn Session>,
        parts: usize,
        timeout: Duration,
        unread_limit: Option<Duration>,
    ) {
        if let Some(entry) = self.plans.lock().get_mut(&self.plan) {
            let now = Instant::now();
            entry.coordinator = Some(coordinator);
            entry.unread = (0..parts).collect();
            entry.until = now + timeout;
            entry.unread_limit = unread_limit;
            entry.last_read = now;
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

/// A part of a plan being read: while it lives, the plan is not released
/// for going unread; dropped when the part's stream ends.
pub struct Reading {
    plans: Plans,
    plan: u64,
    /// The part started: its end counts as a read. A call refused before
    /// (no token, say) does not keep the plan.
    started: bool,
}

impl Reading {
    /// Records that part `index` was read here (it may be read again while
    /// the plan lives).
    pub fn read(&mut self, index: usize) {
        if let Some(entry) = self.plans.lock().get_mut(&self.plan) {
            entry.unread.remove(&index);
        }
        self.started = true;
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        if let Some(entry) = self.plans.lock().get_mut(&self.plan) {
            entry.reading = entry.reading.saturating_sub(1);
            if self.started {
                entry.last_read = Instant::now();
            }
        }
    }
}

impl Plans {
    /// Takes a place for `plan` within the caps of `claim`, for at most
    /// `planning` until [`Reservation::hold`] sets the plan's own time. A cap
    /// that is reached gives way by releasing the oldest plans in its reach
    /// whose parts have all been read; with too few, the plan is refused.
    pub fn reserve(
        &self,
        plan: u64,
        claim: &Claim<'_>,
        planning: Duration,
        tracker: &TaskTracker,
    ) -> Result<Reservation, Refused> {
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
            unread_limit: None,
            reading: 0,
            last_read: now,
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

    /// A part of `plan` starts being read: until the returned [`Reading`]
    /// is dropped, the plan is not released for going unread.
    pub fn reading(&self, plan: u64) -> Reading {
        if let Some(entry) = self.lock().get_mut(&plan) {
            entry.reading += 1;
        }
        Reading {
            plans: self.clone(),
            plan,
            started: false,
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

    /// Releases the plans whose time is over, and those with parts never
    /// read that went unread for their limit.
    pub fn expire(&self, tracker: &TaskTracker) {
        let now = Instant::now();
        let expired: Vec<(u64, Held)> = {
            let mut held = self.lock();
            let numbers: Vec<u64> = held
                .iter()
                .filter(|(_, entry)| entry.coordinator.is_some() && entry.released_at() <= now)
                .map(|(plan, _)| *plan)
                .collect();
            numbers
                .into_iter()
                .filter_map(|plan| held.remove(&plan).map(|entry| (plan, entry)))
                .collect()
        };
        for (plan, entry) in expired {
            let parts_never_read = entry.unread.len();
            if entry.until <= now {
                tracing::info!(
                    plan,
                    parts_never_read,
                    "plan timed out: its snapshot is released"
                );
            } else {
                tracing::info!(
                    plan,
                    parts_never_read,
                    "no part of the plan was read for [flight] unread_plan_timeout: its snapshot \
                     is released"
                );
            }
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

/// The caps a new plan is held to, in the order they are checked.
#[derive(Clone, Copy, Debug)]
enum Cap {
    /// [`MAX_HELD_PLANS`], over every plan on the server.
    Server,
    /// `[flight] max_plans_per_token`, over the token's plans.
    Token,
    /// The database's `pool_size`, over the plans on it.
    Database,
    /// The token's share of the database's places, over its plans there:
    /// while it holds some, it takes another only if a free place stays for
    /// each other token that may plan there and holds none. So no token, nor
    /// any set of fewer tokens than may plan there, can take every place
    /// (with at least as many places as such tokens), yet a token alone on a
    /// database may use all but the places kept for the others. A token
    /// holding none there takes any free place: that is the place kept for it.
    Share,
}

const CAPS: [Cap; 4] = [Cap::Server, Cap::Token, Cap::Database, Cap::Share];

impl Cap {
    /// Whether `entry` counts against this cap for `claim`.
    fn within(self, claim: &Claim<'_>, entry: &Held) -> bool {
        let own = entry.owner.as_deref() == claim.owner;
        let here = entry.database == claim.database;
        match self {
            Cap::Server => true,
            Cap::Token => own,
            Cap::Database => here,
            Cap::Share => own && here,
        }
    }

    /// The most plans its reach may hold, the claim's new one included, and
    /// the refusal when they would be more; `None`: no limit now.
    fn limit(self, claim: &Claim<'_>, staying: &[&Held]) -> Option<(usize, Full)> {
        match self {
            Cap::Server => Some((MAX_HELD_PLANS, Full::Server(MAX_HELD_PLANS))),
            Cap::Token => Some((claim.per_token, Full::Token(claim.per_token))),
            Cap::Database => Some((claim.per_database, Full::Database(claim.per_database))),
            Cap::Share => share(claim, staying),
        }
    }
}

/// [`Cap::Share`]'s limit: the places not held by other tokens, less one
/// for each other planner holding none; no limit while the token holds none.
fn share(claim: &Claim<'_>, staying: &[&Held]) -> Option<(usize, Full)> {
    let here: Vec<&Held> = staying
        .iter()
        .copied()
        .filter(|entry| entry.database == claim.database)
        .collect();
    let holding = |name: Option<&str>| {
        here.iter()
            .filter(|entry| entry.owner.as_deref() == name)
            .count()
    };
    let own = holding(claim.owner);
    if own == 0 {
        return None;
    }
    let others = here.len() - own;
    let waiting = claim
        .planners
        .iter()
        .filter(|name| Some(**name) != claim.owner && holding(Some(name)) == 0)
        .count();
    let full = Full::Share {
        database: claim.database.to_owned(),
        held: own,
        free: claim.per_database.saturating_sub(here.len()),
        waiting,
    };
    Some((claim.per_database.saturating_sub(others + waiting), full))
}

/// The plans that must give way for `claim` to take a place, or the refusal
/// of the first cap that cannot make room: for each cap reached, the oldest
/// fully read plans in its reach (server, token, database, share).
fn room(held: &HashMap<u64, Held>, claim: &Claim<'_>) -> Result<Vec<u64>, Refused> {
    let mut giving_way: Vec<u64> = Vec::new();
    for cap in CAPS {
        let staying: Vec<(u64, &Held)> = held
            .iter()
            .filter(|(plan, _)| !giving_way.contains(plan))
            .map(|(plan, entry)| (*plan, entry))
            .collect();
        let entries: Vec<&Held> = staying.iter().map(|(_, entry)| *entry).collect();
        let Some((limit, full)) = cap.limit(claim, &entries) else {
            continue;
        };
        let reach: Vec<(u64, &Held)> = staying
            .into_iter()
            .filter(|(_, entry)| cap.within(claim, entry))
            .collect();
        let excess = (reach.len() + 1).saturating_sub(limit);
        let mut fully_read: Vec<&(u64, &Held)> = reach
            .iter()
            .filter(|(_, entry)| entry.fully_read())
            .collect();
        if fully_read.len() < excess {
            let now = Instant::now();
            let soonest = reach.iter().map(|(_, entry)| entry.released_at()).min();
            let retry_in = soonest.map_or(Duration::ZERO, |at| at.saturating_duration_since(now));
            return Err(Refused { full, retry_in });
        }
        fully_read.sort_by_key(|(_, entry)| entry.since);
        giving_way.extend(fully_read.iter().take(excess).map(|(plan, _)| *plan));
    }
    Ok(giving_way)
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
            planners: &[],
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
                .hold(Box::new(Idle), 2, PLANNING, None);
        }
        // Parts read, and read again, keep the plan: its snapshot is held.
        plans.reading(1).read(0);
        plans.reading(1).read(0);
        assert_eq!(plans.len(), 2);
        let refused = plans.reserve(3, &claim, PLANNING, &tracker());
        assert_eq!(
            refused.err().map(|refused| refused.full),
            Some(Full::Token(2))
        );
        // Once every part of plan 1 was read, a new plan takes its place;
        // plan 2, not fully read, stays.
        plans.reading(1).read(1);
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
            .hold(Box::new(Idle), 1, PLANNING, None);
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
        assert_eq!(
            refused.err().map(|refused| refused.full),
            Some(Full::Token(2))
        );
        // Another token still plans, up to the database's share.
        let _b1 = plans
            .reserve(4, &claim(Some("b"), "main"), PLANNING, &tracker())
            .unwrap();
        let refused = plans.reserve(5, &claim(Some("b"), "main"), PLANNING, &tracker());
        assert_eq!(
            refused.err().map(|refused| refused.full),
            Some(Full::Database(3))
        );
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
                planners: &[],
            };
            kept.push(plans.reserve(plan, &claim, PLANNING, &tracker()).unwrap());
        }
        let refused = plans.reserve(999, &claim(Some("new"), "other"), PLANNING, &tracker());
        assert_eq!(
            refused.err().map(|refused| refused.full),
            Some(Full::Server(MAX_HELD_PLANS))
        );
    }

    /// Holds `plan`, of two parts, for `claim`, for [`PLANNING`] and at most
    /// `unread_limit` unread.
    fn held(
        plans: &Plans,
        plan: u64,
        claim: &Claim<'_>,
        unread_limit: Option<Duration>,
    ) -> Result<(), Full> {
        let place = plans
            .reserve(plan, claim, PLANNING, &tracker())
            .map_err(|refused| refused.full)?;
        place.hold(Box::new(Idle), 2, PLANNING, unread_limit);
        Ok(())
    }

    #[tokio::test]
    async fn a_token_holding_plans_leaves_a_place_to_each_other_token_holding_none() {
        let plans = Plans::default();
        let planners = ["a", "b", "c"];
        let on = |owner| Claim {
            owner: Some(owner),
            database: "main",
            per_token: 8,
            per_database: 8,
            planners: &planners,
        };
        // Alone so far, a takes all but the places kept for b and c.
        for plan in 0..6 {
            held(&plans, plan, &on("a"), None).unwrap();
        }
        let refused = plans
            .reserve(6, &on("a"), PLANNING, &tracker())
            .err()
            .unwrap();
        assert_eq!(
            refused.full,
            Full::Share {
                database: "main".into(),
                held: 6,
                free: 2,
                waiting: 2,
            }
        );
        assert!(refused.to_string().contains("retry in 60 s"), "{refused}");
        // Each of the others still plans at once; b, holding one now, no
        // longer takes c's place.
        held(&plans, 10, &on("b"), None).unwrap();
        assert!(matches!(
            held(&plans, 11, &on("b"), None),
            Err(Full::Share { waiting: 1, .. })
        ));
        held(&plans, 20, &on("c"), None).unwrap();
        assert_eq!(held(&plans, 21, &on("c"), None), Err(Full::Database(8)));
        // Every part of one of a's plans read: it gives way to a's next.
        plans.reading(0).read(0);
        plans.reading(0).read(1);
        held(&plans, 7, &on("a"), None).unwrap();
        assert_eq!(plans.len(), 8);
        // Without tokens (no planners), one client may take every place.
        let anyone = Claim {
            owner: None,
            database: "other",
            per_token: 8,
            per_database: 8,
            planners: &[],
        };
        let other = Plans::default();
        for plan in 0..8 {
            held(&other, plan, &anyone, None).unwrap();
        }
    }

    #[tokio::test]
    async fn a_plan_with_parts_never_read_is_released_once_none_is_being_read_for_its_limit() {
        let plans = Plans::default();
        let claim = Claim {
            per_token: 8,
            per_database: 8,
            ..claim(None, "main")
        };
        // A limit of zero: gone at the next expiry unless being read.
        for plan in [1, 2, 3] {
            held(&plans, plan, &claim, Some(Duration::ZERO)).unwrap();
        }
        // Plan 4 has no unread limit (its parts are read on other replicas).
        held(&plans, 4, &claim, None).unwrap();
        // Plan 2 has a part being read; plan 3 was read to the end (it gives
        // way to new plans instead).
        let mut reading = plans.reading(2);
        reading.read(0);
        plans.reading(3).read(0);
        plans.reading(3).read(1);
        plans.expire(&tracker());
        assert_eq!(plans.release(1, None, &tracker()), Ok(false));
        assert_eq!(plans.len(), 3);
        // Its read over, plan 2 goes unread again: now it is released.
        drop(reading);
        plans.expire(&tracker());
        assert_eq!(plans.release(2, None, &tracker()), Ok(false));
        assert_eq!(plans.len(), 2);
    }
}
