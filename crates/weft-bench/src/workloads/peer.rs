//! The writers under test behind one [`Sink`] interface: weft's
//! `wal::Producer` and opendata-buffer 0.3's `Producer`, configured alike.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use object_store::ObjectStore;
use weft::wal::{Durability, Producer};

use crate::load::Sink;

/// Settings both producers get.
#[derive(Clone, Copy, Debug)]
pub struct WriteSettings {
    pub flush_interval: Duration,
    pub flush_bytes: usize,
}

/// weft's producer. Segments are capped at the flush size, so both systems
/// write objects of about the same size.
pub struct WeftSink(pub Producer);

impl WeftSink {
    pub async fn open(store: Arc<dyn ObjectStore>, s: WriteSettings) -> Result<WeftSink> {
        let mut b = Producer::builder(store, "wal/manifest", "wal/seg");
        // WEFT_BENCH_UPLOADS: the producer's upload concurrency, for
        // experiments (default: the producer's own, 8).
        if let Some(n) = std::env::var("WEFT_BENCH_UPLOADS")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            b = b.with_upload_concurrency(n);
        }
        // WEFT_BENCH_INFLIGHT_MIB: the producer's in-flight byte budget, for
        // experiments (default: the producer's own).
        if let Some(mib) = std::env::var("WEFT_BENCH_INFLIGHT_MIB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            b = b.with_max_inflight_bytes(mib << 20);
        }
        let p = b
            .with_flush_interval(s.flush_interval)
            .with_flush_bytes(s.flush_bytes)
            .with_segment_max_bytes(s.flush_bytes)
            .open()
            .await?;
        Ok(WeftSink(p))
    }

    pub async fn close(&self) -> Result<()> {
        self.0.close().await?;
        Ok(())
    }
}

impl Sink for WeftSink {
    type Pending = Durability;

    async fn submit(&self, records: Vec<Bytes>) -> Result<Durability> {
        Ok(self.0.append(records, None).await?)
    }

    async fn wait(pending: Durability) -> Result<()> {
        pending.wait().await?;
        Ok(())
    }
}

/// opendata-buffer's producer on the same store (its defaults otherwise:
/// no compression, 1000 buffered inputs).
pub struct PeerSink(pub buffer::Producer);

pub const PEER_MANIFEST: &str = "ingest/manifest";
pub const PEER_DATA: &str = "ingest";

impl PeerSink {
    pub fn open(store: Arc<dyn ObjectStore>, s: WriteSettings) -> Result<PeerSink> {
        let config = buffer::ProducerConfig {
            // Ignored: the store is passed in below.
            object_store: common::ObjectStoreConfig::InMemory,
            data_path_prefix: PEER_DATA.into(),
            manifest_path: PEER_MANIFEST.into(),
            flush_interval: s.flush_interval,
            flush_size_bytes: s.flush_bytes,
            max_buffered_inputs: 1000,
            batch_compression: buffer::CompressionType::None,
        };
        let p = buffer::Producer::with_object_store(
            config,
            store,
            Arc::new(common::clock::SystemClock),
        )?;
        Ok(PeerSink(p))
    }

    pub async fn close(self) -> Result<()> {
        self.0.close().await?;
        Ok(())
    }
}

impl Sink for PeerSink {
    type Pending = buffer::WriteHandle;

    async fn submit(&self, records: Vec<Bytes>) -> Result<buffer::WriteHandle> {
        Ok(self.0.produce(records, Bytes::new()).await?)
    }

    async fn wait(mut pending: buffer::WriteHandle) -> Result<()> {
        pending.watcher.await_durable().await?;
        Ok(())
    }
}
