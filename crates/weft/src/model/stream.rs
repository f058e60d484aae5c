//! A stream as a listing of the log's streams describes it, and the order
//! such listings follow.

use super::LogTag;

/// One stream of a log, as [`Storage::streams`](crate::storage::Storage::streams) lists it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StreamInfo {
    /// The stream's tag.
    pub tag: LogTag,
    /// The version the next entry with this primary tag gets (0 for a
    /// tag that was never a primary tag); trimmed entries included.
    pub next_version: u64,
    /// Live entries carrying the tag, as primary or secondary tag.
    pub entries: u64,
}

/// The order [`Storage::streams`](crate::storage::Storage::streams) lists streams in, the key order of the
/// log index (docs/INDEX.md): shorter namespaces first, then namespace
/// bytes, then shorter keys (no key first), then key bytes.
pub fn stream_order(a: &LogTag, b: &LogTag) -> std::cmp::Ordering {
    fn parts(t: &LogTag) -> (usize, &[u8], usize, &[u8]) {
        let key = t.key().unwrap_or("").as_bytes();
        let ns = t.namespace().as_bytes();
        (ns.len(), ns, key.len(), key)
    }
    parts(a).cmp(&parts(b))
}
