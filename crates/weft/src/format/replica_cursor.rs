//! A replica's saved cursor: the next record it will apply, as a
//! [`FileCursorStore`](crate::wal::FileCursorStore) or
//! [`ObjectCursorStore`](crate::wal::ObjectCursorStore) keeps it.
//!
//! ```text
//!  magic "WCUR" | version u16 = 1 | entry u64 | record u32 | crc32c u32
//! ```
//!
//! Little-endian; the CRC-32C covers the bytes before it. 22 bytes.

use bytes::Bytes;

use super::fields::{Reader, Writer};
use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"WCUR";
const VERSION: u16 = 1;
const LEN: usize = 4 + 2 + 8 + 4 + 4;
const WHAT: &str = "cursor";

/// The next record a replica will apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cursor {
    /// The sequence of the manifest entry holding the record.
    pub entry: u64,
    /// The record's index within that entry's segment.
    pub record: u32,
}

impl Cursor {
    /// The first record of the entry with sequence `entry`.
    pub fn at_entry(entry: u64) -> Self {
        Cursor { entry, record: 0 }
    }
}

/// Encodes a cursor.
pub fn encode_cursor(cursor: Cursor) -> Bytes {
    let mut w = Writer::default();
    w.bytes(MAGIC)
        .u16(VERSION)
        .u64(cursor.entry)
        .u32(cursor.record)
        .crc();
    Bytes::from(w.finish())
}

/// Decodes a cursor written by [`encode_cursor`].
///
/// Errors: `Corrupt` for a wrong length, magic, version or checksum.
pub fn decode_cursor(bytes: &[u8]) -> Result<Cursor> {
    if bytes.len() != LEN {
        return Err(Error::corrupt(format!(
            "cursor is {} bytes, expected {LEN}",
            bytes.len()
        )));
    }
    let mut r = Reader::checked(bytes, WHAT)?;
    r.magic(MAGIC)?;
    let version = r.u16("version")?;
    if version != VERSION {
        return Err(Error::corrupt(format!("unknown cursor version {version}")));
    }
    let cursor = Cursor {
        entry: r.u64("entry")?,
        record: r.u32("record")?,
    };
    r.finish()?;
    Ok(cursor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn cursor_round_trips_and_detects_damage() {
        let c = Cursor {
            entry: 7,
            record: 3,
        };
        let bytes = encode_cursor(c);
        assert_eq!(bytes.len(), LEN);
        assert_eq!(decode_cursor(&bytes).unwrap(), c);
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.to_vec();
            b[i / 8] ^= 1 << (i % 8);
            assert_eq!(decode_cursor(&b).unwrap_err().kind(), ErrorKind::Corrupt);
        }
        for len in 0..bytes.len() {
            assert!(decode_cursor(&bytes[..len]).is_err());
        }
    }
}
