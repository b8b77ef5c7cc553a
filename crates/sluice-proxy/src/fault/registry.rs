//! [`FaultList`]: the faults in force, each with an id, added and removed at
//! run time (by the control API or [`crate::ProxyHandle::faults`]) while
//! connections read it. A version number tells a connection cheaply whether
//! the list changed since it last looked.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::spec::{Fault, Scope};

/// The faults in force.
#[derive(Debug, Default)]
pub struct FaultList {
    entries: Mutex<Vec<Arc<Entry>>>,
    next_id: AtomicU64,
    version: AtomicU64,
}

/// One fault in force.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) id: u64,
    pub(crate) fault: Fault,
    /// Connections it acted on.
    acted: AtomicU64,
    /// Taken off the list: a stall it started ends.
    removed: AtomicBool,
}

impl Entry {
    /// Claims the fault for one more connection: false when it is `once` and
    /// has acted already (or it was removed meanwhile).
    pub(crate) fn claim(&self) -> bool {
        if self.removed() {
            return false;
        }
        match self.fault.scope {
            Scope::Every => {
                self.acted.fetch_add(1, Ordering::SeqCst);
                true
            }
            Scope::Once => self
                .acted
                .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok(),
        }
    }

    /// Whether it was taken off the list.
    pub(crate) fn removed(&self) -> bool {
        self.removed.load(Ordering::SeqCst)
    }

    /// Whether it can still act: in force and not a spent `once`.
    pub(crate) fn live(&self) -> bool {
        let spent = self.fault.scope == Scope::Once && self.acted.load(Ordering::SeqCst) > 0;
        !self.removed() && !spent
    }
}

/// A fault as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// Its id, for removing it.
    pub id: u64,
    /// The fault.
    pub fault: Fault,
    /// Connections it acted on so far (a `once` fault is spent at 1).
    pub acted: u64,
}

impl FaultList {
    /// An empty list.
    pub fn new() -> FaultList {
        FaultList::default()
    }

    /// Adds a fault; it applies to connections from now on. Returns its id.
    pub fn add(&self, fault: Fault) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let entry = Arc::new(Entry {
            id,
            fault,
            acted: AtomicU64::new(0),
            removed: AtomicBool::new(false),
        });
        self.change(|entries| entries.push(entry));
        id
    }

    /// Removes the fault `id`: it stops acting, and a stall it started ends.
    /// `None` when there is no such fault.
    pub fn remove(&self, id: u64) -> Option<Fault> {
        let mut removed = None;
        self.change(|entries| {
            if let Some(at) = entries.iter().position(|entry| entry.id == id) {
                removed = Some(entries.remove(at));
            }
        });
        removed.map(|entry| {
            entry.removed.store(true, Ordering::SeqCst);
            entry.fault
        })
    }

    /// Removes every fault; returns how many there were.
    pub fn clear(&self) -> usize {
        let mut removed = Vec::new();
        self.change(|entries| removed = std::mem::take(entries));
        for entry in &removed {
            entry.removed.store(true, Ordering::SeqCst);
        }
        removed.len()
    }

    /// The faults in force, oldest first.
    pub fn list(&self) -> Vec<Listed> {
        self.entries()
            .iter()
            .map(|entry| Listed {
                id: entry.id,
                fault: entry.fault,
                acted: entry.acted.load(Ordering::SeqCst),
            })
            .collect()
    }

    /// The first fault `wanted` picks that can still act, claimed for one
    /// connection.
    pub(crate) fn claim_first(&self, wanted: impl Fn(&Fault) -> bool) -> Option<Arc<Entry>> {
        self.entries()
            .into_iter()
            .find(|entry| wanted(&entry.fault) && entry.claim())
    }

    /// Changes with every addition and removal.
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// The entries in force now.
    pub(crate) fn entries(&self) -> Vec<Arc<Entry>> {
        self.entries.lock().expect("fault list").clone()
    }

    fn change(&self, change: impl FnOnce(&mut Vec<Arc<Entry>>)) {
        let mut entries = self.entries.lock().expect("fault list");
        change(&mut entries);
        self.version.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_listed_with_ids_and_removed_by_id() {
        let list = FaultList::new();
        let cut = list.add("cut:at-data-row=2".parse().unwrap());
        let once = list.add("refuse:once".parse().unwrap());
        assert_eq!(
            list.list().iter().map(|l| l.id).collect::<Vec<_>>(),
            [cut, once]
        );
        let entries = list.entries();
        assert!(entries[1].claim(), "a once fault acts once");
        assert!(!entries[1].claim(), "and then it is spent");
        assert!(!entries[1].live());
        assert!(entries[0].claim() && entries[0].claim(), "every connection");
        assert_eq!(list.list()[0].acted, 2);
        let version = list.version();
        assert_eq!(
            list.remove(cut).map(|f| f.to_string()).as_deref(),
            Some("cut:at-data-row=2")
        );
        assert!(list.version() > version);
        assert!(entries[0].removed() && !entries[0].claim());
        assert_eq!(list.remove(cut), None);
        assert_eq!(list.clear(), 1);
        assert!(list.list().is_empty());
    }
}
