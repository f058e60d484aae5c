//! Leases: time-limited claims on a KV key, decided by compare-and-set.
//!
//! A [`Lease`] records "holder H owns this until T" under one key of a
//! [`ViewKv`]. Every change goes through the KV's compare-and-set, so:
//!
//! * of many contenders for a free key exactly one wins (`set_if_absent`);
//! * an expired claim is taken over by swapping out the exact bytes that
//!   were read, so two contenders that both see it expired cannot both win;
//! * renewing and releasing compare against the bytes this handle wrote,
//!   so a holder that lost its claim can neither extend nor free the claim
//!   that replaced it.
//!
//! Expiry is judged by an injected [`Clock`], and clocks can be wrong (a
//! paused process, skew between machines). A lease alone therefore never
//! guards a write: pair it with a conditional append on the version the
//! holder last saw ([`FencedWriter`](crate::exec::FencedWriter) does both),
//! so a holder whose lease was taken over is rejected by the log itself.
//!
//! ## Stored value
//!
//! `[format u8 = 1][expires_at_ms u64 LE][holder UTF-8]`. The expiry is part
//! of the value, so every acquisition and renewal writes different bytes.
//! Holder ids must be unique per contender: two contenders sharing an id
//! could write identical bytes and be mistaken for each other.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use std::time::Duration;
//! use weft::clock::ManualClock;
//! use weft::kv::Lease;
//! use weft::{Log, LogTag};
//!
//! let log = Log::memory();
//! let kv = log.kv(LogTag::with_key("execution", "exec-1")?)?;
//! let clock = ManualClock::new(1_000);
//! let ttl = Duration::from_secs(10);
//!
//! let a = Lease::acquire(&kv, "owner", "node-a", ttl, clock.clone()).await?.unwrap();
//! assert!(Lease::acquire(&kv, "owner", "node-b", ttl, clock.clone()).await?.is_none());
//!
//! clock.advance(10_000); // node-a's claim has now expired
//! let b = Lease::acquire(&kv, "owner", "node-b", ttl, clock.clone()).await?.unwrap();
//! assert!(!a.release().await?, "a stale holder cannot free node-b's claim");
//! assert_eq!(Lease::current(&kv, "owner").await?.unwrap().holder, "node-b");
//! assert!(b.release().await?);
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use super::ViewKv;
use crate::clock::Clock;
use crate::error::{Error, Result};

/// The format byte that starts every stored lease value.
const LEASE_FORMAT: u8 = 1;

/// Bytes before the holder id: format byte and expiry.
const HEADER_BYTES: usize = 1 + 8;

/// The longest holder id, in bytes.
pub const MAX_HOLDER_BYTES: usize = 255;

/// How many read-compare rounds `acquire` tries before giving up. Every
/// failed round means another contender changed the key in between, so the
/// bound only matters under a storm of claims and releases.
const ACQUIRE_ATTEMPTS: usize = 16;

/// What a lease key holds: who claimed it, until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The holder id.
    pub holder: String,
    /// When the claim expires, in milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
}

impl LeaseRecord {
    /// True when the claim has expired at `now_ms`.
    pub fn is_expired_at(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_at_ms
    }

    fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(HEADER_BYTES + self.holder.len());
        out.put_u8(LEASE_FORMAT);
        out.put_u64_le(self.expires_at_ms);
        out.put_slice(self.holder.as_bytes());
        out.freeze()
    }

    /// Decodes a stored lease value.
    ///
    /// Errors: `Corrupt` when the bytes are not a lease of a known format.
    pub fn decode(key: &str, bytes: &[u8]) -> Result<LeaseRecord> {
        let (header, holder) = bytes.split_at_checked(HEADER_BYTES).ok_or_else(|| {
            Error::corrupt(format!(
                "kv key {key:?} holds {} bytes, too short for a lease",
                bytes.len()
            ))
        })?;
        let (format, expiry) = header
            .split_first()
            .ok_or_else(|| Error::corrupt(format!("kv key {key:?} holds an empty lease")))?;
        if *format != LEASE_FORMAT {
            return Err(Error::corrupt(format!(
                "kv key {key:?} holds lease format {format}, expected {LEASE_FORMAT}"
            )));
        }
        let expiry: [u8; 8] = expiry
            .try_into()
            .map_err(|_| Error::corrupt(format!("kv key {key:?} holds a truncated lease")))?;
        let holder = std::str::from_utf8(holder).map_err(|e| {
            Error::corrupt(format!(
                "kv key {key:?} holds a lease whose holder is not UTF-8"
            ))
            .with_source(e)
        })?;
        Ok(LeaseRecord {
            holder: holder.to_owned(),
            expires_at_ms: u64::from_le_bytes(expiry),
        })
    }
}

fn validate_holder(holder: &str) -> Result<()> {
    if holder.is_empty() {
        return Err(Error::invalid_input("lease holder id is empty"));
    }
    if holder.len() > MAX_HOLDER_BYTES {
        return Err(Error::invalid_input(format!(
            "lease holder id is {} bytes; the limit is {MAX_HOLDER_BYTES}",
            holder.len()
        )));
    }
    if holder.chars().any(char::is_control) {
        return Err(Error::invalid_input(format!(
            "lease holder id {holder:?} contains a control character"
        )));
    }
    Ok(())
}

fn ttl_ms(ttl: Duration) -> Result<u64> {
    let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return Err(Error::invalid_input(
            "a lease needs a time-to-live of at least 1 ms",
        ));
    }
    Ok(ms)
}

/// A claim this process holds on one KV key.
///
/// Dropping a `Lease` does not release it (the claim simply expires); call
/// [`Lease::release`] to free it early.
#[derive(Debug)]
pub struct Lease {
    kv: ViewKv,
    key: String,
    record: LeaseRecord,
    /// Exactly the bytes this handle last wrote: the value every later
    /// compare-and-set expects.
    written: Bytes,
    ttl_ms: u64,
    clock: Arc<dyn Clock>,
}

impl Lease {
    /// Claims `key` for `holder` for `ttl`, if it is free or its claim has
    /// expired. `None` when someone else holds an unexpired claim.
    ///
    /// Errors: `InvalidInput` (bad key or holder, zero ttl), `Corrupt` when
    /// the key holds something that is not a lease, `Unsupported` when the
    /// backend has no atomic KV, and the backend's I/O kinds.
    pub async fn acquire(
        kv: &ViewKv,
        key: &str,
        holder: &str,
        ttl: Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Lease>> {
        validate_holder(holder)?;
        let ttl_ms = ttl_ms(ttl)?;
        for _ in 0..ACQUIRE_ATTEMPTS {
            let now = clock.now_ms();
            let record = LeaseRecord {
                holder: holder.to_owned(),
                expires_at_ms: now.saturating_add(ttl_ms),
            };
            let mine = record.encode();
            let current = kv.get(key).await?;
            let won = match &current {
                None => kv.set_if_absent(key, mine.clone()).await?,
                Some(held) => {
                    if !LeaseRecord::decode(key, held)?.is_expired_at(now) {
                        return Ok(None);
                    }
                    kv.compare_and_set(key, Some(held), Some(mine.clone()))
                        .await?
                }
            };
            if won {
                tracing::debug!(
                    scope = %kv.scope(),
                    key,
                    holder,
                    took_over = current.is_some(),
                    "lease acquired"
                );
                return Ok(Some(Lease {
                    kv: kv.clone(),
                    key: key.to_owned(),
                    record,
                    written: mine,
                    ttl_ms,
                    clock,
                }));
            }
            // Someone changed the key between our read and our write: look
            // again at what they left.
        }
        Ok(None)
    }

    /// The claim stored under `key`, if any (expired or not).
    ///
    /// Errors: `Corrupt` when the key holds something that is not a lease;
    /// otherwise as [`ViewKv::get`].
    pub async fn current(kv: &ViewKv, key: &str) -> Result<Option<LeaseRecord>> {
        match kv.get(key).await? {
            Some(bytes) => LeaseRecord::decode(key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// The key this lease claims.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The holder id.
    pub fn holder(&self) -> &str {
        &self.record.holder
    }

    /// When this handle's claim expires, in ms since the Unix epoch.
    pub fn expires_at_ms(&self) -> u64 {
        self.record.expires_at_ms
    }

    /// True when, by this handle's clock, the claim has expired. An expired
    /// claim may already belong to someone else.
    pub fn is_expired(&self) -> bool {
        self.record.is_expired_at(self.clock.now_ms())
    }

    /// Extends the claim to now plus the ttl. False when the claim was lost
    /// (taken over after expiring, or deleted); the handle is then stale.
    ///
    /// Renewing an expired claim that nobody took over succeeds: the bytes
    /// are still ours, so nobody else can hold it.
    ///
    /// Errors: as [`ViewKv::compare_and_set`].
    pub async fn renew(&mut self) -> Result<bool> {
        let record = LeaseRecord {
            holder: self.record.holder.clone(),
            expires_at_ms: self.clock.now_ms().saturating_add(self.ttl_ms),
        };
        let next = record.encode();
        if self.written == next {
            // Same millisecond, same expiry: nothing to write, but the claim
            // must still be ours.
            return Ok(self.kv.get(&self.key).await?.as_ref() == Some(&self.written));
        }
        let renewed = self
            .kv
            .compare_and_set(&self.key, Some(&self.written), Some(next.clone()))
            .await?;
        if renewed {
            self.record = record;
            self.written = next;
        }
        Ok(renewed)
    }

    /// Frees the claim, but only if it is still this handle's. False when
    /// someone else holds it now (their claim is left untouched).
    ///
    /// Errors: as [`ViewKv::delete_if`].
    pub async fn release(self) -> Result<bool> {
        let released = self.kv.delete_if(&self.key, &self.written).await?;
        tracing::debug!(
            scope = %self.kv.scope(),
            key = %self.key,
            holder = %self.record.holder,
            released,
            "lease release"
        );
        Ok(released)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn record_round_trips_and_rejects_garbage() {
        let record = LeaseRecord {
            holder: "node-ä".into(),
            expires_at_ms: 42,
        };
        assert_eq!(LeaseRecord::decode("k", &record.encode()).unwrap(), record);
        for bad in [
            &b""[..],
            &b"\x01\x00\x00"[..],
            &b"\x02\x00\x00\x00\x00\x00\x00\x00\x00n"[..],
            &b"\x01\x00\x00\x00\x00\x00\x00\x00\x00\xff"[..],
        ] {
            assert_eq!(
                LeaseRecord::decode("k", bad).unwrap_err().kind(),
                ErrorKind::Corrupt,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn bad_holders_and_ttls_are_invalid_input() {
        for bad in ["", "a\nb"] {
            assert_eq!(
                validate_holder(bad).unwrap_err().kind(),
                ErrorKind::InvalidInput
            );
        }
        assert!(validate_holder(&"h".repeat(MAX_HOLDER_BYTES)).is_ok());
        assert!(validate_holder(&"h".repeat(MAX_HOLDER_BYTES + 1)).is_err());
        assert_eq!(
            ttl_ms(Duration::from_micros(10)).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }
}
