//! Typed views: domain values in and out instead of bytes, through a codec.
//!
//! `JsonCodec` writes readable, self-describing JSON; `PostcardCodec`
//! writes compact binary (field order is its schema, so only append
//! fields). A payload that does not decode is a `Corrupt` error that names
//! the entry, never a panic.
//!
//! Run with `cargo run -p weft --example typed_views`.

use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use weft::{
    Error, ErrorDetail, ErrorKind, JsonCodec, Log, LogTag, Position, PostcardCodec, Result,
};

/// An event on an order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum OrderEvent {
    Placed { order: String, lines: Vec<Line> },
    Paid { order: String, cents: u64 },
    Cancelled { order: String, reason: String },
}

/// One line of an order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Line {
    sku: String,
    quantity: u32,
}

fn sample_events() -> Vec<OrderEvent> {
    vec![
        OrderEvent::Placed {
            order: "o-42".into(),
            lines: vec![
                Line {
                    sku: "tea".into(),
                    quantity: 2,
                },
                Line {
                    sku: "cup".into(),
                    quantity: 1,
                },
            ],
        },
        OrderEvent::Paid {
            order: "o-42".into(),
            cents: 1_250,
        },
        OrderEvent::Cancelled {
            order: "o-7".into(),
            reason: "out of stock".into(),
        },
    ]
}

/// Writes the same events through both codecs, reads them back, follows
/// them with a typed subscription, and shows a decode failure.
#[tokio::main]
pub async fn main() -> Result<()> {
    let log = Log::memory();
    let json = log.typed_view(LogTag::new("orders.json")?, JsonCodec::<OrderEvent>::new());
    let compact = log.typed_view(
        LogTag::new("orders.postcard")?,
        PostcardCodec::<OrderEvent>::new(),
    );

    // A typed subscription, opened before the appends.
    let mut live = compact.subscribe(Position::Beginning);

    let events = sample_events();
    for event in &events {
        json.append(event).await?;
        compact.append(event).await?;
    }

    // Reads give back (entry, value) pairs: the values, with seqnums and
    // versions at hand.
    let from_json: Vec<OrderEvent> = json.read_all().await?.into_iter().map(|(_, v)| v).collect();
    let from_postcard: Vec<(weft::LogEntry, OrderEvent)> = compact.read_all().await?;
    assert_eq!(from_json, events);
    assert_eq!(
        from_postcard
            .iter()
            .map(|(_, v)| v.clone())
            .collect::<Vec<_>>(),
        events
    );

    // Same values, different sizes on the log.
    let json_bytes: usize = json
        .view()
        .read_all()
        .await?
        .iter()
        .map(|e| e.data.len())
        .sum();
    let postcard_bytes: usize = from_postcard.iter().map(|(e, _)| e.data.len()).sum();
    println!("json: {json_bytes} bytes, postcard: {postcard_bytes} bytes");
    assert!(postcard_bytes < json_bytes);

    // Version-keyed typed reads: what came after the first event.
    let later = compact.read_after_version(0).await?;
    assert_eq!(later.len(), 2);
    assert_eq!(later[0].1, events[1]);

    // The typed subscription decodes as it goes.
    for expected in &events {
        let (entry, value) = tokio::time::timeout(Duration::from_secs(5), live.next())
            .await
            .map_err(|_| Error::new(ErrorKind::Unavailable, "no event within 5 s"))?
            .ok_or_else(|| Error::closed("the subscription ended"))??;
        assert_eq!(&value, expected);
        assert_eq!(entry.primary_tag(), compact.view().tag());
    }

    // Bytes that are not JSON for this type: a Corrupt error naming the entry.
    let bad = json.view().append("{not json").await?;
    let err = json.read_all().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert_eq!(
        err.detail(),
        Some(&ErrorDetail::Decode { seqnum: bad.seqnum })
    );
    println!("decode failure reported: {err}");
    // Reading around the bad entry still works.
    assert_eq!(json.read_from(Position::Beginning, 3).await?.len(), 3);
    Ok(())
}
