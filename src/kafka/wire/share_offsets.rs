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

/// Longest topic name Kafka allows.
const MAX_TOPIC_NAME: usize = 249;

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
                // Each partition keeps a copy of the name: bounded, they stay small.
                if topic.len() > MAX_TOPIC_NAME {
                    bail!(
                        "topic name of {} bytes (at most {MAX_TOPIC_NAME})",
                        topic.len()
                    );
                }
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

/// Property tests: any answer bytes decode to an error or to an answer no larger than a
/// small multiple of the bytes that carried it.
#[cfg(test)]
mod hostile {
    use super::*;
    use bytes::{BufMut, Bytes, BytesMut};
    use proptest::prelude::*;

    type Partition = (i32, i64, i64);
    type Topic = (String, Vec<Partition>);
    type Group = (String, Vec<Topic>);

    /// Encodes an answer as a broker does (as `tests::answer`, with any content).
    fn encode(groups: &[Group], version: i16) -> Vec<u8> {
        fn string(b: &mut BytesMut, s: &str) {
            put_unsigned_varint(b, s.len() as u64 + 1);
            b.put_slice(s.as_bytes());
        }
        let mut b = BytesMut::new();
        b.put_i32(0);
        put_unsigned_varint(&mut b, groups.len() as u64 + 1);
        for (group, topics) in groups {
            string(&mut b, group);
            put_unsigned_varint(&mut b, topics.len() as u64 + 1);
            for (topic, partitions) in topics {
                string(&mut b, topic);
                b.put_slice(&[1; 16]);
                put_unsigned_varint(&mut b, partitions.len() as u64 + 1);
                for &(partition, start_offset, lag) in partitions {
                    b.put_i32(partition);
                    b.put_i64(start_offset);
                    b.put_i32(0);
                    if version >= 1 {
                        b.put_i64(lag);
                    }
                    b.put_i16(0);
                    put_unsigned_varint(&mut b, 0);
                    put_unsigned_varint(&mut b, 0);
                }
                put_unsigned_varint(&mut b, 0);
            }
            b.put_i16(0);
            put_unsigned_varint(&mut b, 0);
            put_unsigned_varint(&mut b, 0);
        }
        put_unsigned_varint(&mut b, 0);
        b.to_vec()
    }

    fn any_groups() -> impl Strategy<Value = Vec<Group>> {
        let partition = (any::<i32>(), any::<i64>(), any::<i64>());
        let topic = (
            prop_oneof!["[a-z]{0,20}", "[a-z]{240,2000}"],
            prop::collection::vec(partition, 0..40),
        );
        let group = ("[ -~]{0,20}", prop::collection::vec(topic, 0..3));
        prop::collection::vec(group, 0..3)
    }

    /// Bytes of text the answer holds once decoded.
    fn decoded_text(answer: &DescribeShareGroupOffsetsAnswer) -> usize {
        answer
            .groups
            .iter()
            .map(|g| g.group.len() + g.partitions.iter().map(|p| p.topic.len()).sum::<usize>())
            .sum()
    }

    fn decode(bytes: &[u8], version: i16) -> Result<DescribeShareGroupOffsetsAnswer> {
        let answer =
            DescribeShareGroupOffsetsAnswer::decode(&mut Bytes::copy_from_slice(bytes), version)?;
        // Each partition repeats its topic's name: a bound on the name bounds the copies.
        assert!(
            decoded_text(&answer) <= 16 * bytes.len(),
            "{} bytes of names from {} bytes",
            decoded_text(&answer),
            bytes.len()
        );
        Ok(answer)
    }

    /// Found by `answers_with_any_content`: a 250-byte topic name (longer than Kafka
    /// allows) was read, and copied into each of its 7 partitions. Unbounded, a name of
    /// a few MiB with many partitions made gigabytes of copies from one answer
    /// (`answers_bit_flipped_and_cut` saw decoded names over 16 times the answer's size).
    #[test]
    fn topic_names_longer_than_kafka_allows_are_refused() {
        let topic =
            "aaaabuclnqxnzmnlnvrcxijskoqmwguhnchkunnrezpcfqwnlaxcejerfivsxjqgaralrzjwbfdwlj\
                     rbpejznwkvcvdrafoblftzsyielxujqfxjsjglrjpegtzxxnclrzlojgnbqetjmbxbxomwvjqbuxwq\
                     ggtzdgauardxeapxlybrnjqqebxddnxycwiqjlgljkddnnedymsetjvemdjilriayvyvygjccbbrws\
                     buonotnpuyymogav";
        let partitions = vec![
            (326731244, 4913373490383350373, -7254360102511375136),
            (540066953, 1296975052196458925, -2310532178088170432),
            (-1029135317, 3253200869918995467, 539122156709872514),
            (-819175087, -571754321851894750, 6601855274674455274),
            (1821262942, -7957682779303291274, -4056639090816064163),
            (55746840, -8604290266275618216, -8828203936636040577),
            (-907905690, 6365229915597877908, 8734485939407184340),
        ];
        let groups = vec![(String::new(), vec![(topic.to_string(), partitions.clone())])];
        let error = decode(&encode(&groups, 0), 0).unwrap_err();
        assert!(error.to_string().contains("at most 249"), "{error}");
        // At Kafka's limit the answer is read.
        let groups = vec![(String::new(), vec![("t".repeat(249), partitions)])];
        assert_eq!(
            decode(&encode(&groups, 0), 0).unwrap().groups[0]
                .partitions
                .len(),
            7
        );
    }

    proptest! {
        #![proptest_config(crate::hostile::config(500))]

        #[test]
        fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300), version in 0..2i16) {
            let _ = decode(&bytes, version);
        }

        #[test]
        fn answers_with_any_content(groups in any_groups(), version in 0..2i16) {
            let bytes = encode(&groups, version);
            let answer = decode(&bytes, version);
            let too_long = groups.iter().flat_map(|(_, t)| t).any(|(topic, _)| topic.len() > 249);
            prop_assert_eq!(answer.is_err(), too_long, "{:?}", answer);
            if let Ok(answer) = answer {
                let partitions: Vec<Partition> = answer
                    .groups
                    .iter()
                    .flat_map(|g| &g.partitions)
                    .map(|p| (p.partition, p.start_offset, p.lag.unwrap_or(0)))
                    .collect();
                let written: Vec<Partition> = groups
                    .iter()
                    .flat_map(|(_, t)| t)
                    .flat_map(|(_, p)| p)
                    .map(|&(partition, start, lag)| (partition, start, if version >= 1 { lag } else { 0 }))
                    .collect();
                prop_assert_eq!(partitions, written);
            }
        }

        #[test]
        fn answers_bit_flipped_and_cut(
            groups in any_groups(),
            version in 0..2i16,
            flips in prop::collection::vec((any::<prop::sample::Index>(), 0..8u8), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = encode(&groups, version);
            for (at, bit) in &flips {
                let at = at.index(bytes.len());
                bytes[at] ^= 1 << bit;
            }
            bytes.truncate(cut.index(bytes.len() + 1).max(bytes.len() / 2));
            let _ = decode(&bytes, version);
        }
    }
}
