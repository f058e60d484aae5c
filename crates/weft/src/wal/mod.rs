//! The write-ahead log on object storage: manifest, producer, replica.
//!
//! * [`manifest`] — the in-memory manifest the producer mutates.
//! * [`producer`] — the epoch-fenced writer: group commit, concurrent
//!   uploads, ordered manifest commits, backpressure.
//! * `pipeline`, `flush`, `commit` — the producer's internals: shared
//!   state, segment packing and uploads, and the manifest CAS loop.

mod commit;
mod flush;
pub mod manifest;
mod pipeline;
pub mod producer;

pub use manifest::Manifest;
pub use producer::{Durability, Producer, ProducerBuilder, ProducerConfig};
