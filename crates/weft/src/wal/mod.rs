//! The write-ahead log on object storage: manifest, producer, replica.

pub mod applier;
pub mod cursor;
