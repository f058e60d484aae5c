//! The writer lease object: who writes a bucket log, and that it is alive.
//!
//! A small JSON object beside the manifest (`<manifest path>.lease`), so
//! that an operator can read it with any tool:
//!
//! ```json
//! {"format":"weft-writer-lease","version":1,"run":"01J…","epoch":7,
//!  "holder":"weft append (pid 4242)","renew_every_ms":5000,"renewals":12,
//!  "written_ms":1733050000000,"released":false}
//! ```
//!
//! `written_ms` is the writer's wall clock, for people reading the object;
//! nothing compares it with another clock (see [`crate::wal::lease`]).

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use ulid::Ulid;

use crate::error::{Error, Result};

/// The `format` field of every lease.
pub const LEASE_FORMAT: &str = "weft-writer-lease";

/// The lease layout version this code writes and reads.
pub const LEASE_VERSION: u32 = 1;

/// The longest holder description kept (longer ones are cut).
pub const MAX_HOLDER_BYTES: usize = 256;

/// One writer lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterLease {
    /// Always `LEASE_FORMAT`.
    pub format: String,
    /// Always `LEASE_VERSION`.
    pub version: u32,
    /// The writer's run id (its segments live under it).
    #[serde(with = "ulid_text")]
    pub run: Ulid,
    /// The epoch the writer claimed the log with.
    pub epoch: u64,
    /// Who the writer is, for people: a name and the process id.
    pub holder: String,
    /// How often the writer rewrites the lease while it runs.
    pub renew_every_ms: u64,
    /// How many times it has been rewritten.
    pub renewals: u64,
    /// The writer's wall clock at the last write (informational).
    pub written_ms: u64,
    /// The writer closed and gave the log up.
    pub released: bool,
}

impl WriterLease {
    /// A fresh lease of `run` at `epoch`.
    pub fn new(run: Ulid, epoch: u64, holder: &str, renew_every_ms: u64, now_ms: u64) -> Self {
        let mut holder = holder.to_owned();
        if holder.len() > MAX_HOLDER_BYTES {
            let mut cut = MAX_HOLDER_BYTES;
            while !holder.is_char_boundary(cut) {
                cut -= 1;
            }
            holder.truncate(cut);
        }
        WriterLease {
            format: LEASE_FORMAT.to_owned(),
            version: LEASE_VERSION,
            run,
            epoch,
            holder,
            renew_every_ms,
            renewals: 0,
            written_ms: now_ms,
            released: false,
        }
    }

    /// Whether this lease is `run`'s at `epoch`.
    pub fn is(&self, run: Ulid, epoch: u64) -> bool {
        self.run == run && self.epoch == epoch
    }
}

/// A ULID as its 26-character text.
mod ulid_text {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};
    use ulid::Ulid;

    pub(super) fn serialize<S: Serializer>(run: &Ulid, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&run.to_string())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Ulid, D::Error> {
        let text = String::deserialize(d)?;
        Ulid::from_string(&text).map_err(D::Error::custom)
    }
}

/// Encodes a lease.
///
/// Errors: `Internal` if serialising fails (it cannot for this type).
pub fn encode_lease(lease: &WriterLease) -> Result<Bytes> {
    serde_json::to_vec(lease)
        .map(Bytes::from)
        .map_err(|e| Error::internal("encoding the writer lease").with_source(e))
}

/// Decodes a lease.
///
/// Errors: `Corrupt` for anything but a version-1 weft writer lease.
pub fn decode_lease(bytes: &[u8]) -> Result<WriterLease> {
    let lease: WriterLease = serde_json::from_slice(bytes)
        .map_err(|e| Error::corrupt("the writer lease does not parse").with_source(e))?;
    if lease.format != LEASE_FORMAT || lease.version != LEASE_VERSION {
        return Err(Error::corrupt(format!(
            "the writer lease is {:?} version {}, not {LEASE_FORMAT:?} version {LEASE_VERSION}",
            lease.format, lease.version
        )));
    }
    Ok(lease)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn round_trips_and_refuses_what_is_not_a_lease() {
        let run = Ulid::from_parts(1_700_000_000_000, 5);
        let lease = WriterLease::new(run, 7, "weft append (pid 1)", 5_000, 42);
        let bytes = encode_lease(&lease).unwrap();
        assert_eq!(decode_lease(&bytes).unwrap(), lease);
        assert!(lease.is(run, 7) && !lease.is(run, 8));
        let long = WriterLease::new(run, 1, &"é".repeat(400), 1, 1);
        assert!(long.holder.len() <= MAX_HOLDER_BYTES);
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        for bad in [
            "".to_owned(),
            "{}".to_owned(),
            text.replace("\"version\":1", "\"version\":2"),
            text.replace(LEASE_FORMAT, "other"),
            text.replace(&run.to_string(), "not-a-ulid"),
        ] {
            assert_eq!(
                decode_lease(bad.as_bytes()).unwrap_err().kind(),
                ErrorKind::Corrupt,
                "{bad}"
            );
        }
    }
}
