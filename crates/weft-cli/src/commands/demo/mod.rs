//! `weft demo`: a small but real system on the embedded default.
//!
//! It opens (or creates) a log — a local directory by default, or a bucket
//! (`s3://`, `az://`), through the same `open_log` as `weft append`, or a
//! PostgreSQL log — starts the shop's two executors
//! ([`shop`]; on PostgreSQL the shipping executor runs in a second process,
//! see [`split`]), restocks the warehouse, places a handful of orders with
//! conditional appends, prints every entry as it commits, waits until every
//! order is decided and every reserved order shipped, and ends with a
//! summary. Everything is in the log: run it again on the same directory
//! and it resumes from there (the executors replay, the order numbers go
//! on), and says so.

mod shop;
mod split;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use futures::{StreamExt, TryStreamExt};
use weft::exec::{ExecutorEngine, ExecutorStatus};
use weft::{AppendRequest, Error, ErrorKind, Log, Position, Result, Tip};

use crate::location::{self, Create, StoreArgs};
use crate::output;
use shop::{Event, Inventory, RESTOCK_QTY, Shipping, Tags};

/// How long the demo waits for its executors before it calls it a failure.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// `weft demo`
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// The log: a directory (created if absent) or s3://bucket/prefix,
    /// az://container/prefix (created if absent). Re-running on it resumes.
    #[arg(default_value = "weft-demo", value_name = "LOG")]
    log: String,

    /// How many orders this run places.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1000))]
    orders: u64,

    /// Run one executor only, until stdin closes (the demo starts its
    /// second process on a shared log this way).
    #[arg(long, value_enum, hide = true)]
    role: Option<Role>,
}

/// An executor the demo runs in a process of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Role {
    Shipping,
}

/// Runs `weft demo`.
pub(crate) async fn run(args: DemoArgs, store: &StoreArgs) -> Result<ExitCode> {
    let started = weft::clock::os_monotonic_now();
    // A location, not a path: `s3://bucket/x` is a bucket, never a local
    // directory named `s3:`.
    if let Some(pg) = crate::pg::location(&args.log) {
        let shown = pg.as_ref().map(|l| l.to_string()).unwrap_or_default();
        let log = Log::new(crate::pg::open(pg?, Create::IfMissing).await?);
        let outcome = match args.role {
            Some(Role::Shipping) => split::run_shipping(&log).await,
            None => run_on(&log, &args, &shown, Executors::Split, started).await,
        };
        let closed = log.close().await;
        outcome?;
        closed?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.role.is_some() {
        return Err(Error::invalid_input(
            "--role runs one executor of the demo on a log many processes share (postgres://)",
        ));
    }
    let location = location::parse(&args.log)?;
    let log = location::open_log(&location, Create::IfMissing, false, store).await?;
    let outcome = run_on(&log, &args, &location.to_string(), Executors::Here, started).await;
    let closed = log.close().await;
    outcome?;
    closed?;
    Ok(ExitCode::SUCCESS)
}

/// Where the demo's executors run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Executors {
    /// Both in this process.
    Here,
    /// Inventory here, shipping in a second process ([`split`]).
    Split,
}

async fn run_on(
    log: &Log,
    args: &DemoArgs,
    location: &str,
    executors: Executors,
    started: Instant,
) -> Result<()> {
    let tags = Tags::new()?;
    let start = log.tip().await?.next;
    let run = log.next_version(&tags.stock).await? + 1;
    let placed_before = log.next_version(&tags.orders).await?;
    output::line(&format!(
        "weft demo: an order-fulfilment shop on the log at {location}"
    ))?;
    if start == 0 {
        output::line("new log: starting from seqnum 0")?;
    } else {
        output::line(&format!(
            "resuming: {start} entries already in the log, continuing from seqnum {start} \
             (run {run}, {placed_before} orders placed before)"
        ))?;
    }

    // Print every entry from here on as it commits.
    let mut feed = log.subscribe_log(Position::At(start));
    let (printed_tx, mut printed_rx) = tokio::sync::watch::channel(start);
    let printer = tokio::spawn(async move {
        while let Some(entry) = feed.next().await {
            let entry = entry?;
            output::line(&shop::describe(&entry))?;
            printed_tx.send_replace(entry.seqnum + 1);
        }
        Ok::<(), Error>(())
    });

    let mut engine = ExecutorEngine::new(log.clone());
    let mut inventory = engine.register(Inventory { tags: tags.clone() })?;
    let (mut shipping, mut shipping_process) = match executors {
        Executors::Here => (
            Some(engine.register(Shipping { tags: tags.clone() })?),
            None,
        ),
        Executors::Split => {
            output::line(&format!(
                "inventory runs in this process ({}); shipping in a second one",
                std::process::id()
            ))?;
            (None, Some(split::ShippingProcess::start(&args.log)?))
        }
    };
    let handle = engine.start()?;

    let driven = async {
        // The executors rebuild their state from the log before anything
        // new is written: show what they found.
        if start > 0 {
            let inv = tokio::time::timeout(SETTLE_TIMEOUT, inventory.wait_for(|_| true))
                .await
                .map_err(|_| stuck("the inventory did not finish its replay"))??;
            output::line(&format!(
                "replayed: inventory knows {} orders ({} reserved, {} rejected)",
                inv.state.placed, inv.state.reserved, inv.state.rejected
            ))?;
            if let Some(shipping) = shipping.as_mut() {
                let ship = tokio::time::timeout(SETTLE_TIMEOUT, shipping.wait_for(|_| true))
                    .await
                    .map_err(|_| stuck("shipping did not finish its replay"))??;
                output::line(&format!(
                    "replayed: shipping has shipped {}",
                    ship.state.shipped
                ))?;
            }
        }
        let restock = Event::Restocked {
            run,
            qty: RESTOCK_QTY,
        };
        log.append(
            AppendRequest::new(tags.stock.clone(), restock.encode()).with_tag(tags.orders.clone()),
        )
        .await?;
        for n in placed_before..placed_before + args.orders {
            let (order, item, qty) = shop::order_spec(n);
            let event = Event::Placed {
                order: order.clone(),
                item: item.to_owned(),
                qty,
            };
            let request = AppendRequest::new(tags.orders.clone(), event.encode())
                .with_tag(tags.order(&order)?);
            // Conditional: order n is version n of the `orders` stream, so a
            // second customer racing on this log could not double-place it.
            log.append_if(request, n).await?;
        }
        let placed = placed_before + args.orders;
        let inv = tokio::time::timeout(
            SETTLE_TIMEOUT,
            inventory.wait_for(|s| s.state.placed == placed && s.state.settled()),
        )
        .await
        .map_err(|_| stuck("the inventory did not decide every order"))??;
        let reserved = inv.state.reserved;
        match (shipping.as_mut(), shipping_process.as_mut()) {
            (Some(shipping), _) => {
                tokio::time::timeout(
                    SETTLE_TIMEOUT,
                    shipping
                        .wait_for(|s| s.state.reserved == reserved && s.state.waiting.is_empty()),
                )
                .await
                .map_err(|_| stuck("shipping did not ship every reserved order"))??;
            }
            (None, Some(process)) => {
                tokio::time::timeout(SETTLE_TIMEOUT, process.wait_shipped(log, &tags, reserved))
                    .await
                    .map_err(|_| {
                        stuck("the shipping process did not ship every reserved order")
                    })??;
            }
            (None, None) => return Err(Error::internal("the demo has no shipping executor")),
        }
        // Let the printer show the last entry before the summary.
        let end = log.tip().await?.next;
        tokio::time::timeout(SETTLE_TIMEOUT, printed_rx.wait_for(|p| *p >= end))
            .await
            .map_err(|_| stuck("the log's feed fell behind"))?
            .map_err(|_| Error::internal("the demo's printer stopped"))?;
        Ok::<_, Error>(inv.state)
    }
    .await;

    let finals = handle.shutdown().await;
    printer.abort();
    let stopped = match shipping_process {
        Some(process) => process.stop().await,
        None => Ok(()),
    };
    let inv = driven?;
    stopped?;
    for (name, status) in finals {
        if let ExecutorStatus::Failed(why) = status {
            return Err(Error::internal(format!("executor {name} failed: {why}")));
        }
    }
    summary(log, &tags, start, &inv, started).await
}

fn stuck(what: &str) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!("demo: {what} within {SETTLE_TIMEOUT:?}"),
    )
}

async fn summary(
    log: &Log,
    tags: &Tags,
    start: u64,
    inv: &shop::InventoryState,
    started: Instant,
) -> Result<()> {
    let mut per_tag: BTreeMap<String, u64> = BTreeMap::new();
    let mut distinct = std::collections::BTreeSet::new();
    let mut entries = 0u64;
    let mut all = log.stream_log(Position::Beginning);
    while let Some(e) = all.try_next().await? {
        entries += 1;
        for t in &e.tags {
            distinct.insert(t.clone());
            *per_tag.entry(t.namespace().to_owned()).or_default() += 1;
        }
    }
    let Tip { first, next } = log.tip().await?;
    output::line("")?;
    output::line("summary")?;
    output::line(&format!(
        "  entries    {entries} in the log, {} appended by this run",
        next - start
    ))?;
    if next > first {
        output::line(&format!("  seqnums    {first}..={}", next - 1))?;
    }
    let mut streams: Vec<String> = Vec::new();
    for t in [&tags.stock, &tags.orders, &tags.inventory, &tags.shipments] {
        streams.push(match log.latest_version(t).await? {
            Some(v) => format!("{t} v{v}"),
            None => format!("{t} (empty)"),
        });
    }
    output::line(&format!("  streams    {}", streams.join(", ")))?;
    let tag_counts: Vec<String> = per_tag.iter().map(|(ns, n)| format!("{ns}: {n}")).collect();
    output::line(&format!(
        "  tags       {} distinct; entries per namespace: {}",
        distinct.len(),
        tag_counts.join(", ")
    ))?;
    output::line(&format!(
        "  orders     {} placed, {} reserved and shipped, {} rejected (all runs)",
        inv.placed, inv.reserved, inv.rejected
    ))?;
    let stock: Vec<String> = inv.stock.iter().map(|(i, n)| format!("{i} {n}")).collect();
    output::line(&format!("  stock      {}", stock.join(", ")))?;
    output::line(&format!("  elapsed    {:.2?}", started.elapsed()))?;
    Ok(())
}
