//! The writer lease: a running writer is visible, so tools do not fence it
//! by accident.
//!
//! Opening a writer claims the log by bumping the manifest's epoch, which
//! fences whoever wrote it before — by design for a failover, by accident
//! when a tool (`weft append`) opens a writer beside a running service. So
//! a writer keeps a lease object beside the manifest
//! ([`crate::format::writer_lease`], at `<manifest path>.lease`): its run
//! id, epoch, who it is, and a renewal counter it rewrites every
//! `renew_every` while it runs; on close it marks the lease released.
//!
//! # Opening
//!
//! Unless told to take over, an opening writer first looks at the lease:
//!
//! * none, or released: the log is free;
//! * otherwise it watches the lease for up to three renewal periods (as
//!   the lease states them, at most [`MAX_WATCH`]). A live writer rewrites
//!   it in that time: the open fails with `Locked`, naming the holder. A
//!   lease nobody rewrites belongs to a writer that died (or hung): the
//!   log is taken.
//!
//! **Clock skew.** No clock is compared with another machine's: the
//! opener measures the renewal period it waits on its own monotonic clock,
//! and "alive" means "the object changed while I watched", which holds
//! whatever the writer's clock says. (The lease's `written_ms` is there for
//! people only.) The price: a writer that died without releasing makes the
//! next open wait up to three renewal periods; a clean close makes it
//! instant.
//!
//! # Keeping it
//!
//! After its claim the writer writes its lease by compare-and-set — never
//! over a lease of a higher epoch (a newer writer's) — and renews it the
//! same way. A renewal that finds another writer's lease stops renewing:
//! that writer took over, and this one's next commit will be fenced. A
//! writer that halts for another reason (the store kept failing) releases
//! its lease, so the next writer opens at once.
//!
//! Taking over ([`ProducerBuilder::with_take_over`](super::ProducerBuilder::with_take_over))
//! skips the look and claims at once: the failover path.
//!
//! Retention GC reads the lease too: when it names the run that holds the
//! manifest's epoch, only that run can still commit segments (see
//! [`super::gc`]).

use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};
use ulid::Ulid;

use super::pipeline::Shared;
use crate::clock::{Clock, monotonic_now};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{WriterLease, decode_lease, encode_lease};
use crate::objects::{Backoff, Outcome, RetryPolicy, StoreOp, classify, to_error};

/// How often a writer renews its lease unless configured otherwise.
pub const DEFAULT_RENEW_EVERY: Duration = Duration::from_secs(5);

/// The longest an opening writer watches a lease for a renewal.
pub const MAX_WATCH: Duration = Duration::from_secs(60);

/// The lease object of the log whose manifest is at `manifest`.
pub fn lease_path(manifest: &Path) -> Path {
    Path::from(format!("{manifest}.lease"))
}

/// A lease as read, with its version.
#[derive(Debug, Clone)]
pub struct LeaseState {
    /// The lease.
    pub lease: WriterLease,
    /// Its object version (for compare-and-set).
    pub version: UpdateVersion,
}

/// Reads the lease at `path`; `None` when there is none.
///
/// Errors: `Corrupt` for an object that is not a lease; store kinds
/// (after `backoff`'s retries and deadline).
pub async fn read_lease(
    store: &dyn ObjectStore,
    path: &Path,
    backoff: &mut Backoff,
) -> Result<Option<LeaseState>> {
    match read_raw(store, path, backoff).await? {
        None => Ok(None),
        Some((lease, version)) => Ok(Some(LeaseState {
            lease: lease.map_err(|e| e.context(format!("writer lease {path}")))?,
            version,
        })),
    }
}

/// The lease object, decoded or not, and its version.
async fn read_raw(
    store: &dyn ObjectStore,
    path: &Path,
    backoff: &mut Backoff,
) -> Result<Option<(Result<WriterLease>, UpdateVersion)>> {
    loop {
        let got = backoff.attempt(store.get(path)).await;
        let err = match got {
            Ok(got) => {
                let version = UpdateVersion {
                    e_tag: got.meta.e_tag.clone(),
                    version: got.meta.version.clone(),
                };
                match backoff.attempt(got.bytes()).await {
                    Ok(bytes) => return Ok(Some((decode_lease(&bytes), version))),
                    Err(e) => e,
                }
            }
            Err(e) => e,
        };
        match classify(StoreOp::Read, &err) {
            Outcome::NotFound => return Ok(None),
            Outcome::Transient if backoff.wait().await => {}
            _ => return Err(to_error(StoreOp::Read, path.as_ref(), err)),
        }
    }
}

/// Waits until the log at `manifest` has no live writer: returns at once
/// when there is no lease or it was released; otherwise watches it (see
/// the [module docs](self)).
///
/// Errors: `Locked` naming the live writer; `Corrupt` for an unreadable
/// lease (take over to replace it); store kinds.
pub async fn wait_until_free(
    store: &dyn ObjectStore,
    manifest: &Path,
    retry: &RetryPolicy,
) -> Result<()> {
    watch_until_free(store, &lease_path(manifest), retry)
        .await
        .map(|_| ())
}

/// The epoch a lease names while its writer is between taking the lease
/// and claiming the log (no claim ever yields 0: the first is 1).
pub const RESERVING_EPOCH: u64 = 0;

/// Takes the lease of the log at `manifest` for `identity`'s run before it
/// claims the log: waits until the log is free (as [`wait_until_free`]),
/// then writes a lease at [`RESERVING_EPOCH`] by compare-and-set over
/// exactly the lease it judged free. Of openers racing for a free log one
/// wins that write; the others see their condition fail and get `Locked`,
/// so looking at the lease and taking it are one step and no plain open
/// fences a writer that opened at the same moment.
///
/// Errors: `Locked` (a live writer, or another opener took the lease
/// first); `Corrupt` for an unreadable lease; store kinds.
pub(crate) async fn reserve(
    store: &dyn ObjectStore,
    manifest: &Path,
    identity: &LeaseIdentity,
    clock: &dyn Clock,
    retry: &RetryPolicy,
) -> Result<()> {
    let path = lease_path(manifest);
    let seen = watch_until_free(store, &path, retry).await?;
    let lease = WriterLease::new(
        identity.run,
        RESERVING_EPOCH,
        &identity.holder,
        identity.renew_every.as_millis() as u64,
        clock.now_ms(),
    );
    let bytes = encode_lease(&lease)?;
    let (mode, op) = match seen.clone() {
        Some(v) => (PutMode::Update(v), StoreOp::UpdateIfMatch),
        None => (PutMode::Create, StoreOp::CreateIfAbsent),
    };
    let mut backoff = retry.backoff(0x006c_6561_7367);
    loop {
        let put = backoff
            .attempt(store.put_opts(
                &path,
                PutPayload::from(bytes.clone()),
                PutOptions::from(mode.clone()),
            ))
            .await;
        let err = match put {
            Ok(_) => {
                debug!(run = %identity.run, %path, "writer lease reserved");
                return Ok(());
            }
            Err(e) => e,
        };
        if !matches!(
            classify(op, &err),
            Outcome::Conflict | Outcome::Ambiguous | Outcome::Transient
        ) {
            return Err(to_error(op, path.as_ref(), err).context("taking the writer lease"));
        }
        // Whether the write landed, lost to another opener, or did not
        // happen: the lease tells. Ours (an earlier copy of this write
        // landed): taken. Another one than the lease judged free: that
        // opener won. Unchanged: the same conditional write again, which
        // cannot land twice.
        let mut reread = retry.backoff(0x006c_6561_7368);
        let now = read_lease(store, &path, &mut reread).await?;
        match (&now, &seen) {
            (Some(now), _) if now.lease.run == identity.run => return Ok(()),
            (Some(now), Some(seen)) if now.version == *seen => {}
            (None, None) => {}
            (Some(now), _) => return Err(locked(&path, &now.lease, Duration::ZERO)),
            (None, Some(_)) => {
                return Err(to_error(op, path.as_ref(), err)
                    .context("taking the writer lease (the lease was deleted meanwhile)"));
            }
        }
        if !backoff.wait().await {
            return Err(to_error(op, path.as_ref(), err).context("taking the writer lease"));
        }
    }
}

/// Marks a lease taken by [`reserve`] released, for an open that failed
/// before its claim finished, so the next writer need not wait for it.
pub(crate) async fn unreserve(
    store: &dyn ObjectStore,
    manifest: &Path,
    identity: &LeaseIdentity,
    clock: &dyn Clock,
    retry: &RetryPolicy,
) {
    let identity = LeaseIdentity {
        epoch: RESERVING_EPOCH,
        ..identity.clone()
    };
    release(store, &lease_path(manifest), &identity, clock, retry).await;
}

/// Watches the lease at `path` until its writer is gone: returns the
/// version of the lease judged free (`None`: there is none).
async fn watch_until_free(
    store: &dyn ObjectStore,
    path: &Path,
    retry: &RetryPolicy,
) -> Result<Option<UpdateVersion>> {
    let path = path.clone();
    let mut backoff = retry.backoff(0x006c_6561_7365);
    let Some(first) = read_lease(store, &path, &mut backoff).await? else {
        return Ok(None);
    };
    if first.lease.released {
        return Ok(Some(first.version));
    }
    let period = Duration::from_millis(first.lease.renew_every_ms.max(1));
    let watch = (period * 3).min(MAX_WATCH);
    let poll = (period / 2).clamp(Duration::from_millis(10), Duration::from_secs(2));
    let started = monotonic_now();
    info!(
        run = %first.lease.run,
        epoch = first.lease.epoch,
        holder = %first.lease.holder,
        "the log has a writer lease; watching it for {:.1} s",
        watch.as_secs_f64()
    );
    while started.elapsed() < watch {
        crate::clock::sleep(poll.min(watch.saturating_sub(started.elapsed()))).await;
        let mut backoff = retry.backoff(0x006c_6561_7366);
        let now = match read_lease(store, &path, &mut backoff).await? {
            None => return Ok(None),
            Some(now) => now,
        };
        if now.version == first.version {
            continue;
        }
        if now.lease.released {
            return Ok(Some(now.version));
        }
        return Err(locked(&path, &now.lease, started.elapsed()));
    }
    info!(
        run = %first.lease.run,
        "the writer lease was not renewed for {:.1} s: its writer is gone",
        watch.as_secs_f64()
    );
    Ok(Some(first.version))
}

fn locked(path: &Path, lease: &WriterLease, seen_within: Duration) -> Error {
    Error::new(
        ErrorKind::Locked,
        format!(
            "the log has a live writer: {} (run {}, epoch {}), which renewed its lease {path} \
             within the last {:.1} s; opening a writer would fence it — take over on purpose \
             (--take-over, ProducerBuilder::with_take_over, BucketOptions::take_over) to do so",
            lease.holder,
            lease.run,
            lease.epoch,
            seen_within.as_secs_f64()
        ),
    )
}

/// What a writer puts in its lease.
#[derive(Debug, Clone)]
pub(crate) struct LeaseIdentity {
    pub(crate) run: Ulid,
    pub(crate) epoch: u64,
    pub(crate) holder: String,
    pub(crate) renew_every: Duration,
}

/// A writer's lease while it runs: the renewal task, and what releasing
/// needs.
#[derive(Debug)]
pub(crate) struct LeaseKeeper {
    task: JoinHandle<()>,
    store: Arc<dyn ObjectStore>,
    path: Path,
    identity: LeaseIdentity,
    clock: Arc<dyn Clock>,
    retry: RetryPolicy,
}

impl LeaseKeeper {
    /// Writes the lease of a writer that just claimed the log, and starts
    /// renewing it until the producer halts or the keeper is released or
    /// dropped.
    ///
    /// Errors: `Fenced` when a newer writer's lease is already there (the
    /// claim was overtaken); store kinds.
    pub(crate) async fn start(
        store: Arc<dyn ObjectStore>,
        manifest: &Path,
        identity: LeaseIdentity,
        clock: Arc<dyn Clock>,
        retry: RetryPolicy,
        shared: Arc<Shared>,
    ) -> Result<Self> {
        let path = lease_path(manifest);
        let lease = WriterLease::new(
            identity.run,
            identity.epoch,
            &identity.holder,
            identity.renew_every.as_millis() as u64,
            clock.now_ms(),
        );
        let version = put_lease(store.as_ref(), &path, &lease, None, &retry).await?;
        info!(run = %identity.run, epoch = identity.epoch, %path, "writer lease taken");
        let task = tokio::spawn(renew(
            store.clone(),
            path.clone(),
            lease,
            version,
            clock.clone(),
            retry.clone(),
            shared,
        ));
        Ok(LeaseKeeper {
            task,
            store,
            path,
            identity,
            clock,
            retry,
        })
    }

    /// Stops renewing and marks the lease released (if it is still this
    /// writer's), so the next writer opens at once. Best effort: a lease
    /// left behind only makes the next open wait.
    pub(crate) async fn release(&self) {
        self.task.abort();
        release(
            self.store.as_ref(),
            &self.path,
            &self.identity,
            self.clock.as_ref(),
            &self.retry,
        )
        .await;
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Writes `lease` by compare-and-set: over `expected` when known, else
/// over whatever is there — unless that is a newer writer's. Returns the
/// version written.
async fn put_lease(
    store: &dyn ObjectStore,
    path: &Path,
    lease: &WriterLease,
    expected: Option<UpdateVersion>,
    retry: &RetryPolicy,
) -> Result<UpdateVersion> {
    let mut backoff = retry.backoff(lease.renewals ^ lease.epoch);
    let mut expected = expected;
    let bytes = encode_lease(lease)?;
    loop {
        let current_version = match expected.take() {
            Some(v) => Some(v),
            None => match read_raw(store, path, &mut backoff).await? {
                // Not a lease (damaged, or written by something else): the
                // writer that holds the epoch replaces it.
                Some((Err(e), version)) => {
                    warn!(error = %e, %path, "replacing an object that is not a writer lease");
                    Some(version)
                }
                Some((Ok(theirs), version)) => {
                    let current = LeaseState {
                        lease: theirs,
                        version,
                    };
                    let theirs = &current.lease;
                    if theirs.epoch > lease.epoch
                        || (theirs.epoch == lease.epoch && theirs.run != lease.run)
                    {
                        return Err(Error::fenced(lease.epoch, theirs.epoch).context(format!(
                            "writer lease {path} belongs to {} (run {})",
                            theirs.holder, theirs.run
                        )));
                    }
                    if theirs == lease {
                        // An earlier attempt of ours landed.
                        return Ok(current.version);
                    }
                    Some(current.version)
                }
                None => None,
            },
        };
        let mode = match current_version {
            Some(v) => PutMode::Update(v),
            None => PutMode::Create,
        };
        let op = match mode {
            PutMode::Create => StoreOp::CreateIfAbsent,
            _ => StoreOp::UpdateIfMatch,
        };
        let put = backoff
            .attempt(store.put_opts(
                path,
                PutPayload::from(bytes.clone()),
                PutOptions::from(mode),
            ))
            .await;
        match put {
            Ok(r) => return Ok(UpdateVersion::from(r)),
            Err(e) => match classify(op, &e) {
                // Re-read: someone else wrote it, or our own attempt did.
                Outcome::Conflict | Outcome::Ambiguous | Outcome::Transient
                    if backoff.wait().await => {}
                _ => return Err(to_error(op, path.as_ref(), e).context("writing the writer lease")),
            },
        }
    }
}

/// The renewal task.
async fn renew(
    store: Arc<dyn ObjectStore>,
    path: Path,
    mut lease: WriterLease,
    mut version: UpdateVersion,
    clock: Arc<dyn Clock>,
    retry: RetryPolicy,
    shared: Arc<Shared>,
) {
    let every = Duration::from_millis(lease.renew_every_ms.max(1));
    loop {
        crate::clock::sleep(every).await;
        if let Some(halt) = shared.halt_reason() {
            let identity = LeaseIdentity {
                run: lease.run,
                epoch: lease.epoch,
                holder: lease.holder.clone(),
                renew_every: every,
            };
            // A fenced writer's lease is a newer writer's business.
            if halt.kind() != ErrorKind::Fenced {
                release(store.as_ref(), &path, &identity, clock.as_ref(), &retry).await;
            }
            return;
        }
        let mut next = lease.clone();
        next.renewals = next.renewals.saturating_add(1);
        next.written_ms = clock.now_ms();
        match put_lease(store.as_ref(), &path, &next, Some(version.clone()), &retry).await {
            Ok(v) => {
                lease = next;
                version = v;
            }
            Err(e) if e.kind() == ErrorKind::Fenced => {
                info!(run = %lease.run, "another writer took the lease over; renewing stops");
                return;
            }
            Err(e) => {
                // The next tick tries again (from a fresh read).
                debug!(error = %e, "renewing the writer lease failed");
                match read_lease(store.as_ref(), &path, &mut retry.backoff(0)).await {
                    Ok(Some(current)) if current.lease.is(lease.run, lease.epoch) => {
                        lease = current.lease;
                        version = current.version;
                    }
                    Ok(Some(_)) | Ok(None) => {
                        info!(run = %lease.run, "the writer lease is no longer ours; renewing stops");
                        return;
                    }
                    Err(_) => {}
                }
            }
        }
    }
}

/// Marks the lease released if it is still `identity`'s.
async fn release(
    store: &dyn ObjectStore,
    path: &Path,
    identity: &LeaseIdentity,
    clock: &dyn Clock,
    retry: &RetryPolicy,
) {
    let mut backoff = retry.backoff(identity.epoch);
    let current = match read_lease(store, path, &mut backoff).await {
        Ok(Some(c)) if c.lease.is(identity.run, identity.epoch) => c,
        Ok(_) => return,
        Err(e) => {
            warn!(error = %e, %path, "could not release the writer lease");
            return;
        }
    };
    if current.lease.released {
        return;
    }
    let mut released = current.lease.clone();
    released.released = true;
    released.renewals = released.renewals.saturating_add(1);
    released.written_ms = clock.now_ms();
    match put_lease(store, path, &released, Some(current.version), retry).await {
        Ok(_) => info!(run = %identity.run, "writer lease released"),
        Err(e) => warn!(error = %e, %path, "could not release the writer lease"),
    }
}
