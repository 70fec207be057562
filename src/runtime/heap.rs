//! The C allocator's share of the exporter's resident memory (glibc's malloc, which Rust's
//! global allocator calls on Linux).

/// One malloc arena for the whole process, where glibc gives every thread that allocates an
/// arena of its own (up to eight per core): the sampler, the runtime's workers, each blocking
/// thread that encodes a scrape. Each arena keeps what was freed in it resident for its own
/// thread's next allocations, so a scrape's snapshot and chunks, an analysis' temporaries and
/// the holes the history's growth leaves are kept once per arena. The exporter's threads seldom
/// allocate at the same moment, so one arena costs little waiting; at 8 GPUs × 64 processes
/// with the history full it held 0.36 MiB less (bench/RESULTS.md). Call it first thing in
/// `main`, before any thread starts: a thread keeps the arena it first allocated in.
pub fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator, before any other thread runs.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
