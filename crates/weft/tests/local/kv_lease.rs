//! Leases and the version fence: claims, expiry, takeover, renew, release,
//! and a taken-over holder rejected by the log.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Barrier;
use weft::clock::ManualClock;
use weft::exec::FencedWriter;
use weft::kv::Lease;
use weft::{AppendRequest, ErrorKind, Log, LogTag, ViewKv};

const TTL: Duration = Duration::from_secs(10);

fn stream_kv(log: &Log) -> (LogTag, ViewKv) {
    let tag = LogTag::with_key("execution", "exec-1").unwrap();
    let kv = log.kv(tag.clone()).unwrap();
    (tag, kv)
}

#[tokio::test]
async fn an_unexpired_lease_is_not_taken() {
    let log = Log::memory();
    let (_, kv) = stream_kv(&log);
    let clock = ManualClock::new(1_000);
    let a = Lease::acquire(&kv, "owner", "a", TTL, clock.clone())
        .await
        .unwrap()
        .expect("free key");
    assert_eq!(a.expires_at_ms(), 11_000);
    clock.advance(9_999);
    assert!(!a.is_expired());
    assert!(
        Lease::acquire(&kv, "owner", "b", TTL, clock.clone())
            .await
            .unwrap()
            .is_none()
    );
    // Even the same holder id cannot claim twice while the first is valid.
    assert!(
        Lease::acquire(&kv, "owner", "a", TTL, clock.clone())
            .await
            .unwrap()
            .is_none()
    );
    let current = Lease::current(&kv, "owner").await.unwrap().unwrap();
    assert_eq!(current.holder, "a");
    clock.advance(1);
    assert!(a.is_expired());
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_and_the_stale_holder_cannot_release_or_renew() {
    let log = Log::memory();
    let (_, kv) = stream_kv(&log);
    let clock = ManualClock::new(0);
    let mut a = Lease::acquire(&kv, "owner", "a", TTL, clock.clone())
        .await
        .unwrap()
        .unwrap();
    clock.advance(10_000);
    let b = Lease::acquire(&kv, "owner", "b", TTL, clock.clone())
        .await
        .unwrap()
        .expect("expired lease is free");
    assert!(!a.renew().await.unwrap(), "a lost its lease");
    assert!(!a.release().await.unwrap(), "a cannot free b's claim");
    assert_eq!(
        Lease::current(&kv, "owner").await.unwrap().unwrap().holder,
        "b"
    );
    assert!(b.release().await.unwrap());
    assert!(Lease::current(&kv, "owner").await.unwrap().is_none());
}

#[tokio::test]
async fn renewal_extends_and_keeps_others_out() {
    let log = Log::memory();
    let (_, kv) = stream_kv(&log);
    let clock = ManualClock::new(0);
    let mut a = Lease::acquire(&kv, "owner", "a", TTL, clock.clone())
        .await
        .unwrap()
        .unwrap();
    clock.advance(8_000);
    assert!(a.renew().await.unwrap());
    assert_eq!(a.expires_at_ms(), 18_000);
    clock.advance(8_000); // past the first expiry, before the renewed one
    assert!(
        Lease::acquire(&kv, "owner", "b", TTL, clock.clone())
            .await
            .unwrap()
            .is_none()
    );
    // Renewing in the same millisecond writes nothing and still holds.
    assert!(a.renew().await.unwrap());
    assert!(a.renew().await.unwrap());
    // An expired lease that nobody took over can still be renewed.
    clock.advance(60_000);
    assert!(a.is_expired());
    assert!(a.renew().await.unwrap());
    assert!(!a.is_expired());
    // A released lease cannot be renewed through a stale copy of its bytes:
    // release consumes the handle, and a fresh claim by b succeeds at once.
    assert!(a.release().await.unwrap());
    assert!(
        Lease::acquire(&kv, "owner", "b", TTL, clock.clone())
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_takeover_of_an_expired_lease_has_one_winner() {
    let log = Log::memory();
    let (_, kv) = stream_kv(&log);
    let clock = ManualClock::new(0);
    for round in 0..100u64 {
        // Whoever holds it now lets it expire.
        clock.advance(TTL.as_millis() as u64);
        let barrier = Arc::new(Barrier::new(8));
        let tasks: Vec<_> = (0..8)
            .map(|c| {
                let (kv, clock, barrier) = (kv.clone(), clock.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    Lease::acquire(&kv, "owner", &format!("r{round}-c{c}"), TTL, clock)
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            if let Some(lease) = task.await.unwrap() {
                winners.push(lease.holder().to_owned());
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let current = Lease::current(&kv, "owner").await.unwrap().unwrap();
        assert_eq!(current.holder, winners[0]);
    }
}

#[tokio::test]
async fn lease_takeover_still_fences_the_old_holders_append() {
    // The raw pattern: claim, remember the version, append_if at it.
    let log = Log::memory();
    let (tag, kv) = stream_kv(&log);
    let clock = ManualClock::new(0);

    let a = Lease::acquire(&kv, "owner", "a", TTL, clock.clone())
        .await
        .unwrap()
        .unwrap();
    let a_saw = log.next_version(&tag).await.unwrap();
    log.append_if(AppendRequest::new(tag.clone(), "a-1"), a_saw)
        .await
        .unwrap();
    let a_saw = a_saw + 1;

    // a pauses past its lease; b takes over, reads the stream, writes.
    clock.advance(30_000);
    let b = Lease::acquire(&kv, "owner", "b", TTL, clock.clone())
        .await
        .unwrap()
        .unwrap();
    let b_saw = log.next_version(&tag).await.unwrap();
    assert_eq!(b_saw, a_saw);
    log.append_if(AppendRequest::new(tag.clone(), "b-1"), b_saw)
        .await
        .unwrap();

    // a wakes up and writes at the version it last saw: rejected by the log.
    let err = log
        .append_if(AppendRequest::new(tag.clone(), "a-2"), a_saw)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(err.conflict_next_version(), Some(b_saw + 1));
    let data: Vec<_> = log
        .read_all(&tag)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.data)
        .collect();
    assert_eq!(data, vec!["a-1", "b-1"]);
    assert!(!a.release().await.unwrap());
    assert!(b.release().await.unwrap());
}

#[tokio::test]
async fn fenced_writer_rejects_a_taken_over_holder_even_with_a_stalled_clock() {
    let log = Log::memory();
    let stream = log.view(LogTag::with_key("execution", "exec-2").unwrap());
    // a's clock never moves, so a believes its lease is valid throughout.
    let a_clock = ManualClock::new(0);
    let b_clock = ManualClock::new(0);
    let mut a = FencedWriter::claim(stream.clone(), "owner", "a", TTL, a_clock)
        .await
        .unwrap()
        .unwrap();
    a.append("a-1").await.unwrap();
    assert_eq!(a.next_version(), 1);

    // While b's clock says a's lease is valid, b cannot claim.
    assert!(
        FencedWriter::claim(stream.clone(), "owner", "b", TTL, b_clock.clone())
            .await
            .unwrap()
            .is_none()
    );
    b_clock.advance(10_000);
    let mut b = FencedWriter::claim(stream.clone(), "owner", "b", TTL, b_clock.clone())
        .await
        .unwrap()
        .unwrap();
    // b folds what a wrote before deciding.
    assert!(b.catch_up().await.unwrap().is_empty());
    assert_eq!(b.next_version(), 1);
    b.append("b-1").await.unwrap();

    assert!(!a.lease().is_expired(), "a's clock stalled");
    let err = a.append("a-2").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(err.conflict_next_version(), Some(2));
    // a re-reads: it learns b wrote, and its renewal fails: it steps down.
    let missed = a.catch_up().await.unwrap();
    assert_eq!(missed.len(), 1);
    assert_eq!(&missed[0].data[..], b"b-1");
    assert!(!a.renew().await.unwrap());
    assert!(!a.release().await.unwrap());

    // b's own clock expiring stops b locally before it even tries the log.
    b_clock.advance(10_000);
    let err = b.append("b-2").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(b.renew().await.unwrap());
    b.append("b-2").await.unwrap();

    let data: Vec<_> = stream
        .read_all()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.data)
        .collect();
    assert_eq!(data, vec!["a-1", "b-1", "b-2"]);
    assert!(b.release().await.unwrap());
}

#[tokio::test]
async fn fenced_writer_with_lease_fences_at_the_current_version() {
    let log = Log::memory();
    let stream = log.view(LogTag::with_key("execution", "exec-3").unwrap());
    stream.append("before-0").await.unwrap();
    stream.append("before-1").await.unwrap();
    let lease = Lease::acquire(
        &stream.kv().unwrap(),
        "owner",
        "a",
        TTL,
        ManualClock::new(0),
    )
    .await
    .unwrap()
    .unwrap();
    let mut w = FencedWriter::with_lease(stream.clone(), lease)
        .await
        .unwrap();
    assert_eq!(w.next_version(), 2);
    assert!(w.catch_up().await.unwrap().is_empty());
    w.append("mine").await.unwrap();
    assert_eq!(w.next_version(), 3);
}

#[tokio::test]
async fn a_non_lease_value_is_corrupt_not_a_panic() {
    let log = Log::memory();
    let (_, kv) = stream_kv(&log);
    kv.set("owner", "garbage").await.unwrap();
    let err = Lease::acquire(&kv, "owner", "a", TTL, ManualClock::new(0))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    let err = Lease::acquire(&kv, "owner", "", TTL, ManualClock::new(0))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}
