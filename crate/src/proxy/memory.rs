//! How `palaver serve` allocates: from one glibc malloc arena.
//!
//! Why (issue 41): glibc gives each thread that allocates its own arena, up to eight per core,
//! and a freed block is kept by the arena it came from. The workspace copy of a chat is written
//! whole after every turn (the body received, the old copy read to check its hash), each time
//! on whichever blocking thread is free; every arena came to hold a hole the size of the chat.
//! Over 1,000 turns of a chat whose copy grew to 5 MB the RSS went 14.8 → 63 MB. Over 400 turns
//! (`bench-memory.mjs`) it grew +12.5 MB with glibc's default, +5.7 MB with two arenas and
//! +2.7 MB with one. A local server for one person has little to gain from more: small blocks
//! come from each thread's cache without the arena's lock.

/// One glibc arena, set before the runtime starts its threads. Elsewhere (musl, other systems)
/// the allocator is left as it is.
pub(super) fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const ARENAS: libc::c_int = 1;
        // SAFETY: mallopt only sets a tuning value of glibc's allocator; it is called before any
        // thread of ours exists, and an unknown value is refused (returns 0), not acted on.
        let _ = unsafe { libc::mallopt(libc::M_ARENA_MAX, ARENAS) };
    }
}
