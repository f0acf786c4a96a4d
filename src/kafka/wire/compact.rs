//! The field encodings of flexible message versions (KIP-482) that the messages encoded
//! here ([`super::share_offsets`], [`super::streams_describe`]) share: unsigned varints,
//! compact strings and arrays, nullable structs and tagged fields. Reading never trusts a
//! length: whatever runs past the end of the answer is an error, never a panic or a huge
//! allocation.

use anyhow::{bail, Result};
use bytes::Buf;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};

pub fn put_unsigned_varint<B: ByteBufMut>(buf: &mut B, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// The bytes [`put_unsigned_varint`] writes for `value`.
pub fn varint_len(value: u64) -> usize {
    (64 - value.leading_zeros() as usize).div_ceil(7).max(1)
}

/// A compact string: length + 1 as a varint, then the bytes.
pub fn put_compact_string<B: ByteBufMut>(buf: &mut B, value: &str) {
    put_unsigned_varint(buf, value.len() as u64 + 1);
    buf.put_slice(value.as_bytes());
}

pub fn unsigned_varint<B: ByteBuf>(buf: &mut B) -> Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        if !buf.has_remaining() {
            bail!("varint runs past the end");
        }
        let byte = buf.get_u8();
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("varint longer than 10 bytes")
}

/// Fails unless `bytes` more bytes remain.
pub fn need<B: ByteBuf>(buf: &B, bytes: usize) -> Result<()> {
    if buf.remaining() < bytes {
        bail!("answer ends early");
    }
    Ok(())
}

/// Skips `bytes` bytes.
pub fn skip<B: ByteBuf>(buf: &mut B, bytes: usize) -> Result<()> {
    need(buf, bytes)?;
    buf.advance(bytes);
    Ok(())
}

/// A compact (nullable) string: length + 1 as a varint, 0 for null.
pub fn compact_string<B: ByteBuf>(buf: &mut B) -> Result<Option<String>> {
    let length = unsigned_varint(buf)?;
    if length == 0 {
        return Ok(None);
    }
    let length = (length - 1) as usize;
    need(buf, length)?;
    let bytes = buf.try_get_bytes(length)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// Skips a compact (nullable) string.
pub fn skip_compact_string<B: ByteBuf>(buf: &mut B) -> Result<()> {
    let length = unsigned_varint(buf)?.saturating_sub(1);
    skip(buf, usize::try_from(length)?)
}

/// A compact array's length (length + 1 as a varint), refusing lengths the remaining
/// bytes cannot hold (each element takes at least one byte). A null array reads as empty.
pub fn compact_array_len<B: ByteBuf>(buf: &mut B) -> Result<usize> {
    let length = unsigned_varint(buf)?.saturating_sub(1) as usize;
    if length > buf.remaining() {
        bail!("array of {length} elements in {} bytes", buf.remaining());
    }
    Ok(length)
}

/// Skips a compact array whose elements `skip_element` skips.
pub fn skip_compact_array<B: ByteBuf>(
    buf: &mut B,
    mut skip_element: impl FnMut(&mut B) -> Result<()>,
) -> Result<()> {
    for _ in 0..compact_array_len(buf)? {
        skip_element(buf)?;
    }
    Ok(())
}

/// Whether a nullable struct is present: an int8, -1 for null, 1 for present.
pub fn struct_present<B: ByteBuf>(buf: &mut B) -> Result<bool> {
    need(buf, 1)?;
    match buf.get_i8() {
        -1 => Ok(false),
        1 => Ok(true),
        marker => bail!("nullable struct marked {marker}"),
    }
}

pub fn skip_tagged_fields<B: ByteBuf>(buf: &mut B) -> Result<()> {
    let count = unsigned_varint(buf)?;
    for _ in 0..count {
        let _tag = unsigned_varint(buf)?;
        let size = unsigned_varint(buf)?;
        skip(buf, usize::try_from(size)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn varint_lengths_match_what_is_written() {
        for value in [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut b = BytesMut::new();
            put_unsigned_varint(&mut b, value);
            assert_eq!(varint_len(value), b.len(), "{value}");
            assert_eq!(unsigned_varint(&mut b.freeze()).unwrap(), value);
        }
    }
}
