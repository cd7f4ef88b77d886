//! The compact binary encoding shared by envelopes, receipts and epoch headers.
//!
//! Design constraints:
//! - Unsigned integers are LEB128 varints (7 bits per byte, low group first); a
//!   decoder rejects non-minimal encodings and values above `u64::MAX`, so every
//!   value has exactly one encoding.
//! - Signed integers are zig-zag mapped onto varints.
//! - Strings are `varint(len) || UTF-8 bytes`; byte arrays of fixed size are raw.
//! - Decoding is total: every read checks the remaining input first, a declared
//!   length larger than what remains is an error, and no allocation is larger than
//!   the input it was read from. Nothing here panics on any input.

use crate::error::DecodeError;

/// Appends values to a byte buffer in the canonical encoding.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn new() -> Self {
        Self {
            buf: Vec::with_capacity(192),
        }
    }
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn varint(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(byte);
                return;
            }
            self.buf.push(byte | 0x80);
        }
    }
    pub(crate) fn zigzag(&mut self, v: i64) {
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    pub(crate) fn str(&mut self, v: &str) {
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v.as_bytes());
    }
}

/// Reads canonical values from untrusted bytes; every method is total.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }
    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
    pub(crate) fn position(&self) -> usize {
        self.pos
    }
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes { offset: self.pos })
        }
    }
    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self
            .data
            .get(self.pos)
            .ok_or(DecodeError::Truncated { offset: self.pos })?;
        self.pos += 1;
        Ok(b)
    }
    pub(crate) fn varint(&mut self) -> Result<u64, DecodeError> {
        let start = self.pos;
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            let part = u64::from(b & 0x7f);
            if shift == 63 && part > 1 {
                return Err(DecodeError::BadVarint { offset: start });
            }
            value |= part << shift;
            if b & 0x80 == 0 {
                if b == 0 && shift > 0 {
                    return Err(DecodeError::BadVarint { offset: start });
                }
                return Ok(value);
            }
        }
        Err(DecodeError::BadVarint { offset: start })
    }
    pub(crate) fn zigzag(&mut self) -> Result<i64, DecodeError> {
        let v = self.varint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated { offset: self.pos });
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    pub(crate) fn array32(&mut self) -> Result<[u8; 32], DecodeError> {
        let s = self.bytes(32)?;
        let mut out = [0u8; 32];
        out.copy_from_slice(s);
        Ok(out)
    }
    pub(crate) fn len(&mut self) -> Result<usize, DecodeError> {
        let at = self.pos;
        let n = self.varint()?;
        if n > self.remaining() as u64 {
            return Err(DecodeError::LengthOutOfBounds {
                offset: at,
                length: n,
            });
        }
        Ok(n as usize)
    }
    /// A count of items each at least `min_item` bytes long; bounded by the input.
    pub(crate) fn count(&mut self, min_item: usize) -> Result<usize, DecodeError> {
        let at = self.pos;
        let n = self.varint()?;
        if n.saturating_mul(min_item.max(1) as u64) > self.remaining() as u64 {
            return Err(DecodeError::LengthOutOfBounds {
                offset: at,
                length: n,
            });
        }
        Ok(n as usize)
    }
    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        let at = self.pos;
        let n = self.len()?;
        let raw = self.bytes(n)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| DecodeError::BadUtf8 { offset: at })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip_and_canonical() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut w = Writer::new();
            w.varint(v);
            let mut r = Reader::new(&w.buf);
            assert_eq!(r.varint().unwrap(), v);
            r.finish().unwrap();
        }
        assert!(Reader::new(&[0x80, 0x00]).varint().is_err());
        assert!(Reader::new(&[0xff; 11]).varint().is_err());
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            let mut w = Writer::new();
            w.zigzag(v);
            assert_eq!(Reader::new(&w.buf).zigzag().unwrap(), v);
        }
    }
}
