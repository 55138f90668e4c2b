//! Valid requests of every API the broker serves, filled with plausible values taken
//! from the broker itself (its topics, topic ids, partitions, brokers, a transactional
//! producer) or, when `hostile`, with values a careless or malicious client could send:
//! negative ids, empty and oversized names, unknown topic ids, thousands of partitions.
//! Every request here encodes with kafka-protocol, so the broker must answer it with an
//! error code at worst; the mutations in `mutate` are what break the framing.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    add_offsets_to_txn_request, add_partitions_to_txn_request, alter_configs_request,
    alter_partition_reassignments_request, api_versions_request, create_partitions_request,
    create_topics_request, delete_groups_request, delete_records_request, delete_topics_request,
    describe_cluster_request, describe_configs_request, describe_groups_request,
    describe_log_dirs_request, describe_producers_request, describe_quorum_request,
    describe_topic_partitions_request, describe_transactions_request, elect_leaders_request,
    end_txn_request, fetch_request, find_coordinator_request, heartbeat_request,
    incremental_alter_configs_request, init_producer_id_request, join_group_request,
    leave_group_request, list_groups_request, list_offsets_request,
    list_partition_reassignments_request, list_transactions_request, metadata_request,
    offset_commit_request, offset_delete_request, offset_fetch_request,
    offset_for_leader_epoch_request, produce_request, sync_group_request,
    txn_offset_commit_request, write_txn_markers_request, ApiKey, BrokerId, GroupId, ProducerId,
    RequestHeader, RequestKind, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use uuid::Uuid;

/// A topic the broker reported in Metadata.
#[derive(Clone, Debug)]
pub struct Topic {
    /// Its name.
    pub name: String,
    /// Its topic id.
    pub id: Uuid,
    /// Its partition indexes.
    pub partitions: Vec<i32>,
}

/// What the broker told us about itself, the raw material of plausible requests.
#[derive(Clone, Debug, Default)]
pub struct Corpus {
    /// Topics from Metadata (internal ones included).
    pub topics: Vec<Topic>,
    /// Broker ids from Metadata.
    pub brokers: Vec<i32>,
    /// Group ids worth naming (ones we created and made-up ones).
    pub groups: Vec<String>,
    /// Transactional ids worth naming.
    pub transactional_ids: Vec<String>,
    /// A producer id and epoch the broker handed out, `(-1, -1)` if none.
    pub producer: (i64, i16),
    /// Valid record batches (v2, a few records, every compression).
    pub batches: Vec<Bytes>,
    /// Compressed batches that inflate to far more than the frame carries.
    pub bombs: Vec<Bytes>,
}

/// Bytes a compression bomb's one record inflates to.
const BOMB_VALUE_BYTES: usize = 32 * 1024 * 1024;

/// Record batches for Produce: small valid ones, and bombs.
#[must_use]
pub fn record_batches() -> (Vec<Bytes>, Vec<Bytes>) {
    let compressions = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    let record = |value: Bytes| Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::from_static(b"key")),
        value: Some(value),
        headers: Default::default(),
    };
    let encode = |records: &[Record], compression: Compression| {
        let mut out = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut out, records, &options).map(|()| out.freeze())
    };
    let small: Vec<Record> = (0..3)
        .map(|i| record(Bytes::from(format!("fuzz value {i}"))))
        .collect();
    let batches = compressions
        .iter()
        .filter_map(|c| encode(&small, *c).ok())
        .collect();
    let bomb = [record(Bytes::from(vec![0u8; BOMB_VALUE_BYTES]))];
    let bombs = [Compression::Gzip, Compression::Zstd, Compression::Lz4]
        .iter()
        .filter_map(|c| encode(&bomb, *c).ok())
        .collect();
    (batches, bombs)
}

/// Draws plausible (or hostile) values for one request.
pub struct Gen<'a> {
    /// What the broker told us.
    pub corpus: &'a Corpus,
    /// The seeded PRNG.
    pub rng: &'a mut fastrand::Rng,
    /// Draw hostile values rather than plausible ones.
    pub hostile: bool,
    /// The version the request is for: fields a version lacks are left at their defaults.
    pub version: i16,
    /// A huge array or string was already drawn for this request: one per request, so
    /// nested arrays do not multiply into gigabytes.
    pub big_used: bool,
}

/// Boundary values of an i32 field.
const I32_EDGES: [i32; 8] = [0, -1, 1, i32::MAX, i32::MIN, -2, 65_536, 1_000_000];
/// Boundary values of an i64 field.
const I64_EDGES: [i64; 7] = [0, -1, -2, i64::MAX, i64::MIN, 1, 1 << 40];

impl Gen<'_> {
    /// True if the request's version is within `min..=max` (a field exists there).
    fn at(&self, min: i16, max: i16) -> bool {
        (min..=max).contains(&self.version)
    }

    /// True with probability `percent`%.
    fn chance(&mut self, percent: u32) -> bool {
        self.rng.u32(0..100) < percent
    }

    /// A hostile draw happens for a fraction of fields only, so one bad field at a time
    /// gets past the checks before it.
    fn odd(&mut self) -> bool {
        self.hostile && self.chance(35)
    }

    fn str(s: &str) -> StrBytes {
        StrBytes::from_string(s.to_owned())
    }

    /// A hostile string: empty, long, control characters, path tricks.
    fn nasty_string(&mut self) -> String {
        match self.rng.u32(0..8) {
            0 => String::new(),
            1 if !self.big_used => {
                self.big_used = true;
                "x".repeat(self.rng.usize(250..40_000))
            }
            1 => "x".repeat(self.rng.usize(250..300)),
            2 => "..".to_owned(),
            3 => "../../../etc/passwd".to_owned(),
            4 => "topic\u{0}with\nnul".to_owned(),
            5 => "\u{1F4A9}".repeat(100),
            6 => "__consumer_offsets".to_owned(),
            // A bounded pool: auto-created topics must not grow without end.
            _ => format!("fuzz-odd-{}", self.rng.u32(..50)),
        }
    }

    fn pick<'s>(&mut self, items: &'s [String], fallback: &'s str) -> &'s str {
        if items.is_empty() {
            fallback
        } else {
            &items[self.rng.usize(..items.len())]
        }
    }

    /// A topic from Metadata, or a made-up one.
    fn topic_entry(&mut self) -> Option<Topic> {
        let topics = &self.corpus.topics;
        if topics.is_empty() || self.chance(10) {
            return None;
        }
        Some(topics[self.rng.usize(..topics.len())].clone())
    }

    /// A topic name and its partitions (made-up names get partition 0).
    fn topic(&mut self) -> (String, Uuid, Vec<i32>) {
        if self.odd() {
            let name = self.nasty_string();
            return (name, self.uuid(), vec![self.partition_of(&[0])]);
        }
        match self.topic_entry() {
            Some(t) => (t.name, t.id, t.partitions),
            None => (
                format!("fuzz-new-{}", self.rng.u32(..50)),
                Uuid::nil(),
                vec![0],
            ),
        }
    }

    fn uuid(&mut self) -> Uuid {
        match self.rng.u32(0..4) {
            0 => Uuid::nil(),
            1 => Uuid::from_u128(u128::MAX),
            _ => Uuid::from_u128(self.rng.u128(..)),
        }
    }

    fn topic_id(&mut self, id: Uuid) -> Uuid {
        if self.odd() {
            self.uuid()
        } else {
            id
        }
    }

    fn partition_of(&mut self, partitions: &[i32]) -> i32 {
        if self.odd() || partitions.is_empty() {
            return I32_EDGES[self.rng.usize(..I32_EDGES.len())];
        }
        partitions[self.rng.usize(..partitions.len())]
    }

    /// Some of a topic's partitions; hostile: thousands of them, duplicates included.
    fn partitions(&mut self, partitions: &[i32]) -> Vec<i32> {
        let count = self.count(partitions.len().clamp(1, 3));
        (0..count).map(|_| self.partition_of(partitions)).collect()
    }

    /// How many array entries: `normal` at most, or thousands when hostile.
    fn count(&mut self, normal: usize) -> usize {
        if self.odd() {
            let count = [0, 1, 2_000, 20_000][self.rng.usize(..4)];
            if count < 1000 {
                count
            } else if self.big_used {
                normal
            } else {
                self.big_used = true;
                count
            }
        } else {
            self.rng.usize(1..=normal.max(1))
        }
    }

    fn int(&mut self, normal: i32) -> i32 {
        if self.odd() {
            I32_EDGES[self.rng.usize(..I32_EDGES.len())]
        } else {
            normal
        }
    }

    fn long(&mut self, normal: i64) -> i64 {
        if self.odd() {
            I64_EDGES[self.rng.usize(..I64_EDGES.len())]
        } else {
            normal
        }
    }

    fn short(&mut self, normal: i16) -> i16 {
        if self.odd() {
            [0, -1, i16::MAX, i16::MIN, 1][self.rng.usize(..5)]
        } else {
            normal
        }
    }

    fn byte(&mut self, normal: i8) -> i8 {
        if self.odd() {
            [0, -1, i8::MAX, i8::MIN, 2, 5][self.rng.usize(..6)]
        } else {
            normal
        }
    }

    fn broker(&mut self) -> i32 {
        if self.odd() || self.corpus.brokers.is_empty() {
            return I32_EDGES[self.rng.usize(..I32_EDGES.len())];
        }
        self.corpus.brokers[self.rng.usize(..self.corpus.brokers.len())]
    }

    fn group(&mut self) -> GroupId {
        let name = if self.odd() {
            self.nasty_string()
        } else {
            self.pick(&self.corpus.groups, "fuzz-group").to_owned()
        };
        GroupId(Self::str(&name))
    }

    fn txn(&mut self) -> TransactionalId {
        let name = if self.odd() {
            self.nasty_string()
        } else {
            self.pick(&self.corpus.transactional_ids, "fuzz-txn")
                .to_owned()
        };
        TransactionalId(Self::str(&name))
    }

    fn text(&mut self, normal: &str) -> StrBytes {
        if self.odd() {
            let s = self.nasty_string();
            Self::str(&s)
        } else {
            Self::str(normal)
        }
    }

    fn producer(&mut self) -> (ProducerId, i16) {
        let (id, epoch) = self.corpus.producer;
        (ProducerId(self.long(id)), self.short(epoch))
    }

    fn records(&mut self) -> Option<Bytes> {
        if self.hostile && !self.big_used && self.chance(30) && !self.corpus.bombs.is_empty() {
            self.big_used = true;
            let bombs = &self.corpus.bombs;
            return Some(bombs[self.rng.usize(..bombs.len())].clone());
        }
        if self.odd() {
            return [None, Some(Bytes::new()), Some(Bytes::from_static(&[0; 61]))]
                [self.rng.usize(..3)]
            .clone();
        }
        let batches = &self.corpus.batches;
        if batches.is_empty() {
            return None;
        }
        Some(batches[self.rng.usize(..batches.len())].clone())
    }

    fn config_name(&mut self) -> StrBytes {
        const NAMES: [&str; 9] = [
            "cleanup.policy",
            "retention.ms",
            "segment.bytes",
            "max.message.bytes",
            "min.insync.replicas",
            "compression.type",
            "message.timestamp.type",
            "no.such.config",
            "",
        ];
        Self::str(NAMES[self.rng.usize(..NAMES.len())])
    }

    fn config_value(&mut self) -> Option<StrBytes> {
        const VALUES: [&str; 9] = [
            "delete",
            "compact,delete",
            "604800000",
            "1048576",
            "-1",
            "0",
            "9223372036854775807",
            "abc",
            "1e99",
        ];
        if self.chance(10) {
            return None;
        }
        Some(Self::str(VALUES[self.rng.usize(..VALUES.len())]))
    }

    /// `(resource_type, resource_name)` for config APIs: topics, brokers, the default.
    fn config_resource(&mut self) -> (i8, StrBytes) {
        match self.rng.u32(0..5) {
            0 => {
                let broker = self.broker();
                (4, Self::str(&broker.to_string()))
            }
            1 => (4, Self::str("")),
            2 => (self.byte(8), self.text("whatever")),
            _ => {
                let (name, _, _) = self.topic();
                (2, Self::str(&name))
            }
        }
    }

    /// Garbage tagged fields on the top-level struct (flexible versions only encode them).
    fn tagged(&mut self) -> BTreeMap<i32, Bytes> {
        let mut fields = BTreeMap::new();
        if self.hostile && self.chance(20) {
            for _ in 0..self.rng.usize(1..4) {
                let tag = [0, 1, 2, 3, 7, 1000, i32::MAX][self.rng.usize(..7)];
                let len = self.rng.usize(0..64);
                let bytes: Vec<u8> = (0..len).map(|_| self.rng.u8(..)).collect();
                fields.insert(tag, Bytes::from(bytes));
            }
        }
        fields
    }
}

/// A valid request of `key` (one of the 40 Logbook serves) with plausible or hostile
/// values; `None` for an API this fuzzer does not know how to fill (it then sends the
/// default request).
///
/// Longer than 70 lines because it is one exhaustive match with an arm per API (forty),
/// each filling its request's fields in a few lines; forty one-use functions would only
/// spread the table out, and the arms draw from `g` in the order a seed replays.
#[expect(
    clippy::too_many_lines,
    reason = "one arm per API reads better than forty functions"
)]
pub fn build(key: ApiKey, g: &mut Gen<'_>) -> Option<RequestKind> {
    let tagged = g.tagged();
    let request = match key {
        ApiKey::Produce => {
            let mut r = produce_request::ProduceRequest::default();
            r.acks = [1, -1, 0][g.rng.usize(..3)];
            r.acks = g.short(r.acks);
            r.timeout_ms = g.int(1000);
            if g.chance(20) {
                r.transactional_id = Some(g.txn());
            }
            for _ in 0..g.count(2) {
                let (name, id, partitions) = g.topic();
                let mut t = produce_request::TopicProduceData::default();
                t.name = TopicName(Gen::str(&name));
                t.topic_id = g.topic_id(id);
                for _ in 0..g.count(2) {
                    let mut p = produce_request::PartitionProduceData::default();
                    p.index = g.partition_of(&partitions);
                    p.records = g.records();
                    t.partition_data.push(p);
                }
                r.topic_data.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::Produce(r)
        }
        ApiKey::Fetch => {
            let mut r = fetch_request::FetchRequest::default();
            // A follower's fetch (replica id = a broker) half of the time.
            let replica = if g.chance(50) { g.broker() } else { -1 };
            if g.at(15, i16::MAX) {
                r.replica_state.replica_id = BrokerId(replica);
                r.replica_state.replica_epoch = g.long(-1);
            } else {
                r.replica_id = BrokerId(replica);
            }
            r.max_wait_ms = {
                let v = g.rng.i32(0..200);
                g.int(v)
            };
            r.min_bytes = g.int(1);
            r.max_bytes = g.int(1 << 20);
            r.isolation_level = {
                let v = g.rng.i8(0..2);
                g.byte(v)
            };
            r.session_id = g.int(0);
            r.session_epoch = g.int(-1);
            for _ in 0..g.count(2) {
                let (name, id, partitions) = g.topic();
                let mut t = fetch_request::FetchTopic::default();
                t.topic = TopicName(Gen::str(&name));
                t.topic_id = g.topic_id(id);
                for _ in 0..g.count(2) {
                    let mut p = fetch_request::FetchPartition::default();
                    p.partition = g.partition_of(&partitions);
                    p.current_leader_epoch = g.int(-1);
                    p.fetch_offset = {
                        let v = g.rng.i64(0..10);
                        g.long(v)
                    };
                    p.last_fetched_epoch = g.int(-1);
                    p.log_start_offset = g.long(-1);
                    p.partition_max_bytes = g.int(1 << 20);
                    t.partitions.push(p);
                }
                r.topics.push(t);
            }
            if g.odd() {
                let (name, id, partitions) = g.topic();
                let mut f = fetch_request::ForgottenTopic::default();
                f.topic = TopicName(Gen::str(&name));
                f.topic_id = id;
                f.partitions = g.partitions(&partitions);
                r.forgotten_topics_data.push(f);
            }
            r.rack_id = g.text("");
            r.unknown_tagged_fields = tagged;
            RequestKind::Fetch(r)
        }
        ApiKey::ListOffsets => {
            let mut r = list_offsets_request::ListOffsetsRequest::default();
            r.replica_id = BrokerId(if g.chance(30) { g.broker() } else { -1 });
            r.isolation_level = g.byte(0);
            r.timeout_ms = g.int(1000);
            for _ in 0..g.count(2) {
                let (name, _, partitions) = g.topic();
                let mut t = list_offsets_request::ListOffsetsTopic::default();
                t.name = TopicName(Gen::str(&name));
                for _ in 0..g.count(2) {
                    let mut p = list_offsets_request::ListOffsetsPartition::default();
                    p.partition_index = g.partition_of(&partitions);
                    p.current_leader_epoch = g.int(-1);
                    let v = [-1, -2, -3, -4, -5, 0][g.rng.usize(..6)];
                    p.timestamp = g.long(v);
                    t.partitions.push(p);
                }
                r.topics.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::ListOffsets(r)
        }
        ApiKey::Metadata => {
            let mut r = metadata_request::MetadataRequest::default();
            // Null (all topics) exists from v1; v0 asks for all with an empty list.
            if g.version == 0 {
                r.topics = Some(Vec::new());
            }
            if g.chance(70) {
                let mut topics = Vec::new();
                for _ in 0..g.count(3) {
                    let (name, id, _) = g.topic();
                    let mut t = metadata_request::MetadataRequestTopic::default();
                    t.name = if g.at(10, i16::MAX) && g.odd() {
                        None
                    } else {
                        Some(TopicName(Gen::str(&name)))
                    };
                    if g.at(10, i16::MAX) {
                        let v = if g.chance(50) { id } else { Uuid::nil() };
                        t.topic_id = g.topic_id(v);
                    }
                    topics.push(t);
                }
                r.topics = Some(topics);
            }
            r.allow_auto_topic_creation = !g.at(4, i16::MAX) || g.chance(20);
            r.include_topic_authorized_operations = g.at(8, i16::MAX) && g.chance(50);
            r.include_cluster_authorized_operations = g.at(8, 10) && g.chance(50);
            r.unknown_tagged_fields = tagged;
            RequestKind::Metadata(r)
        }
        ApiKey::OffsetCommit => {
            let mut r = offset_commit_request::OffsetCommitRequest::default();
            r.group_id = g.group();
            r.generation_id_or_member_epoch = g.int(-1);
            r.member_id = g.text("");
            r.retention_time_ms = g.long(-1);
            for _ in 0..g.count(2) {
                let (name, id, partitions) = g.topic();
                let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
                if g.at(10, i16::MAX) {
                    t.topic_id = g.topic_id(id);
                } else {
                    t.name = TopicName(Gen::str(&name));
                }
                for _ in 0..g.count(2) {
                    let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
                    p.partition_index = g.partition_of(&partitions);
                    p.committed_offset = {
                        let v = g.rng.i64(0..5);
                        g.long(v)
                    };
                    p.committed_leader_epoch = g.int(-1);
                    p.committed_metadata = Some(g.text("meta"));
                    t.partitions.push(p);
                }
                r.topics.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::OffsetCommit(r)
        }
        ApiKey::OffsetFetch => {
            let mut r = offset_fetch_request::OffsetFetchRequest::default();
            r.require_stable = g.at(7, i16::MAX) && g.chance(50);
            let (name, id, partitions) = g.topic();
            if g.at(0, 7) {
                r.group_id = g.group();
            }
            // Null topics (all of the group's) exist from v2.
            if g.at(0, 7) && (g.version < 2 || g.chance(70)) {
                let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
                t.name = TopicName(Gen::str(&name));
                t.partition_indexes = g.partitions(&partitions);
                r.topics = Some(vec![t]);
            }
            let groups = if g.at(8, i16::MAX) { g.count(2) } else { 0 };
            for _ in 0..groups {
                let mut group = offset_fetch_request::OffsetFetchRequestGroup::default();
                group.group_id = g.group();
                if g.at(9, i16::MAX) {
                    group.member_epoch = g.int(-1);
                }
                if g.chance(70) {
                    let mut t = offset_fetch_request::OffsetFetchRequestTopics::default();
                    if g.at(10, i16::MAX) {
                        t.topic_id = g.topic_id(id);
                    } else {
                        t.name = TopicName(Gen::str(&name));
                    }
                    t.partition_indexes = g.partitions(&partitions);
                    group.topics = Some(vec![t]);
                }
                r.groups.push(group);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::OffsetFetch(r)
        }
        ApiKey::FindCoordinator => {
            let mut r = find_coordinator_request::FindCoordinatorRequest::default();
            let key_type = if g.at(1, i16::MAX) {
                let v = g.rng.i8(0..2);
                g.byte(v)
            } else {
                0
            };
            r.key_type = key_type;
            let key = if key_type == 1 {
                g.txn().0
            } else {
                g.group().0
            };
            if g.at(4, i16::MAX) {
                r.coordinator_keys = (0..g.count(2)).map(|_| key.clone()).collect();
            } else {
                r.key = key;
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::FindCoordinator(r)
        }
        ApiKey::JoinGroup => {
            let mut r = join_group_request::JoinGroupRequest::default();
            r.group_id = g.group();
            // Short timeouts: a join waits up to the rebalance timeout for other members.
            r.session_timeout_ms = g.int(6000);
            r.rebalance_timeout_ms = g.int(100);
            r.member_id = g.text("");
            r.protocol_type = g.text("consumer");
            for _ in 0..g.count(2) {
                let mut p = join_group_request::JoinGroupRequestProtocol::default();
                p.name = g.text("range");
                p.metadata = Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 0]);
                r.protocols.push(p);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::JoinGroup(r)
        }
        ApiKey::Heartbeat => {
            let mut r = heartbeat_request::HeartbeatRequest::default();
            r.group_id = g.group();
            r.generation_id = g.int(1);
            r.member_id = g.text("member-1");
            r.unknown_tagged_fields = tagged;
            RequestKind::Heartbeat(r)
        }
        ApiKey::LeaveGroup => {
            let mut r = leave_group_request::LeaveGroupRequest::default();
            r.group_id = g.group();
            if g.at(3, i16::MAX) {
                for _ in 0..g.count(2) {
                    let mut m = leave_group_request::MemberIdentity::default();
                    m.member_id = g.text("member-1");
                    r.members.push(m);
                }
            } else {
                r.member_id = g.text("member-1");
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::LeaveGroup(r)
        }
        ApiKey::SyncGroup => {
            let mut r = sync_group_request::SyncGroupRequest::default();
            r.group_id = g.group();
            r.generation_id = g.int(1);
            r.member_id = g.text("member-1");
            r.protocol_type = Some(g.text("consumer"));
            r.protocol_name = Some(g.text("range"));
            for _ in 0..g.count(2) {
                let mut a = sync_group_request::SyncGroupRequestAssignment::default();
                a.member_id = g.text("member-1");
                a.assignment = Bytes::from_static(&[0, 1, 0, 0, 0, 0]);
                r.assignments.push(a);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::SyncGroup(r)
        }
        ApiKey::DescribeGroups => {
            let mut r = describe_groups_request::DescribeGroupsRequest::default();
            r.groups = (0..g.count(3)).map(|_| g.group()).collect();
            r.include_authorized_operations = g.at(3, i16::MAX) && g.chance(50);
            r.unknown_tagged_fields = tagged;
            RequestKind::DescribeGroups(r)
        }
        ApiKey::ListGroups => {
            let mut r = list_groups_request::ListGroupsRequest::default();
            if g.at(4, i16::MAX) && g.chance(50) {
                r.states_filter = vec![g.text("Stable")];
            }
            if g.at(5, i16::MAX) && g.chance(50) {
                r.types_filter = vec![g.text("classic")];
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::ListGroups(r)
        }
        ApiKey::ApiVersions => {
            let mut r = api_versions_request::ApiVersionsRequest::default();
            r.client_software_name = g.text("logbook-wire-fuzz");
            r.client_software_version = g.text("0.1.0");
            r.unknown_tagged_fields = tagged;
            RequestKind::ApiVersions(r)
        }
        ApiKey::CreateTopics => {
            let mut r = create_topics_request::CreateTopicsRequest::default();
            r.timeout_ms = g.int(5000);
            // Mostly validate-only, so the broker does not fill up with topics.
            r.validate_only = !g.chance(10);
            for _ in 0..g.count(2) {
                let mut t = create_topics_request::CreatableTopic::default();
                let (name, _, _) = g.topic();
                t.name = TopicName(Gen::str(&name));
                t.num_partitions = {
                    let v = g.rng.i32(-1..4);
                    g.int(v)
                };
                t.replication_factor = g.short(-1);
                if g.odd() {
                    let mut a = create_topics_request::CreatableReplicaAssignment::default();
                    a.partition_index = g.int(0);
                    a.broker_ids = (0..g.count(3)).map(|_| BrokerId(g.broker())).collect();
                    t.assignments.push(a);
                }
                if g.chance(30) {
                    let mut c = create_topics_request::CreatableTopicConfig::default();
                    c.name = g.config_name();
                    c.value = g.config_value();
                    t.configs.push(c);
                }
                r.topics.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::CreateTopics(r)
        }
        ApiKey::DeleteTopics => {
            let mut r = delete_topics_request::DeleteTopicsRequest::default();
            r.timeout_ms = g.int(5000);
            // Existing topics only when hostile and then rarely: deleting them all would
            // leave nothing to fuzz.
            for _ in 0..g.count(2) {
                let name = if g.hostile && g.chance(5) {
                    g.topic().0
                } else {
                    format!("fuzz-absent-{}", g.rng.u32(..))
                };
                if g.at(6, i16::MAX) {
                    let mut t = delete_topics_request::DeleteTopicState::default();
                    t.name = Some(TopicName(Gen::str(&name)));
                    t.topic_id = if g.odd() { g.uuid() } else { Uuid::nil() };
                    r.topics.push(t);
                } else {
                    r.topic_names.push(TopicName(Gen::str(&name)));
                }
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::DeleteTopics(r)
        }
        ApiKey::InitProducerId => {
            let mut r = init_producer_id_request::InitProducerIdRequest::default();
            if g.chance(60) {
                r.transactional_id = Some(g.txn());
            }
            r.transaction_timeout_ms = g.int(60_000);
            let (id, epoch) = g.producer();
            if g.at(3, i16::MAX) && g.chance(30) {
                r.producer_id = id;
                r.producer_epoch = epoch;
            } else {
                r.producer_id = ProducerId(-1);
                r.producer_epoch = -1;
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::InitProducerId(r)
        }
        ApiKey::AddPartitionsToTxn => {
            let mut r = add_partitions_to_txn_request::AddPartitionsToTxnRequest::default();
            let txn = g.txn();
            let (id, epoch) = g.producer();
            let v4 = g.at(4, i16::MAX);
            let mut topics = Vec::new();
            for _ in 0..g.count(2) {
                let (name, _, partitions) = g.topic();
                let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
                t.name = TopicName(Gen::str(&name));
                t.partitions = g.partitions(&partitions);
                topics.push(t);
            }
            if v4 {
                let mut tx =
                    add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default();
                tx.transactional_id = txn;
                tx.producer_id = id;
                tx.producer_epoch = epoch;
                tx.verify_only = g.chance(50);
                tx.topics = topics;
                r.transactions = vec![tx];
            } else {
                r.v3_and_below_transactional_id = txn;
                r.v3_and_below_producer_id = id;
                r.v3_and_below_producer_epoch = epoch;
                r.v3_and_below_topics = topics;
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::AddPartitionsToTxn(r)
        }
        ApiKey::AddOffsetsToTxn => {
            let mut r = add_offsets_to_txn_request::AddOffsetsToTxnRequest::default();
            r.transactional_id = g.txn();
            (r.producer_id, r.producer_epoch) = g.producer();
            r.group_id = g.group();
            r.unknown_tagged_fields = tagged;
            RequestKind::AddOffsetsToTxn(r)
        }
        ApiKey::EndTxn => {
            let mut r = end_txn_request::EndTxnRequest::default();
            r.transactional_id = g.txn();
            (r.producer_id, r.producer_epoch) = g.producer();
            r.committed = g.chance(50);
            r.unknown_tagged_fields = tagged;
            RequestKind::EndTxn(r)
        }
        ApiKey::TxnOffsetCommit => {
            let mut r = txn_offset_commit_request::TxnOffsetCommitRequest::default();
            r.transactional_id = g.txn();
            r.group_id = g.group();
            (r.producer_id, r.producer_epoch) = g.producer();
            r.generation_id = g.int(-1);
            r.member_id = g.text("");
            for _ in 0..g.count(2) {
                let (name, _, partitions) = g.topic();
                let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
                t.name = TopicName(Gen::str(&name));
                let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
                p.partition_index = g.partition_of(&partitions);
                p.committed_offset = g.long(1);
                p.committed_leader_epoch = g.int(-1);
                t.partitions.push(p);
                r.topics.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::TxnOffsetCommit(r)
        }
        ApiKey::WriteTxnMarkers => {
            let mut r = write_txn_markers_request::WriteTxnMarkersRequest::default();
            for _ in 0..g.count(2) {
                let mut m = write_txn_markers_request::WritableTxnMarker::default();
                (m.producer_id, m.producer_epoch) = g.producer();
                m.transaction_result = g.chance(50);
                m.coordinator_epoch = g.int(0);
                let (name, _, partitions) = g.topic();
                let mut t = write_txn_markers_request::WritableTxnMarkerTopic::default();
                t.name = TopicName(Gen::str(&name));
                t.partition_indexes = g.partitions(&partitions);
                m.topics.push(t);
                r.markers.push(m);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::WriteTxnMarkers(r)
        }
        ApiKey::DescribeTransactions => {
            let mut r = describe_transactions_request::DescribeTransactionsRequest::default();
            r.transactional_ids = (0..g.count(3)).map(|_| g.txn()).collect();
            r.unknown_tagged_fields = tagged;
            RequestKind::DescribeTransactions(r)
        }
        ApiKey::ListTransactions => {
            let mut r = list_transactions_request::ListTransactionsRequest::default();
            if g.chance(50) {
                r.state_filters = vec![g.text("Ongoing")];
            }
            if g.chance(50) {
                r.producer_id_filters = vec![g.producer().0];
            }
            if g.at(1, i16::MAX) {
                r.duration_filter = g.long(-1);
            }
            if g.at(2, i16::MAX) && g.chance(50) {
                let pattern = if g.odd() {
                    ["(a+)+$", "[", "\\", ".*{99999}", "(?i)"][g.rng.usize(..5)]
                } else {
                    "fuzz.*"
                };
                r.transactional_id_pattern = Some(Gen::str(pattern));
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::ListTransactions(r)
        }
        ApiKey::DescribeConfigs => {
            let mut r = describe_configs_request::DescribeConfigsRequest::default();
            for _ in 0..g.count(2) {
                let mut res = describe_configs_request::DescribeConfigsResource::default();
                (res.resource_type, res.resource_name) = g.config_resource();
                if g.chance(50) {
                    res.configuration_keys = Some(vec![g.config_name()]);
                }
                r.resources.push(res);
            }
            r.include_synonyms = g.at(1, i16::MAX) && g.chance(50);
            r.include_documentation = g.at(3, i16::MAX) && g.chance(50);
            r.unknown_tagged_fields = tagged;
            RequestKind::DescribeConfigs(r)
        }
        ApiKey::DeleteGroups => {
            let mut r = delete_groups_request::DeleteGroupsRequest::default();
            r.groups_names = (0..g.count(2)).map(|_| g.group()).collect();
            r.unknown_tagged_fields = tagged;
            RequestKind::DeleteGroups(r)
        }
        ApiKey::CreatePartitions => {
            let mut r = create_partitions_request::CreatePartitionsRequest::default();
            r.timeout_ms = g.int(5000);
            r.validate_only = !g.chance(5);
            for _ in 0..g.count(2) {
                let (name, _, partitions) = g.topic();
                let mut t = create_partitions_request::CreatePartitionsTopic::default();
                t.name = TopicName(Gen::str(&name));
                let current = i32::try_from(partitions.len()).unwrap_or(1);
                t.count = g.int(current + 1);
                if g.odd() {
                    let mut a = create_partitions_request::CreatePartitionsAssignment::default();
                    a.broker_ids = (0..g.count(3)).map(|_| BrokerId(g.broker())).collect();
                    t.assignments = Some(vec![a]);
                }
                r.topics.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::CreatePartitions(r)
        }
        ApiKey::OffsetDelete => {
            let mut r = offset_delete_request::OffsetDeleteRequest::default();
            r.group_id = g.group();
            let (name, _, partitions) = g.topic();
            let mut t = offset_delete_request::OffsetDeleteRequestTopic::default();
            t.name = TopicName(Gen::str(&name));
            for partition in g.partitions(&partitions) {
                let mut p = offset_delete_request::OffsetDeleteRequestPartition::default();
                p.partition_index = partition;
                t.partitions.push(p);
            }
            r.topics.push(t);
            drop(tagged);
            RequestKind::OffsetDelete(r)
        }
        ApiKey::DeleteRecords => {
            let mut r = delete_records_request::DeleteRecordsRequest::default();
            r.timeout_ms = g.int(1000);
            for _ in 0..g.count(2) {
                let (name, _, partitions) = g.topic();
                let mut t = delete_records_request::DeleteRecordsTopic::default();
                t.name = TopicName(Gen::str(&name));
                for _ in 0..g.count(2) {
                    let mut p = delete_records_request::DeleteRecordsPartition::default();
                    p.partition_index = g.partition_of(&partitions);
                    p.offset = {
                        let v = g.rng.i64(-1..3);
                        g.long(v)
                    };
                    t.partitions.push(p);
                }
                r.topics.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::DeleteRecords(r)
        }
        ApiKey::DescribeLogDirs => {
            let mut r = describe_log_dirs_request::DescribeLogDirsRequest::default();
            if g.chance(60) {
                let (name, _, partitions) = g.topic();
                let mut t = describe_log_dirs_request::DescribableLogDirTopic::default();
                t.topic = TopicName(Gen::str(&name));
                t.partitions = g.partitions(&partitions);
                r.topics = Some(vec![t]);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::DescribeLogDirs(r)
        }
        ApiKey::ElectLeaders => {
            let mut r = elect_leaders_request::ElectLeadersRequest::default();
            r.election_type = g.byte(0);
            r.timeout_ms = g.int(1000);
            if g.chance(70) {
                let (name, _, partitions) = g.topic();
                let mut t = elect_leaders_request::TopicPartitions::default();
                t.topic = TopicName(Gen::str(&name));
                t.partitions = g.partitions(&partitions);
                r.topic_partitions = Some(vec![t]);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::ElectLeaders(r)
        }
        ApiKey::AlterPartitionReassignments => {
            let mut r =
                alter_partition_reassignments_request::AlterPartitionReassignmentsRequest::default(
                );
            r.timeout_ms = g.int(1000);
            r.allow_replication_factor_change = !g.at(1, i16::MAX) || g.chance(50);
            for _ in 0..g.count(2) {
                let (name, _, partitions) = g.topic();
                let mut t = alter_partition_reassignments_request::ReassignableTopic::default();
                t.name = TopicName(Gen::str(&name));
                let mut p = alter_partition_reassignments_request::ReassignablePartition::default();
                p.partition_index = g.partition_of(&partitions);
                // Mostly a cancellation or the replicas the partition already has.
                p.replicas = if g.chance(50) {
                    None
                } else {
                    Some((0..g.count(1)).map(|_| BrokerId(g.broker())).collect())
                };
                t.partitions.push(p);
                r.topics.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::AlterPartitionReassignments(r)
        }
        ApiKey::ListPartitionReassignments => {
            let mut r =
                list_partition_reassignments_request::ListPartitionReassignmentsRequest::default();
            r.timeout_ms = g.int(1000);
            if g.chance(60) {
                let (name, _, partitions) = g.topic();
                let mut t =
                    list_partition_reassignments_request::ListPartitionReassignmentsTopics::default(
                    );
                t.name = TopicName(Gen::str(&name));
                t.partition_indexes = g.partitions(&partitions);
                r.topics = Some(vec![t]);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::ListPartitionReassignments(r)
        }
        ApiKey::DescribeCluster => {
            let mut r = describe_cluster_request::DescribeClusterRequest::default();
            r.include_cluster_authorized_operations = g.chance(50);
            if g.at(1, i16::MAX) {
                r.endpoint_type = g.byte(1);
            }
            r.include_fenced_brokers = g.at(2, i16::MAX) && g.chance(50);
            r.unknown_tagged_fields = tagged;
            RequestKind::DescribeCluster(r)
        }
        ApiKey::DescribeQuorum => {
            let mut r = describe_quorum_request::DescribeQuorumRequest::default();
            for _ in 0..g.count(1) {
                let mut t = describe_quorum_request::TopicData::default();
                t.topic_name = TopicName(g.text("__cluster_metadata"));
                for _ in 0..g.count(1) {
                    let mut p = describe_quorum_request::PartitionData::default();
                    p.partition_index = g.int(0);
                    t.partitions.push(p);
                }
                r.topics.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::DescribeQuorum(r)
        }
        ApiKey::DescribeTopicPartitions => {
            let mut r =
                describe_topic_partitions_request::DescribeTopicPartitionsRequest::default();
            for _ in 0..g.count(3) {
                let mut t = describe_topic_partitions_request::TopicRequest::default();
                t.name = TopicName(Gen::str(&g.topic().0));
                r.topics.push(t);
            }
            r.response_partition_limit = g.int(2000);
            if g.chance(30) {
                let (name, _, partitions) = g.topic();
                let mut c = describe_topic_partitions_request::Cursor::default();
                c.topic_name = TopicName(Gen::str(&name));
                c.partition_index = g.partition_of(&partitions);
                r.cursor = Some(c);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::DescribeTopicPartitions(r)
        }
        ApiKey::AlterConfigs => {
            let mut r = alter_configs_request::AlterConfigsRequest::default();
            r.validate_only = !g.chance(20);
            for _ in 0..g.count(2) {
                let mut res = alter_configs_request::AlterConfigsResource::default();
                (res.resource_type, res.resource_name) = g.config_resource();
                for _ in 0..g.count(2) {
                    let mut c = alter_configs_request::AlterableConfig::default();
                    c.name = g.config_name();
                    c.value = g.config_value();
                    res.configs.push(c);
                }
                r.resources.push(res);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::AlterConfigs(r)
        }
        ApiKey::IncrementalAlterConfigs => {
            let mut r =
                incremental_alter_configs_request::IncrementalAlterConfigsRequest::default();
            r.validate_only = !g.chance(20);
            for _ in 0..g.count(2) {
                let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
                (res.resource_type, res.resource_name) = g.config_resource();
                for _ in 0..g.count(2) {
                    let mut c = incremental_alter_configs_request::AlterableConfig::default();
                    c.name = g.config_name();
                    c.config_operation = {
                        let v = g.rng.i8(0..4);
                        g.byte(v)
                    };
                    c.value = g.config_value();
                    res.configs.push(c);
                }
                r.resources.push(res);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::IncrementalAlterConfigs(r)
        }
        ApiKey::DescribeProducers => {
            let mut r = describe_producers_request::DescribeProducersRequest::default();
            for _ in 0..g.count(2) {
                let (name, _, partitions) = g.topic();
                let mut t = describe_producers_request::TopicRequest::default();
                t.name = TopicName(Gen::str(&name));
                t.partition_indexes = g.partitions(&partitions);
                r.topics.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::DescribeProducers(r)
        }
        ApiKey::OffsetForLeaderEpoch => {
            let mut r = offset_for_leader_epoch_request::OffsetForLeaderEpochRequest::default();
            r.replica_id = BrokerId(if g.chance(50) { g.broker() } else { -1 });
            for _ in 0..g.count(2) {
                let (name, _, partitions) = g.topic();
                let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
                t.topic = TopicName(Gen::str(&name));
                for _ in 0..g.count(2) {
                    let mut p =
                        offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
                    p.partition = g.partition_of(&partitions);
                    p.current_leader_epoch = g.int(-1);
                    p.leader_epoch = g.int(0);
                    t.partitions.push(p);
                }
                r.topics.push(t);
            }
            r.unknown_tagged_fields = tagged;
            RequestKind::OffsetForLeaderEpoch(r)
        }
        _ => return None,
    };
    Some(request)
}

/// The request header and body of `request` at `version`, without the size prefix;
/// `None` if kafka-protocol refuses to encode it at that version.
#[must_use]
pub fn encode(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
    request: &RequestKind,
) -> Option<Vec<u8>> {
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = client_id.map(|s| StrBytes::from_string(s.to_owned()));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, key.request_header_version(version))
        .ok()?;
    request.encode(&mut out, version).ok()?;
    Some(out.to_vec())
}

/// The APIs and versions Logbook serves (its handlers' `VERSIONS` when this was
/// written), for the encoding test.
#[cfg(test)]
const SERVED: [(ApiKey, i16, i16); 40] = [
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
];

#[cfg(test)]
mod tests {
    use super::*;

    // Plausible requests of every served API encode at every version kafka-protocol
    // knows, most of the time: the fuzzer's "valid frame" is then really valid.
    #[test]
    fn plausible_requests_encode_at_every_version() {
        let (batches, bombs) = (vec![Bytes::from_static(b"batch")], Vec::new());
        let corpus = Corpus {
            topics: vec![Topic {
                name: "t".to_owned(),
                id: Uuid::from_u128(7),
                partitions: vec![0, 1],
            }],
            brokers: vec![1],
            groups: vec!["g".to_owned()],
            transactional_ids: vec!["x".to_owned()],
            producer: (5, 0),
            batches,
            bombs,
        };
        let mut failures = Vec::new();
        for (key, min, max) in SERVED {
            for version in min..=max {
                let mut ok = 0;
                let mut last_error = String::new();
                for seed in 0..20 {
                    let mut rng = fastrand::Rng::with_seed(seed);
                    let mut g = Gen {
                        corpus: &corpus,
                        rng: &mut rng,
                        hostile: false,
                        version,
                        big_used: false,
                    };
                    let request = build(key, &mut g).expect("a served API");
                    let mut out = BytesMut::new();
                    match request.encode(&mut out, version) {
                        Ok(()) => ok += 1,
                        Err(e) => last_error = e.to_string(),
                    }
                }
                if ok < 15 {
                    failures.push(format!("{key:?} v{version}: {ok}/20 ({last_error})"));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
