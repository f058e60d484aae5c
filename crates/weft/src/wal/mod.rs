//! The write-ahead log on object storage: manifest, producer, replica.

pub mod manifest;

pub use manifest::Manifest;
