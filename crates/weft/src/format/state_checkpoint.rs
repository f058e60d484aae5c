//! Stream-state checkpoints: every stream's next version as of a seqnum,
//! stored now and then by a bucket log's writer so that a writer opened
//! with no local state reads the state and the entries after it instead of
//! the whole log.
//!
//! A checkpoint is derived state. It carries the check value of the entry
//! at its `through` seqnum (CRC-32C of that entry's seqnum, version,
//! timestamp and payload, as a log index records it), so a reader can tell
//! whether the log it finds is the one the checkpoint was taken of before
//! trusting it.
//!
//! Version 2 also names, for every stream, the seqnum of its last entry at
//! or before `through`, so that a writer can check one stream's version
//! against the log by reading that one entry before it numbers the stream
//! (a version 1 checkpoint gives the writer nothing to check a stream by:
//! it waits for its history fill before numbering one).
//!
//! ## Layout (all integers little-endian)
//!
//! ```text
//!  magic "WSC1" | version u16 (1 or 2) | through_check u64 | state_len u32 (v2 only)
//!  | log state (a whole log-state object, see `log_state`, with its own CRC)
//!  | v2 only: count u32 | count × last seqnum u64 (in the log state's tag order)
//!  | crc32c u32
//! ```
//!
//! The trailing CRC-32C covers every byte before it. The embedded log
//! state's `through` is the checkpoint's seqnum. A last seqnum of
//! `u64::MAX` ([`TRIMMED`]) says the stream's last entry was trimmed: its
//! version is the one the log's trim state holds.

use bytes::Bytes;

use super::fields::{Reader, Writer};
use super::log_state::{LogState, decode_log_state, encode_log_state};
use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"WSC1";
/// The version written.
const VERSION: u16 = 2;

/// The last seqnum of a stream whose entries were all trimmed away.
pub const TRIMMED: u64 = u64::MAX;

/// Every stream's next version as of `state.through`, and the check value
/// of the entry at that seqnum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateCheckpoint {
    /// The numbering state: every primary tag with an entry at or before
    /// `state.through`, with the version its next entry gets.
    pub state: LogState,
    /// The check value of the entry at `state.through`.
    pub through_check: u64,
    /// For every stream of `state.next_versions`, in that order, the seqnum
    /// of its last entry at or before `state.through` ([`TRIMMED`] when it
    /// was trimmed away); `None` for a version 1 checkpoint, which does not
    /// record them.
    pub last_seqnums: Option<Vec<u64>>,
}

/// Encodes `checkpoint`: version 2 when it has last seqnums, else version
/// 1 (what older writers stored; kept so that tests can store one).
///
/// Errors: `InvalidInput` for a state that cannot be encoded (see
/// [`encode_log_state`]), or last seqnums that are not one per stream.
pub fn encode_state_checkpoint(checkpoint: &StateCheckpoint) -> Result<Bytes> {
    let state = encode_log_state(&checkpoint.state)?;
    let mut w = Writer::default();
    w.bytes(MAGIC);
    match &checkpoint.last_seqnums {
        None => {
            w.u16(1).u64(checkpoint.through_check).bytes(&state);
        }
        Some(last) => {
            if last.len() != checkpoint.state.next_versions.len() {
                return Err(Error::invalid_input(format!(
                    "a state checkpoint of {} streams with {} last seqnums",
                    checkpoint.state.next_versions.len(),
                    last.len()
                )));
            }
            let len = u32::try_from(state.len())
                .map_err(|_| Error::invalid_input("a log state over 4 GiB"))?;
            w.u16(VERSION)
                .u64(checkpoint.through_check)
                .u32(len)
                .bytes(&state)
                .u32(len_u32(last.len())?);
            for s in last {
                w.u64(*s);
            }
        }
    }
    w.crc();
    Ok(Bytes::from(w.finish()))
}

fn len_u32(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::invalid_input("more than 2^32 - 1 streams"))
}

/// Decodes a stream-state checkpoint.
///
/// Errors: `Corrupt` for a wrong magic, version or checksum, or a damaged
/// log state inside.
pub fn decode_state_checkpoint(bytes: &[u8]) -> Result<StateCheckpoint> {
    let mut r = Reader::checked(bytes, "state checkpoint")?;
    r.magic(MAGIC)?;
    let version = r.u16("version")?;
    if version != 1 && version != VERSION {
        return Err(Error::corrupt(format!(
            "unknown state checkpoint version {version}"
        )));
    }
    let through_check = r.u64("through check")?;
    let inner = |e: Error| e.context("the log state inside a state checkpoint");
    if version == 1 {
        let state = decode_log_state(r.rest()).map_err(inner)?;
        return Ok(StateCheckpoint {
            state,
            through_check,
            last_seqnums: None,
        });
    }
    let len = r.u32("log state length")? as usize;
    let state = decode_log_state(r.take(len, "log state")?).map_err(inner)?;
    let count = r.count("stream count", 8)?;
    if count != state.next_versions.len() {
        return Err(Error::corrupt(format!(
            "a state checkpoint of {} streams names {count} last seqnums",
            state.next_versions.len()
        )));
    }
    let mut last = Vec::with_capacity(count);
    for _ in 0..count {
        last.push(r.u64("last seqnum")?);
    }
    r.finish()?;
    Ok(StateCheckpoint {
        state,
        through_check,
        last_seqnums: Some(last),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn checkpoint() -> StateCheckpoint {
        StateCheckpoint {
            state: LogState::new(
                99,
                vec![
                    ("orders:o-2".parse().unwrap(), 7),
                    ("acct".parse().unwrap(), 40),
                ],
            )
            .unwrap(),
            through_check: 0xdead_beef,
            last_seqnums: Some(vec![98, 12]),
        }
    }

    #[test]
    fn round_trips() {
        let c = checkpoint();
        let bytes = encode_state_checkpoint(&c).unwrap();
        assert_eq!(&bytes[..4], b"WSC1");
        assert_eq!(decode_state_checkpoint(&bytes).unwrap(), c);
        // What older writers stored still reads, without last seqnums.
        let old = StateCheckpoint {
            last_seqnums: None,
            ..c
        };
        let bytes = encode_state_checkpoint(&old).unwrap();
        assert_eq!(&bytes[4..6], &1u16.to_le_bytes());
        assert_eq!(decode_state_checkpoint(&bytes).unwrap(), old);
    }

    #[test]
    fn every_damage_is_a_corrupt_error() {
        let bytes = encode_state_checkpoint(&checkpoint()).unwrap();
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.to_vec();
            b[i / 8] ^= 1 << (i % 8);
            assert_eq!(
                decode_state_checkpoint(&b).unwrap_err().kind(),
                ErrorKind::Corrupt,
                "bit {i}"
            );
        }
        for len in 0..bytes.len() {
            assert_eq!(
                decode_state_checkpoint(&bytes[..len]).unwrap_err().kind(),
                ErrorKind::Corrupt
            );
        }
        // A well-checksummed wrapper around a damaged state.
        let mut body = bytes[..bytes.len() - 4].to_vec();
        body[20] ^= 1;
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(
            decode_state_checkpoint(&body).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
    }
}
