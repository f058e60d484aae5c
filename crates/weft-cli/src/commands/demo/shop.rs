//! The demo's system: a tiny shop whose whole state is the log.
//!
//! * The customer (the demo driver) restocks the warehouse once per run and
//!   places orders on `orders` (each also tagged `orders:o-N`), with
//!   conditional appends.
//! * The `inventory` executor folds `orders`: it decides each order the
//!   moment it folds it (reserve if the stock covers it, else reject), and
//!   publishes the decision on `inventory`, also tagged `orders` so the
//!   decision folds back and is never published twice.
//! * The `shipping` executor folds `inventory` and ships every reserved
//!   order on `shipments`, also tagged `inventory` for the same reason.
//!
//! Decisions are taken inside `apply`, in log order, so the outcome depends
//! only on the order of restocks and orders in the log — not on timing, on
//! how entries are batched, or on where a previous run was interrupted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weft::exec::{Executor, ExecutorContext};
use weft::{AppendRequest, Error, LogEntry, LogTag, Result};

/// The items the shop sells.
pub(crate) const ITEMS: [&str; 3] = ["widget", "gadget", "gizmo"];

/// How many of each item one restock delivers.
pub(crate) const RESTOCK_QTY: u64 = 4;

/// Every payload the shop writes, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event {
    /// The warehouse received `qty` of every item (run `run` of the demo).
    Restocked { run: u64, qty: u64 },
    /// A customer ordered `qty` of `item`.
    Placed {
        order: String,
        item: String,
        qty: u64,
    },
    /// The inventory set the items aside.
    Reserved {
        order: String,
        item: String,
        qty: u64,
    },
    /// The inventory could not cover the order.
    Rejected {
        order: String,
        item: String,
        qty: u64,
        left: u64,
    },
    /// The order left the warehouse.
    Shipped { order: String, parcel: String },
}

impl Event {
    /// Decodes a payload.
    ///
    /// Errors: `InvalidInput` for a payload that is not a shop event.
    pub(crate) fn decode(entry: &LogEntry) -> Result<Event> {
        serde_json::from_slice(&entry.data).map_err(|e| {
            Error::invalid_input(format!(
                "entry {} is not a demo event (is this a demo log?)",
                entry.seqnum
            ))
            .with_source(e)
        })
    }

    /// Encodes the event as a payload.
    pub(crate) fn encode(&self) -> Vec<u8> {
        // Serializing a plain enum of strings and integers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The shop's tags.
#[derive(Debug, Clone)]
pub(crate) struct Tags {
    pub(crate) stock: LogTag,
    pub(crate) orders: LogTag,
    pub(crate) inventory: LogTag,
    pub(crate) shipments: LogTag,
}

impl Tags {
    pub(crate) fn new() -> Result<Tags> {
        Ok(Tags {
            stock: LogTag::new("stock")?,
            orders: LogTag::new("orders")?,
            inventory: LogTag::new("inventory")?,
            shipments: LogTag::new("shipments")?,
        })
    }

    /// The tag of one order.
    pub(crate) fn order(&self, order: &str) -> Result<LogTag> {
        LogTag::with_key("orders", order)
    }
}

/// The order number `n` (0-based) as its id, and what it asks for. A fixed
/// formula, so every run of the demo places the same orders.
pub(crate) fn order_spec(n: u64) -> (String, &'static str, u64) {
    let item = ITEMS[((n * 7 + n / 3) % ITEMS.len() as u64) as usize];
    let qty = 1 + (n * 5 + 1) % 3;
    (format!("o-{}", n + 1), item, qty)
}

/// A decision the inventory took and has yet to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) event: Event,
}

/// What the inventory executor folds `orders` into.
#[derive(Debug, Clone, Default)]
pub(crate) struct InventoryState {
    pub(crate) stock: BTreeMap<String, u64>,
    pub(crate) placed: u64,
    pub(crate) reserved: u64,
    pub(crate) rejected: u64,
    /// Decisions taken but not yet seen in the log, by order id.
    pub(crate) unpublished: BTreeMap<String, Decision>,
}

impl InventoryState {
    /// Every placed order has its decision in the log.
    pub(crate) fn settled(&self) -> bool {
        self.unpublished.is_empty() && self.reserved + self.rejected == self.placed
    }
}

/// Reserves or rejects orders against the stock.
#[derive(Debug)]
pub(crate) struct Inventory {
    pub(crate) tags: Tags,
}

impl Executor for Inventory {
    type State = InventoryState;

    fn name(&self) -> &str {
        "inventory"
    }

    fn input_tag(&self) -> LogTag {
        self.tags.orders.clone()
    }

    fn initial_state(&self) -> InventoryState {
        InventoryState::default()
    }

    fn apply(&self, state: &mut InventoryState, entry: &LogEntry) -> Result<()> {
        match Event::decode(entry)? {
            Event::Restocked { qty, .. } => {
                for item in ITEMS {
                    *state.stock.entry(item.to_owned()).or_default() += qty;
                }
            }
            Event::Placed { order, item, qty } => {
                state.placed += 1;
                let left = state.stock.entry(item.clone()).or_default();
                let event = if *left >= qty {
                    *left -= qty;
                    Event::Reserved {
                        order: order.clone(),
                        item,
                        qty,
                    }
                } else {
                    Event::Rejected {
                        order: order.clone(),
                        item,
                        qty,
                        left: *left,
                    }
                };
                state.unpublished.insert(order, Decision { event });
            }
            Event::Reserved { order, .. } => {
                state.reserved += 1;
                state.unpublished.remove(&order);
            }
            Event::Rejected { order, .. } => {
                state.rejected += 1;
                state.unpublished.remove(&order);
            }
            Event::Shipped { .. } => {}
        }
        Ok(())
    }

    async fn execute(
        &self,
        state: &InventoryState,
        _ctx: &mut ExecutorContext,
    ) -> Result<Vec<AppendRequest>> {
        state
            .unpublished
            .iter()
            .map(|(order, decision)| {
                Ok(
                    AppendRequest::new(self.tags.inventory.clone(), decision.event.encode())
                        .with_tag(self.tags.orders.clone())
                        .with_tag(self.tags.order(order)?),
                )
            })
            .collect()
    }
}

/// What the shipping executor folds `inventory` into.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShippingState {
    /// Reserved orders not yet shipped.
    pub(crate) waiting: BTreeMap<String, ()>,
    pub(crate) reserved: u64,
    pub(crate) shipped: u64,
}

/// Ships reserved orders.
#[derive(Debug)]
pub(crate) struct Shipping {
    pub(crate) tags: Tags,
}

impl Executor for Shipping {
    type State = ShippingState;

    fn name(&self) -> &str {
        "shipping"
    }

    fn input_tag(&self) -> LogTag {
        self.tags.inventory.clone()
    }

    fn initial_state(&self) -> ShippingState {
        ShippingState::default()
    }

    fn apply(&self, state: &mut ShippingState, entry: &LogEntry) -> Result<()> {
        match Event::decode(entry)? {
            Event::Reserved { order, .. } => {
                state.reserved += 1;
                state.waiting.insert(order, ());
            }
            Event::Shipped { order, .. } => {
                state.shipped += 1;
                state.waiting.remove(&order);
            }
            _ => {}
        }
        Ok(())
    }

    async fn execute(
        &self,
        state: &ShippingState,
        _ctx: &mut ExecutorContext,
    ) -> Result<Vec<AppendRequest>> {
        state
            .waiting
            .keys()
            .map(|order| {
                let parcel = format!("parcel-{}", order.trim_start_matches("o-"));
                let event = Event::Shipped {
                    order: order.clone(),
                    parcel,
                };
                Ok(
                    AppendRequest::new(self.tags.shipments.clone(), event.encode())
                        .with_tag(self.tags.inventory.clone())
                        .with_tag(self.tags.order(order)?),
                )
            })
            .collect()
    }
}

/// One entry of the shop for people.
pub(crate) fn describe(entry: &LogEntry) -> String {
    let what = match Event::decode(entry) {
        Ok(Event::Restocked { run, qty }) => {
            format!("warehouse restocked for run {run}: +{qty} of every item")
        }
        Ok(Event::Placed { order, item, qty }) => format!("{order} placed: {qty} x {item}"),
        Ok(Event::Reserved { order, item, qty }) => {
            format!("{order} reserved: {qty} x {item} set aside")
        }
        Ok(Event::Rejected {
            order,
            item,
            qty,
            left,
        }) => {
            format!("{order} rejected: {qty} x {item} wanted, {left} left")
        }
        Ok(Event::Shipped { order, parcel }) => format!("{order} shipped as {parcel}"),
        Err(_) => crate::output::payload_text(&entry.data),
    };
    let primary = entry
        .tags
        .first()
        .map(ToString::to_string)
        .unwrap_or_default();
    format!(
        "  #{:<4} {:<10} v{:<3} {what}",
        entry.seqnum, primary, entry.stream_version
    )
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn entry(seqnum: u64, event: &Event) -> LogEntry {
        LogEntry {
            seqnum,
            stream_version: seqnum,
            tags: vec![LogTag::new("orders").unwrap()],
            data: Bytes::from(event.encode()),
            timestamp_ms: 0,
            append_id: None,
        }
    }

    #[test]
    fn the_inventory_decides_in_log_order() {
        let inv = Inventory {
            tags: Tags::new().unwrap(),
        };
        let mut s = inv.initial_state();
        inv.apply(&mut s, &entry(0, &Event::Restocked { run: 1, qty: 2 }))
            .unwrap();
        let place = |order: &str, qty| Event::Placed {
            order: order.into(),
            item: "widget".into(),
            qty,
        };
        inv.apply(&mut s, &entry(1, &place("o-1", 2))).unwrap();
        inv.apply(&mut s, &entry(2, &place("o-2", 1))).unwrap();
        assert!(matches!(s.unpublished["o-1"].event, Event::Reserved { .. }));
        assert!(matches!(
            s.unpublished["o-2"].event,
            Event::Rejected { left: 0, .. }
        ));
        assert!(!s.settled());
        let decided = s.unpublished["o-1"].event.clone();
        inv.apply(&mut s, &entry(3, &decided)).unwrap();
        assert_eq!((s.reserved, s.unpublished.len()), (1, 1));
    }

    #[test]
    fn orders_are_a_fixed_sequence() {
        assert_eq!(order_spec(0), ("o-1".to_owned(), "widget", 2));
        assert_eq!(order_spec(0), order_spec(0));
        let items: std::collections::BTreeSet<_> = (0..9).map(|n| order_spec(n).1).collect();
        assert_eq!(items.len(), ITEMS.len());
    }
}
