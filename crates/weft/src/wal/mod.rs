//! The write-ahead log on object storage: manifest, producer, replica.

pub mod applier;
pub mod cursor;
pub mod manifest;
pub mod replica;

pub use applier::{Applier, FnApplier, Record, TypedApplier};
pub use cursor::{Cursor, CursorStore, FileCursorStore, MemoryCursorStore, ObjectCursorStore};
pub use manifest::Manifest;
pub use replica::{PollOutcome, Replica, ReplicaBuilder};
