//! How many CPUs this process may use, for the size of a runtime: `main`'s
//! for the commands that serve many streams at once, and `sluice serve`'s
//! default thread count.

/// The CPUs this process may use. The standard library reads the scheduler's
/// affinity mask and the cgroup CPU quota (v1 and v2), so a container limited
/// to 2 CPUs on a 64-core host counts 2.
pub fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}
