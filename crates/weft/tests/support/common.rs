//! Byte-level builders shared by the format tests: they lay out the
//! documented formats field by field, independently of weft's encoders.

#![allow(dead_code)]

/// A little-endian byte assembler.
#[derive(Default)]
pub(crate) struct Le(pub(crate) Vec<u8>);

impl Le {
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(crate) fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time.
pub(crate) fn crc32c_bitwise(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

pub(crate) type Md<'a> = (u32, i64, &'a [u8]);

/// `[body_len][sequence]([count])[loc_len][loc][md_count]` + metadata.
pub(crate) fn entry(
    out: &mut Le,
    sequence: u64,
    count: Option<u32>,
    location: &str,
    md: &[Md<'_>],
) {
    let body = entry_body(sequence, count, location.as_bytes(), md);
    out.u32(body.len() as u32).raw(&body);
}

/// An entry body (everything after `body_len`), location given as raw bytes.
pub(crate) fn entry_body(
    sequence: u64,
    count: Option<u32>,
    location: &[u8],
    md: &[Md<'_>],
) -> Vec<u8> {
    let mut body = Le::default();
    body.u64(sequence);
    if let Some(c) = count {
        body.u32(c);
    }
    body.u16(location.len() as u16).raw(location);
    body.u32(md.len() as u32);
    for (start, ms, payload) in md {
        body.u32(*start)
            .i64(*ms)
            .u32(payload.len() as u32)
            .raw(payload);
    }
    body.0
}

/// `[loc][loc_len][through_seq][created_ms]`.
pub(crate) fn snapshot_block(out: &mut Le, location: &str, through_seq: u64, created_ms: i64) {
    out.raw(location.as_bytes())
        .u16(location.len() as u16)
        .u64(through_seq)
        .i64(created_ms);
}

pub(crate) fn footer(out: &mut Le, entries: u32, next_sequence: u64, epoch: u64, version: u16) {
    out.u32(entries).u64(next_sequence).u64(epoch);
    if version == 4 {
        let crc = crc32c_bitwise(&out.0);
        out.u32(crc);
    }
    out.u16(version);
}

pub(crate) fn segment_block(records: &[&[u8]]) -> Vec<u8> {
    let mut b = Le::default();
    for r in records {
        b.u32(r.len() as u32).raw(r);
    }
    b.0
}

pub(crate) fn segment_footer(out: &mut Le, compression: u8, count: u32, version: u16) {
    out.u8(compression).u32(count);
    if version == 2 {
        let crc = crc32c_bitwise(&out.0);
        out.u32(crc);
    }
    out.u16(version);
}
