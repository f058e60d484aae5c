//! A two-stage workflow: one executor turns submitted commands into
//! `processing` events, a second one turns those into `complete` events.
//!
//! ```text
//! workflow.commands  submit:job-1 ─┐
//!                                  ▼ intake
//! workflow.events    processing:job-1 ─┐
//!                                      ▼ worker
//! workflow.events    complete:job-1
//! ```
//!
//! Neither stage keeps an "already emitted" set in memory (it would be lost
//! on restart). Both fold their own outputs back instead:
//!
//! * the worker writes to its own input tag, so it sees its `complete`
//!   events come back;
//! * the intake writes to another tag, so it adds its input tag as a
//!   secondary tag: each `processing` event also sits in
//!   `workflow.commands`, acknowledging the command there.
//!
//! Run with `cargo run -p weft --example workflow`.

use std::collections::BTreeSet;
use std::time::Duration;

use weft::exec::{Executor, ExecutorContext, ExecutorEngine, ExecutorStatus, StateWatch};
use weft::{AppendRequest, Error, ErrorKind, Log, LogEntry, LogTag, Result};

fn commands() -> Result<LogTag> {
    LogTag::new("workflow.commands")
}

fn events() -> Result<LogTag> {
    LogTag::new("workflow.events")
}

/// Splits `stage:id` payloads.
fn parse(entry: &LogEntry) -> Result<(&str, &str)> {
    std::str::from_utf8(&entry.data)
        .ok()
        .and_then(|text| text.split_once(':'))
        .ok_or_else(|| Error::invalid_input(format!("entry {} is not stage:id", entry.seqnum)))
}

/// What a stage has seen: items it must handle, items it already handled.
#[derive(Clone, Debug, Default, PartialEq)]
struct Stage {
    todo: BTreeSet<String>,
    done: BTreeSet<String>,
}

impl Stage {
    fn open(&self) -> impl Iterator<Item = &String> {
        self.todo.difference(&self.done)
    }
}

/// Stage 1: `submit:<id>` in the commands → `processing:<id>` in the events.
struct Intake {
    commands: LogTag,
    events: LogTag,
}

impl Executor for Intake {
    type State = Stage;

    fn name(&self) -> &str {
        "intake"
    }

    fn input_tag(&self) -> LogTag {
        self.commands.clone()
    }

    fn initial_state(&self) -> Stage {
        Stage::default()
    }

    fn apply(&self, state: &mut Stage, entry: &LogEntry) -> Result<()> {
        match parse(entry)? {
            ("submit", id) => state.todo.insert(id.to_owned()),
            // Our own acknowledgement, seen through the secondary tag.
            ("processing", id) => state.done.insert(id.to_owned()),
            _ => false,
        };
        Ok(())
    }

    async fn execute(&self, state: &Stage, _: &mut ExecutorContext) -> Result<Vec<AppendRequest>> {
        Ok(state
            .open()
            .map(|id| {
                AppendRequest::new(self.events.clone(), format!("processing:{id}"))
                    .with_tag(self.commands.clone())
            })
            .collect())
    }
}

/// Stage 2: `processing:<id>` → `complete:<id>`, both in the events.
struct Worker {
    events: LogTag,
}

impl Executor for Worker {
    type State = Stage;

    fn name(&self) -> &str {
        "worker"
    }

    fn input_tag(&self) -> LogTag {
        self.events.clone()
    }

    fn initial_state(&self) -> Stage {
        Stage::default()
    }

    fn apply(&self, state: &mut Stage, entry: &LogEntry) -> Result<()> {
        match parse(entry)? {
            ("processing", id) => state.todo.insert(id.to_owned()),
            ("complete", id) => state.done.insert(id.to_owned()),
            _ => false,
        };
        Ok(())
    }

    async fn execute(&self, state: &Stage, _: &mut ExecutorContext) -> Result<Vec<AppendRequest>> {
        Ok(state
            .open()
            .map(|id| AppendRequest::new(self.events.clone(), format!("complete:{id}")))
            .collect())
    }
}

/// Waits (at most a few seconds) until the worker completed `ids`.
async fn completed(watch: &mut StateWatch<Stage>, ids: &BTreeSet<String>) -> Result<Stage> {
    let wait = watch.wait_for(|s| &s.state.done == ids && s.state.open().next().is_none());
    let snap = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .map_err(|_| Error::new(ErrorKind::Unavailable, "workflow did not finish in 10 s"))??;
    Ok(snap.state)
}

fn pipeline(log: &Log) -> Result<(ExecutorEngine, StateWatch<Stage>, StateWatch<Stage>)> {
    let mut engine = ExecutorEngine::new(log.clone());
    let intake = engine.register(Intake {
        commands: commands()?,
        events: events()?,
    })?;
    let worker = engine.register(Worker { events: events()? })?;
    Ok((engine, intake, worker))
}

/// Pushes three jobs through both stages, then restarts the engine and
/// checks that no stage repeats itself.
#[tokio::main]
pub async fn main() -> Result<()> {
    let log = Log::memory();
    let (engine, _intake, mut worker) = pipeline(&log)?;
    let handle = engine.start()?;

    let jobs: BTreeSet<String> = ["job-1", "job-2", "job-99"].map(String::from).into();
    for id in &jobs {
        log.append(AppendRequest::new(commands()?, format!("submit:{id}")))
            .await?;
    }
    let state = completed(&mut worker, &jobs).await?;
    println!("completed: {:?}", state.done);
    assert_eq!(handle.status("intake"), Some(ExecutorStatus::Running));
    assert_eq!(handle.status("worker"), Some(ExecutorStatus::Running));

    let events_log = log.read_all(&events()?).await?;
    let texts: Vec<String> = events_log
        .iter()
        .map(|e| String::from_utf8_lossy(&e.data).into_owned())
        .collect();
    assert_eq!(
        texts.len(),
        6,
        "one processing and one complete per job: {texts:?}"
    );
    for id in &jobs {
        let processing = texts.iter().position(|t| *t == format!("processing:{id}"));
        let complete = texts.iter().position(|t| *t == format!("complete:{id}"));
        assert!(processing < complete, "{id} completed before processing");
    }
    handle.shutdown().await;

    // Restart both stages over the same log: each replays, finds nothing
    // open, and appends nothing.
    let (engine, mut intake, mut worker) = pipeline(&log)?;
    let handle = engine.start()?;
    let intake_snap = tokio::time::timeout(
        Duration::from_secs(10),
        intake.wait_for(|s| s.executions >= 1),
    )
    .await
    .map_err(|_| Error::new(ErrorKind::Unavailable, "intake did not replay in 10 s"))??;
    let again = completed(&mut worker, &jobs).await?;
    assert_eq!(again, state);
    assert_eq!(intake_snap.appended, 0);
    assert_eq!(worker.latest().map(|s| s.appended), Some(0));
    assert_eq!(log.read_all(&events()?).await?.len(), 6);
    handle.shutdown().await;
    Ok(())
}
