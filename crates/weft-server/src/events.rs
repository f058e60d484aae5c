//! The encoded server-sent events of recent entries, shared by every
//! subscription of a server (see `routes::subscribe`). Apart from the
//! route so that the server's shared state, which holds the cache, and the
//! route, which reads that state, need not import each other.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};
use weft::LogEntry;
use weft_api::body::Entry;

/// The encoded events of recent entries, by seqnum, shared by every
/// subscription of a server: most subscribers send the same entries at
/// about the same time, and encoding each once is what keeps fan-out cheap.
/// Holds at most [`EventCache::CAPACITY`] events (the oldest inserted go
/// first); a miss is encoded again. An entry's seqnum names it until a
/// hard delete erases its payload: the server's erase route clears the
/// cache ([`EventCache::clear`]).
#[derive(Default)]
pub struct EventCache {
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    events: HashMap<u64, Bytes>,
    order: VecDeque<u64>,
}

impl EventCache {
    /// Events kept.
    pub const CAPACITY: usize = 16_384;

    /// Forgets every event (payloads were erased).
    pub fn clear(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.events.clear();
        inner.order.clear();
    }

    /// The events of `entries`, concatenated: from the cache, or encoded
    /// and added to it.
    pub(crate) fn events_of(&self, entries: &[LogEntry]) -> Bytes {
        let mut out = BytesMut::new();
        let mut missing: Vec<(usize, Bytes)> = Vec::new();
        let mut found: Vec<Option<Bytes>> = Vec::with_capacity(entries.len());
        {
            let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            for e in entries {
                found.push(inner.events.get(&e.seqnum).cloned());
            }
        }
        for (i, (e, f)) in entries.iter().zip(&mut found).enumerate() {
            if f.is_none() {
                let event = encode(e);
                missing.push((i, event.clone()));
                *f = Some(event);
            }
        }
        if !missing.is_empty() {
            let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            for (i, event) in missing {
                let seqnum = entries[i].seqnum;
                if inner.events.insert(seqnum, event).is_none() {
                    inner.order.push_back(seqnum);
                }
            }
            while inner.order.len() > Self::CAPACITY {
                if let Some(old) = inner.order.pop_front() {
                    inner.events.remove(&old);
                }
            }
        }
        for event in found.into_iter().flatten() {
            out.extend_from_slice(&event);
        }
        out.freeze()
    }
}

/// One entry's event: `id`, `event: entry`, and the entry's JSON (which
/// has no line break) as `data`.
fn encode(entry: &LogEntry) -> Bytes {
    let json = serde_json::to_string(&Entry::from(entry)).unwrap_or_default();
    Bytes::from(format!(
        "id: {}\nevent: entry\ndata: {json}\n\n",
        entry.seqnum
    ))
}
