//! A first tour of weft on the in-memory backend: append, read, read from
//! a position, fold a tag page by page, subscribe, entries with several
//! tags, and a view.
//!
//! Run with `cargo run -p weft --example quick_start`.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use weft::{AppendRequest, Error, ErrorKind, Log, LogTag, Position, Subscription};

/// The next entry of `sub`, or an error if none comes within a few seconds.
async fn next_text(sub: &mut Subscription) -> weft::Result<String> {
    let entry = tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .map_err(|_| Error::new(ErrorKind::Unavailable, "no entry within 5 s"))?
        .ok_or_else(|| Error::closed("the subscription ended"))??;
    Ok(String::from_utf8_lossy(&entry.data).into_owned())
}

/// Runs the tour; an assertion fails if any step behaves otherwise.
#[tokio::main]
pub async fn main() -> weft::Result<()> {
    let log = Log::memory();
    let orders = LogTag::new("orders")?;
    let inventory = LogTag::new("inventory")?;

    // Append: every entry gets a global seqnum and a version within its
    // (primary) tag's stream.
    let placed = log
        .append(AppendRequest::new(orders.clone(), "order-placed"))
        .await?;
    println!(
        "placed: seqnum={} version={}",
        placed.seqnum, placed.stream_version
    );
    assert_eq!((placed.seqnum, placed.stream_version), (0, 0));

    // Subscribe from the beginning: the entry above arrives as backlog,
    // everything appended later arrives live, in order.
    let mut sub = log.subscribe(&orders, Position::Beginning);

    // Another stream interleaves: its seqnums are global, its versions its own.
    let stock = log
        .append(AppendRequest::new(inventory.clone(), "-10 units"))
        .await?;
    assert_eq!((stock.seqnum, stock.stream_version), (1, 0));

    // One entry, two tags: visible from the namespace-wide stream and from
    // the one order's stream. The first tag is primary and numbers it.
    let order_42 = LogTag::with_key("orders", "order-42")?;
    let confirmed = log
        .append(AppendRequest::new(orders.clone(), "order-confirmed").with_tag(order_42.clone()))
        .await?;
    assert_eq!((confirmed.seqnum, confirmed.stream_version), (2, 1));

    // Read everything of a tag.
    let all_orders = log.read_all(&orders).await?;
    assert_eq!(all_orders.len(), 2);
    let just_42 = log.read_all(&order_42).await?;
    assert_eq!(just_42.len(), 1);
    assert_eq!(&just_42[0].data[..], b"order-confirmed");
    assert_eq!(just_42[0].tags, vec![orders.clone(), order_42.clone()]);

    // Read from a position: seqnums are global, so start at the one we hold.
    let from_confirmed = log
        .read_from(&orders, Position::At(confirmed.seqnum), 10)
        .await?;
    assert_eq!(from_confirmed.len(), 1);
    // Version-keyed reads use the stream's own numbering instead.
    let after_v0 = log.read_after_version(&orders, 0).await?;
    assert_eq!(after_v0.len(), 1);
    assert_eq!(after_v0[0].seqnum, confirmed.seqnum);

    // Fold a tag without holding it all: the stream fetches bounded pages
    // as it is polled, and ends at the end of the log.
    let bytes = log
        .stream(&orders, Position::Beginning)
        .try_fold(0, |n, e| async move { Ok(n + e.data.len()) })
        .await?;
    assert_eq!(bytes, "order-placed".len() + "order-confirmed".len());

    // A view: a window on one tag; its appends always carry that tag.
    let view = log.view(orders.clone());
    let shipped = view.append("order-shipped").await?;
    assert_eq!(shipped.stream_version, 2);
    assert_eq!(view.latest_version().await?, Some(2));
    assert_eq!(view.check_tail().await?, Some(shipped.seqnum));

    // The subscription saw the backlog and the live entries, nothing else.
    let mut received = Vec::new();
    for _ in 0..3 {
        received.push(next_text(&mut sub).await?);
    }
    println!("subscription received: {received:?}");
    assert_eq!(
        received,
        ["order-placed", "order-confirmed", "order-shipped"]
    );

    // Conditional append: only if the stream is still where we saw it.
    let stale = view.append_if("order-cancelled", 2).await;
    assert_eq!(stale.unwrap_err().kind(), ErrorKind::Conflict);
    view.append_if("order-delivered", view.next_version().await?)
        .await?;
    assert_eq!(view.read_all().await?.len(), 4);
    Ok(())
}
