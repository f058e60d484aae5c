//! Flushing: sealing buffered appends into segments and uploading them.
//!
//! The flusher task wakes on the flush interval, when the buffer reaches the
//! flush threshold, or on close; it packs the buffered groups (in append
//! order, never splitting a group) into segments of at most
//! `segment_max_bytes` (a group larger than that gets a segment of its own),
//! gives each the next ordinal, and starts its upload as soon as an upload
//! slot is free.
//!
//! A group's metadata becomes one manifest metadata item at the group's
//! first record, and an item covers the records from there to the next item
//! or the end of the segment. So a group appended without metadata that
//! follows a group with metadata starts a new segment: in the same segment
//! its records would read back with the earlier group's metadata and
//! ingestion time. (Groups without metadata before the first item are
//! covered by none and share the segment.) Uploads run concurrently and finish in any order; each
//! reports to the committer, which restores ordinal order.
//!
//! Segment names are `<prefix>/<run id>/<ordinal:016x>`: unique per writer
//! run (a ULID), ordered within it. An upload writes the same bytes to the
//! same name on every attempt, so retrying after an ambiguous failure is
//! safe.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use object_store::path::Path;
use object_store::{ObjectStore, PutOptions, PutPayload};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::MissedTickBehavior;
use tracing::{Instrument, debug, info_span, warn};
use ulid::Ulid;

use super::pipeline::{Group, Shared, Waiter};
use super::window::UploadStart;
use crate::error::{Error, Result};
use crate::format::{Compression, Metadata, SegmentBuilder, SegmentVersion};
use crate::objects::{RetryPolicy, StoreOp, retry_store, to_error};

/// Settings the flusher and its uploads use.
#[derive(Debug, Clone)]
pub(crate) struct FlushSettings {
    pub(crate) flush_interval: Duration,
    pub(crate) segment_max_bytes: usize,
    pub(crate) compression: Compression,
    pub(crate) segment_version: SegmentVersion,
    pub(crate) retry: RetryPolicy,
    pub(crate) seed: u64,
}

/// Names this run's segments.
#[derive(Debug, Clone)]
pub(crate) struct SegmentNamer {
    prefix: String,
    run: Ulid,
    next_ordinal: u64,
}

impl SegmentNamer {
    pub(crate) fn new(prefix: &str, run: Ulid) -> Self {
        SegmentNamer {
            prefix: prefix.trim_matches('/').to_string(),
            run,
            next_ordinal: 0,
        }
    }

    /// The object path of segment `ordinal` of this run.
    pub(crate) fn path(&self, ordinal: u64) -> Path {
        if self.prefix.is_empty() {
            Path::from(format!("{}/{ordinal:016x}", self.run))
        } else {
            Path::from(format!("{}/{}/{ordinal:016x}", self.prefix, self.run))
        }
    }

    fn next(&mut self) -> (u64, Path) {
        let ordinal = self.next_ordinal;
        self.next_ordinal += 1;
        (ordinal, self.path(ordinal))
    }
}

/// A sealed, not yet uploaded segment.
#[derive(Debug)]
pub(crate) struct PlannedSegment {
    pub(crate) ordinal: u64,
    pub(crate) path: Path,
    pub(crate) records: Vec<Bytes>,
    pub(crate) metadata: Vec<Metadata>,
    pub(crate) waiters: Vec<Waiter>,
    /// The earliest deadline of its appends.
    pub(crate) deadline: tokio::time::Instant,
}

/// A segment that is in the store, waiting for its manifest entry.
#[derive(Debug)]
pub(crate) struct Uploaded {
    pub(crate) ordinal: u64,
    pub(crate) location: String,
    pub(crate) record_count: usize,
    pub(crate) metadata: Vec<Metadata>,
    pub(crate) waiters: Vec<Waiter>,
    /// When its upload began (the commit window runs from there).
    pub(crate) started: UploadStart,
    /// The earliest deadline of its appends.
    pub(crate) deadline: tokio::time::Instant,
}

/// What an upload tells the committer.
#[derive(Debug)]
pub(crate) struct UploadReport {
    pub(crate) ordinal: u64,
    /// The segment, or the error that stopped its upload and the waiters
    /// that were in it.
    pub(crate) result: std::result::Result<Uploaded, (Error, Vec<Waiter>)>,
}

/// Packs groups, in order, into segments of at most `max_bytes` block
/// bytes; a group is never split.
pub(crate) fn plan(
    groups: Vec<Group>,
    max_bytes: usize,
    namer: &mut SegmentNamer,
) -> Vec<PlannedSegment> {
    let mut out = Vec::new();
    let mut current: Option<(PlannedSegment, usize)> = None;
    for g in groups {
        let fits = |(seg, bytes): &(PlannedSegment, usize)| {
            *bytes + g.bytes <= max_bytes
                && seg.records.len() + g.records.len() <= u32::MAX as usize
                // A metadata item covers every record up to the next item
                // (or the segment's end), and the format has no item that
                // means "no metadata": a group without metadata cannot
                // follow one with metadata in the same segment.
                && (g.meta.is_some() || seg.metadata.is_empty())
        };
        if current.as_ref().is_some_and(|c| !fits(c)) {
            out.extend(current.take().map(|(s, _)| s));
        }
        let (seg, bytes) = current.get_or_insert_with(|| {
            let (ordinal, path) = namer.next();
            (
                PlannedSegment {
                    ordinal,
                    path,
                    records: Vec::new(),
                    metadata: Vec::new(),
                    waiters: Vec::new(),
                    deadline: g.deadline,
                },
                0,
            )
        });
        seg.deadline = seg.deadline.min(g.deadline);
        // Fits in u32: checked by `fits` (or the segment was empty and the
        // append was validated to hold at most u32::MAX records).
        let start_index = seg.records.len() as u32;
        if let Some(payload) = g.meta {
            seg.metadata.push(Metadata {
                start_index,
                ingestion_ms: g.ingestion_ms,
                payload,
            });
        }
        seg.records.extend(g.records);
        seg.waiters.push(Waiter {
            start_index,
            reply: g.reply,
            permit: g.permit,
        });
        *bytes += g.bytes;
    }
    out.extend(current.map(|(s, _)| s));
    out
}

/// The flusher task. Runs until close is requested (or the producer handle
/// is dropped) or the producer halts; the report channel closes when it and
/// every upload it started are done.
pub(crate) async fn run_flusher(
    shared: Arc<Shared>,
    store: Arc<dyn ObjectStore>,
    settings: FlushSettings,
    mut namer: SegmentNamer,
    mut close: mpsc::UnboundedReceiver<()>,
    reports: mpsc::UnboundedSender<UploadReport>,
    upload_slots: Arc<Semaphore>,
) {
    let mut tick = tokio::time::interval(settings.flush_interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The first tick of an interval is immediate.
    tick.tick().await;
    loop {
        let closing = tokio::select! {
            _ = tick.tick() => false,
            _ = shared.flush_requested() => false,
            _ = close.recv() => true,
        };
        if shared.is_halted() {
            break;
        }
        let groups = shared.take_buffer();
        if !groups.is_empty() {
            flush(
                groups,
                &shared,
                &store,
                &settings,
                &mut namer,
                &reports,
                &upload_slots,
            )
            .await;
        }
        if closing {
            break;
        }
    }
    debug!("flusher stopped");
}

async fn flush(
    groups: Vec<Group>,
    shared: &Arc<Shared>,
    store: &Arc<dyn ObjectStore>,
    settings: &FlushSettings,
    namer: &mut SegmentNamer,
    reports: &mpsc::UnboundedSender<UploadReport>,
    upload_slots: &Arc<Semaphore>,
) {
    let bytes: usize = groups.iter().map(|g| g.bytes).sum();
    let span = info_span!("flush", groups = groups.len(), bytes);
    async {
        for seg in plan(groups, settings.segment_max_bytes, namer) {
            let Ok(slot) = upload_slots.clone().acquire_owned().await else {
                // The slots are never closed; fail the segment rather than
                // lose it should that change.
                fail_segment(seg, &shared.stopped_error());
                continue;
            };
            if shared.is_halted() {
                fail_segment(seg, &shared.stopped_error());
                continue;
            }
            let store = store.clone();
            let settings = settings.clone();
            let reports = reports.clone();
            let ordinal = seg.ordinal;
            let span = info_span!("upload", ordinal, path = %seg.path);
            tokio::spawn(
                async move {
                    let report = AssertUnwindSafe(upload(seg, &store, &settings))
                        .catch_unwind()
                        .await
                        .unwrap_or_else(|_| UploadReport {
                            ordinal,
                            result: Err((
                                Error::internal(format!("upload of segment {ordinal} panicked")),
                                Vec::new(),
                            )),
                        });
                    drop(slot);
                    // The committer is gone only after a halt; the waiters
                    // inside then learn the reason from the halt state.
                    let _ = reports.send(report);
                }
                .instrument(span),
            );
        }
    }
    .instrument(span)
    .await
}

fn fail_segment(seg: PlannedSegment, err: &Error) {
    let halt = super::pipeline::Halt::from_error(err);
    for w in seg.waiters {
        w.resolve(Err(halt.pending_error()));
    }
}

async fn encode(
    records: Vec<Bytes>,
    compression: Compression,
    version: SegmentVersion,
) -> Result<Bytes> {
    let build = move || {
        let block: usize = records.iter().map(|r| 4 + r.len()).sum();
        let mut b = SegmentBuilder::with_capacity(block);
        for r in &records {
            b.push(r)?;
        }
        b.finish(compression, version)
    };
    match compression {
        Compression::None => build(),
        // Compressing megabytes takes milliseconds: keep it off the runtime.
        Compression::Zstd => tokio::task::spawn_blocking(build)
            .await
            .map_err(|e| Error::internal("segment encoding task failed").with_source(e))?,
    }
}

async fn upload(
    seg: PlannedSegment,
    store: &Arc<dyn ObjectStore>,
    settings: &FlushSettings,
) -> UploadReport {
    let PlannedSegment {
        ordinal,
        path,
        records,
        metadata,
        waiters,
        deadline,
    } = seg;
    let started = UploadStart::now();
    let record_count = records.len();
    let bytes = match encode(records, settings.compression, settings.segment_version).await {
        Ok(b) => b,
        Err(e) => {
            return UploadReport {
                ordinal,
                result: Err((e, waiters)),
            };
        }
    };
    let payload = PutPayload::from(bytes);
    let mut backoff = settings
        .retry
        .backoff(settings.seed ^ ordinal)
        .until(deadline);
    let mut retries = 0u32;
    let result = retry_store(
        &mut backoff,
        StoreOp::Put,
        // Same bytes, same name: an upload that may have landed is simply
        // written again.
        true,
        |outcome, err| {
            metrics::counter!("weft_producer_retries_total", "op" => "upload").increment(1);
            // One warning per upload; an outage's further retries at debug.
            retries += 1;
            if retries == 1 {
                warn!(ordinal, ?outcome, error = %err, "segment upload failed; retrying");
            } else {
                debug!(ordinal, retries, ?outcome, error = %err, "segment upload retry");
            }
        },
        || store.put_opts(&path, payload.clone(), PutOptions::default()),
    )
    .await;
    if retries > 0 && result.is_ok() {
        warn!(ordinal, retries, "segment upload succeeded after retrying");
    }
    match result {
        Ok(_) => {
            metrics::counter!("weft_producer_segments_uploaded_total").increment(1);
            UploadReport {
                ordinal,
                result: Ok(Uploaded {
                    ordinal,
                    location: path.to_string(),
                    record_count,
                    metadata,
                    waiters,
                    started,
                    deadline,
                }),
            }
        }
        Err(gave_up) => {
            let err = to_error(StoreOp::Put, path.as_ref(), gave_up.error).context(format!(
                "upload of segment {ordinal} gave up after {} attempts",
                gave_up.attempts
            ));
            UploadReport {
                ordinal,
                result: Err((err, waiters)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot;

    use super::*;

    fn group(sizes: &[usize], meta: bool, budget: &Arc<Semaphore>) -> Group {
        let records: Vec<Bytes> = sizes.iter().map(|n| Bytes::from(vec![7u8; *n])).collect();
        let bytes = records.iter().map(|r| 4 + r.len()).sum();
        let (reply, _rx) = oneshot::channel();
        Group {
            records,
            meta: meta.then(|| Bytes::from_static(b"m")),
            bytes,
            ingestion_ms: 5,
            deadline: crate::clock::monotonic_now(),
            reply,
            permit: budget.clone().try_acquire_owned().unwrap(),
        }
    }

    #[test]
    fn packs_groups_in_order_without_splitting() {
        let budget = Arc::new(Semaphore::new(100));
        let mut namer = SegmentNamer::new("wal/seg/", Ulid::from_parts(1, 2));
        // 6, 14, 24 (> max on its own), 10 block bytes.
        let groups = vec![
            group(&[2], false, &budget),
            group(&[3, 3], true, &budget),
            group(&[20], true, &budget),
            group(&[6], true, &budget),
        ];
        let segs = plan(groups, 20, &mut namer);
        let shape: Vec<(u64, usize, Vec<u32>)> = segs
            .iter()
            .map(|s| {
                (
                    s.ordinal,
                    s.records.len(),
                    s.waiters.iter().map(|w| w.start_index).collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![(0, 3, vec![0, 1]), (1, 1, vec![0]), (2, 1, vec![0])]
        );
        assert_eq!(segs[0].metadata.len(), 1, "only groups with meta");
        assert_eq!(segs[0].metadata[0].start_index, 1);
        assert_eq!(segs[0].metadata[0].ingestion_ms, 5);
        let run = Ulid::from_parts(1, 2);
        assert_eq!(
            segs[1].path.as_ref(),
            format!("wal/seg/{run}/0000000000000001")
        );
        // Ordinals continue across flushes.
        let more = plan(vec![group(&[1], false, &budget)], 20, &mut namer);
        assert_eq!(more[0].ordinal, 3);
    }

    #[test]
    fn a_group_without_metadata_never_follows_one_with_metadata_in_a_segment() {
        let budget = Arc::new(Semaphore::new(100));
        let mut namer = SegmentNamer::new("wal/seg", Ulid::from_parts(1, 2));
        let pattern = [false, true, false, false, true, true, false];
        let groups = pattern
            .iter()
            .map(|meta| group(&[1], *meta, &budget))
            .collect();
        let segs = plan(groups, 1 << 20, &mut namer);
        let shape: Vec<(usize, Vec<u32>)> = segs
            .iter()
            .map(|s| {
                (
                    s.records.len(),
                    s.metadata.iter().map(|m| m.start_index).collect(),
                )
            })
            .collect();
        // Runs without metadata lead a segment; a run with metadata ends it.
        assert_eq!(
            shape,
            vec![(2, vec![1]), (4, vec![2, 3]), (1, vec![])],
            "segments for {pattern:?}"
        );
    }
}
