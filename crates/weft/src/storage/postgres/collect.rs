//! The collector: learns the outcomes of this handle's staged groups, with
//! one `outcomes_of` call per round for all of them.
//!
//! A staged group waits for a numbering round of whichever process holds
//! the log's lock. Asking for each group at every round's NOTIFY (what
//! builds before this one did, and what `outcome_of` still serves) cost
//! ~2.65 server calls per group at 16 processes, most answering
//! "pending": the round that notified began before the group was staged.
//! On a small server those calls took the CPU the serial round needs.
//!
//! Every round now also says, on the log's *settled* channel, the highest
//! staged id it numbered (`schema.rs`); the tailer passes that on here
//! ([`RoundsHeard`]). The collector asks once per round, in one call, for
//! the groups that round may have settled (id at or below the highest),
//! and for nothing else — except:
//!
//! * after a round that settled no staged group, it asks for every group
//!   waiting since before that round: nobody collecting is then bound to
//!   start the next round, so a waiter must (`outcomes_of` runs a round
//!   when the lock is free);
//! * when no round has been heard for [`QUIET`] while a group waits (and
//!   at the latest after [`PENDING_RECHECK`]: a lost notification, a
//!   reconnecting tailer), the group is asked for anyway.
//!
//! Who starts the next round: an append that finds the lock free (under
//! load the appenders whose groups a round settled append again at once),
//! or `outcomes_of` asked for a group no round has settled, when the lock
//! is free — after an empty round, or when the log went quiet. A call
//! whose groups were all settled starts no round: its appenders would wait
//! for that round too.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;

use super::Shared;
use super::errors::Op;
use super::writer::{Outcome, STATUS_PENDING};
use crate::error::{Error, Result};

/// How long a staged group waits for a round that settles it before its
/// handle asks anyway.
pub(super) const PENDING_RECHECK: Duration = Duration::from_millis(50);

/// How long without any round heard before a waiting group is asked for
/// (nobody may be driving rounds). Above the round cycle of a busy log on
/// a small server (~5-10 ms measured), so a busy log does not trigger it.
const QUIET: Duration = Duration::from_millis(20);

/// What the tailer heard on the settled channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RoundsHeard {
    /// Rounds heard.
    pub(super) rounds: u64,
    /// Of those, the rounds that settled no staged group.
    pub(super) empty: u64,
    /// The highest staged id any heard round settled.
    pub(super) settled_max: i64,
}

impl RoundsHeard {
    /// Adds one round, from its notification's payload (the highest
    /// staged id it settled, or empty; a trailing `+` when the round, being
    /// bounded, left staged groups behind). An unreadable payload counts as
    /// a round that settled nothing, so waiters ask; so does a round that
    /// left groups behind: somebody must start the next one at once.
    pub(super) fn heard(&mut self, payload: &str) {
        self.rounds += 1;
        let (settled, more) = match payload.strip_suffix('+') {
            Some(rest) => (rest, true),
            None => (payload, false),
        };
        match settled.parse::<i64>() {
            Ok(id) => self.settled_max = self.settled_max.max(id),
            Err(_) => self.empty += 1,
        }
        if more && !settled.is_empty() {
            self.empty += 1;
        }
    }
}

/// The staged groups of a handle waiting for their outcomes.
pub(super) struct Collector {
    heard: watch::Sender<RoundsHeard>,
    waiting: Mutex<BTreeMap<i64, Waiter>>,
    /// A group started waiting, or the writer finished.
    wake: Notify,
    writer_done: std::sync::atomic::AtomicBool,
}

struct Waiter {
    reply: oneshot::Sender<Result<Vec<Outcome>>>,
    /// What had been heard when the group was last asked for (or, before
    /// any ask, when its append call was sent).
    seen: RoundsHeard,
    /// When it was last asked for, or registered.
    since: Instant,
}

impl Waiter {
    /// When the clock alone makes it due: [`QUIET`] after both its last
    /// ask and the last round heard, or [`PENDING_RECHECK`] after its ask.
    fn due_at(&self, last_round: Instant) -> Instant {
        (self.since.max(last_round) + QUIET).min(self.since + PENDING_RECHECK)
    }

    fn due(&self, id: i64, now: &RoundsHeard, at: Instant, last_round: Instant) -> bool {
        (id <= now.settled_max && now.rounds > self.seen.rounds)
            || now.empty > self.seen.empty
            || at >= self.due_at(last_round)
    }
}

impl Collector {
    pub(super) fn new() -> Collector {
        Collector {
            heard: watch::Sender::new(RoundsHeard::default()),
            waiting: Mutex::new(BTreeMap::new()),
            wake: Notify::new(),
            writer_done: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The tailer heard a round on the settled channel.
    pub(super) fn round_heard(&self, payload: &str) {
        self.heard.send_modify(|h| h.heard(payload));
    }

    /// What has been heard so far: taken before an append call, so a round
    /// that notifies while the call stages the group counts for it.
    pub(super) fn heard_now(&self) -> RoundsHeard {
        *self.heard.borrow()
    }

    /// Waits for the outcome of the staged group `id`; `seen` is what had
    /// been heard before its append call was sent. Dropping the receiver
    /// (the appender gave up) forgets the group.
    pub(super) fn wait_for(
        &self,
        id: i64,
        seen: RoundsHeard,
    ) -> oneshot::Receiver<Result<Vec<Outcome>>> {
        let (reply, rx) = oneshot::channel();
        let waiter = Waiter {
            reply,
            seen,
            since: crate::clock::monotonic_now(),
        };
        self.lock().insert(id, waiter);
        self.wake.notify_one();
        rx
    }

    /// The writer has finished: once nothing waits, the collector ends.
    pub(super) fn writer_done(&self) {
        self.writer_done
            .store(true, std::sync::atomic::Ordering::Release);
        self.wake.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<i64, Waiter>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The groups to ask for now (marked asked), and when the next one
    /// comes due by the clock. `last_round`: when a round was last heard.
    fn due(&self, now: &RoundsHeard, last_round: Instant) -> (Vec<i64>, Option<Instant>) {
        let at = crate::clock::monotonic_now();
        let mut waiting = self.lock();
        waiting.retain(|_, w| !w.reply.is_closed());
        let mut ids = Vec::new();
        let mut next: Option<Instant> = None;
        for (id, w) in waiting.iter_mut() {
            if w.due(*id, now, at, last_round) {
                ids.push(*id);
                w.seen = *now;
                w.since = at;
            } else {
                let when = w.due_at(last_round);
                next = Some(next.map_or(when, |n| n.min(when)));
            }
        }
        (ids, next)
    }

    fn answer(&self, id: i64, result: Result<Vec<Outcome>>) {
        if let Some(w) = self.lock().remove(&id) {
            let _ = w.reply.send(result);
        }
    }
}

/// Runs until the writer is done and nothing waits.
pub(super) async fn run(shared: Arc<Shared>) {
    let collector = &shared.collector;
    let mut heard = collector.heard.subscribe();
    let mut rounds = 0;
    let mut last_round = crate::clock::monotonic_now();
    loop {
        // Registered before looking, so a group or a round arriving
        // between the look and the wait still wakes it.
        let woken = collector.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let now = *heard.borrow_and_update();
        if now.rounds != rounds {
            rounds = now.rounds;
            last_round = crate::clock::monotonic_now();
        }
        let (ids, next) = collector.due(&now, last_round);
        if !ids.is_empty() {
            ask(&shared, ids).await;
            continue;
        }
        if next.is_none()
            && collector
                .writer_done
                .load(std::sync::atomic::Ordering::Acquire)
        {
            return;
        }
        let wait = next.map_or(Duration::from_secs(3600), |n| {
            n.saturating_duration_since(crate::clock::monotonic_now())
        });
        tokio::select! {
            _ = &mut woken => {}
            _ = heard.changed() => {}
            _ = crate::clock::sleep(wait) => {}
        }
    }
}

/// One `outcomes_of` call for `ids`; answers every group it decided.
/// A failed call fails every group asked for (their appenders make it
/// `Indeterminate`: the groups are staged).
async fn ask(shared: &Shared, ids: Vec<i64>) {
    let collector = &shared.collector;
    let rows = match shared
        .connections
        .query(
            Op::Write,
            "append: the outcomes of staged groups",
            &shared.sql.outcomes_of,
            &[&ids],
        )
        .await
    {
        Ok(rows) => rows,
        Err(e) => {
            for id in ids {
                collector.answer(id, Err(e.clone()));
            }
            return;
        }
    };
    let mut by_id: BTreeMap<i64, Vec<Outcome>> = BTreeMap::new();
    for row in &rows {
        by_id
            .entry(row.get::<_, i64>(0))
            .or_default()
            .push(Outcome::from_row(row, 1));
    }
    for id in ids {
        match by_id.remove(&id) {
            Some(outcomes) if matches!(outcomes.as_slice(), [o] if o.status == STATUS_PENDING) => {}
            Some(outcomes) => collector.answer(id, Ok(outcomes)),
            None => collector.answer(
                id,
                Err(Error::internal(format!(
                    "outcomes_of answered nothing for the staged group {id}"
                ))),
            ),
        }
    }
}
