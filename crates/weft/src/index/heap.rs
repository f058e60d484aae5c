//! Handing freed heap memory back to the operating system.
//!
//! The index's flusher allocates and frees a batch's rows, the tail's
//! entries and fjall's memtables and cache blocks from two or three
//! threads, interleaved with memory that stays. glibc's allocator keeps
//! what is freed for reuse and returns it to the OS only from the top of
//! each heap, so a writer's resident memory crept with the index's size
//! while the memory in use stayed within the budget (a 1 GiB dir soak
//! without the trim: 173–214 MiB in use, 93–159 MiB more held free, RSS
//! averaging ~50 MiB above the same run with it; BENCHMARKS.md, "dir
//! soak").
//! `malloc_trim` returns the free pages anywhere in every heap; the
//! flusher calls it every few seconds while it writes. It is a no-op with
//! another allocator or libc.

use std::time::{Duration, Instant};

/// How often, at most, the flusher returns free memory.
const EVERY: Duration = Duration::from_secs(5);

/// When the flusher last returned free memory.
#[derive(Debug)]
pub(super) struct HeapTrim {
    last: Instant,
}

impl HeapTrim {
    pub(super) fn new() -> HeapTrim {
        HeapTrim {
            last: crate::clock::os_monotonic_now(),
        }
    }

    /// Returns free memory to the OS if the last time was [`EVERY`] ago.
    pub(super) fn maybe_trim(&mut self) {
        if self.last.elapsed() < EVERY {
            return;
        }
        release_free_memory();
        self.last = crate::clock::os_monotonic_now();
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_memory() {
    // SAFETY: malloc_trim takes the allocator's own locks and only
    // releases pages of free chunks; it touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}
