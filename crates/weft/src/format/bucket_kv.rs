//! The object a bucket log's KV keeps per key.
//!
//! ```text
//! v1   "WKV1" | present u8 | value
//! v2   "WKV2" | flags u8 | n u8 | n × writer token (8 B, newest first) | value
//!      flags: bit 0 = present, bit 1 = the tokens reach back to the
//!      object's creation; other bits must be zero; 1 <= n <= 128
//! ```
//!
//! A tombstone (a deleted key) is an object whose value is absent
//! (`present = 0`, no value bytes).
//!
//! **Why writer tokens.** A conditional PUT whose answer was lost may have
//! landed, and object_store resends a conditional PUT after a 5xx: if the
//! first copy had landed, the resend is answered 412 as if someone else
//! had won. Each write therefore carries a token its writer drew for it,
//! and the tokens of the writes before it (up to [`MAX_WRITERS`]): after
//! any unclear answer the writer re-reads the object and finds out exactly
//! what happened — its token is in the list (it won), or the write it was
//! conditioned on is followed by someone else's (it lost), or the object is
//! still what it was conditioned on (nothing landed yet). When the list is
//! too short to tell, the writer says so (`Indeterminate`) rather than
//! guess.
//!
//! v1 objects (written before tokens existed) still read; weft writes v2.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, Result};

/// The length of a writer token. Random 64-bit tokens: two writes within
/// one object's history share a token with a chance of about 2^-57.
pub const WRITER_TOKEN_LEN: usize = 8;

/// The most tokens an object keeps: the write's own and those of the
/// writes before it. A writer learns its outcome exactly as long as fewer
/// writes to the key completed during its own request; a key written that
/// often during one request (well beyond a single object's CAS rate on S3)
/// gets `Indeterminate` instead.
pub const MAX_WRITERS: usize = 128;

/// A writer's token: random bytes drawn for one write.
pub type WriterToken = [u8; WRITER_TOKEN_LEN];

const MAGIC_V1: &[u8; 4] = b"WKV1";
const MAGIC_V2: &[u8; 4] = b"WKV2";
const PRESENT: u8 = 1;
const COMPLETE: u8 = 2;

/// One KV object, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvObject {
    /// The value; `None` for a tombstone.
    pub value: Option<Bytes>,
    /// The tokens of the writes that made this object, newest (this one's)
    /// first. Empty for a v1 object.
    pub writers: Vec<WriterToken>,
    /// `writers` lists every write since the object was created (none was
    /// dropped for space, none was unconditional).
    pub complete: bool,
}

/// Encodes `object` as v2.
///
/// Errors: `InvalidInput` when it has no token or more than
/// [`MAX_WRITERS`].
pub fn encode_kv_object(object: &KvObject) -> Result<Bytes> {
    let n = object.writers.len();
    if n == 0 || n > MAX_WRITERS {
        return Err(Error::invalid_input(format!(
            "a KV object carries 1 to {MAX_WRITERS} writer tokens, not {n}"
        )));
    }
    let value_len = object.value.as_ref().map_or(0, Bytes::len);
    let mut buf = BytesMut::with_capacity(6 + n * WRITER_TOKEN_LEN + value_len);
    buf.put_slice(MAGIC_V2);
    let mut flags = 0;
    if object.value.is_some() {
        flags |= PRESENT;
    }
    if object.complete {
        flags |= COMPLETE;
    }
    buf.put_u8(flags);
    buf.put_u8(n as u8);
    for token in &object.writers {
        buf.put_slice(token);
    }
    if let Some(v) = &object.value {
        buf.put_slice(v);
    }
    Ok(buf.freeze())
}

/// Decodes a v1 or v2 KV object.
///
/// Errors: `Corrupt` for an unknown magic, unknown flag bits, a token count
/// of 0 or over [`MAX_WRITERS`], too few bytes for the tokens, or value
/// bytes on a tombstone.
pub fn decode_kv_object(bytes: Bytes) -> Result<KvObject> {
    let magic = bytes.get(..4).ok_or_else(|| short(&bytes))?;
    if magic == MAGIC_V1 {
        let flag = *bytes.get(4).ok_or_else(|| short(&bytes))?;
        let value = match flag {
            0 if bytes.len() == 5 => None,
            0 => return Err(Error::corrupt("a v1 KV tombstone carries value bytes")),
            1 => Some(bytes.slice(5..)),
            other => return Err(Error::corrupt(format!("unknown v1 KV flag {other}"))),
        };
        return Ok(KvObject {
            value,
            writers: Vec::new(),
            complete: false,
        });
    }
    if magic != MAGIC_V2 {
        return Err(Error::corrupt("not a weft KV object (unknown magic)"));
    }
    let flags = *bytes.get(4).ok_or_else(|| short(&bytes))?;
    if flags & !(PRESENT | COMPLETE) != 0 {
        return Err(Error::corrupt(format!("unknown KV flags {flags:#04x}")));
    }
    let n = usize::from(*bytes.get(5).ok_or_else(|| short(&bytes))?);
    if n == 0 || n > MAX_WRITERS {
        return Err(Error::corrupt(format!(
            "a KV object names {n} writers (1 to {MAX_WRITERS} allowed)"
        )));
    }
    let value_at = 6 + n * WRITER_TOKEN_LEN;
    if bytes.len() < value_at {
        return Err(short(&bytes));
    }
    let writers = bytes[6..value_at]
        .chunks_exact(WRITER_TOKEN_LEN)
        .map(|c| {
            let mut t = [0u8; WRITER_TOKEN_LEN];
            t.copy_from_slice(c);
            t
        })
        .collect();
    let value = if flags & PRESENT != 0 {
        Some(bytes.slice(value_at..))
    } else if bytes.len() > value_at {
        return Err(Error::corrupt("a KV tombstone carries value bytes"));
    } else {
        None
    };
    Ok(KvObject {
        value,
        writers,
        complete: flags & COMPLETE != 0,
    })
}

fn short(bytes: &[u8]) -> Error {
    Error::corrupt(format!(
        "a KV object of {} bytes is too short for its header",
        bytes.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn token(b: u8) -> WriterToken {
        [b; WRITER_TOKEN_LEN]
    }

    #[test]
    fn v2_round_trips_values_tombstones_and_histories() {
        for object in [
            KvObject {
                value: Some(Bytes::from_static(b"hello")),
                writers: vec![token(1)],
                complete: true,
            },
            KvObject {
                value: Some(Bytes::new()),
                writers: (0..MAX_WRITERS as u8).map(token).collect(),
                complete: false,
            },
            KvObject {
                value: None,
                writers: vec![token(9), token(8)],
                complete: true,
            },
        ] {
            let bytes = encode_kv_object(&object).unwrap();
            assert_eq!(decode_kv_object(bytes).unwrap(), object);
        }
    }

    #[test]
    fn v1_objects_still_read() {
        let v = decode_kv_object(Bytes::from_static(b"WKV1\x01abc")).unwrap();
        assert_eq!(v.value.as_deref(), Some(&b"abc"[..]));
        assert!(v.writers.is_empty() && !v.complete);
        let gone = decode_kv_object(Bytes::from_static(b"WKV1\x00")).unwrap();
        assert_eq!(gone.value, None);
    }

    #[test]
    fn malformed_objects_are_corrupt_and_bad_histories_are_refused() {
        let good = encode_kv_object(&KvObject {
            value: Some(Bytes::from_static(b"v")),
            writers: vec![token(1), token(2)],
            complete: true,
        })
        .unwrap();
        let mut cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"WKV".to_vec(),
            b"WKV3\x01\x01".to_vec(),
            b"WKV1\x02x".to_vec(),
            b"WKV1\x00x".to_vec(),
            b"WKV2\x05\x01".to_vec(),
            b"WKV2\x01\x00".to_vec(),
            b"WKV2\x01\x11".to_vec(),
        ];
        // Every cut short of the tokens.
        for cut in 0..6 + 2 * WRITER_TOKEN_LEN {
            cases.push(good[..cut].to_vec());
        }
        let mut tombstone_with_value = good.to_vec();
        tombstone_with_value[4] = COMPLETE;
        cases.push(tombstone_with_value);
        for bytes in cases {
            let err = decode_kv_object(Bytes::from(bytes.clone())).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{bytes:?}");
        }
        for n in [0, MAX_WRITERS + 1] {
            let object = KvObject {
                value: None,
                writers: vec![token(1); n],
                complete: false,
            };
            assert_eq!(
                encode_kv_object(&object).unwrap_err().kind(),
                ErrorKind::InvalidInput
            );
        }
    }
}
