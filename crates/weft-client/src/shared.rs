//! What a [`RemoteStorage`](crate::storage::RemoteStorage), its KV and its
//! tailer share: the API client, the commit feed and the handle's state.
//! Apart from the storage so that the KV and the tailer need not import
//! the storage that holds them.

use std::sync::atomic::{AtomicBool, Ordering};

use weft::storage::{Capabilities, CommitFeed};
use weft::{Error, Result};

use crate::http::Api;

/// What the storage, its KV and its tailer share.
pub(crate) struct Shared {
    pub(crate) api: Api,
    pub(crate) feed: CommitFeed,
    pub(crate) closed: AtomicBool,
    pub(crate) capabilities: Capabilities,
    pub(crate) append_ids: bool,
    pub(crate) kv: bool,
}

impl Shared {
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::closed("this remote log handle is closed"));
        }
        Ok(())
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}
