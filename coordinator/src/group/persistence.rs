//! Records of the `__consumer_offsets` topic, in Apache Kafka's own key/value schemas so
//! Kafka's tools could read them, and the replay that rebuilds groups at startup (the
//! batches themselves are the runtime's: `runtime::framing`).
//!
//! Keys (big-endian, strings as i16 length + UTF-8, non-flexible):
//! - offset commit, key version 1: `version i16, group string, topic string, partition i32`;
//! - group metadata, key version 2: `version i16, group string`.
//!
//! Values (a null value is a tombstone that deletes the key):
//! - `OffsetCommitValue` v3: `version i16, offset i64, leader_epoch i32, metadata string,
//!   commit_timestamp i64` (v1, with an extra `expire_timestamp i64`, is read too);
//! - `GroupMetadataValue` v3: `version i16, protocol_type string, generation i32,
//!   protocol nullable string, leader nullable string, current_state_timestamp i64,
//!   members [member_id string, group_instance_id nullable string, client_id string,
//!   client_host string, rebalance_timeout i32, session_timeout i32, subscription bytes,
//!   assignment bytes]` (arrays: i32 count; bytes: i32 length).

use crate::partition_writer::CoordinatorPartition;
pub use crate::runtime::framing::{encode_batch, encode_batch_as};
use crate::runtime::framing::{replay_with, Replayed};
use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::offsets::OffsetAndMetadata;

const OFFSET_KEY_VERSION: i16 = 1;
const GROUP_KEY_VERSION: i16 = 2;
const OFFSET_VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;

/// A persisted member of a group (static groups keep members across restarts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberValue {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`, for static members.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Metadata for the selected protocol.
    pub subscription: Bytes,
    /// The member's assignment.
    pub assignment: Bytes,
}

/// A persisted group (Kafka's `GroupMetadataValue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    /// Protocol type ("" for offset-only groups).
    pub protocol_type: String,
    /// Generation.
    pub generation_id: i32,
    /// Selected protocol.
    pub protocol_name: Option<String>,
    /// Leader.
    pub leader_id: Option<String>,
    /// When the state last changed.
    pub state_timestamp_ms: i64,
    /// Members.
    pub members: Vec<MemberValue>,
}

/// One decoded record of `__consumer_offsets`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Persisted {
    /// A committed offset, or its deletion (`None`).
    Offset {
        /// Group.
        group_id: String,
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// The offset, `None` for a tombstone.
        value: Option<OffsetAndMetadata>,
    },
    /// A transactional offset commit (TxnOffsetCommit), pending until its marker.
    TxnOffset {
        /// The transactional producer.
        producer_id: i64,
        /// Group.
        group_id: String,
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// The offset, `None` for a tombstone.
        value: Option<OffsetAndMetadata>,
    },
    /// A transaction marker: the producer's pending offsets are applied or dropped.
    TxnMarker {
        /// The transactional producer.
        producer_id: i64,
        /// Commit (true) or abort.
        commit: bool,
    },
    /// A group's metadata, or its deletion (`None`).
    Group {
        /// Group.
        group_id: String,
        /// The metadata, `None` for a tombstone.
        value: Option<GroupValue>,
    },
}

/// Longest string the int16-length fields of Kafka's `__consumer_offsets` schemas hold;
/// callers refuse longer group ids, instance ids, topics and protocol names up front.
pub const STRING_BYTES_MAX: usize = i16::MAX as usize;

fn put_string(buf: &mut BytesMut, s: &str) {
    let len = i16::try_from(s.len()).expect("strings persisted are checked to be < 32 KiB");
    buf.put_i16(len);
    buf.put_slice(s.as_bytes());
}

fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(buf, s),
        None => buf.put_i16(-1),
    }
}

fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(i32::try_from(b.len()).expect("member metadata is bounded by the frame size"));
    buf.put_slice(b);
}

/// The key of a committed offset.
#[must_use]
pub fn offset_key(group_id: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(OFFSET_KEY_VERSION);
    put_string(&mut buf, group_id);
    put_string(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

/// The key of a group's metadata.
#[must_use]
pub fn group_key(group_id: &str) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(GROUP_KEY_VERSION);
    put_string(&mut buf, group_id);
    buf.freeze()
}

/// The value of a committed offset.
#[must_use]
pub fn offset_value(value: &OffsetAndMetadata) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(OFFSET_VALUE_VERSION);
    buf.put_i64(value.offset);
    buf.put_i32(value.leader_epoch);
    put_string(&mut buf, &value.metadata);
    buf.put_i64(value.commit_timestamp_ms);
    buf.freeze()
}

/// The value of a group's metadata.
#[must_use]
pub fn group_value(value: &GroupValue) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(GROUP_VALUE_VERSION);
    put_string(&mut buf, &value.protocol_type);
    buf.put_i32(value.generation_id);
    put_nullable_string(&mut buf, value.protocol_name.as_deref());
    put_nullable_string(&mut buf, value.leader_id.as_deref());
    buf.put_i64(value.state_timestamp_ms);
    buf.put_i32(i32::try_from(value.members.len()).expect("group size is bounded"));
    for m in &value.members {
        put_string(&mut buf, &m.member_id);
        put_nullable_string(&mut buf, m.group_instance_id.as_deref());
        put_string(&mut buf, &m.client_id);
        put_string(&mut buf, &m.client_host);
        buf.put_i32(m.rebalance_timeout_ms);
        buf.put_i32(m.session_timeout_ms);
        put_bytes(&mut buf, &m.subscription);
        put_bytes(&mut buf, &m.assignment);
    }
    buf.freeze()
}

struct Reader(Bytes);

impl Reader {
    fn need(&self, n: usize) -> Result<(), String> {
        if self.0.remaining() < n {
            return Err(format!(
                "truncated: need {n} bytes, {} left",
                self.0.remaining()
            ));
        }
        Ok(())
    }
    fn i16(&mut self) -> Result<i16, String> {
        self.need(2)?;
        Ok(self.0.get_i16())
    }
    fn i32(&mut self) -> Result<i32, String> {
        self.need(4)?;
        Ok(self.0.get_i32())
    }
    fn i64(&mut self) -> Result<i64, String> {
        self.need(8)?;
        Ok(self.0.get_i64())
    }
    fn nullable_string(&mut self) -> Result<Option<String>, String> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|e| e.to_string())?;
        self.need(len)?;
        let bytes = self.0.split_to(len);
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|e| e.to_string())
    }
    fn string(&mut self) -> Result<String, String> {
        self.nullable_string()?
            .ok_or_else(|| "null where a string is required".to_string())
    }
    fn bytes(&mut self) -> Result<Bytes, String> {
        let len = self.i32()?;
        let len = usize::try_from(len.max(0)).map_err(|e| e.to_string())?;
        self.need(len)?;
        Ok(self.0.split_to(len))
    }
}

/// Decodes one record's key and value.
///
/// # Errors
/// A description of what does not parse (replay logs it and skips the record).
pub fn decode_record(key: &Bytes, value: Option<&Bytes>) -> Result<Persisted, String> {
    let mut k = Reader(key.clone());
    match k.i16()? {
        0 | 1 => {
            let group_id = k.string()?;
            let topic = k.string()?;
            let partition = k.i32()?;
            let value = value.map(decode_offset_value).transpose()?;
            Ok(Persisted::Offset {
                group_id,
                topic,
                partition,
                value,
            })
        }
        2 => {
            let group_id = k.string()?;
            let value = value.map(decode_group_value).transpose()?;
            Ok(Persisted::Group { group_id, value })
        }
        other => Err(format!("unknown key version {other}")),
    }
}

fn decode_offset_value(value: &Bytes) -> Result<OffsetAndMetadata, String> {
    let mut v = Reader(value.clone());
    let version = v.i16()?;
    let offset = v.i64()?;
    let leader_epoch = if version >= 3 { v.i32()? } else { -1 };
    let metadata = v.string()?;
    let commit_timestamp_ms = v.i64()?;
    if version == 1 {
        let _expire_timestamp = v.i64()?;
    }
    if !(0..=3).contains(&version) {
        return Err(format!("unknown offset value version {version}"));
    }
    Ok(OffsetAndMetadata {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

fn decode_group_value(value: &Bytes) -> Result<GroupValue, String> {
    let mut v = Reader(value.clone());
    let version = v.i16()?;
    if version != GROUP_VALUE_VERSION {
        return Err(format!("unsupported group value version {version}"));
    }
    let protocol_type = v.string()?;
    let generation_id = v.i32()?;
    let protocol_name = v.nullable_string()?;
    let leader_id = v.nullable_string()?;
    let state_timestamp_ms = v.i64()?;
    let count = v.i32()?;
    let mut members = Vec::new();
    for _ in 0..count.max(0) {
        members.push(MemberValue {
            member_id: v.string()?,
            group_instance_id: v.nullable_string()?,
            client_id: v.string()?,
            client_host: v.string()?,
            rebalance_timeout_ms: v.i32()?,
            session_timeout_ms: v.i32()?,
            subscription: v.bytes()?,
            assignment: v.bytes()?,
        });
    }
    Ok(GroupValue {
        protocol_type,
        generation_id,
        protocol_name,
        leader_id,
        state_timestamp_ms,
        members,
    })
}

/// Decodes one data record as replay sees it: an offset commit in a transactional batch is
/// `producer_id`'s TxnOffsetCommit, pending until its marker. Shared by the load's replay
/// and the group coordinator's write path (which replays what it appended), so both read a
/// record the same way.
///
/// # Errors
/// See [`decode_record`].
pub fn decode_replayed(
    key: &Bytes,
    value: Option<&Bytes>,
    producer_id: i64,
    transactional: bool,
) -> Result<Persisted, String> {
    Ok(match decode_record(key, value)? {
        Persisted::Offset {
            group_id,
            topic,
            partition,
            value,
        } if transactional => Persisted::TxnOffset {
            producer_id,
            group_id,
            topic,
            partition,
            value,
        },
        other => other,
    })
}

/// Reads `partition` from its log start to its log end and returns every record in log
/// order. Records that do not decode are logged and skipped.
///
/// # Errors
/// Storage errors, or a batch the record decoder rejects.
pub fn replay(partition: &dyn CoordinatorPartition) -> Result<Vec<Persisted>, String> {
    replay_with(partition, |record| match record {
        Replayed::Data {
            key,
            value,
            producer_id,
            transactional,
        } => decode_replayed(key, value, producer_id, transactional).map(Some),
        Replayed::Marker {
            producer_id,
            commit,
        } => Ok(Some(Persisted::TxnMarker {
            producer_id,
            commit,
        })),
    })
}
