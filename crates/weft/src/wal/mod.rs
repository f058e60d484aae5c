//! The write-ahead log on object storage: manifest, producer, replica.
