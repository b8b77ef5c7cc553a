//! Names for what a test creates on a shared server (a PostgreSQL schema, a
//! MariaDB database), unique among the tests of every process that uses the
//! server at once, and the random suffix they end with.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// A name for a test's schema or database, unique on the server:
/// `t_<pid>_<counter>_<short random>`, for PostgreSQL and MariaDB alike (the
/// crate docs promise that form for both).
pub(crate) fn unique_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let counter = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "t_{}_{}_{}",
        std::process::id(),
        counter,
        random_suffix(counter)
    )
}

/// A short lowercase alphanumeric random string (not cryptographic).
pub(crate) fn random_suffix(salt: u64) -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(salt);
    hasher.write_u32(std::process::id());
    if let Ok(elapsed) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        hasher.write_u128(elapsed.as_nanos());
    }
    let mut n = hasher.finish();
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..6)
        .map(|_| {
            let c = alphabet[(n % alphabet.len() as u64) as usize] as char;
            n /= alphabet.len() as u64;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_suffixes_are_short_identifiers() {
        let a = random_suffix(1);
        assert_eq!(a.len(), 6);
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        assert_ne!(a, random_suffix(2));
    }
}
