//! A `dir` backend KV bucket file: every (scope, key) whose name hashes to
//! the same file, with its value.
//!
//! ```text
//!  "WFTK" | version u8 = 1 | reserved [0; 3] | count u32
//!  count times: [scope tag][key_len u16][key][value_len u32][value]
//!  crc32c u32 of every byte before it
//!  tag: [ns_len u16][namespace][key_len u16][key]   (key_len 0: none)
//! ```

use bytes::Bytes;

use super::fields::{Reader, Writer};
use crate::error::{Error, Result};
use crate::model::LogTag;

const MAGIC: &[u8; 4] = b"WFTK";
const VERSION: u8 = 1;
const WHAT: &str = "kv bucket";

/// The items of one bucket: scope, key, value.
pub type KvBucket = Vec<(LogTag, String, Bytes)>;

/// The bucket file's bytes. Keys are validated to at most 255 bytes and
/// values to 1 MiB before they get here.
pub fn encode_kv_bucket(bucket: &KvBucket) -> Vec<u8> {
    let mut w = Writer::default();
    w.bytes(MAGIC)
        .u8(VERSION)
        .bytes(&[0; 3])
        .u32(bucket.len() as u32);
    for (scope, key, value) in bucket {
        w.tag(scope)
            .u16(key.len() as u16)
            .bytes(key.as_bytes())
            .u32(value.len() as u32)
            .bytes(value);
    }
    w.crc();
    w.finish()
}

/// Decodes a bucket file.
///
/// Errors: `Corrupt` for any damage.
pub fn decode_kv_bucket(bytes: &[u8]) -> Result<KvBucket> {
    let mut r = Reader::checked(bytes, WHAT)?;
    r.magic(MAGIC)?;
    let version = r.u8("version")?;
    if version != VERSION {
        return Err(Error::corrupt(format!(
            "kv bucket version {version} is not supported"
        )));
    }
    r.zeros(3, "reserved field")?;
    // Each item takes at least 10 bytes.
    let count = r.count("item count", 10)?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let scope = r.tag("scope")?;
        let key = r.text("key")?.to_owned();
        let value_len = r.u32("value length")? as usize;
        let value = Bytes::copy_from_slice(r.take(value_len, "value")?);
        out.push((scope, key, value));
    }
    r.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_round_trip_and_reject_damage() {
        let bucket: KvBucket = vec![
            ("a:b".parse().unwrap(), "k".into(), Bytes::from_static(b"v")),
            (
                "c".parse().unwrap(),
                "key with spaces/and:colons".into(),
                Bytes::new(),
            ),
        ];
        let bytes = encode_kv_bucket(&bucket);
        assert_eq!(decode_kv_bucket(&bytes).unwrap(), bucket);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x04;
            assert!(decode_kv_bucket(&bad).is_err(), "byte {i}");
        }
        for cut in 0..bytes.len() {
            assert!(decode_kv_bucket(&bytes[..cut]).is_err(), "cut {cut}");
        }
    }
}
