//! Rooting a store at a key prefix.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::prefix::PrefixStore;

/// Roots `store` at `prefix` (returned unchanged when `prefix` is empty;
/// leading and trailing `/` are ignored).
pub fn with_prefix(store: Arc<dyn ObjectStore>, prefix: &str) -> Arc<dyn ObjectStore> {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        store
    } else {
        Arc::new(PrefixStore::new(store, prefix))
    }
}
