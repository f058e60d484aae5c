//! The write-ahead log on object storage: manifest, producer, replica.
//!
//! * [`manifest`] — the in-memory manifest the producer mutates.
//! * [`producer`] — the epoch-fenced writer: group commit, concurrent
//!   uploads, ordered manifest commits, backpressure.
//! * `pipeline`, `flush`, `commit` — the producer's internals: shared
//!   state, segment packing and uploads, and the manifest CAS loop.
//! * [`replica`] — read replicas that tail the manifest and hand records
//!   to an [`Applier`]; [`cursor`] keeps their place.

pub mod applier;
mod commit;
pub mod cursor;
mod flush;
pub mod manifest;
mod pipeline;
pub mod producer;
pub mod replica;

pub use applier::{Applier, FnApplier, Record, TypedApplier};
pub use cursor::{Cursor, CursorStore, FileCursorStore, MemoryCursorStore, ObjectCursorStore};
pub use manifest::Manifest;
pub use producer::{Durability, Producer, ProducerBuilder, ProducerConfig};
pub use replica::{PollOutcome, Replica, ReplicaBuilder};
