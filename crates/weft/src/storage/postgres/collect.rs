//! The collector: learns the outcomes of this handle's staged groups, and
//! starts the next numbering round when this handle is the one to.
//!
//! A staged group waits for a numbering round of whichever process holds
//! the log's lock. Asking for each group at every round's NOTIFY (what
//! builds before this one did, and what `outcome_of` still serves) cost
//! ~2.65 server calls per group at 16 processes, most answering
//! "pending": the round that notified began before the group was staged.
//! On a small server those calls took the CPU the serial round needs.
//!
//! Every round also says, on the log's *settled* channel, the highest
//! staged id it numbered and the oldest id still staged as it ended
//! (`layout/functions.sql`); the tailer passes that on here
//! ([`RoundsHeard`]). Groups whose outcome a round told (`append_group`'s)
//! are answered by the told notification and never asked for. A waiting
//! group is asked for, in one call with every other group due, when:
//!
//! * a round heard since its last ask may have settled it (its id is at or
//!   below the highest): an outcome the round did not tell (a refused
//!   batch, a duplicate id) waits in `outcomes`;
//! * its handle is the one to start the next round: the group is the
//!   oldest the round left staged, or the round did not see it (nothing
//!   was left, or only younger groups: it committed after the round
//!   looked). `outcomes_of` runs a round when the lock is free. A group
//!   younger than the oldest left waits: the round that the oldest's
//!   handle starts sees it. So after a busy round one handle asks, not
//!   every handle with a group waiting (which cost ~0.85 calls per group
//!   at 16 processes);
//! * no round has been heard for [`QUIET`] while it waits, and at the
//!   latest [`PENDING_RECHECK`](super::outcome::PENDING_RECHECK) after its
//!   last ask (a handle that was to start the round gave up or died, a
//!   lost notification, a reconnecting tailer).
//!
//! Who starts the next round, then: an append that finds the lock free
//! (under load the appenders whose groups a round settled append again at
//! once), or the handle named above. A call whose groups were all settled
//! starts no round: its appenders would wait for that round too.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;

use super::Shared;
use super::errors::Op;
use super::outcome::{Outcome, PENDING_RECHECK, STATUS_PENDING, STATUS_UNKNOWN, Shape};
use crate::error::{Error, Result};

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
    /// What the last heard round found staged as it ended: the oldest
    /// staged id (`None`: nothing was staged).
    pub(super) oldest_left: Option<i64>,
}

impl RoundsHeard {
    /// Adds one round, from its notification's payload: the highest
    /// staged id it settled (or nothing), then, when groups were staged as
    /// it ended, `+` and the oldest of their ids. An unreadable payload
    /// counts as a round that settled nothing and says nothing of who is
    /// next, so every waiter asks; so does a bare `+` (the functions of an
    /// older build: groups were left, but not which).
    pub(super) fn heard(&mut self, payload: &str) {
        self.rounds += 1;
        let (settled, left) = match payload.split_once('+') {
            Some((settled, left)) => (settled, Some(left)),
            None => (payload, None),
        };
        let settled = match settled {
            "" => Some(None),
            s => s.parse::<i64>().ok().map(Some),
        };
        let left = match left {
            None => Some(None),
            Some(l) => l.parse::<i64>().ok().map(Some),
        };
        if let Some(Some(id)) = settled {
            self.settled_max = self.settled_max.max(id);
        }
        match (settled, left) {
            (Some(_), Some(left)) => self.oldest_left = left,
            _ => {
                self.oldest_left = None;
                self.empty += 1;
            }
        }
    }
}

/// One item of a told notification: `id:first:v1,v2,...`.
fn told_item(item: &str) -> Option<(i64, i64, Vec<i64>)> {
    let mut parts = item.split(':');
    let id = parts.next()?.parse().ok()?;
    let first = parts.next()?.parse().ok()?;
    let versions = parts
        .next()?
        .split(',')
        .map(|v| v.parse().ok())
        .collect::<Option<Vec<i64>>>()?;
    parts.next().is_none().then_some((id, first, versions))
}

/// The collector's state, under one lock so a told outcome and the
/// registration of its waiter can never miss each other.
#[derive(Default)]
struct Inner {
    waiting: BTreeMap<i64, Waiter>,
    /// Told outcomes of groups nobody waits for yet, kept while an append
    /// call that may have staged one is in flight (its answer, with the
    /// group's id, may come after the round's notification): id ->
    /// (when heard, in told notifications, first seqnum, versions).
    early: HashMap<i64, (u64, i64, Vec<i64>)>,
    /// Append calls in flight: token -> told notifications heard when it
    /// started.
    calls: BTreeMap<u64, u64>,
    told: u64,
    next_call: u64,
}

/// An append call in flight: while it lives, told outcomes of unknown
/// groups are kept for it.
pub(super) struct CallGuard<'a> {
    collector: &'a Collector,
    token: u64,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        let mut inner = self.collector.lock();
        inner.calls.remove(&self.token);
        let oldest = inner.calls.values().next().copied();
        match oldest {
            Some(since) => inner.early.retain(|_, (heard, _, _)| *heard >= since),
            None => inner.early.clear(),
        }
    }
}

/// The staged groups of a handle waiting for their outcomes.
pub(super) struct Collector {
    heard: watch::Sender<RoundsHeard>,
    waiting: Mutex<Inner>,
    /// A group started waiting, or the writer finished.
    wake: Notify,
    writer_done: std::sync::atomic::AtomicBool,
}

struct Waiter {
    reply: oneshot::Sender<Result<Vec<Outcome>>>,
    /// Its group's shape, when the group can be told (`append_group`).
    shape: Option<Shape>,
    /// What had been heard when the group was last asked for (or, before
    /// any ask, when its append call was sent).
    seen: RoundsHeard,
    /// When it was last asked for, or registered.
    since: Instant,
}

impl Waiter {
    /// Answers from a told item; a group that cannot be told (no shape)
    /// never is, so that case is an internal error.
    fn answer_told(self, first: i64, versions: &[i64]) {
        let result = match &self.shape {
            Some(shape) => shape.outcomes(first, versions),
            None => Err(Error::internal("a group staged by append was told")),
        };
        let _ = self.reply.send(result);
    }

    /// When the clock alone makes it due: [`QUIET`] after both its last
    /// ask and the last round heard, or [`PENDING_RECHECK`] after its ask.
    fn due_at(&self, last_round: Instant) -> Instant {
        (self.since.max(last_round) + QUIET).min(self.since + PENDING_RECHECK)
    }

    /// Whether the group `id` is asked for now. After a round heard since
    /// its last ask: when that round may have settled it (an outcome a
    /// round did not tell is in `outcomes`); or when its handle is the one
    /// to start the next round — the group is the oldest the round left
    /// staged, or the round did not see it (nothing was left, or only
    /// younger groups: it was committed after the round looked). A group
    /// younger than the oldest left waits for the round the oldest's
    /// handle starts, which sees it.
    fn due(&self, id: i64, now: &RoundsHeard, at: Instant, last_round: Instant) -> bool {
        let new_round = now.rounds > self.seen.rounds;
        (new_round && (id <= now.settled_max || now.oldest_left.is_none_or(|oldest| id <= oldest)))
            || now.empty > self.seen.empty
            || at >= self.due_at(last_round)
    }
}

impl Collector {
    pub(super) fn new() -> Collector {
        Collector {
            heard: watch::Sender::new(RoundsHeard::default()),
            waiting: Mutex::new(Inner::default()),
            wake: Notify::new(),
            writer_done: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The tailer heard a round on the settled channel.
    pub(super) fn round_heard(&self, payload: &str) {
        self.heard.send_modify(|h| h.heard(payload));
    }

    /// A round told outcomes (the told channel's payload): answers the
    /// groups waiting for them, keeps the others while a call is in
    /// flight. An unreadable item is skipped: its group is asked for.
    pub(super) fn told(&self, payload: &str) {
        let mut inner = self.lock();
        inner.told += 1;
        let heard = inner.told;
        let keep = !inner.calls.is_empty();
        for (id, first, versions) in payload.split(' ').filter_map(told_item) {
            match inner.waiting.remove(&id) {
                Some(w) => w.answer_told(first, &versions),
                None if keep => {
                    inner.early.insert(id, (heard, first, versions));
                }
                None => {}
            }
        }
    }

    /// The tailer's connection broke: told outcomes may have been lost, so
    /// every group waiting for one gets `Indeterminate` now (its round may
    /// have committed; a retry with the same append id lands once), and
    /// nothing heard before is kept.
    pub(super) fn told_lost(&self) {
        let mut inner = self.lock();
        inner.early.clear();
        let told: Vec<i64> = inner
            .waiting
            .iter()
            .filter(|(_, w)| w.shape.is_some())
            .map(|(id, _)| *id)
            .collect();
        for id in told {
            if let Some(w) = inner.waiting.remove(&id) {
                let _ = w.reply.send(Err(Error::new(
                    crate::ErrorKind::Indeterminate,
                    "the connection that hears numbering rounds broke while the append group \
                     waited for its outcome",
                )));
            }
        }
    }

    /// Whether the group `id` waits for a told outcome.
    fn tellable(&self, id: i64) -> bool {
        self.lock()
            .waiting
            .get(&id)
            .is_some_and(|w| w.shape.is_some())
    }

    /// Starts an append call: told outcomes heard from now until the
    /// guard drops are kept for the group it may stage.
    pub(super) fn call_started(&self) -> CallGuard<'_> {
        let mut inner = self.lock();
        let token = inner.next_call;
        inner.next_call += 1;
        let since = inner.told;
        inner.calls.insert(token, since);
        CallGuard {
            collector: self,
            token,
        }
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
        shape: Option<Shape>,
    ) -> oneshot::Receiver<Result<Vec<Outcome>>> {
        let (reply, rx) = oneshot::channel();
        let waiter = Waiter {
            reply,
            shape,
            seen,
            since: crate::clock::monotonic_now(),
        };
        let mut inner = self.lock();
        if let Some((_, first, versions)) = inner.early.remove(&id) {
            waiter.answer_told(first, &versions);
            return rx;
        }
        inner.waiting.insert(id, waiter);
        drop(inner);
        self.wake.notify_one();
        rx
    }

    /// The writer has finished: once nothing waits, the collector ends.
    pub(super) fn writer_done(&self) {
        self.writer_done
            .store(true, std::sync::atomic::Ordering::Release);
        self.wake.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The groups to ask for now (marked asked), and when the next one
    /// comes due by the clock. `last_round`: when a round was last heard.
    fn due(&self, now: &RoundsHeard, last_round: Instant) -> (Vec<i64>, Option<Instant>) {
        let at = crate::clock::monotonic_now();
        let mut inner = self.lock();
        let waiting = &mut inner.waiting;
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
        if let Some(w) = self.lock().waiting.remove(&id) {
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
            // Neither staged nor in `outcomes`: a round of another process
            // told it, and the notification is on its way (it is sent at
            // that round's commit, and this call may have overtaken it).
            // If it never comes, the tailer's lost connection or the
            // append's deadline answers the group.
            Some(outcomes)
                if matches!(outcomes.as_slice(), [o] if o.status == STATUS_UNKNOWN)
                    && collector.tellable(id) => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiter whose last ask (or call) saw `seen`, asked just now.
    fn waiter(seen: RoundsHeard, at: Instant) -> Waiter {
        Waiter {
            reply: oneshot::channel().0,
            shape: None,
            seen,
            since: at,
        }
    }

    fn heard(payloads: &[&str]) -> RoundsHeard {
        let mut h = RoundsHeard::default();
        for p in payloads {
            h.heard(p);
        }
        h
    }

    /// Which of the waiting ids are asked for after the rounds `payloads`,
    /// heard since they were last asked for (the clock not yet due).
    fn asked(before: &[&str], payloads: &[&str], ids: &[i64]) -> Vec<i64> {
        let at = crate::clock::monotonic_now();
        let seen = heard(before);
        let mut now = seen;
        for p in payloads {
            now.heard(p);
        }
        ids.iter()
            .copied()
            .filter(|id| waiter(seen, at).due(*id, &now, at, at))
            .collect()
    }

    #[test]
    fn settled_payloads_are_read_in_every_spelling() {
        let h = heard(&["12+15"]);
        assert_eq!(
            (h.rounds, h.settled_max, h.oldest_left, h.empty),
            (1, 12, Some(15), 0)
        );
        let h = heard(&["12+15", "+20"]);
        assert_eq!(
            (h.rounds, h.settled_max, h.oldest_left, h.empty),
            (2, 12, Some(20), 0)
        );
        let h = heard(&["12+15", "14"]);
        assert_eq!((h.settled_max, h.oldest_left, h.empty), (14, None, 0));
        let h = heard(&[""]);
        assert_eq!(
            (h.rounds, h.settled_max, h.oldest_left, h.empty),
            (1, 0, None, 0)
        );
        // Revision 1's bare '+', and what nobody wrote: everyone asks.
        let h = heard(&["12+"]);
        assert_eq!((h.settled_max, h.oldest_left, h.empty), (12, None, 1));
        let h = heard(&["x+1"]);
        assert_eq!((h.settled_max, h.empty), (0, 1));
        let h = heard(&["3+y"]);
        assert_eq!((h.settled_max, h.empty), (3, 1));
    }

    #[test]
    fn one_handle_starts_the_next_round() {
        // Settled up to 12, 15 the oldest left: 15's handle starts the next
        // round; 13 and 14 were committed after the round looked (their
        // handles start one too); 16 and 20 wait for 15's round; 10 may
        // have an outcome row.
        let ids = [10, 13, 14, 15, 16, 20];
        assert_eq!(asked(&[], &["12+15"], &ids), vec![10, 13, 14, 15]);
        // Nothing left as the round ended: every waiting group is one the
        // round did not see.
        assert_eq!(asked(&[], &["12"], &ids), ids.to_vec());
        assert_eq!(asked(&[], &[""], &[16]), vec![16]);
        // Several rounds heard: the last one's look decides.
        assert_eq!(asked(&[], &["12+15", "15+20"], &[16, 20, 21]), vec![16, 20]);
        // Nothing heard since the last ask: nobody asks before the clock.
        assert_eq!(asked(&["12+15"], &[], &ids), Vec::<i64>::new());
        // A round nobody can read, or revision 1's '+': everyone asks.
        assert_eq!(asked(&[], &["12+"], &[16, 20]), vec![16, 20]);
        assert_eq!(asked(&[], &["garbage"], &[16, 20]), vec![16, 20]);
    }

    #[test]
    fn the_clock_asks_when_no_round_comes() {
        let at = crate::clock::monotonic_now();
        let seen = heard(&["12+15"]);
        let w = waiter(seen, at);
        assert!(!w.due(20, &seen, at, at));
        assert!(w.due(20, &seen, at + QUIET, at));
        // Rounds heard, but none naming it: at the latest after the recheck.
        assert!(!w.due(20, &seen, at + QUIET, at + QUIET));
        assert!(w.due(20, &seen, at + PENDING_RECHECK, at + PENDING_RECHECK));
    }
}
