//! An actor with a durable checkpoint: on start it reads the last seqnum it
//! finished from its inbox's KV, replays the backlog after it, and then
//! keeps receiving live messages, all through one subscription with no gap.
//!
//! The actor here bills orders: for each message in its inbox it appends
//! an invoice to `invoices`, then moves its checkpoint. The example runs it
//! twice with a "crash" in between and checks that every order was billed
//! exactly once.
//!
//! Run with `cargo run -p weft --example actor_checkpoint`.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use weft::exec::Checkpoint;
use weft::{AppendRequest, Error, ErrorKind, Log, LogTag, LogView, Result};

const CHECKPOINT_KEY: &str = "checkpoint";

/// What one run of the actor did.
#[derive(Debug, Default)]
struct RunReport {
    from_backlog: Vec<String>,
    live: Vec<String>,
}

/// Runs the actor until it has handled `count` messages, then returns, as
/// if the process stopped there. `resumed_tx` fires once the subscription
/// is open, so the example can send "live" orders strictly afterwards.
async fn run_actor(
    inbox: &LogView,
    invoices: &LogTag,
    count: usize,
    resumed_tx: oneshot::Sender<()>,
) -> Result<RunReport> {
    let checkpoint = Checkpoint::for_view(inbox, CHECKPOINT_KEY)?;
    let mut resumed = checkpoint.resume(inbox).await?;
    println!(
        "actor resumes at {:?}; backlog through {:?}",
        resumed.from, resumed.backlog_through
    );
    // The receiver only goes away if the sender task already failed, which
    // the caller reports.
    let _ = resumed_tx.send(());
    let mut report = RunReport::default();
    while report.from_backlog.len() + report.live.len() < count {
        let entry = tokio::time::timeout(Duration::from_secs(5), resumed.subscription.next())
            .await
            .map_err(|_| Error::new(ErrorKind::Unavailable, "no message within 5 s"))?
            .ok_or_else(|| Error::closed("the inbox subscription ended"))??;
        let order = String::from_utf8_lossy(&entry.data).into_owned();

        // Act, then checkpoint: a crash in between bills this order again
        // on the next run (at-least-once), never skips it.
        inbox
            .log()
            .append(AppendRequest::new(
                invoices.clone(),
                format!("invoice for {order}"),
            ))
            .await?;
        checkpoint.advance(entry.seqnum).await?;

        if resumed
            .backlog_through
            .is_some_and(|end| entry.seqnum <= end)
        {
            report.from_backlog.push(order);
        } else {
            report.live.push(order);
        }
    }
    Ok(report)
}

async fn send(inbox: &LogView, orders: &[&str]) -> Result<()> {
    for order in orders {
        inbox.append(order.to_string()).await?;
    }
    Ok(())
}

/// Sends `orders` once the actor has resumed, from another task.
fn send_live(
    inbox: &LogView,
    orders: &'static [&'static str],
) -> (oneshot::Sender<()>, JoinHandle<Result<()>>) {
    let (tx, rx) = oneshot::channel();
    let inbox = inbox.clone();
    let task = tokio::spawn(async move {
        rx.await
            .map_err(|_| Error::closed("the actor never resumed"))?;
        send(&inbox, orders).await
    });
    (tx, task)
}

async fn join(task: JoinHandle<Result<()>>) -> Result<()> {
    task.await
        .map_err(|e| Error::internal("sender task failed").with_source(e))?
}

/// Bills orders across two runs of the actor and checks none is billed
/// twice or skipped.
#[tokio::main]
pub async fn main() -> Result<()> {
    let log = Log::memory();
    let inbox = log.view(LogTag::with_key("actor", "billing")?);
    let invoices = LogTag::new("invoices")?;

    // First start: no checkpoint yet, so everything is backlog; then two
    // orders arrive live while it runs.
    send(&inbox, &["order-1", "order-2", "order-3"]).await?;
    let (resumed, sender) = send_live(&inbox, &["order-4", "order-5"]);
    let first = run_actor(&inbox, &invoices, 5, resumed).await?;
    join(sender).await?;
    println!("run 1: {first:?}");
    assert_eq!(first.from_backlog, ["order-1", "order-2", "order-3"]);
    assert_eq!(first.live, ["order-4", "order-5"]);

    // The actor is down; orders keep coming.
    send(&inbox, &["order-6", "order-7", "order-8"]).await?;

    // Second start: resumes after the checkpoint; the three missed orders
    // are its backlog, then two more arrive live.
    let (resumed, sender) = send_live(&inbox, &["order-9", "order-10"]);
    let second = run_actor(&inbox, &invoices, 5, resumed).await?;
    join(sender).await?;
    println!("run 2: {second:?}");
    assert_eq!(second.from_backlog, ["order-6", "order-7", "order-8"]);
    assert_eq!(second.live, ["order-9", "order-10"]);

    // Every order billed exactly once, in order.
    let billed: Vec<String> = log
        .read_all(&invoices)
        .await?
        .iter()
        .map(|e| String::from_utf8_lossy(&e.data).into_owned())
        .collect();
    let expected: Vec<String> = (1..=10).map(|i| format!("invoice for order-{i}")).collect();
    assert_eq!(billed, expected);
    let last = inbox.check_tail().await?;
    let checkpoint = Checkpoint::for_view(&inbox, CHECKPOINT_KEY)?;
    assert_eq!(checkpoint.load().await?, last);
    Ok(())
}
