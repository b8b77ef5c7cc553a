//! The snapshots this replica holds open for its plans.
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
//! itself.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_core::connect::Session;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

/// The plans whose snapshots are held, by plan number.
#[derive(Clone, Default)]
pub struct Plans {
    held: Arc<Mutex<HashMap<u64, Held>>>,
}

struct Held {
    coordinator: Box<dyn Session>,
    /// Parts not yet started here.
    waiting: BTreeSet<usize>,
    until: Instant,
}

impl Plans {
    /// Holds `coordinator` (and so the snapshot) for `plan` of `parts` parts,
    /// for at most `timeout`.
    pub fn hold(&self, plan: u64, coordinator: Box<dyn Session>, parts: usize, timeout: Duration) {
        let held = Held {
            coordinator,
            waiting: (0..parts).collect(),
            until: Instant::now() + timeout,
        };
        self.lock().insert(plan, held);
    }

    /// Records that part `index` of `plan` joined the snapshot; the last one
    /// releases it (closed by a task `tracker` follows).
    pub fn started(&self, plan: u64, index: usize, tracker: &TaskTracker) {
        let released = {
            let mut held = self.lock();
            let done = held.get_mut(&plan).is_some_and(|entry| {
                entry.waiting.remove(&index);
                entry.waiting.is_empty()
            });
            done.then(|| held.remove(&plan)).flatten()
        };
        if let Some(entry) = released {
            tracing::debug!(plan, "every part started: the snapshot is released");
            tracker.spawn(entry.coordinator.close());
        }
    }

    /// Plans held now.
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
                .filter(|(_, entry)| entry.until <= now)
                .map(|(plan, _)| *plan)
                .collect();
            numbers
                .into_iter()
                .filter_map(|plan| held.remove(&plan).map(|entry| (plan, entry)))
                .collect()
        };
        for (plan, entry) in &expired {
            tracing::info!(
                plan,
                parts_not_started = entry.waiting.len(),
                "plan timed out: its snapshot is released"
            );
        }
        for (_, entry) in expired {
            tracker.spawn(entry.coordinator.close());
        }
    }

    /// Releases every plan (at shutdown).
    pub fn release_all(&self, tracker: &TaskTracker) {
        let all: Vec<Held> = self.lock().drain().map(|(_, entry)| entry).collect();
        for entry in all {
            tracker.spawn(entry.coordinator.close());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Held>> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
