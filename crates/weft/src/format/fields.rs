//! Little-endian fields: the one bounds-checked [`Reader`] every decoder in
//! [`crate::format`] reads through, and the [`Writer`] the small formats
//! are built with.
//!
//! No input, however short or malformed, can make a decoder index out of
//! bounds: a read past the end is a
//! [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) error that names the
//! object and the field, and a failed read consumes nothing.

use crate::error::{Error, Result};
use crate::model::LogTag;

/// Reads fields front to back from a borrowed slice.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`; `what` names the object in errors.
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    /// Checks the CRC-32C in the last four bytes of `buf` against every
    /// byte before it, and returns a reader over those covered bytes.
    ///
    /// Errors: `Corrupt` when `buf` is shorter than the checksum or the
    /// checksum does not match.
    pub(crate) fn checked(buf: &'a [u8], what: &'static str) -> Result<Self> {
        let (body, crc) = split_tail(buf, 4, what, "crc32c")?;
        let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(Error::corrupt(format!(
                "{what}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            )));
        }
        Ok(Reader::new(body, what))
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// How many bytes have been read.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// The unread bytes, without consuming them.
    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Consumes exactly `n` bytes.
    pub(crate) fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::corrupt(format!(
                "{}: truncated {field}: needs {n} bytes at offset {}, {} left",
                self.what,
                self.pos,
                self.remaining()
            )));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let bytes = self.take(N, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(crate) fn u16(&mut self, field: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn u32(&mut self, field: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn u64(&mut self, field: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn i64(&mut self, field: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array(field)?))
    }

    /// Requires the next bytes to be `magic`.
    pub(crate) fn magic(&mut self, magic: &[u8]) -> Result<()> {
        if self.take(magic.len(), "magic")? != magic {
            return Err(Error::corrupt(format!("{}: wrong magic", self.what)));
        }
        Ok(())
    }

    /// Requires the next `n` bytes (a reserved field) to be zero.
    pub(crate) fn zeros(&mut self, n: usize, field: &str) -> Result<()> {
        if self.take(n, field)?.iter().any(|&b| b != 0) {
            return Err(Error::corrupt(format!(
                "{}: {field} is not zero",
                self.what
            )));
        }
        Ok(())
    }

    /// `[len u16][utf-8 text]`.
    pub(crate) fn text(&mut self, field: &str) -> Result<&'a str> {
        let len = self.u16(field)? as usize;
        let bytes = self.take(len, field)?;
        std::str::from_utf8(bytes)
            .map_err(|_| Error::corrupt(format!("{}: {field} is not utf-8", self.what)))
    }

    /// A tag: `[ns_len u16][namespace][key_len u16][key]`, key_len 0 for
    /// no key.
    pub(crate) fn tag(&mut self, field: &str) -> Result<LogTag> {
        let ns = self.text(field)?;
        let key = self.text(field)?;
        let tag = if key.is_empty() {
            LogTag::new(ns)
        } else {
            LogTag::with_key(ns, key)
        };
        tag.map_err(|e| Error::corrupt(format!("{}: bad {field}: {}", self.what, e.message())))
    }

    /// A count of items that each take at least `min_item_len` bytes,
    /// refused when the unread bytes cannot hold that many (so a damaged
    /// count never sizes an allocation).
    pub(crate) fn count(&mut self, field: &str, min_item_len: usize) -> Result<usize> {
        let count = self.u32(field)? as usize;
        if count > self.remaining() / min_item_len.max(1) {
            return Err(Error::corrupt(format!(
                "{}: {field} {count} exceeds what {} bytes can hold",
                self.what,
                self.remaining()
            )));
        }
        Ok(count)
    }

    /// Errors unless every byte was read.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(Error::corrupt(format!(
                "{}: {} unexpected trailing bytes",
                self.what,
                self.remaining()
            )));
        }
        Ok(())
    }
}

/// Appends little-endian fields to a buffer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    pub(crate) fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(crate) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }

    /// A tag as [`Reader::tag`] reads it. `LogTag` bounds both parts to 255
    /// bytes, so the lengths fit.
    pub(crate) fn tag(&mut self, tag: &LogTag) -> &mut Self {
        let ns = tag.namespace().as_bytes();
        let key = tag.key().unwrap_or("").as_bytes();
        self.u16(ns.len() as u16).bytes(ns);
        self.u16(key.len() as u16).bytes(key)
    }

    /// Appends the CRC-32C of everything written so far.
    pub(crate) fn crc(&mut self) -> &mut Self {
        let crc = crc32c::crc32c(&self.buf);
        self.u32(crc)
    }

    /// The bytes written.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// Splits `bytes` into `(body, tail)` where `tail` is the last `tail_len`
/// bytes, or fails with Corrupt if the object is shorter than that.
pub(crate) fn split_tail<'a>(
    bytes: &'a [u8],
    tail_len: usize,
    what: &str,
    field: &str,
) -> Result<(&'a [u8], &'a [u8])> {
    match bytes.len().checked_sub(tail_len) {
        Some(at) => Ok(bytes.split_at(at)),
        None => Err(Error::corrupt(format!(
            "{what}: {} bytes is too short for the {tail_len}-byte {field}",
            bytes.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn reads_little_endian_and_refuses_overrun() {
        let bytes = [1, 0, 2, 0, 0, 0, 9];
        let mut c = Reader::new(&bytes, "test");
        assert_eq!(c.u16("a").unwrap(), 1);
        assert_eq!(c.u32("b").unwrap(), 2);
        assert_eq!(c.remaining(), 1);
        let err = c.u16("c").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        // A failed read consumes nothing.
        assert_eq!(c.u8("d").unwrap(), 9);
        assert_eq!(c.position(), 7);
        c.finish().unwrap();
    }

    #[test]
    fn split_tail_checks_length() {
        assert!(split_tail(&[1, 2], 3, "x", "footer").is_err());
        let (body, tail) = split_tail(&[1, 2, 3], 2, "x", "footer").unwrap();
        assert_eq!((body, tail), (&[1u8][..], &[2u8, 3][..]));
    }

    #[test]
    fn written_fields_read_back_and_damage_is_corrupt() {
        let tag = LogTag::with_key("ns", "k:1").unwrap();
        let mut w = Writer::default();
        w.u8(1).u16(2).u32(3).u64(4).tag(&tag).u32(0).crc();
        let bytes = w.finish();
        let mut r = Reader::checked(&bytes, "test").unwrap();
        assert_eq!(r.u8("a").unwrap(), 1);
        assert_eq!(r.u16("b").unwrap(), 2);
        assert_eq!(r.u32("c").unwrap(), 3);
        assert_eq!(r.u64("d").unwrap(), 4);
        assert_eq!(r.tag("tag").unwrap(), tag);
        assert!(r.count("count", 1).is_ok());
        r.finish().unwrap();
        assert_eq!(r.u8("past").unwrap_err().kind(), ErrorKind::Corrupt);

        let mut bad = bytes.clone();
        bad[3] ^= 1;
        assert!(Reader::checked(&bad, "test").is_err());
        assert!(Reader::checked(&[1, 2], "test").is_err());
        // A count the rest cannot hold is refused before anything sizes by it.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0x7f, 0, 0], "test");
        assert_eq!(r.count("count", 1).unwrap_err().kind(), ErrorKind::Corrupt);
    }
}
