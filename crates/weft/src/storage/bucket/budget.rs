//! How a bucket writer or follower splits its memory budget.
//!
//! Everything a writer or follower holds that does not grow with the log
//! comes out of one number (`memory_budget` in their options): the appends
//! in flight (writer), the newest entries, decoded segments read back,
//! manifest history pages, and the persistent index's caches, tail and
//! write buffers. What remains outside it are the log's numbers when they
//! are kept in memory (no cache directory: a few dozen bytes per entry) and
//! the runtime itself.

use crate::index::IndexOptions;

/// The parts of a memory budget, in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    /// The producer's in-flight bytes (writer only; 0 for a follower).
    pub(crate) in_flight: usize,
    /// The newest entries kept for reads.
    pub(crate) recent: usize,
    /// Decoded segments read back.
    pub(crate) segments: usize,
    /// Manifest history pages.
    pub(crate) pages: usize,
    /// The persistent index (used only with a cache directory).
    pub(crate) index: IndexOptions,
}

impl Budget {
    fn split(total: usize, in_flight: usize) -> Self {
        let index = IndexOptions {
            cache_bytes: total / 8,
            tail_bytes: (total / 16).max(1 << 16),
            write_buffer_bytes: (total / 8).max(4 << 20),
            ..IndexOptions::default()
        };
        Budget {
            in_flight,
            recent: total / 16,
            segments: total / 8,
            pages: total / 32,
            index,
        }
    }

    /// A writer's: a quarter for the appends in flight (two flushes of
    /// full segments at the default flush size), the rest for reads and
    /// the index.
    pub(crate) fn writer(total: usize) -> Self {
        Budget::split(total, (total / 4).clamp(1 << 20, u32::MAX as usize))
    }

    /// A follower's: no appends; twice the writer's room for entries read
    /// back.
    pub(crate) fn follower(total: usize) -> Self {
        let mut b = Budget::split(total, 0);
        b.recent = total / 8;
        b.segments = total / 4;
        b.pages = total / 16;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_stay_within_the_budget() {
        for total in [16 << 20, 256 << 20, 4 << 30] {
            for b in [Budget::writer(total), Budget::follower(total)] {
                let sum = b.in_flight
                    + b.recent
                    + b.segments
                    + b.pages
                    + b.index.cache_bytes
                    + b.index.tail_bytes
                    + b.index.write_buffer_bytes;
                assert!(sum <= total, "{sum} > {total}: {b:?}");
                b.index.validate().unwrap();
            }
        }
    }
}
