//! Little-endian building blocks for the backend's small files (segment
//! header, trim point, KV buckets): a writer that appends fields and a
//! reader that never reads past its input.

use crate::error::{Error, Result};
use crate::model::LogTag;

/// Appends little-endian fields to a buffer.
#[derive(Debug, Default)]
pub(super) struct Writer {
    pub(super) buf: Vec<u8>,
}

impl Writer {
    pub(super) fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    pub(super) fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(super) fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(super) fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(super) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }

    /// `[ns_len u16][ns][key_len u16][key]`, key_len 0 for no key.
    pub(super) fn tag(&mut self, tag: &LogTag) -> &mut Self {
        // LogTag bounds both parts to 255 bytes.
        let ns = tag.namespace().as_bytes();
        let key = tag.key().unwrap_or("").as_bytes();
        self.u16(ns.len() as u16).bytes(ns);
        self.u16(key.len() as u16).bytes(key)
    }

    /// Appends the CRC-32C of everything written so far.
    pub(super) fn crc(&mut self) -> &mut Self {
        let crc = crc32c::crc32c(&self.buf);
        self.u32(crc)
    }
}

/// Reads little-endian fields; every read past the end is a `Corrupt` error
/// naming `what`.
#[derive(Debug)]
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, at: 0, what }
    }

    /// Checks a trailing CRC-32C over everything before it and returns a
    /// reader over the covered bytes.
    pub(super) fn checked(buf: &'a [u8], what: &'static str) -> Result<Self> {
        let split = buf
            .len()
            .checked_sub(4)
            .ok_or_else(|| Error::corrupt(format!("{what}: {} bytes is too short", buf.len())))?;
        let (body, crc) = buf.split_at(split);
        let stored = u32::from_le_bytes(crc.try_into().unwrap_or([0; 4]));
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(Error::corrupt(format!(
                "{what}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            )));
        }
        Ok(Reader::new(body, what))
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| {
            Error::corrupt(format!("{}: truncated at byte {}", self.what, self.at))
        })?;
        let out = &self.buf[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let bytes = self.take(N)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(super) fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    pub(super) fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub(super) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(super) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn text(&mut self) -> Result<&'a str> {
        let len = self.u16()? as usize;
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes)
            .map_err(|_| Error::corrupt(format!("{}: text is not utf-8", self.what)))
    }

    pub(super) fn tag(&mut self) -> Result<LogTag> {
        let ns = self.text()?;
        let key = self.text()?;
        let tag = if key.is_empty() {
            LogTag::new(ns)
        } else {
            LogTag::with_key(ns, key)
        };
        tag.map_err(|e| Error::corrupt(format!("{}: bad tag: {}", self.what, e.message())))
    }

    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    /// Errors unless every byte was consumed.
    pub(super) fn finish(&self) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_overruns_are_corrupt() {
        let tag = LogTag::with_key("ns", "k:1").unwrap();
        let mut w = Writer::default();
        w.u8(1).u16(2).u32(3).u64(4).tag(&tag).crc();
        let mut r = Reader::checked(&w.buf, "test").unwrap();
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u16().unwrap(), 2);
        assert_eq!(r.u32().unwrap(), 3);
        assert_eq!(r.u64().unwrap(), 4);
        assert_eq!(r.tag().unwrap(), tag);
        r.finish().unwrap();
        assert_eq!(r.u8().unwrap_err().kind(), crate::ErrorKind::Corrupt);

        let mut bad = w.buf.clone();
        bad[3] ^= 1;
        assert!(Reader::checked(&bad, "test").is_err());
        assert!(Reader::checked(&[1, 2], "test").is_err());
    }
}
