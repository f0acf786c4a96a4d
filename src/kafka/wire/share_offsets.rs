//! DescribeShareGroupOffsets (API key 90) in versions 0 and 1, encoded here: the
//! `kafka-protocol` crate knows version 0 only, and version 1 (KIP-1226) adds the lag
//! the broker computes for each share-partition. Both versions are flexible; the request
//! is the same in both, the answer's partitions gain `lag` (int64) after the leader
//! epoch.

use anyhow::{bail, Result};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Message, Request, VersionRange,
};

use super::compact::{
    compact_array_len, compact_string, need, put_compact_string, put_unsigned_varint,
    skip_tagged_fields,
};

/// A request for every topic-partition of each group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeShareGroupOffsets {
    pub groups: Vec<String>,
}

/// One share-partition's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartition {
    pub topic: String,
    pub partition: i32,
    /// -1 when the share-partition is not initialized.
    pub start_offset: i64,
    /// The broker's lag (version 1); `None` in version 0, or -1 when the broker does not
    /// know it.
    pub lag: Option<i64>,
    pub error_code: i16,
}

/// One group of the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupOffsets {
    pub group: String,
    pub error_code: i16,
    pub partitions: Vec<SharePartition>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeShareGroupOffsetsAnswer {
    pub groups: Vec<ShareGroupOffsets>,
}

const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

impl Message for DescribeShareGroupOffsets {
    const VERSIONS: VersionRange = VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Message for DescribeShareGroupOffsetsAnswer {
    const VERSIONS: VersionRange = VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl HeaderVersion for DescribeShareGroupOffsets {
    fn header_version(_version: i16) -> i16 {
        2
    }
}

impl HeaderVersion for DescribeShareGroupOffsetsAnswer {
    fn header_version(_version: i16) -> i16 {
        1
    }
}

impl Request for DescribeShareGroupOffsets {
    const KEY: i16 = 90;
    type Response = DescribeShareGroupOffsetsAnswer;
}

impl Encodable for DescribeShareGroupOffsets {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> Result<()> {
        put_unsigned_varint(buf, self.groups.len() as u64 + 1);
        for group in &self.groups {
            put_compact_string(buf, group);
            put_unsigned_varint(buf, 0); // topics: null, every topic
            put_unsigned_varint(buf, 0); // no tagged fields
        }
        put_unsigned_varint(buf, 0);
        Ok(())
    }

    fn compute_size(&self, _version: i16) -> Result<usize> {
        Ok(self.groups.iter().map(|g| g.len() + 12).sum::<usize>() + 6)
    }
}

impl Decodable for DescribeShareGroupOffsets {
    fn decode<B: ByteBuf>(_buf: &mut B, _version: i16) -> Result<Self> {
        bail!("a client does not decode requests")
    }
}

impl Encodable for DescribeShareGroupOffsetsAnswer {
    fn encode<B: ByteBufMut>(&self, _buf: &mut B, _version: i16) -> Result<()> {
        bail!("a client does not encode answers")
    }

    fn compute_size(&self, _version: i16) -> Result<usize> {
        Ok(0)
    }
}

impl Decodable for DescribeShareGroupOffsetsAnswer {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        need(buf, 4)?;
        let _throttle_time_ms = buf.get_i32();
        let mut groups = Vec::new();
        for _ in 0..compact_array_len(buf)? {
            let group = compact_string(buf)?.unwrap_or_default();
            let mut partitions = Vec::new();
            for _ in 0..compact_array_len(buf)? {
                let topic = compact_string(buf)?.unwrap_or_default();
                need(buf, 16)?;
                buf.advance(16); // topic id
                for _ in 0..compact_array_len(buf)? {
                    need(buf, 16)?;
                    let partition = buf.get_i32();
                    let start_offset = buf.get_i64();
                    let _leader_epoch = buf.get_i32();
                    let lag = if version >= 1 {
                        need(buf, 8)?;
                        Some(buf.get_i64())
                    } else {
                        None
                    };
                    need(buf, 2)?;
                    let error_code = buf.get_i16();
                    let _error_message = compact_string(buf)?;
                    skip_tagged_fields(buf)?;
                    partitions.push(SharePartition {
                        topic: topic.clone(),
                        partition,
                        start_offset,
                        lag,
                        error_code,
                    });
                }
                skip_tagged_fields(buf)?;
            }
            need(buf, 2)?;
            let error_code = buf.get_i16();
            let _error_message = compact_string(buf)?;
            skip_tagged_fields(buf)?;
            groups.push(ShareGroupOffsets {
                group,
                error_code,
                partitions,
            });
        }
        skip_tagged_fields(buf)?;
        Ok(DescribeShareGroupOffsetsAnswer { groups })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, Bytes, BytesMut};

    /// An answer as a broker encodes it: one group, one topic, one partition.
    fn answer(version: i16) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_i32(0); // throttle
        put_unsigned_varint(&mut b, 2); // 1 group
        put_unsigned_varint(&mut b, 3);
        b.put_slice(b"sq");
        put_unsigned_varint(&mut b, 2); // 1 topic
        put_unsigned_varint(&mut b, 7);
        b.put_slice(b"orders");
        b.put_slice(&[7; 16]); // topic id
        put_unsigned_varint(&mut b, 2); // 1 partition
        b.put_i32(3);
        b.put_i64(880);
        b.put_i32(0);
        if version >= 1 {
            b.put_i64(6);
        }
        b.put_i16(0);
        put_unsigned_varint(&mut b, 0); // null message
        put_unsigned_varint(&mut b, 1); // one tagged field, skipped
        put_unsigned_varint(&mut b, 9);
        put_unsigned_varint(&mut b, 2);
        b.put_slice(&[1, 2]);
        put_unsigned_varint(&mut b, 0); // topic tags
        b.put_i16(0);
        put_unsigned_varint(&mut b, 0);
        put_unsigned_varint(&mut b, 0); // group tags
        put_unsigned_varint(&mut b, 0); // top-level tags
        b.to_vec()
    }

    #[test]
    fn decodes_both_versions_and_never_panics_on_broken_bytes() {
        for version in [0, 1] {
            let bytes = answer(version);
            let decoded =
                DescribeShareGroupOffsetsAnswer::decode(&mut Bytes::from(bytes.clone()), version)
                    .unwrap();
            let p = &decoded.groups[0].partitions[0];
            assert_eq!(decoded.groups[0].group, "sq");
            assert_eq!(
                (p.topic.as_str(), p.partition, p.start_offset),
                ("orders", 3, 880)
            );
            assert_eq!(p.lag, (version == 1).then_some(6));
            for cut in 0..bytes.len() {
                assert!(DescribeShareGroupOffsetsAnswer::decode(
                    &mut Bytes::from(bytes[..cut].to_vec()),
                    version
                )
                .is_err());
            }
        }
        // A huge array length in a short answer is refused, not allocated.
        let mut b = BytesMut::new();
        b.put_i32(0);
        put_unsigned_varint(&mut b, u32::MAX as u64);
        assert!(DescribeShareGroupOffsetsAnswer::decode(&mut b.freeze(), 1).is_err());
    }

    #[test]
    fn encodes_the_request_as_kafka_does() {
        let mut b = BytesMut::new();
        DescribeShareGroupOffsets {
            groups: vec!["sq".into()],
        }
        .encode(&mut b, 1)
        .unwrap();
        assert_eq!(&b[..], &[2, 3, b's', b'q', 0, 0, 0]);
    }
}
