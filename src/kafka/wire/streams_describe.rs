//! StreamsGroupDescribe (API key 89, KIP-1071) in version 0, encoded here: the
//! `kafka-protocol` crate does not know it. Version 0 is flexible. Of an answer only each
//! group's id, error, state and epochs, the source topics of each subtopology, and its
//! members' ids, epochs, clients and active tasks (assigned and target) are kept; standby
//! and warm-up tasks and the rest of the topology are read past. An active task
//! (subtopology, partition) reads that partition of each of the subtopology's source
//! topics: which member owns which partition. Version 1 (KIP-1331) adds only the topology description from a
//! broker-side plugin, which the exporter has no use for; every broker with the API
//! speaks version 0.

use anyhow::{bail, Result};
use kafka_protocol::messages::GroupId;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Message, Request, StrBytes, VersionRange,
};

use super::compact::{
    compact_array_len, compact_string, need, put_compact_string, put_unsigned_varint, skip,
    skip_compact_array, skip_compact_string, skip_tagged_fields, struct_present, varint_len,
};

/// A request to describe streams groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamsGroupDescribe {
    pub group_ids: Vec<GroupId>,
}

/// One group of the answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribedStreamsGroup {
    pub error_code: i16,
    pub group_id: GroupId,
    /// Empty, NotReady, Assigning, Reconciling, Stable or Dead; empty on an error.
    pub group_state: StrBytes,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// Per subtopology id, the topics it reads (source and repartition source topics);
    /// `None` when the answer has no topology (not yet known to the broker).
    pub topology: Option<Vec<(String, Vec<String>)>>,
    pub members: Vec<StreamsMember>,
}

/// Active tasks: per subtopology id, the partitions.
pub type Tasks = Vec<(String, Vec<i32>)>;

/// One member of a streams group, without its tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamsMember {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Its active tasks, and those the group's assignor gave it (it owns them once it has
    /// reconciled).
    pub active: Tasks,
    pub target_active: Tasks,
}

impl DescribedStreamsGroup {
    /// The partitions `tasks` read, by topic; `None` without a topology, or where a
    /// task's subtopology is not in it (what it reads is then unknown, not nothing).
    pub fn partitions_of(&self, tasks: &Tasks) -> Option<Vec<(String, Vec<i32>)>> {
        let topology = self.topology.as_ref()?;
        let mut out: Vec<(String, Vec<i32>)> = Vec::new();
        for (subtopology, partitions) in tasks {
            let (_, topics) = topology.iter().find(|(id, _)| id == subtopology)?;
            for topic in topics {
                match out.iter_mut().find(|(t, _)| t == topic) {
                    Some((_, owned)) => owned.extend(partitions),
                    None => out.push((topic.clone(), partitions.clone())),
                }
            }
        }
        for (_, owned) in &mut out {
            owned.sort_unstable();
            owned.dedup();
        }
        out.sort();
        Some(out)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamsGroupDescribeAnswer {
    pub groups: Vec<DescribedStreamsGroup>,
}

const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

impl Message for StreamsGroupDescribe {
    const VERSIONS: VersionRange = VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Message for StreamsGroupDescribeAnswer {
    const VERSIONS: VersionRange = VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl HeaderVersion for StreamsGroupDescribe {
    fn header_version(_version: i16) -> i16 {
        2
    }
}

impl HeaderVersion for StreamsGroupDescribeAnswer {
    fn header_version(_version: i16) -> i16 {
        1
    }
}

impl Request for StreamsGroupDescribe {
    const KEY: i16 = 89;
    type Response = StreamsGroupDescribeAnswer;
}

impl Encodable for StreamsGroupDescribe {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> Result<()> {
        put_unsigned_varint(buf, self.group_ids.len() as u64 + 1);
        for group in &self.group_ids {
            put_compact_string(buf, &group.0);
        }
        buf.put_u8(0); // include_authorized_operations: false
        put_unsigned_varint(buf, 0); // no tagged fields
        Ok(())
    }

    fn compute_size(&self, _version: i16) -> Result<usize> {
        let ids: usize = self
            .group_ids
            .iter()
            .map(|g| varint_len(g.0.len() as u64 + 1) + g.0.len())
            .sum();
        Ok(varint_len(self.group_ids.len() as u64 + 1) + ids + 2)
    }
}

impl Decodable for StreamsGroupDescribe {
    fn decode<B: ByteBuf>(_buf: &mut B, _version: i16) -> Result<Self> {
        bail!("a client does not decode requests")
    }
}

impl Encodable for StreamsGroupDescribeAnswer {
    fn encode<B: ByteBufMut>(&self, _buf: &mut B, _version: i16) -> Result<()> {
        bail!("a client does not encode answers")
    }

    fn compute_size(&self, _version: i16) -> Result<usize> {
        Ok(0)
    }
}

impl Decodable for StreamsGroupDescribeAnswer {
    fn decode<B: ByteBuf>(buf: &mut B, _version: i16) -> Result<Self> {
        let _throttle_time_ms = i32_of(buf)?;
        let mut groups = Vec::new();
        for _ in 0..compact_array_len(buf)? {
            need(buf, 2)?;
            let error_code = buf.get_i16();
            let _error_message = compact_string(buf)?;
            let group_id = compact_string(buf)?.unwrap_or_default();
            let group_state = compact_string(buf)?.unwrap_or_default();
            let group_epoch = i32_of(buf)?;
            let assignment_epoch = i32_of(buf)?;
            let topology = if struct_present(buf)? {
                Some(read_topology(buf)?)
            } else {
                None
            };
            let mut members = Vec::new();
            for _ in 0..compact_array_len(buf)? {
                members.push(member(buf)?);
            }
            skip(buf, 4)?; // authorized operations
            skip_tagged_fields(buf)?;
            groups.push(DescribedStreamsGroup {
                error_code,
                group_id: GroupId(StrBytes::from_string(group_id)),
                group_state: StrBytes::from_string(group_state),
                group_epoch,
                assignment_epoch,
                topology,
                members,
            });
        }
        skip_tagged_fields(buf)?;
        Ok(StreamsGroupDescribeAnswer { groups })
    }
}

fn i32_of<B: ByteBuf>(buf: &mut B) -> Result<i32> {
    need(buf, 4)?;
    Ok(buf.get_i32())
}

/// Topology: epoch, then its (nullable) subtopologies: per subtopology id, the topics it
/// reads (source topics and repartition source topics).
fn read_topology<B: ByteBuf>(buf: &mut B) -> Result<Vec<(String, Vec<String>)>> {
    skip(buf, 4)?;
    let mut subtopologies = Vec::new();
    for _ in 0..compact_array_len(buf)? {
        let id = compact_string(buf)?.unwrap_or_default();
        let mut topics = Vec::new();
        for _ in 0..compact_array_len(buf)? {
            topics.extend(compact_string(buf)?); // source topics
        }
        skip_compact_array(buf, skip_compact_string)?; // repartition sink topics
        skip_compact_array(buf, |buf| topic_info(buf).map(drop))?; // state changelog topics
        for _ in 0..compact_array_len(buf)? {
            topics.extend(topic_info(buf)?); // repartition source topics
        }
        skip_tagged_fields(buf)?;
        subtopologies.push((id, topics));
    }
    skip_tagged_fields(buf)?;
    Ok(subtopologies)
}

/// TopicInfo: name, partitions, replication factor, configs; the name.
fn topic_info<B: ByteBuf>(buf: &mut B) -> Result<Option<String>> {
    let name = compact_string(buf)?;
    skip(buf, 6)?;
    skip_compact_array(buf, skip_key_value)?;
    skip_tagged_fields(buf)?;
    Ok(name)
}

fn skip_key_value<B: ByteBuf>(buf: &mut B) -> Result<()> {
    skip_compact_string(buf)?;
    skip_compact_string(buf)?;
    skip_tagged_fields(buf)
}

/// TaskOffset: subtopology id, partition, offset.
fn skip_task_offset<B: ByteBuf>(buf: &mut B) -> Result<()> {
    skip_compact_string(buf)?;
    skip(buf, 12)?;
    skip_tagged_fields(buf)
}

/// Assignment: active, standby and warm-up tasks, each a list of TaskIds (subtopology
/// id, partitions); the active ones.
fn active_tasks<B: ByteBuf>(buf: &mut B) -> Result<Tasks> {
    let mut active = Vec::new();
    for kind in 0..3 {
        for _ in 0..compact_array_len(buf)? {
            let subtopology = compact_string(buf)?.unwrap_or_default();
            let count = compact_array_len(buf)?;
            need(buf, count * 4)?;
            let partitions: Vec<i32> = (0..count).map(|_| buf.get_i32()).collect();
            skip_tagged_fields(buf)?;
            if kind == 0 {
                active.push((subtopology, partitions));
            }
        }
    }
    skip_tagged_fields(buf)?;
    Ok(active)
}

/// One member, without its tasks.
fn member<B: ByteBuf>(buf: &mut B) -> Result<StreamsMember> {
    let member_id = compact_string(buf)?.unwrap_or_default();
    let member_epoch = i32_of(buf)?;
    let instance_id = compact_string(buf)?;
    skip_compact_string(buf)?; // rack id
    let client_id = compact_string(buf)?.unwrap_or_default();
    let client_host = compact_string(buf)?.unwrap_or_default();
    skip(buf, 4)?; // topology epoch
    skip_compact_string(buf)?; // process id
    if struct_present(buf)? {
        // user endpoint: host, port
        skip_compact_string(buf)?;
        skip(buf, 2)?;
        skip_tagged_fields(buf)?;
    }
    skip_compact_array(buf, skip_key_value)?; // client tags
    skip_compact_array(buf, skip_task_offset)?; // task offsets
    skip_compact_array(buf, skip_task_offset)?; // task end offsets
    let active = active_tasks(buf)?;
    let target_active = active_tasks(buf)?;
    skip(buf, 1)?; // is classic
    skip_tagged_fields(buf)?;
    Ok(StreamsMember {
        member_id,
        member_epoch,
        instance_id,
        client_id,
        client_host,
        active,
        target_active,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, Bytes, BytesMut};

    fn bytes_of(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    /// An answer as kafka-clients 4.4.0 encodes it (StreamsGroupDescribeResponseData,
    /// version 0): group "app", Stable, with a topology (one subtopology reading "in",
    /// one changelog topic with a config) and two members: "m1" with a rack, a user
    /// endpoint, a client tag, a task offset and active tasks 0 and 1 of subtopology 0;
    /// "m2" with nothing optional. Then group "gone": GROUP_ID_NOT_FOUND, no topology.
    const ANSWER: &str = concat!(
        "00000000030000000461707007537461626c65000000030000000301000000010202300203696e01",
        "02146170702d73746f72652d6368616e67656c6f6700000000000102026b0276000001000003036d",
        "310000000500027202630b2f3132372e302e302e310000000102700102681f900002026b02760002",
        "0230000000010000000000000007000102023003000000000000000100010100020230030000000000",
        "000001000101000000036d3200000000000002630268000000000270ff0101010101010001010100",
        "0000800000000000450a6e6f7420666f756e6405676f6e65010000000000000000ff018000000000",
        "00",
    );

    #[test]
    fn decodes_an_answer_of_kafka_clients_and_never_panics_on_broken_bytes() {
        let bytes = bytes_of(ANSWER);
        let answer =
            StreamsGroupDescribeAnswer::decode(&mut Bytes::from(bytes.clone()), 0).unwrap();
        assert_eq!(answer.groups.len(), 2);
        let app = &answer.groups[0];
        assert_eq!(
            (&*app.group_id.0, app.error_code, &*app.group_state),
            ("app", 0, "Stable")
        );
        assert_eq!((app.group_epoch, app.assignment_epoch), (3, 3));
        let members: Vec<(&str, i32, &str, &str)> = app
            .members
            .iter()
            .map(|m| {
                (
                    &*m.member_id,
                    m.member_epoch,
                    &*m.client_id,
                    &*m.client_host,
                )
            })
            .collect();
        assert_eq!(members, [("m1", 5, "c", "/127.0.0.1"), ("m2", 0, "c", "h")]);
        // Subtopology 0 reads "in"; m1's active tasks 0 and 1 of it read in/0 and in/1.
        assert_eq!(
            app.topology,
            Some(vec![("0".to_string(), vec!["in".to_string()])])
        );
        assert_eq!(
            app.partitions_of(&app.members[0].active),
            Some(vec![("in".to_string(), vec![0, 1])])
        );
        assert_eq!(app.partitions_of(&app.members[1].active), Some(vec![]));
        let gone = &answer.groups[1];
        assert_eq!((&*gone.group_id.0, gone.error_code), ("gone", 69));
        assert!(gone.members.is_empty());
        for cut in 0..bytes.len() {
            assert!(
                StreamsGroupDescribeAnswer::decode(&mut Bytes::from(bytes[..cut].to_vec()), 0)
                    .is_err(),
                "cut at {cut}"
            );
        }
        // A huge array length in a short answer is refused, not allocated.
        let mut huge = BytesMut::new();
        huge.put_i32(0);
        put_unsigned_varint(&mut huge, u32::MAX as u64);
        assert!(StreamsGroupDescribeAnswer::decode(&mut huge.freeze(), 0).is_err());
    }

    #[test]
    fn encodes_the_request_as_kafka_clients_does() {
        let request = StreamsGroupDescribe {
            group_ids: ["app", "gone"]
                .map(|g| GroupId(StrBytes::from_static_str(g)))
                .to_vec(),
        };
        let mut b = BytesMut::new();
        request.encode(&mut b, 0).unwrap();
        // StreamsGroupDescribeRequestData of kafka-clients 4.4.0, version 0.
        assert_eq!(b.to_vec(), bytes_of("030461707005676f6e650000"));
        assert_eq!(request.compute_size(0).unwrap(), b.len());
    }
}
