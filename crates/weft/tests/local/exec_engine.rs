//! The executor engine: replay then live, restart to identical state
//! without re-emitting, failure isolation, clean shutdown.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use weft::exec::{
    Executor, ExecutorContext, ExecutorEngine, ExecutorSnapshot, ExecutorStatus, StateWatch,
};
use weft::{AppendRequest, Error, ErrorKind, Log, LogEntry, LogTag, Result};

const WAIT: Duration = Duration::from_secs(20);

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

fn orders() -> LogTag {
    LogTag::new("orders").unwrap()
}

/// Fulfils every placed order once, folding its own `fulfilled` outputs
/// back (they carry the input tag).
struct Fulfil {
    name: String,
    tag: LogTag,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Orders {
    pending: BTreeSet<String>,
    fulfilled: BTreeSet<String>,
    /// How many `fulfilled` entries each order got: more than one is a
    /// duplicate emission.
    fulfil_count: BTreeMap<String, u32>,
    /// Every seqnum folded, in order: equal states mean equal folds.
    folded: Vec<u64>,
}

impl Fulfil {
    fn new(name: &str) -> Self {
        Fulfil {
            name: name.into(),
            tag: orders(),
        }
    }
}

impl Executor for Fulfil {
    type State = Orders;

    fn name(&self) -> &str {
        &self.name
    }

    fn input_tag(&self) -> LogTag {
        self.tag.clone()
    }

    fn initial_state(&self) -> Orders {
        Orders::default()
    }

    fn apply(&self, s: &mut Orders, e: &LogEntry) -> Result<()> {
        let text = std::str::from_utf8(&e.data)
            .map_err(|_| Error::invalid_input(format!("entry {} is not text", e.seqnum)))?;
        if let Some(id) = text.strip_prefix("placed:") {
            s.pending.insert(id.to_owned());
        } else if let Some(id) = text.strip_prefix("fulfilled:") {
            s.pending.remove(id);
            s.fulfilled.insert(id.to_owned());
            *s.fulfil_count.entry(id.to_owned()).or_default() += 1;
        }
        s.folded.push(e.seqnum);
        Ok(())
    }

    async fn execute(&self, s: &Orders, _: &mut ExecutorContext) -> Result<Vec<AppendRequest>> {
        Ok(s.pending
            .iter()
            .map(|id| {
                AppendRequest::new(self.tag.clone(), format!("fulfilled:{id}"))
                    .with_tag(LogTag::with_key("orders", id.as_str()).unwrap())
            })
            .collect())
    }
}

async fn place(log: &Log, ids: impl IntoIterator<Item = u32>) {
    for id in ids {
        log.append(AppendRequest::new(orders(), format!("placed:{id}")))
            .await
            .unwrap();
    }
}

fn settled(n: usize) -> impl FnMut(&ExecutorSnapshot<Orders>) -> bool {
    move |s| s.state.fulfilled.len() == n && s.state.pending.is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_backlog_then_processes_live_entries() {
    let log = Log::memory();
    place(&log, 0..5).await;

    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(Fulfil::new("fulfil")).unwrap();
    let handle = engine.start().unwrap();

    // The backlog is fulfilled by the first execute after the replay.
    let first = within("backlog", watch.wait_for(settled(5))).await.unwrap();
    assert!(first.executions >= 1);
    place(&log, 5..10).await;
    let snap = within("live entries", watch.wait_for(settled(10)))
        .await
        .unwrap();
    assert!(snap.state.fulfil_count.values().all(|&n| n == 1));
    assert_eq!(snap.appended, 10);
    assert_eq!(log.read_all(&orders()).await.unwrap().len(), 20);
    // Each fulfilment also went to the order's own stream.
    let one = LogTag::with_key("orders", "7").unwrap();
    assert_eq!(log.read_all(&one).await.unwrap().len(), 1);

    let finals = within("shutdown", handle.shutdown()).await;
    assert_eq!(finals, vec![("fulfil".to_owned(), ExecutorStatus::Stopped)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_engine_resumes_with_identical_state_and_emits_nothing_twice() {
    let log = Log::memory();
    place(&log, 0..3).await;

    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(Fulfil::new("fulfil")).unwrap();
    let handle = engine.start().unwrap();
    place(&log, 3..8).await;
    let before = within("first run", watch.wait_for(settled(8)))
        .await
        .unwrap();
    within("shutdown", handle.shutdown()).await;
    let len_before = log.read_all(&orders()).await.unwrap().len();
    assert_eq!(len_before, 16);

    // A new engine, a new executor value, the same log.
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(Fulfil::new("fulfil")).unwrap();
    let handle = engine.start().unwrap();
    let after = within(
        "replay",
        watch.wait_for(|s| s.applied_through == before.applied_through),
    )
    .await
    .unwrap();
    assert_eq!(after.state, before.state, "the fold is deterministic");
    assert_eq!(after.executions, 1, "one execute after the replay");
    assert_eq!(after.appended, 0, "nothing re-emitted after restart");
    assert_eq!(log.read_all(&orders()).await.unwrap().len(), len_before);

    // And it keeps going from there.
    place(&log, 8..10).await;
    let last = within("live after restart", watch.wait_for(settled(10)))
        .await
        .unwrap();
    assert_eq!(last.appended, 2);
    assert!(last.state.fulfil_count.values().all(|&n| n == 1));
    within("shutdown", handle.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_orders_arrived_while_stopped_fulfils_only_those() {
    let log = Log::memory();
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(Fulfil::new("fulfil")).unwrap();
    let handle = engine.start().unwrap();
    place(&log, 0..4).await;
    within("first run", watch.wait_for(settled(4)))
        .await
        .unwrap();
    within("shutdown", handle.shutdown()).await;

    place(&log, 4..6).await; // nobody is running

    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(Fulfil::new("fulfil")).unwrap();
    let handle = engine.start().unwrap();
    let snap = within("second run", watch.wait_for(settled(6)))
        .await
        .unwrap();
    assert_eq!(snap.appended, 2);
    assert!(snap.state.fulfil_count.values().all(|&n| n == 1));
    within("shutdown", handle.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_entries_never_triggers_a_second_copy_of_an_output() {
    // Entries placed while the executor's outputs are in flight land before
    // those outputs; the engine must not execute on a state that lacks them.
    // The interleaving is up to the scheduler, so try several times.
    for round in 0..5 {
        let log = Log::memory();
        let mut engine = ExecutorEngine::new(log.clone());
        let mut watch = engine.register(Fulfil::new("fulfil")).unwrap();
        let handle = engine.start().unwrap();
        let writers: Vec<_> = (0..4u32)
            .map(|w| {
                let log = log.clone();
                tokio::spawn(async move { place(&log, (w * 100)..(w * 100 + 100)).await })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        let snap = within("burst", watch.wait_for(settled(400))).await.unwrap();
        let dupes: Vec<_> = snap
            .state
            .fulfil_count
            .iter()
            .filter(|&(_, &n)| n != 1)
            .collect();
        assert!(
            dupes.is_empty(),
            "round {round}: duplicated outputs: {dupes:?}"
        );
        assert_eq!(snap.appended, 400);
        within("shutdown", handle.shutdown()).await;
    }
}

#[test]
fn crashes_and_restarts_at_arbitrary_points_match_a_pure_fold_and_never_duplicate() {
    // A tiny seeded generator: the schedule is reproducible per seed.
    let mut seed: u64 = 0x5eed_1234_abcd_0001;
    let mut next = move |bound: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % bound
    };
    let driver = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let log = Log::memory();
    let mut placed = 0u32;
    for restart in 0..16 {
        // Each run lives on its own runtime, so a "crash" can drop every
        // task of the engine wherever it is, as a killed process would.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut engine = ExecutorEngine::new(log.clone());
        engine.register(Fulfil::new("fulfil")).unwrap();
        let handle = runtime.block_on(async { engine.start() }).unwrap();
        let burst = next(20) as u32;
        driver.block_on(place(&log, placed..placed + burst));
        placed += burst;
        // Stop after a random number of scheduler turns: mid-replay,
        // mid-burst, or settled.
        let turns = next(50);
        runtime.block_on(async {
            for _ in 0..turns {
                tokio::task::yield_now().await;
            }
        });
        if restart % 2 == 0 {
            // Crash: no clean stop; every task is dropped at its next await.
            // Dropping the runtime waits for its worker thread to leave the
            // poll it is in. `shutdown_background` does not, and the
            // worker could then append the crashed run's outputs after the
            // next run had replayed the log: two engines on one log at
            // once (which duplicates, as nothing fences them), not a crash.
            drop(runtime);
            drop(handle);
        } else {
            runtime.block_on(within("shutdown", handle.shutdown()));
        }
    }

    // A last run settles everything.
    driver.block_on(async {
        let mut engine = ExecutorEngine::new(log.clone());
        let mut watch = engine.register(Fulfil::new("fulfil")).unwrap();
        let handle = engine.start().unwrap();
        let snap = within("settle", watch.wait_for(settled(placed as usize)))
            .await
            .unwrap();
        within("shutdown", handle.shutdown()).await;

        // The engine's state is exactly the fold of what is in the log.
        let fulfil = Fulfil::new("reference");
        let mut expected = fulfil.initial_state();
        for entry in log.read_all(&orders()).await.unwrap() {
            fulfil.apply(&mut expected, &entry).unwrap();
        }
        assert_eq!(snap.state, expected);
        let dupes: Vec<_> = expected
            .fulfil_count
            .iter()
            .filter(|&(_, &n)| n != 1)
            .collect();
        assert!(dupes.is_empty(), "duplicated outputs: {dupes:?}");
        assert_eq!(expected.fulfilled.len(), placed as usize);
    });
}

/// Counts entries of its tag; panics or fails on command.
struct Fragile {
    name: &'static str,
    tag: LogTag,
}

impl Executor for Fragile {
    type State = u64;

    fn name(&self) -> &str {
        self.name
    }

    fn input_tag(&self) -> LogTag {
        self.tag.clone()
    }

    fn initial_state(&self) -> u64 {
        0
    }

    fn apply(&self, n: &mut u64, e: &LogEntry) -> Result<()> {
        match &e.data[..] {
            b"panic-in-apply" => panic!("boom in apply at {}", e.seqnum),
            b"fail-in-apply" => Err(Error::invalid_input("refusing this entry")),
            _ => {
                *n += 1;
                Ok(())
            }
        }
    }

    async fn execute(&self, n: &u64, ctx: &mut ExecutorContext) -> Result<Vec<AppendRequest>> {
        let last = match ctx.applied_through() {
            Some(s) => {
                ctx.log()
                    .read_from(ctx.input_tag(), weft::Position::At(s), 1)
                    .await?
            }
            None => vec![],
        };
        match last.first().map(|e| &e.data[..]) {
            Some(b"panic-in-execute") => panic!("boom in execute after {n} entries"),
            Some(b"fail-in-execute") => Err(Error::new(ErrorKind::Unavailable, "backend gone")),
            _ => Ok(vec![]),
        }
    }
}

fn fragile(name: &'static str) -> Fragile {
    Fragile {
        name,
        tag: LogTag::with_key("fragile", name).unwrap(),
    }
}

async fn wait_failed(handle: &weft::exec::EngineHandle, name: &str) -> String {
    let status = within(
        name,
        handle.wait_for_status(name, ExecutorStatus::is_finished),
    )
    .await
    .unwrap();
    match status {
        ExecutorStatus::Failed(message) => message,
        other => panic!("{name} ended as {other:?}, not Failed"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_or_failing_executor_is_reported_and_the_others_keep_running() {
    let log = Log::memory();
    let mut engine = ExecutorEngine::new(log.clone());
    let names = [
        "panic-in-apply",
        "fail-in-apply",
        "panic-in-execute",
        "fail-in-execute",
    ];
    let mut broken: Vec<StateWatch<u64>> = names
        .iter()
        .map(|n| engine.register(fragile(n)).unwrap())
        .collect();
    let mut healthy = engine.register(fragile("healthy")).unwrap();
    let handle = engine.start().unwrap();

    for name in names {
        let view = log.view(LogTag::with_key("fragile", name).unwrap());
        view.append("fine").await.unwrap();
        view.append(name).await.unwrap();
    }
    let messages: Vec<String> = {
        let mut out = Vec::new();
        for name in names {
            out.push(wait_failed(&handle, name).await);
        }
        out
    };
    assert!(messages[0].contains("panicked") && messages[0].contains("boom in apply"));
    assert!(!messages[1].contains("panicked") && messages[1].contains("refusing this entry"));
    assert!(messages[2].contains("panicked") && messages[2].contains("boom in execute"));
    assert!(!messages[3].contains("panicked") && messages[3].contains("backend gone"));

    // A failed executor's watch reports the stop instead of hanging.
    for watch in &mut broken {
        let err = within("closed watch", watch.wait_for(|_| false))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
    }

    // The healthy one was never disturbed.
    let healthy_view = log.view(LogTag::with_key("fragile", "healthy").unwrap());
    for _ in 0..3 {
        healthy_view.append("fine").await.unwrap();
    }
    within("healthy", healthy.wait_for(|s| s.state == 3))
        .await
        .unwrap();
    assert_eq!(handle.status("healthy"), Some(ExecutorStatus::Running));

    let finals = within("shutdown", handle.shutdown()).await;
    assert_eq!(finals.len(), 5);
    for (name, status) in finals {
        if name == "healthy" {
            assert_eq!(status, ExecutorStatus::Stopped);
        } else {
            assert!(
                matches!(status, ExecutorStatus::Failed(_)),
                "{name}: {status:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_every_executor_and_nothing_runs_after_it() {
    let log = Log::memory();
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watches: Vec<_> = ["a", "b", "c"]
        .into_iter()
        .map(|n| engine.register(fragile(n)).unwrap())
        .collect();
    let handle = engine.start().unwrap();
    for watch in &mut watches {
        within("replayed", watch.wait_for(|s| s.executions == 1))
            .await
            .unwrap();
    }
    assert_eq!(
        handle.statuses(),
        ["a", "b", "c"]
            .map(|n| (n.to_owned(), ExecutorStatus::Running))
            .to_vec()
    );
    assert_eq!(handle.names(), vec!["a", "b", "c"]);

    let finals = within("shutdown", handle.shutdown()).await;
    assert!(finals.iter().all(|(_, s)| *s == ExecutorStatus::Stopped));
    // The tasks are gone: their watches are closed, and an append is not
    // folded by anyone.
    log.view(LogTag::with_key("fragile", "a").unwrap())
        .append("fine")
        .await
        .unwrap();
    for watch in &mut watches {
        let err = within("closed", watch.wait_for(|s| s.state > 0))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert_eq!(watch.latest().unwrap().state, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_handle_stops_the_executors() {
    let log = Log::memory();
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(fragile("a")).unwrap();
    let handle = engine.start().unwrap();
    within("replayed", watch.wait_for(|s| s.executions == 1))
        .await
        .unwrap();
    drop(handle);
    let err = within("stopped", watch.wait_for(|_| false))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_log_stops_executors_cleanly() {
    let log = Log::memory();
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(fragile("a")).unwrap();
    let handle = engine.start().unwrap();
    within("replayed", watch.wait_for(|s| s.executions == 1))
        .await
        .unwrap();
    log.close().await.unwrap();
    let status = within(
        "stop",
        handle.wait_for_status("a", ExecutorStatus::is_finished),
    )
    .await
    .unwrap();
    assert_eq!(status, ExecutorStatus::Stopped);
    within("shutdown", handle.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_log_at_any_point_is_a_clean_stop() {
    // Close during the replay, before the subscription's first read, and
    // while live: every one of them ends as Stopped, never Failed.
    for yields in 0..30 {
        let log = Log::memory();
        place(&log, 0..3).await;
        let mut engine = ExecutorEngine::new(log.clone());
        engine.register(Fulfil::new("a")).unwrap();
        let handle = engine.start().unwrap();
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
        log.close().await.unwrap();
        let status = within(
            "stop",
            handle.wait_for_status("a", ExecutorStatus::is_finished),
        )
        .await
        .unwrap();
        assert_eq!(status, ExecutorStatus::Stopped, "after {yields} yields");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replay_folds_a_backlog_larger_than_one_read_before_executing() {
    let log = Log::memory();
    let tag = LogTag::with_key("fragile", "big").unwrap();
    let requests: Vec<_> = (0..2500)
        .map(|_| AppendRequest::new(tag.clone(), "fine"))
        .collect();
    log.append_batch(requests).await.unwrap();
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(fragile("big")).unwrap();
    let handle = engine.start().unwrap();
    let first = within("replay", watch.wait_for(|s| s.executions == 1))
        .await
        .unwrap();
    assert_eq!(
        first.state, 2500,
        "the whole backlog before the first execute"
    );
    assert_eq!(first.applied_through, Some(2499));
    within("shutdown", handle.shutdown()).await;
}

#[tokio::test]
async fn registration_rejects_duplicate_and_empty_names() {
    let log = Log::memory();
    let mut engine = ExecutorEngine::new(log);
    engine.register(fragile("a")).unwrap();
    let err = engine.register(fragile("a")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let unnamed = Fragile {
        name: "",
        tag: LogTag::new("fragile").unwrap(),
    };
    let err = engine.register(unnamed).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let handle = engine.start().unwrap();
    let err = handle.wait_for_status("nope", |_| true).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(handle.status("nope"), None);
    within("shutdown", handle.shutdown()).await;
}

#[test]
fn start_outside_a_runtime_is_an_error_not_a_panic() {
    let mut engine = ExecutorEngine::new(Log::memory());
    engine.register(fragile("a")).unwrap();
    let err = engine.start().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

/// Writes an audit line through the context for every batch, and checks
/// what the context reports.
struct Auditor {
    tag: LogTag,
    audit: LogTag,
}

impl Executor for Auditor {
    type State = Vec<u64>;

    fn name(&self) -> &str {
        "auditor"
    }

    fn input_tag(&self) -> LogTag {
        self.tag.clone()
    }

    fn initial_state(&self) -> Vec<u64> {
        Vec::new()
    }

    fn apply(&self, s: &mut Vec<u64>, e: &LogEntry) -> Result<()> {
        s.push(e.seqnum);
        Ok(())
    }

    async fn execute(&self, s: &Vec<u64>, ctx: &mut ExecutorContext) -> Result<Vec<AppendRequest>> {
        assert_eq!(ctx.name(), "auditor");
        assert_eq!(ctx.input_tag(), &self.tag);
        assert_eq!(ctx.applied_through(), s.last().copied());
        if !s.is_empty() {
            let line = format!("seen {} through {:?}", s.len(), ctx.applied_through());
            ctx.view(self.audit.clone()).append(line).await?;
        }
        Ok(vec![])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_can_write_other_tags_through_the_context() {
    let log = Log::memory();
    let tag = LogTag::new("work").unwrap();
    let audit = LogTag::new("audit").unwrap();
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine
        .register(Auditor {
            tag: tag.clone(),
            audit: audit.clone(),
        })
        .unwrap();
    let handle = engine.start().unwrap();
    for i in 0..3 {
        log.append(AppendRequest::new(tag.clone(), format!("job-{i}")))
            .await
            .unwrap();
        within("folded", watch.wait_for(|s| s.state.len() == i + 1))
            .await
            .unwrap();
    }
    let lines = log.read_all(&audit).await.unwrap();
    assert!(!lines.is_empty());
    assert!(lines.last().unwrap().data.starts_with(b"seen 3 through"));
    // Context appends are not the engine's outputs.
    assert_eq!(watch.latest().unwrap().appended, 0);
    assert_eq!(handle.status("auditor"), Some(ExecutorStatus::Running));
    within("shutdown", handle.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_over_a_trimmed_tag_replays_what_is_left() {
    let log = Log::memory();
    place(&log, 0..4).await;
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(Fulfil::new("fulfil")).unwrap();
    let handle = engine.start().unwrap();
    within("run", watch.wait_for(settled(4))).await.unwrap();
    within("shutdown", handle.shutdown()).await;

    // Drop the first two placements; the replay starts at the trim point.
    log.trim(1).await.unwrap();
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(Fulfil::new("fulfil")).unwrap();
    let handle = engine.start().unwrap();
    let snap = within("replay", watch.wait_for(|s| s.executions == 1))
        .await
        .unwrap();
    assert_eq!(snap.state.folded.first(), Some(&2));
    assert_eq!(snap.state.folded.len(), 6);
    within("shutdown", handle.shutdown()).await;
}
