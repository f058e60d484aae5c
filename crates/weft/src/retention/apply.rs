//! Applying a retention policy: one bounded [`Retention::step`] at a time,
//! and the background task a writer runs it in.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::Notify;

use super::RetentionPolicy;
use super::consumer::protected_position;
use crate::clock::{self, Clock};
use crate::error::{ErrorKind, Result};
use crate::log::Log;
use crate::storage::{Storage, Tip};

/// The most entries one step trims, and the most entries it reads to count
/// bytes.
pub const STEP_ENTRIES: u64 = 1 << 16;

/// The least time between two steps of the background task.
pub const STEP_INTERVAL: Duration = Duration::from_secs(5);

/// What one [`Retention::step`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetentionStep {
    /// The policy it applied (`None`: the log has none).
    pub policy: Option<RetentionPolicy>,
    /// The last seqnum the policy's limits want dropped (before
    /// protection and the step's bound), `None` when they want nothing.
    pub wanted_through: Option<u64>,
    /// The last seqnum this step trimmed through, `None` when it trimmed
    /// nothing.
    pub trimmed_through: Option<u64>,
    /// The protected consumer that held the step back (its name and
    /// position), if one did.
    pub held_by: Option<(String, u64)>,
    /// True when the policy wants more than this step did (the step's
    /// bound, or bytes not counted yet): the next step goes on.
    pub more: bool,
    /// Under `max_age_ms`: how long, from now, until the oldest entry kept
    /// expires (by its timestamp), when one is kept.
    pub next_expiry_ms: Option<u64>,
}

/// The running count of payload bytes of the entries `head..tail`.
#[derive(Clone, Copy, Debug)]
struct ByteCount {
    head: u64,
    tail: u64,
    bytes: u64,
}

/// Applies a log's stored [`RetentionPolicy`], a bounded step at a time.
///
/// Each step reads the policy, the tip and what the limits need — a count
/// needs nothing more; an age, a binary search over seqnums by entry
/// timestamps (about log2 of the live length single-entry reads); a size,
/// the payloads of at most [`STEP_ENTRIES`] new entries and as many old
/// ones (a running count this applier keeps: each entry is read about
/// twice over its life, however long the log) — then the protected
/// consumers' positions, and trims through the highest seqnum the limits
/// want dropped, at most [`STEP_ENTRIES`] entries at a time and never at
/// or past a protected consumer's position.
///
/// Writers run one in the background ([`RetentionSlot`]); tests and tools
/// may step one themselves, with any clock.
#[derive(Debug)]
pub struct Retention {
    clock: Arc<dyn Clock>,
    step_entries: u64,
    count: Option<ByteCount>,
}

impl Retention {
    /// An applier whose "now" (for `max_age_ms`) is `clock`'s.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Retention {
            clock,
            step_entries: STEP_ENTRIES,
            count: None,
        }
    }

    /// Bounds each step to `entries` (at least 1) trimmed, and as many read.
    pub fn with_step_entries(mut self, entries: u64) -> Self {
        self.step_entries = entries.max(1);
        self
    }

    /// One bounded step on `log`.
    ///
    /// A trim racing the step (another process, `weft trim`) is not an
    /// error: the step stops and the next one starts from the new start.
    ///
    /// Errors: `Corrupt` for a stored policy or position that does not
    /// decode; the backend's read, KV and trim kinds (`ReadOnly` on a
    /// follower, `Closed`).
    pub async fn step(&mut self, log: &Log) -> Result<RetentionStep> {
        match self.step_inner(log).await {
            Err(e) if e.kind() == ErrorKind::Trimmed => {
                self.count = None;
                Ok(RetentionStep {
                    more: true,
                    ..RetentionStep::default()
                })
            }
            other => other,
        }
    }

    async fn step_inner(&mut self, log: &Log) -> Result<RetentionStep> {
        let Some(policy) = log.retention_policy().await? else {
            self.count = None;
            return Ok(RetentionStep::default());
        };
        let mut step = RetentionStep {
            policy: Some(policy.clone()),
            ..RetentionStep::default()
        };
        if policy.max_bytes.is_none() {
            self.count = None;
        }
        let tip = log.tip().await?;
        if tip.is_empty() {
            self.count = None;
            return Ok(step);
        }
        let storage = log.storage().as_ref();
        let mut wanted: Option<u64> = None;
        let mut want = |through: u64| wanted = Some(wanted.map_or(through, |w| w.max(through)));
        if let Some(max) = policy.max_count {
            let live = tip.next - tip.first;
            if live > max {
                want(tip.next - max - 1);
            }
        }
        let mut age_keeps_from = None;
        if let Some(max_age) = policy.max_age_ms {
            let cutoff = self.clock.now_ms().saturating_sub(max_age);
            let keep = first_at_or_after(storage, tip, cutoff).await?;
            if keep > tip.first {
                want(keep - 1);
            }
            age_keeps_from = Some(keep);
        }
        if let Some(max_bytes) = policy.max_bytes {
            let (through, complete) = self.count_bytes(storage, tip, max_bytes).await?;
            if let Some(t) = through {
                want(t);
            }
            step.more |= !complete;
        }
        step.wanted_through = wanted;
        let Some(mut through) = wanted else {
            step.next_expiry_ms = self.expiry(storage, &policy, age_keeps_from).await?;
            return Ok(step);
        };
        let bound = tip.first + self.step_entries - 1;
        if through > bound {
            through = bound;
            step.more = true;
        }
        for name in &policy.protect_consumers {
            let position = protected_position(log, name).await?;
            if position <= through {
                step.held_by = Some((name.clone(), position));
                if position <= tip.first {
                    step.more = false;
                    return Ok(step);
                }
                through = position - 1;
                step.more = false;
            }
        }
        if let Some(count) = &mut self.count {
            // The running count must drop what is trimmed: walk its head
            // to the new start (bounded; trim no further than it got).
            let reached = advance_head(storage, count, through + 1, self.step_entries).await?;
            if reached <= tip.first {
                step.more = true;
                return Ok(step);
            }
            if reached - 1 < through {
                through = reached - 1;
                step.more = true;
            }
        }
        storage.trim(through).await?;
        step.trimmed_through = Some(through);
        let first = through + 1;
        let age_from = age_keeps_from.map(|k| k.max(first));
        step.next_expiry_ms = self.expiry(storage, &policy, age_from).await?;
        Ok(step)
    }

    /// Under `max_age_ms`, how long until the entry at `from` expires.
    async fn expiry(
        &self,
        storage: &dyn Storage,
        policy: &RetentionPolicy,
        from: Option<u64>,
    ) -> Result<Option<u64>> {
        let (Some(max_age), Some(from)) = (policy.max_age_ms, from) else {
            return Ok(None);
        };
        let Some(ts) = timestamp_at(storage, from).await? else {
            return Ok(None);
        };
        Ok(Some(
            ts.saturating_add(max_age)
                .saturating_sub(self.clock.now_ms()),
        ))
    }

    /// Counts payload bytes up to the tip (a bounded page walk) and walks
    /// the head while the count exceeds `max_bytes`. Returns the last
    /// seqnum the size limit wants dropped, and whether the count reached
    /// the tip.
    async fn count_bytes(
        &mut self,
        storage: &dyn Storage,
        tip: Tip,
        max_bytes: u64,
    ) -> Result<(Option<u64>, bool)> {
        let count = match self.count {
            Some(c) if c.head >= tip.first && c.tail <= tip.next => self.count.insert(c),
            _ => self.count.insert(ByteCount {
                head: tip.first,
                tail: tip.first,
                bytes: 0,
            }),
        };
        let mut budget = self.step_entries;
        while count.tail < tip.next && budget > 0 {
            let page = storage
                .read(None, count.tail, budget.min(1024) as usize)
                .await?;
            let Some(last) = page.last() else { break };
            for e in &page {
                count.bytes += e.data.len() as u64;
            }
            count.tail = last.seqnum + 1;
            budget = budget.saturating_sub(page.len() as u64);
        }
        let complete = count.tail >= tip.next;
        if count.bytes <= max_bytes {
            return Ok((None, complete));
        }
        // Find how far the head must move, without moving it: the trim
        // (after protection) moves it.
        let mut probe = *count;
        let mut budget = self.step_entries;
        while probe.bytes > max_bytes && probe.head < probe.tail && budget > 0 {
            let page = storage
                .read(None, probe.head, budget.min(1024) as usize)
                .await?;
            if page.is_empty() {
                break;
            }
            for e in &page {
                if probe.bytes <= max_bytes || e.seqnum >= probe.tail {
                    break;
                }
                probe.bytes -= e.data.len() as u64;
                probe.head = e.seqnum + 1;
                budget -= 1;
            }
        }
        let through = (probe.head > tip.first).then(|| probe.head - 1);
        Ok((through, complete && probe.bytes <= max_bytes))
    }
}

/// Moves `count`'s head to `to` (or as far as `budget` entries take it),
/// subtracting payloads; returns where the head is.
async fn advance_head(
    storage: &dyn Storage,
    count: &mut ByteCount,
    to: u64,
    budget: u64,
) -> Result<u64> {
    if to >= count.tail {
        // Everything counted is dropped: start counting again at `to`.
        *count = ByteCount {
            head: to,
            tail: to,
            bytes: 0,
        };
        return Ok(to);
    }
    let mut budget = budget;
    while count.head < to && budget > 0 {
        let want = (to - count.head).min(budget).min(1024) as usize;
        let page = storage.read(None, count.head, want).await?;
        if page.is_empty() {
            break;
        }
        for e in &page {
            if e.seqnum >= to {
                break;
            }
            count.bytes = count.bytes.saturating_sub(e.data.len() as u64);
            count.head = e.seqnum + 1;
            budget = budget.saturating_sub(1);
        }
    }
    Ok(count.head)
}

/// The timestamp of the entry at `seqnum`, `None` past the end.
async fn timestamp_at(storage: &dyn Storage, seqnum: u64) -> Result<Option<u64>> {
    Ok(storage
        .read(None, seqnum, 1)
        .await?
        .first()
        .map(|e| e.timestamp_ms))
}

/// The first live seqnum whose entry's timestamp is `>= cutoff` (`tip.next`
/// when every live entry is older): a binary search over seqnums, so
/// about log2 of the live length single-entry reads. Entry times are the
/// writer's clock and do not go back within a log, which makes them sorted
/// by seqnum; if a clock did go back, the cut is a point where the time
/// crosses `cutoff`, not necessarily the last.
///
/// This is the seam a time index answers from once a log has one.
pub(crate) async fn first_at_or_after(storage: &dyn Storage, tip: Tip, cutoff: u64) -> Result<u64> {
    let (mut lo, mut hi) = (tip.first, tip.next);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match timestamp_at(storage, mid).await? {
            Some(ts) if ts < cutoff => lo = mid + 1,
            _ => hi = mid,
        }
    }
    Ok(lo)
}

/// What a writer backend holds so that a [`Log`] over it runs retention in
/// the background: the clock "now" is read from (the one its entries'
/// timestamps come from) and whether the task runs already.
///
/// The task starts when the first [`Log`] over the backend is made inside
/// a tokio runtime. It steps one interval after it starts (not at once:
/// opening does no retention work), then after commits (at most once
/// per [`STEP_INTERVAL`]), when a policy is set through a handle of this
/// process, and when the oldest entry kept under `max_age_ms` expires. It
/// holds the backend weakly and ends when the last log over it is dropped:
/// a step in flight is dropped then too, so dropping the logs releases
/// what the backend holds at once, as it would without the task.
#[derive(Debug)]
pub struct RetentionSlot {
    clock: Arc<dyn Clock>,
    owner: Mutex<Weak<TaskOwner>>,
    nudge: Arc<Notify>,
}

impl RetentionSlot {
    /// A slot whose task reads time from `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        RetentionSlot {
            clock,
            owner: Mutex::new(Weak::new()),
            nudge: Arc::new(Notify::new()),
        }
    }

    /// Wakes the task (a policy was set through this process).
    pub fn nudge(&self) {
        self.nudge.notify_one();
    }
}

/// The background task of the logs over one backend, owned by them: every
/// [`Log`] over the backend holds it, and the last one to go drops the
/// task's future at once — with any storage handle a step in flight holds
/// — so dropping a log releases what its backend holds (a directory's
/// lock, its files) without waiting for that step to end.
pub(crate) struct TaskOwner {
    future: Arc<Mutex<Option<TaskFuture>>>,
    abort: tokio::task::AbortHandle,
}

type TaskFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

impl std::fmt::Debug for TaskOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskOwner").finish_non_exhaustive()
    }
}

impl Drop for TaskOwner {
    fn drop(&mut self) {
        // Waits at most for a poll in progress on another thread (a poll
        // never blocks); the future is dropped here, outside the lock.
        let future = self.future.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.abort.abort();
        drop(future);
    }
}

/// Starts `storage`'s background retention task, if it has a slot and a
/// tokio runtime is current, or joins the one running; the caller holds
/// the returned owner for as long as its log lives.
pub(crate) fn start(storage: &Arc<dyn Storage>) -> Option<Arc<TaskOwner>> {
    let slot = storage.retention_slot()?;
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let mut owner = slot.owner.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(running) = owner.upgrade() {
        return Some(running);
    }
    let weak = Arc::downgrade(storage);
    let task: TaskFuture = Box::pin(run(
        weak,
        slot.nudge.clone(),
        slot.clock.clone(),
        storage.feed().watch_tip(),
    ));
    let future = Arc::new(Mutex::new(Some(task)));
    let polled = Arc::downgrade(&future);
    // The spawned driver holds the future weakly: once the owner took it,
    // the driver has nothing to poll and ends.
    let handle = runtime.spawn(std::future::poll_fn(move |cx| {
        let Some(future) = polled.upgrade() else {
            return Poll::Ready(());
        };
        let mut future = future.lock().unwrap_or_else(|p| p.into_inner());
        let Some(task) = future.as_mut() else {
            return Poll::Ready(());
        };
        let poll = task.as_mut().poll(cx);
        if poll.is_ready() {
            *future = None;
        }
        poll
    }));
    let running = Arc::new(TaskOwner {
        future,
        abort: handle.abort_handle(),
    });
    *owner = Arc::downgrade(&running);
    Some(running)
}

async fn run(
    weak: Weak<dyn Storage>,
    nudge: Arc<Notify>,
    clock: Arc<dyn Clock>,
    mut tip: tokio::sync::watch::Receiver<u64>,
) {
    let mut retention = Retention::new(clock);
    // The first step waits for a commit, a nudge or one interval: opening a
    // log does no retention work (no policy read, no segment fetched), so
    // what an open costs does not change with a policy's existence.
    let mut expiry: Option<Duration> = Some(STEP_INTERVAL);
    loop {
        let wait_expiry = async {
            match expiry {
                Some(d) => clock::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = tip.changed() => if changed.is_err() { return },
            () = nudge.notified() => {}
            () = wait_expiry => {}
        }
        let Some(storage) = weak.upgrade() else {
            return;
        };
        let log = Log::from_arc_unstarted(storage);
        let mut more = true;
        let mut rounds = 0;
        // Catch up in bounded steps (a bounded number of them per wake).
        while more && rounds < 64 {
            rounds += 1;
            match retention.step(&log).await {
                Ok(step) => {
                    more = step.more;
                    expiry = step
                        .next_expiry_ms
                        .map(|ms| Duration::from_millis(ms).max(STEP_INTERVAL));
                }
                Err(e) if matches!(e.kind(), ErrorKind::Closed | ErrorKind::Fenced) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "a retention step failed; the next commit retries it");
                    more = false;
                }
            }
        }
        drop(log);
        clock::sleep(STEP_INTERVAL).await;
    }
}
