//! An executor that ships orders: it rebuilds its state from the backlog on
//! startup, then handles new orders as they arrive, one shipment per round.
//!
//! The state is a fold of the `orders` stream, and every shipment the
//! executor appends carries the `orders` tag, so it is folded back: the
//! state knows which orders already shipped. That is why the second engine
//! at the end, started over the same log, ships nothing twice.
//!
//! Run with `cargo run -p weft --example order_fulfilment`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use weft::exec::{Executor, ExecutorContext, ExecutorEngine, ExecutorSnapshot, StateWatch};
use weft::{AppendRequest, Codec, Error, ErrorKind, JsonCodec, Log, LogEntry, LogTag, Result};

/// What happens to an order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum OrderEvent {
    Placed { order: String, items: u32 },
    Shipped { order: String },
}

/// The folded state: orders waiting, and orders shipped (with how often,
/// which must stay 1).
#[derive(Clone, Debug, Default, PartialEq)]
struct Fulfilment {
    waiting: BTreeMap<String, u32>,
    shipped: BTreeMap<String, u32>,
}

/// Ships the oldest waiting order on every round.
struct Shipper {
    orders: LogTag,
    codec: JsonCodec<OrderEvent>,
}

impl Executor for Shipper {
    type State = Fulfilment;

    fn name(&self) -> &str {
        "shipper"
    }

    fn input_tag(&self) -> LogTag {
        self.orders.clone()
    }

    fn initial_state(&self) -> Fulfilment {
        Fulfilment::default()
    }

    fn apply(&self, state: &mut Fulfilment, entry: &LogEntry) -> Result<()> {
        match self.codec.decode(&entry.data)? {
            OrderEvent::Placed { order, items } => {
                state.waiting.insert(order, items);
            }
            OrderEvent::Shipped { order } => {
                state.waiting.remove(&order);
                *state.shipped.entry(order).or_default() += 1;
            }
        }
        Ok(())
    }

    async fn execute(
        &self,
        state: &Fulfilment,
        _ctx: &mut ExecutorContext,
    ) -> Result<Vec<AppendRequest>> {
        // One shipment per round: the shipment comes back as a new entry,
        // which starts the next round.
        let Some(order) = state.waiting.keys().next() else {
            return Ok(Vec::new());
        };
        let event = OrderEvent::Shipped {
            order: order.clone(),
        };
        let request = AppendRequest::new(self.orders.clone(), self.codec.encode(&event)?)
            .with_tag(LogTag::with_key("orders", order.as_str())?);
        Ok(vec![request])
    }
}

fn shipper() -> Result<Shipper> {
    Ok(Shipper {
        orders: LogTag::new("orders")?,
        codec: JsonCodec::new(),
    })
}

async fn place(log: &Log, order: &str, items: u32) -> Result<()> {
    let event = OrderEvent::Placed {
        order: order.into(),
        items,
    };
    log.append(AppendRequest::new(
        LogTag::new("orders")?,
        JsonCodec::new().encode(&event)?,
    ))
    .await?;
    Ok(())
}

/// Waits (at most a few seconds) until `n` orders shipped and none waits.
async fn all_shipped(
    watch: &mut StateWatch<Fulfilment>,
    n: usize,
) -> Result<ExecutorSnapshot<Fulfilment>> {
    let wait = watch.wait_for(|s| s.state.shipped.len() == n && s.state.waiting.is_empty());
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .map_err(|_| Error::new(ErrorKind::Unavailable, "orders did not ship within 10 s"))?
}

/// Places orders before and after the executor starts, checks each ships
/// exactly once, then restarts and checks nothing ships again.
#[tokio::main]
pub async fn main() -> Result<()> {
    let log = Log::memory();

    // A backlog, written before any executor runs.
    for (order, items) in [("o-1", 2), ("o-2", 1), ("o-3", 5)] {
        place(&log, order, items).await?;
    }

    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(shipper()?)?;
    let handle = engine.start()?;

    // The replay rebuilt the backlog; the executor ships it round by round.
    let snap = all_shipped(&mut watch, 3).await?;
    println!("backlog shipped: {:?}", snap.state.shipped.keys());

    // New orders are handled incrementally.
    place(&log, "o-4", 1).await?;
    place(&log, "o-5", 3).await?;
    let first_run = all_shipped(&mut watch, 5).await?;
    assert!(first_run.state.shipped.values().all(|&times| times == 1));
    assert_eq!(first_run.appended, 5);
    let orders = LogTag::new("orders")?;
    let entries = log.read_all(&orders).await?.len();
    assert_eq!(entries, 10, "5 placed + 5 shipped");
    // Each shipment also sits in the order's own stream.
    assert_eq!(
        log.read_all(&LogTag::with_key("orders", "o-4")?)
            .await?
            .len(),
        1
    );
    handle.shutdown().await;

    // A restart replays everything, ships nothing twice.
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch = engine.register(shipper()?)?;
    let handle = engine.start()?;
    let second_run = all_shipped(&mut watch, 5).await?;
    assert_eq!(second_run.state, first_run.state);
    assert_eq!(second_run.appended, 0);
    assert_eq!(log.read_all(&orders).await?.len(), entries);
    println!(
        "after restart: {} shipped, {} appended",
        second_run.state.shipped.len(),
        second_run.appended
    );
    handle.shutdown().await;
    Ok(())
}
