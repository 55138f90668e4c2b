//! Every handler's response encodes at every version we advertise. The crate refuses to
//! encode a field the version cannot carry when it holds a non-default value, so a handler
//! that sets, say, a leader epoch on ListOffsets v2 would otherwise only fail in front of a
//! real client.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use clap::Parser;
use indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::broker::Broker;
use crate::config::Config;
use crate::topic_config::BrokerDefaults;
use crate::topics::Topics;

fn broker(dir: &std::path::Path) -> Arc<Broker> {
    broker_with(dir, Arc::new(crate::authorizer::AllowEveryone))
}

/// A broker whose requests are decided by `authorizer`.
fn broker_with(
    dir: &std::path::Path,
    authorizer: Arc<dyn crate::authorizer::Authorizer>,
) -> Arc<Broker> {
    let config = Config::parse_from(["logbook", "--data-dir", dir.to_str().expect("utf-8 path")]);
    let replicas = Arc::new(logbook_replication::ReplicaManager::new(
        dir,
        logbook_replication::FlushPolicy::EveryWrite,
        1,
    ));
    let topics = Arc::new(
        Topics::open(
            dir,
            Arc::clone(&replicas),
            BrokerDefaults::new(1_048_588, 1 << 30, -1),
            1000,
        )
        .expect("topics"),
    );
    let producer_ids = crate::coordinator::producer_id_manager::RpcProducerIdManager::for_tests();
    let host: Arc<dyn crate::coordinator::partition_writer::CoordinatorHost> =
        crate::coordinator_partition_writer::CoordinatorPartitionWriter::new(Arc::clone(&topics));
    let groups = crate::coordinator::GroupCoordinator::load(
        &host,
        crate::coordinator::group::GroupConfig::default(),
    )
    .expect("group coordinator");
    let transactions = crate::coordinator::TransactionCoordinator::load(
        &host,
        groups.clone(),
        producer_ids,
        crate::coordinator::transaction::TransactionConfig::default(),
    )
    .expect("transaction coordinator");
    Arc::new(Broker {
        fetch_sessions: crate::fetch_session::FetchSessionCache::new(
            config.limits.fetch_session_cache_slots,
            config.limits.fetch_session_partitions_max,
        ),
        config,
        topics,
        replicas,
        groups,
        transactions,
        listeners: crate::listeners::Listeners::single(
            "127.0.0.1:9092".parse().expect("address"),
            ("127.0.0.1".into(), 9092),
        ),
        authorizer,
        quotas: crate::client_quota_manager::QuotaManagers::default(),
        faults: None,
    })
}

fn batch(count: i64) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            // One batch: the encoder splits wherever `offset - sequence` changes.
            sequence: i32::try_from(i).expect("small") - 1,
            timestamp: 1000 + i,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{i}"))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encode batch");
    buf.freeze()
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// A request exercising the handler's main path at `version`, or None for APIs this test
/// does not know yet.
fn request(key: ApiKey, version: i16, topic_id: uuid::Uuid) -> Option<RequestKind> {
    let by_id = |v: i16, from: i16| v >= from;
    Some(match key {
        ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::Metadata => RequestKind::Metadata(
            MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(name("t"))),
                    MetadataRequestTopic::default().with_name(Some(name("bad/name"))),
                ]))
                .with_allow_auto_topic_creation(true),
        ),
        ApiKey::Produce => {
            let topic = if by_id(version, 13) {
                TopicProduceData::default().with_topic_id(topic_id)
            } else {
                TopicProduceData::default().with_name(name("t"))
            };
            RequestKind::Produce(
                ProduceRequest::default()
                    .with_acks(-1)
                    .with_timeout_ms(5000)
                    .with_topic_data(vec![topic.with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(batch(3))),
                        PartitionProduceData::default()
                            .with_index(7)
                            .with_records(Some(batch(1))),
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from_static(b"garbage"))),
                    ])]),
            )
        }
        ApiKey::Fetch => {
            let topic = if by_id(version, 13) {
                FetchTopic::default().with_topic_id(topic_id)
            } else {
                FetchTopic::default().with_topic(name("t"))
            };
            RequestKind::Fetch(
                FetchRequest::default()
                    .with_max_bytes(1 << 20)
                    .with_max_wait_ms(0)
                    .with_topics(vec![topic.with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20),
                        FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(1_000_000)
                            .with_partition_max_bytes(1 << 20),
                        FetchPartition::default()
                            .with_partition(9)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20),
                    ])]),
            )
        }
        ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default().with_topics(
            vec![ListOffsetsTopic::default()
                .with_name(name("t"))
                .with_partitions(
                    [-1i64, -2, -3, 1001, 99_999]
                        .into_iter()
                        .filter(|ts| *ts != -3 || version >= 7)
                        .map(|ts| {
                            ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(ts)
                        })
                        .collect(),
                )],
        )),
        ApiKey::CreateTopics => {
            RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(name(&format!("created-{version}")))
                    .with_num_partitions(2)
                    .with_replication_factor(1),
                CreatableTopic::default()
                    .with_name(name("t"))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
                CreatableTopic::default()
                    .with_name(name(".."))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]))
        }
        ApiKey::DeleteTopics => {
            let request = if version >= 6 {
                DeleteTopicsRequest::default().with_topics(vec![
                    DeleteTopicState::default()
                        .with_name(Some(name(&format!("created-{version}")))),
                    DeleteTopicState::default().with_topic_id(uuid::Uuid::new_v4()),
                ])
            } else {
                DeleteTopicsRequest::default()
                    .with_topic_names(vec![name(&format!("created-{version}")), name("nope")])
            };
            RequestKind::DeleteTopics(request)
        }
        ApiKey::CreatePartitions => {
            RequestKind::CreatePartitions(CreatePartitionsRequest::default().with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(name("t"))
                    .with_count(1),
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(name("missing"))
                    .with_count(4),
            ]))
        }
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(
            DescribeConfigsRequest::default()
                .with_include_synonyms(true)
                .with_resources(vec![
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_static_str("t")),
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_static_str("missing")),
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(4)
                        .with_resource_name(StrBytes::from_static_str("1"))
                        .with_configuration_keys(Some(vec![StrBytes::from_static_str(
                            "num.partitions",
                        )])),
                ]),
        ),
        ApiKey::InitProducerId => RequestKind::InitProducerId(
            InitProducerIdRequest::default()
                .with_transactional_id(
                    (version % 2 == 1).then(|| TransactionalId(StrBytes::from_static_str("txn"))),
                )
                .with_transaction_timeout_ms(60_000),
        ),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(if version >= 4 {
            FindCoordinatorRequest::default()
                .with_coordinator_keys(vec![StrBytes::from_static_str("g")])
        } else {
            FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g"))
        }),
        // Answered at once: MEMBER_ID_REQUIRED from v4, INVALID_SESSION_TIMEOUT before.
        ApiKey::JoinGroup => RequestKind::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(StrBytes::from_static_str("g").into())
                .with_session_timeout_ms(if version >= 4 { 10_000 } else { 1 })
                .with_rebalance_timeout_ms(if version >= 1 { 10_000 } else { -1 })
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                )
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(Bytes::from_static(b"m"))]),
        ),
        ApiKey::SyncGroup => RequestKind::SyncGroup({
            let r = SyncGroupRequest::default()
                .with_group_id(StrBytes::from_static_str("nogroup").into())
                .with_member_id(StrBytes::from_static_str("m"));
            if version >= 5 {
                r.with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                    .with_protocol_name(Some(StrBytes::from_static_str("range")))
            } else {
                r
            }
        }),
        ApiKey::Heartbeat => RequestKind::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(StrBytes::from_static_str("g").into())
                .with_member_id(StrBytes::from_static_str("m")),
        ),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(if version >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(StrBytes::from_static_str("g").into())
                .with_members(vec![leave_group_request::MemberIdentity::default()
                    .with_member_id(StrBytes::from_static_str("m"))])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(StrBytes::from_static_str("g").into())
                .with_member_id(StrBytes::from_static_str("m"))
        }),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(StrBytes::from_static_str("standalone").into())
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(5),
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(9)
                                .with_committed_offset(5),
                        ]),
                ]),
        ),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(if version >= 8 {
            OffsetFetchRequest::default().with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(StrBytes::from_static_str("standalone").into()),
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(StrBytes::from_static_str("other").into())
                    .with_topics(Some(vec![
                        offset_fetch_request::OffsetFetchRequestTopics::default()
                            .with_name(name("t"))
                            .with_partition_indexes(vec![0]),
                    ])),
            ])
        } else {
            OffsetFetchRequest::default()
                .with_group_id(StrBytes::from_static_str("standalone").into())
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(name("t"))
                        .with_partition_indexes(vec![0, 1]),
                ]))
        }),
        ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(
            DescribeGroupsRequest::default()
                .with_groups(vec![
                    StrBytes::from_static_str("standalone").into(),
                    StrBytes::from_static_str("nope").into(),
                ])
                .with_include_authorized_operations(version >= 3),
        ),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(
            DeleteGroupsRequest::default()
                .with_groups_names(vec![StrBytes::from_static_str("nope").into()]),
        ),
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(
            OffsetDeleteRequest::default()
                .with_group_id(StrBytes::from_static_str("standalone").into())
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            offset_delete_request::OffsetDeleteRequestPartition::default()
                                .with_partition_index(0),
                        ]),
                ]),
        ),
        ApiKey::DeleteRecords => {
            RequestKind::DeleteRecords(DeleteRecordsRequest::default().with_topics(vec![
                delete_records_request::DeleteRecordsTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![
                        delete_records_request::DeleteRecordsPartition::default()
                            .with_partition_index(0)
                            .with_offset(-1),
                    ]),
            ]))
        }
        ApiKey::DescribeProducers => {
            RequestKind::DescribeProducers(DescribeProducersRequest::default().with_topics(vec![
                describe_producers_request::TopicRequest::default()
                    .with_name(name("t"))
                    .with_partition_indexes(vec![0, 9]),
                describe_producers_request::TopicRequest::default()
                    .with_name(name("missing"))
                    .with_partition_indexes(vec![0]),
            ]))
        }
        ApiKey::DescribeLogDirs => {
            RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(None))
        }
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(
            ElectLeadersRequest::default().with_topic_partitions(Some(vec![
                elect_leaders_request::TopicPartitions::default()
                    .with_topic(name("t"))
                    .with_partitions(vec![0, 1]),
            ])),
        ),
        ApiKey::AlterPartitionReassignments => RequestKind::AlterPartitionReassignments(
            kafka_protocol::messages::AlterPartitionReassignmentsRequest::default().with_topics(
                vec![
                    kafka_protocol::messages::alter_partition_reassignments_request::ReassignableTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition::default()
                                .with_partition_index(0)
                                .with_replicas(Some(vec![BrokerId(0)])),
                        ]),
                ],
            ),
        ),
        ApiKey::DescribeUserScramCredentials => RequestKind::DescribeUserScramCredentials(
            kafka_protocol::messages::DescribeUserScramCredentialsRequest::default().with_users(
                Some(vec![
                    kafka_protocol::messages::describe_user_scram_credentials_request::UserName::default()
                        .with_name(StrBytes::from_static_str("alice")),
                ]),
            ),
        ),
        ApiKey::AlterUserScramCredentials => RequestKind::AlterUserScramCredentials(
            kafka_protocol::messages::AlterUserScramCredentialsRequest::default().with_deletions(
                vec![
                    kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                        .with_name(StrBytes::from_static_str("alice"))
                        .with_mechanism(1),
                ],
            ),
        ),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(
            kafka_protocol::messages::DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
        ),
        ApiKey::CreateAcls => RequestKind::CreateAcls(
            kafka_protocol::messages::CreateAclsRequest::default().with_creations(vec![
                kafka_protocol::messages::create_acls_request::AclCreation::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t"))
                    .with_resource_pattern_type(3)
                    .with_principal(StrBytes::from_static_str("User:alice"))
                    .with_host(StrBytes::from_static_str("*"))
                    .with_operation(3)
                    .with_permission_type(3),
            ]),
        ),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(
            kafka_protocol::messages::DeleteAclsRequest::default().with_filters(vec![
                kafka_protocol::messages::delete_acls_request::DeleteAclsFilter::default()
                    .with_resource_type_filter(2)
                    .with_pattern_type_filter(3)
                    .with_operation(1)
                    .with_permission_type(1),
            ]),
        ),
        ApiKey::DescribeClientQuotas => RequestKind::DescribeClientQuotas(
            kafka_protocol::messages::DescribeClientQuotasRequest::default().with_components(
                vec![
                    kafka_protocol::messages::describe_client_quotas_request::ComponentData::default()
                        .with_entity_type(StrBytes::from_static_str("user"))
                        .with_match_type(2)
                        .with_match(None),
                ],
            ),
        ),
        ApiKey::AlterClientQuotas => RequestKind::AlterClientQuotas(
            kafka_protocol::messages::AlterClientQuotasRequest::default().with_entries(vec![
                kafka_protocol::messages::alter_client_quotas_request::EntryData::default()
                    .with_entity(vec![
                        kafka_protocol::messages::alter_client_quotas_request::EntityData::default()
                            .with_entity_type(StrBytes::from_static_str("user"))
                            .with_entity_name(Some(StrBytes::from_static_str("alice"))),
                    ])
                    .with_ops(vec![
                        kafka_protocol::messages::alter_client_quotas_request::OpData::default()
                            .with_key(StrBytes::from_static_str("producer_byte_rate"))
                            .with_value(1024.0),
                    ]),
            ]),
        ),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(
            kafka_protocol::messages::SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("PLAIN")),
        ),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(
            kafka_protocol::messages::SaslAuthenticateRequest::default(),
        ),
        ApiKey::ListPartitionReassignments => RequestKind::ListPartitionReassignments(
            kafka_protocol::messages::ListPartitionReassignmentsRequest::default(),
        ),
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(
            DescribeClusterRequest::default()
                .with_include_cluster_authorized_operations(true)
                .with_endpoint_type(1),
        ),
        ApiKey::DescribeQuorum => RequestKind::DescribeQuorum(
            kafka_protocol::messages::DescribeQuorumRequest::default().with_topics(vec![
                kafka_protocol::messages::describe_quorum_request::TopicData::default()
                    .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
                    .with_partitions(vec![
                        kafka_protocol::messages::describe_quorum_request::PartitionData::default(),
                    ]),
            ]),
        ),
        ApiKey::DescribeTopicPartitions => RequestKind::DescribeTopicPartitions(
            DescribeTopicPartitionsRequest::default()
                .with_response_partition_limit(2000)
                .with_topics(vec![
                    describe_topic_partitions_request::TopicRequest::default().with_name(name("t")),
                ]),
        ),
        // A valid change and an unknown name, so both the success and the error
        // response encode at every version.
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(
            AlterConfigsRequest::default().with_resources(
                ["retention.ms", "no.such.config"]
                    .map(|config| {
                        alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("t"))
                            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                                .with_name(StrBytes::from_static_str(config))
                                .with_value(Some(StrBytes::from_static_str("1000")))])
                    })
                    .to_vec(),
            ),
        ),
        ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default().with_resources(
                ["retention.ms", "no.such.config"]
                    .map(|config| {
                        incremental_alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("t"))
                            .with_configs(vec![
                                incremental_alter_configs_request::AlterableConfig::default()
                                    .with_name(StrBytes::from_static_str(config))
                                    .with_value(Some(StrBytes::from_static_str("1000"))),
                            ])
                    })
                    .to_vec(),
            ),
        ),
        ApiKey::AddPartitionsToTxn if version < 4 => RequestKind::AddPartitionsToTxn(
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str(
                    "txn",
                )))
                .with_v3_and_below_producer_id(ProducerId(0))
                .with_v3_and_below_topics(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![0, 9]),
                ]),
        ),
        ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(
            AddPartitionsToTxnRequest::default().with_transactions(vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_static_str("txn")))
                    .with_verify_only(true)
                    .with_topics(vec![
                        add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                            .with_name(name("t"))
                            .with_partitions(vec![0]),
                    ]),
            ]),
        ),
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("txn")))
                .with_group_id(GroupId(StrBytes::from_static_str("g"))),
        ),
        ApiKey::EndTxn => RequestKind::EndTxn(
            EndTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("txn")))
                .with_committed(true),
        ),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(
            TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("txn")))
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_generation_id(-1)
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(1),
                        ]),
                ]),
        ),
        ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(
            DescribeTransactionsRequest::default().with_transactional_ids(vec![
                TransactionalId(StrBytes::from_static_str("txn")),
                TransactionalId(StrBytes::from_static_str("unknown")),
            ]),
        ),
        ApiKey::ListTransactions => RequestKind::ListTransactions(
            ListTransactionsRequest::default()
                .with_state_filters(vec![StrBytes::from_static_str("Bogus")])
                .with_duration_filter(-1),
        ),
        ApiKey::WriteTxnMarkers => {
            RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default().with_markers(vec![
                write_txn_markers_request::WritableTxnMarker::default()
                    .with_producer_id(ProducerId(7))
                    .with_transaction_result(false)
                    .with_topics(vec![
                        write_txn_markers_request::WritableTxnMarkerTopic::default()
                            .with_name(name("t"))
                            .with_partition_indexes(vec![0, 9]),
                        write_txn_markers_request::WritableTxnMarkerTopic::default()
                            .with_name(name("missing"))
                            .with_partition_indexes(vec![0]),
                    ]),
            ]))
        }
        ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(
            OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                        .with_topic(name("t"))
                        .with_partitions(vec![
                            offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                                .with_partition(0)
                                .with_current_leader_epoch(-1)
                                .with_leader_epoch(0),
                            offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                                .with_partition(9)
                                .with_current_leader_epoch(-1)
                                .with_leader_epoch(0),
                        ]),
                ]),
        ),
        _ => return None,
    })
}

// Every advertised version of every API produces a response that encodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_version_encodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    let topic = broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    let mut untested = Vec::new();
    for key in ApiKey::iter() {
        let Some(range) = super::supported(key) else {
            continue;
        };
        for version in range.min..=range.max {
            // CreateTopics then DeleteTopics of the same name per version.
            let Some(body) = request(key, version, topic.id) else {
                untested.push(format!("{key:?} v{version}"));
                continue;
            };
            let ctx = super::RequestContext::new(
                Arc::clone(&broker),
                "127.0.0.1:1".parse().expect("address"),
                crate::listeners::ListenerName::new("PLAINTEXT"),
                key,
                version,
                1,
                None,
            );
            let response = super::dispatch(&ctx, body).await;
            let Some(response) = response else {
                panic!("{key:?} v{version} gave no response")
            };
            let mut out = BytesMut::new();
            logbook_protocol::encode_response(&mut out, key, version, 1, &response.body)
                .unwrap_or_else(|e| panic!("{key:?} v{version}: {e}"));
        }
    }
    assert!(
        untested.is_empty(),
        "APIs without a request in this test: {untested:?}"
    );
}

// ApiVersions advertises the feature transaction.version (supported 0..2) and finalizes it
// at the broker's level with an epoch >= 0 (Kafka clients ignore epoch -1); below level 2
// EndTxn and TxnOffsetCommit stop at v4, and level 0 is not listed as finalized.
#[test]
fn api_versions_finalizes_transaction_version() {
    let versions = |tv: i16, key: ApiKey| {
        let r = super::api_versions::response(0, tv);
        r.api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| k.max_version)
    };
    for tv in 0..=2 {
        let r = super::api_versions::response(0, tv);
        assert_eq!(r.supported_features.len(), 1);
        assert_eq!(r.supported_features[0].name.as_str(), "transaction.version");
        assert_eq!(
            (
                r.supported_features[0].min_version,
                r.supported_features[0].max_version
            ),
            (0, 2)
        );
        assert!(r.finalized_features_epoch >= 0);
        let finalized: Vec<(String, i16, i16)> = r
            .finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.min_version_level, f.max_version_level))
            .collect();
        if tv == 0 {
            assert!(finalized.is_empty());
        } else {
            assert_eq!(finalized, vec![("transaction.version".to_string(), tv, tv)]);
        }
    }
    assert_eq!(versions(2, ApiKey::EndTxn), Some(5));
    assert_eq!(versions(2, ApiKey::TxnOffsetCommit), Some(5));
    assert_eq!(versions(1, ApiKey::EndTxn), Some(4));
    assert_eq!(versions(1, ApiKey::TxnOffsetCommit), Some(4));
    assert_eq!(versions(1, ApiKey::Produce), versions(2, ApiKey::Produce));
    // Produce is listed from v0 as Kafka 4.x lists it (old librdkafka compresses only then),
    // while requests below v3 stay refused.
    let produce = super::api_versions::response(0, 2)
        .api_keys
        .into_iter()
        .find(|v| v.api_key == ApiKey::Produce as i16)
        .expect("Produce advertised");
    assert_eq!((produce.min_version, produce.max_version), (0, 13));
    assert_eq!(super::supported(ApiKey::Produce).map(|r| r.min), Some(3));
    assert_eq!(
        super::supported_at(ApiKey::EndTxn, 1).map(|r| r.max),
        Some(4)
    );
}

mod authorization;
mod listener_view;
mod produce_verification;
mod replication;
mod transactions;

// An idempotent producer (no transactional id) that sends its current id and epoch, as
// librdkafka does after a request timed out (KIP-360), gets a new producer id at epoch 0,
// as from Kafka's `TransactionCoordinator.handleInitProducerId`; not its own id with
// epoch + 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_producer_asking_for_a_bump_gets_a_new_id() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = broker(dir.path());
    let init = |id: i64, epoch: i16| {
        let ctx = super::RequestContext::new(
            Arc::clone(&broker),
            "127.0.0.1:1".parse().expect("address"),
            crate::listeners::ListenerName::new("PLAINTEXT"),
            ApiKey::InitProducerId,
            4,
            1,
            None,
        );
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch);
        async move {
            let response = super::dispatch(&ctx, RequestKind::InitProducerId(request))
                .await
                .expect("a response");
            match response.body {
                ResponseKind::InitProducerId(r) => {
                    (r.error_code, r.producer_id.0, r.producer_epoch)
                }
                other => panic!("unexpected answer {other:?}"),
            }
        }
    };
    let (code, first, epoch) = init(-1, -1).await;
    assert_eq!((code, epoch), (0, 0));
    let (code, second, epoch) = init(first, 0).await;
    assert_eq!((code, epoch), (0, 0), "a bump answer");
    assert_ne!(second, first, "the same producer id again");
    let (code, third, epoch) = init(second, 5).await;
    assert_eq!((code, epoch), (0, 0));
    assert!(third != first && third != second);
}
