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
//! ## Layout (all integers little-endian)
//!
//! ```text
//!  magic "WSC1" | version u16 = 1 | through_check u64 | log state (a whole
//!  log-state object, see `log_state`, with its own CRC) | crc32c u32
//! ```
//!
//! The trailing CRC-32C covers every byte before it. The embedded log
//! state's `through` is the checkpoint's seqnum.

use bytes::Bytes;

use super::fields::{Reader, Writer};
use super::log_state::{LogState, decode_log_state, encode_log_state};
use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"WSC1";
const VERSION: u16 = 1;

/// Every stream's next version as of `state.through`, and the check value
/// of the entry at that seqnum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateCheckpoint {
    /// The numbering state: every primary tag with an entry at or before
    /// `state.through`, with the version its next entry gets.
    pub state: LogState,
    /// The check value of the entry at `state.through`.
    pub through_check: u64,
}

/// Encodes `checkpoint`.
///
/// Errors: `InvalidInput` for a state that cannot be encoded (see
/// [`encode_log_state`]).
pub fn encode_state_checkpoint(checkpoint: &StateCheckpoint) -> Result<Bytes> {
    let state = encode_log_state(&checkpoint.state)?;
    let mut w = Writer::default();
    w.bytes(MAGIC)
        .u16(VERSION)
        .u64(checkpoint.through_check)
        .bytes(&state)
        .crc();
    Ok(Bytes::from(w.finish()))
}

/// Decodes a stream-state checkpoint.
///
/// Errors: `Corrupt` for a wrong magic, version or checksum, or a damaged
/// log state inside.
pub fn decode_state_checkpoint(bytes: &[u8]) -> Result<StateCheckpoint> {
    let mut r = Reader::checked(bytes, "state checkpoint")?;
    r.magic(MAGIC)?;
    let version = r.u16("version")?;
    if version != VERSION {
        return Err(Error::corrupt(format!(
            "unknown state checkpoint version {version}"
        )));
    }
    let through_check = r.u64("through check")?;
    let state = decode_log_state(r.rest())
        .map_err(|e| e.context("the log state inside a state checkpoint"))?;
    Ok(StateCheckpoint {
        state,
        through_check,
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
        }
    }

    #[test]
    fn round_trips() {
        let c = checkpoint();
        let bytes = encode_state_checkpoint(&c).unwrap();
        assert_eq!(&bytes[..4], b"WSC1");
        assert_eq!(decode_state_checkpoint(&bytes).unwrap(), c);
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
