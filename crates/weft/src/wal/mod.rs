//! The write-ahead log on object storage: manifest, producer, replica.
//!
//! What a user of the WAL names is exported here, and each part is
//! documented in its module:
//!
//! * [`producer`] — the epoch-fenced writer: group commit, concurrent
//!   uploads, ordered manifest commits, backpressure.
//! * [`replica`] — read replicas that tail the manifest and hand records
//!   to an [`Applier`] ([`applier`]); [`cursor`] keeps their place.
//! * [`manifest`] — the in-memory manifest the producer mutates, and its
//!   checkpoints into history pages, read back by a [`HistoryReader`].
//! * [`maintenance`] — truncation and the snapshot pointer, through the
//!   producer or (for tools) by a CAS that fences nobody.
//! * [`snapshot`] — storing base snapshots and recording their pointer.
//! * [`gc`] — retention GC of objects no manifest references any more.
//! * The format types those take and return ([`ManifestData`],
//!   [`SnapshotPointer`], …).
//!
//! The rest is private: `pipeline`, `flush` and `commit` are the
//! producer's shared state, segment packing and uploads, and manifest CAS
//! loop; `manifest_object` reads the manifest with its CAS version;
//! `history` names, stores and caches history pages; `segments` fetches
//! and checks the segment an entry names; `lease` is the writer lease
//! that makes a running writer visible; `window` is the commit window, the
//! rule between uploads, the CAS that references them, and GC. The last
//! four are public with the `internals` feature, for weft's own tools and
//! tests.
//!
//! A producer appends records and a replica applies them (a fuller
//! replicated key-value store, with restarts and snapshots, is
//! `examples/replicated_kv.rs`):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use std::sync::{Arc, Mutex};
//!
//! use bytes::Bytes;
//! use object_store::{ObjectStore, memory::InMemory};
//! use weft::wal::{FnApplier, Producer, Record, Replica};
//!
//! let bucket: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
//! let producer = Producer::builder(bucket.clone(), "app/manifest", "app/segments")
//!     .open()
//!     .await?;
//! let records = vec![Bytes::from("put a=1"), Bytes::from("put b=2")];
//! let seq = producer.append(records, None).await?.wait().await?;
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let into = seen.clone();
//! let mut replica = Replica::builder(
//!     bucket,
//!     "app/manifest",
//!     FnApplier::new(move |r: &Record| {
//!         into.lock().unwrap().push(r.data.clone());
//!         Ok(())
//!     }),
//! )
//! .build();
//! replica.poll().await?;
//! assert_eq!(seen.lock().unwrap().len(), 2);
//! assert_eq!(seq, 0, "the first record of a new log");
//! producer.close().await
//! # }
//! ```

pub mod applier;
pub(crate) mod commit;
pub mod cursor;
pub(crate) mod flush;
pub mod gc;
internal_mod!(history);
internal_mod!(lease);
pub mod maintenance;
pub mod manifest;
pub(crate) mod manifest_object;
pub(crate) mod pipeline;
pub(crate) mod prefetch;
pub mod producer;
pub mod replica;
internal_mod!(segments);
pub mod snapshot;
internal_mod!(window);

pub use applier::{Applier, FnApplier, Record, TypedApplier};
pub use cursor::{Cursor, CursorStore, FileCursorStore, MemoryCursorStore, ObjectCursorStore};
pub use gc::{DEFAULT_GRACE, Gc, GcObject, GcReport, KeepReason, KeptObject, ObjectKind};
pub use history::{DEFAULT_PAGE_CACHE_BYTES, HistoryReader};
pub use lease::{DEFAULT_RENEW_EVERY, MAX_WATCH};
pub use maintenance::{ManifestEdit, edit_unowned};
pub use manifest::{CheckpointPolicy, Manifest, PageUpload};
pub use producer::{Durability, Producer, ProducerBuilder, ProducerOptions};
pub use replica::{PollOutcome, Replica, ReplicaBuilder};
pub use snapshot::{SnapshotWriter, write_snapshot};

// The format types the WAL's own API takes and returns, so a user of the
// producer and replica can name them without the `internals` feature.
pub use crate::format::{
    Compression, DecodedSegment, History, HistoryPage, ManifestData, ManifestEntry,
    ManifestVersion, Metadata, PageItems, PagePointer, SegmentVersion, SnapshotPointer,
    WriterLease,
};
