//! The write-ahead log on object storage: manifest, producer, replica.
//!
//! * [`manifest`] — the in-memory manifest the producer mutates, and its
//!   checkpoints into history pages.
//! * [`history`] — reading (through a bounded cache) and storing the
//!   history pages of a v5 manifest.
//! * [`producer`] — the epoch-fenced writer: group commit, concurrent
//!   uploads, ordered manifest commits, backpressure.
//! * `pipeline`, `flush`, `commit` — the producer's internals: shared
//!   state, segment packing and uploads, and the manifest CAS loop;
//!   `manifest_object` reads the manifest with its CAS version.
//! * [`replica`] — read replicas that tail the manifest and hand records
//!   to an [`Applier`]; [`cursor`] keeps their place; [`segments`] fetches
//!   and checks the segment an entry names, for replicas and tools alike.
//! * [`maintenance`] — truncation and the snapshot pointer, through the
//!   producer or (for tools) by a CAS that fences nobody.
//! * [`snapshot`] — storing base snapshots and recording their pointer.
//! * [`gc`] — retention GC of objects no manifest references any more.
//! * [`lease`] — the writer lease that makes a running writer visible.
//! * [`window`] — the commit window: the rule between uploads, the CAS
//!   that references them, and GC.
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
mod commit;
pub mod cursor;
mod flush;
pub mod gc;
pub mod history;
pub mod lease;
pub mod maintenance;
pub mod manifest;
mod manifest_object;
mod pipeline;
mod prefetch;
pub mod producer;
pub mod replica;
pub mod segments;
pub mod snapshot;
pub mod window;

pub use applier::{Applier, FnApplier, Record, TypedApplier};
pub use cursor::{Cursor, CursorStore, FileCursorStore, MemoryCursorStore, ObjectCursorStore};
pub use gc::{Gc, GcReport};
pub use history::HistoryReader;
pub use maintenance::{ManifestEdit, edit_unowned};
pub use manifest::{CheckpointPolicy, Manifest, PageUpload};
pub use producer::{Durability, Producer, ProducerBuilder, ProducerConfig};
pub use replica::{PollOutcome, Replica, ReplicaBuilder};
pub use snapshot::{SnapshotWriter, write_snapshot};

// The format types the WAL's own API takes and returns, so a user of the
// producer and replica can name them without the `internals` feature.
pub use crate::format::{
    Compression, DecodedSegment, History, HistoryPage, ManifestData, ManifestEntry,
    ManifestVersion, PagePointer, SegmentVersion, SnapshotPointer, WriterLease,
};
