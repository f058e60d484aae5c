//! A bounds-checked little-endian reader over a byte slice.
//!
//! Every decoder in [`crate::format`] reads through this type so that no
//! input, however short or malformed, can index out of bounds: a read past
//! the end is a [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) error that
//! names the object and the field.

use crate::error::{Error, Result};

/// Reads fields front to back from a borrowed slice.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`; `what` names the object in errors.
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Cursor { buf, pos: 0, what }
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

    /// Consume exactly `n` bytes.
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
}

/// Split `bytes` into `(body, tail)` where `tail` is the last `tail_len`
/// bytes, or fail with Corrupt if the object is shorter than that.
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
        let mut c = Cursor::new(&bytes, "test");
        assert_eq!(c.u16("a").unwrap(), 1);
        assert_eq!(c.u32("b").unwrap(), 2);
        assert_eq!(c.remaining(), 1);
        let err = c.u16("c").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        // A failed read consumes nothing.
        assert_eq!(c.u8("d").unwrap(), 9);
        assert_eq!(c.position(), 7);
    }

    #[test]
    fn split_tail_checks_length() {
        assert!(split_tail(&[1, 2], 3, "x", "footer").is_err());
        let (body, tail) = split_tail(&[1, 2, 3], 2, "x", "footer").unwrap();
        assert_eq!((body, tail), (&[1u8][..], &[2u8, 3][..]));
    }
}
