//! A least-recently-used map bounded by the bytes of what it holds.
//!
//! The bucket backends read history pages and segments on demand; this is
//! what keeps the copies they hold within a configured budget, whatever
//! the log's length. Values are shared (`Arc`), so a reader keeps using a
//! value after it was evicted; the budget counts what the cache holds.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// A byte-bounded LRU map, safe to share between tasks.
#[derive(Debug)]
pub(crate) struct ByteLru<K, V> {
    inner: Mutex<Inner<K, V>>,
    budget: usize,
}

#[derive(Debug)]
struct Inner<K, V> {
    map: HashMap<K, (Arc<V>, usize, u64)>,
    /// Use tick → key, oldest first.
    order: BTreeMap<u64, K>,
    tick: u64,
    bytes: usize,
}

impl<K: Eq + Hash + Clone, V> ByteLru<K, V> {
    /// An empty cache that holds at most `budget` bytes.
    pub(crate) fn new(budget: usize) -> Self {
        ByteLru {
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                order: BTreeMap::new(),
                tick: 0,
                bytes: 0,
            }),
            budget,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K, V>> {
        // Every critical section leaves the maps consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value under `key`, marked as just used.
    pub(crate) fn get(&self, key: &K) -> Option<Arc<V>> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let (value, old) = {
            let slot = inner.map.get_mut(key)?;
            let old = std::mem::replace(&mut slot.2, tick);
            (slot.0.clone(), old)
        };
        inner.order.remove(&old);
        inner.order.insert(tick, key.clone());
        Some(value)
    }

    /// Adds `value` of `bytes` bytes under `key`, evicting the least
    /// recently used entries beyond the budget. A value larger than the
    /// whole budget is not kept.
    pub(crate) fn insert(&self, key: K, value: Arc<V>, bytes: usize) {
        if bytes > self.budget {
            return;
        }
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((_, old_bytes, old_tick)) = inner.map.remove(&key) {
            inner.order.remove(&old_tick);
            inner.bytes -= old_bytes;
        }
        inner.map.insert(key.clone(), (value, bytes, tick));
        inner.order.insert(tick, key);
        inner.bytes += bytes;
        while inner.bytes > self.budget {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            if let Some((_, b, _)) = inner.map.remove(&oldest) {
                inner.bytes -= b;
            }
        }
    }

    /// Drops the value under `key`, if held (its source changed).
    pub(crate) fn remove(&self, key: &K) {
        let mut inner = self.lock();
        if let Some((_, bytes, tick)) = inner.map.remove(key) {
            inner.order.remove(&tick);
            inner.bytes -= bytes;
        }
    }

    /// Bytes held now.
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_beyond_the_budget() {
        let lru = ByteLru::new(10);
        lru.insert("a", Arc::new(1), 4);
        lru.insert("b", Arc::new(2), 4);
        assert_eq!(lru.get(&"a").as_deref(), Some(&1));
        lru.insert("c", Arc::new(3), 4);
        assert!(lru.get(&"b").is_none(), "b was least recently used");
        assert!(lru.get(&"a").is_some() && lru.get(&"c").is_some());
        assert_eq!(lru.bytes(), 8);
        lru.insert("huge", Arc::new(4), 11);
        assert!(lru.get(&"huge").is_none());
        lru.insert("a", Arc::new(5), 2);
        assert_eq!((lru.get(&"a").as_deref(), lru.bytes()), (Some(&5), 6));
        lru.remove(&"a");
        lru.remove(&"absent");
        assert_eq!((lru.get(&"a"), lru.bytes()), (None, 4));
        assert!(lru.get(&"c").is_some());
    }
}
