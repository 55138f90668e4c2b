//! ACLs with Kafka's StandardAuthorizer: an ACL matrix on the wire. `alice` logs in with
//! SASL/PLAIN and asks every API once without ACLs, getting Kafka's exact refusal codes
//! (TOPIC 29, GROUP 30, CLUSTER 31, TRANSACTIONAL_ID 53), then again once the super user
//! has granted what each needs with CreateAcls, getting 0; a DENY wins over an ALLOW; and
//! DeleteAcls takes the grants back. The same matrix runs against Apache Kafka with
//! `ACL_MATRIX_KAFKA=PLAIN_PORT,SASL_PORT cargo test -p integration-tests --test it
//! acls::matrix_against_kafka -- --ignored` (a Kafka started as this file's
//! `kafka_settings` say), so the two can be compared code for code.

use std::net::{SocketAddr, TcpStream};

use bytes::Bytes;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteAclsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeAclsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest, FetchRequest,
    FindCoordinatorRequest, GroupId, IncrementalAlterConfigsRequest, InitProducerIdRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetFetchRequest, ProduceRequest,
    SaslAuthenticateRequest, SaslHandshakeRequest, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use integration_tests::{free_ports, Broker};

use crate::wire;

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const SECURITY_DISABLED: i16 = 54;

const TOPIC: &str = "acl-t";
const NEW_TOPIC: &str = "acl-new";
const GROUP: &str = "acl-g";
const TXN: &str = "acl-tx";

// Kafka's codes: resource types, pattern types, operations, permissions.
const RT_ANY: i8 = 1;
const RT_TOPIC: i8 = 2;
const RT_GROUP: i8 = 3;
const RT_CLUSTER: i8 = 4;
const RT_TXN: i8 = 5;
const PT_ANY: i8 = 1;
const PT_LITERAL: i8 = 3;
const PT_PREFIXED: i8 = 4;
const OP_ANY: i8 = 1;
const OP_READ: i8 = 3;
const OP_WRITE: i8 = 4;
const OP_CREATE: i8 = 5;
const OP_DELETE: i8 = 6;
const OP_ALTER: i8 = 7;
const OP_DESCRIBE: i8 = 8;
const OP_DESCRIBE_CONFIGS: i8 = 10;
const OP_ALTER_CONFIGS: i8 = 11;
const OP_IDEMPOTENT_WRITE: i8 = 12;
const PERM_ANY: i8 = 1;
const PERM_DENY: i8 = 2;
const PERM_ALLOW: i8 = 3;

/// The broker (and reference Kafka) settings of the matrix: a PLAINTEXT listener whose
/// anonymous principal is a super user (the admin's), and SASL_PLAINTEXT with PLAIN for
/// alice.
fn kafka_settings(plain: u16, sasl: u16) -> Vec<String> {
    vec![
        format!("listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"),
        "sasl.enabled.mechanisms=PLAIN".to_string(),
        r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#.to_string(),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".to_string(),
        "super.users=User:admin;User:ANONYMOUS".to_string(),
    ]
}

fn start_with_acls(extra: &[&str]) -> (Broker, SocketAddr, SocketAddr) {
    let [plain, sasl] = free_ports();
    let settings = kafka_settings(plain, sasl);
    let mut args = Vec::new();
    for setting in settings
        .iter()
        .map(String::as_str)
        .chain(extra.iter().copied())
    {
        args.extend(["--override", setting]);
    }
    let broker = Broker::start_on(plain, &args, &[]);
    let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    (broker, addr(plain), addr(sasl))
}

/// A connection logged in as `user` with SASL/PLAIN.
fn login(addr: SocketAddr, user: &str, password: &str) -> TcpStream {
    let mut stream = wire::connect(addr);
    wire::round_trip(&mut stream, 3, 1, &ApiVersionsRequest::default());
    let shaken = wire::round_trip(
        &mut stream,
        1,
        2,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
    );
    assert_eq!(shaken.error_code, 0);
    let token = format!("\0{user}\0{password}");
    let done = wire::round_trip(
        &mut stream,
        2,
        3,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token.into_bytes())),
    );
    assert_eq!(done.error_code, 0, "{user} logs in");
    stream
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

/// One client's view of every API the matrix asks, each as the code that matters.
struct Client {
    stream: TcpStream,
    correlation: i32,
}

impl Client {
    fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            correlation: 100,
        }
    }

    fn call<R: kafka_protocol::protocol::Request>(&mut self, version: i16, r: &R) -> R::Response {
        self.correlation += 1;
        wire::round_trip(&mut self.stream, version, self.correlation, r)
    }

    fn metadata(&mut self) -> (i16, i32) {
        let r = self.call(
            12,
            &MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(topic(TOPIC)))
                ]))
                .with_include_topic_authorized_operations(true),
        );
        let t = &r.topics[0];
        (t.error_code, t.topic_authorized_operations)
    }

    fn produce(&mut self) -> i16 {
        let batch =
            wire::record_batch(&[(None, Some(Bytes::from_static(b"v")))], 1_700_000_000_000);
        let r = self.call(
            9,
            &ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(5000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(topic(TOPIC))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch))])]),
        );
        r.responses[0].partition_responses[0].error_code
    }

    fn fetch(&mut self) -> i16 {
        let r = self.call(
            12,
            &FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_max_bytes(1 << 20)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(topic(TOPIC))
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1 << 20)])]),
        );
        if r.error_code != 0 {
            return r.error_code;
        }
        r.responses[0].partitions[0].error_code
    }

    fn list_offsets(&mut self) -> i16 {
        let r = self.call(
            7,
            &ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(topic(TOPIC))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1)])]),
        );
        r.topics[0].partitions[0].error_code
    }

    /// The coordinator of the group (`key_type` 0) or of the transactional id (1).
    fn find_coordinator(&mut self, key_type: i8) -> i16 {
        let key = if key_type == 0 { GROUP } else { TXN };
        for _ in 0..50 {
            let r = self.call(
                4,
                &FindCoordinatorRequest::default()
                    .with_key_type(key_type)
                    .with_coordinator_keys(vec![s(key)]),
            );
            let code = r.coordinators[0].error_code;
            if code != COORDINATOR_NOT_AVAILABLE {
                return code;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        COORDINATOR_NOT_AVAILABLE
    }

    /// Retried while the group coordinator loads or moves, as clients do.
    fn offset_commit(&mut self) -> i16 {
        let mut code = COORDINATOR_NOT_AVAILABLE;
        for _ in 0..100 {
            let r = self.call(
                8,
                &OffsetCommitRequest::default()
                    .with_group_id(GroupId(s(GROUP)))
                    .with_generation_id_or_member_epoch(-1)
                    .with_topics(vec![OffsetCommitRequestTopic::default()
                        .with_name(topic(TOPIC))
                        .with_partitions(vec![OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(1)])]),
            );
            code = r.topics[0].partitions[0].error_code;
            if ![
                COORDINATOR_LOAD_IN_PROGRESS,
                COORDINATOR_NOT_AVAILABLE,
                NOT_COORDINATOR,
            ]
            .contains(&code)
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        code
    }

    fn offset_fetch(&mut self) -> i16 {
        let r = self.call(
            8,
            &OffsetFetchRequest::default().with_groups(vec![
                OffsetFetchRequestGroup::default().with_group_id(GroupId(s(GROUP)))
            ]),
        );
        r.groups[0].error_code
    }

    fn describe_groups(&mut self) -> (i16, i32) {
        let r = self.call(
            5,
            &DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(s(GROUP))])
                .with_include_authorized_operations(true),
        );
        (r.groups[0].error_code, r.groups[0].authorized_operations)
    }

    fn create_topic(&mut self, name: &str) -> i16 {
        let r = self.call(
            7,
            &CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(topic(name))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        );
        r.topics[0].error_code
    }

    fn delete_topic(&mut self, name: &str) -> i16 {
        let r = self.call(
            6,
            &DeleteTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![
                    DeleteTopicState::default().with_name(Some(topic(name)))
                ]),
        );
        r.responses[0].error_code
    }

    fn describe_configs(&mut self) -> i16 {
        let r = self.call(
            4,
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(TOPIC)),
            ]),
        );
        r.results[0].error_code
    }

    fn alter_configs(&mut self) -> i16 {
        let r = self.call(
            1,
            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(TOPIC))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(s("retention.ms"))
                        .with_config_operation(0)
                        .with_value(Some(s("86400000")))]),
            ]),
        );
        r.responses[0].error_code
    }

    /// Retried while the coordinator loads (COORDINATOR_LOAD_IN_PROGRESS, or
    /// COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR while Kafka creates `__transaction_state`), as clients do.
    fn init_producer_id(&mut self, transactional_id: Option<&str>) -> i16 {
        let mut code = COORDINATOR_NOT_AVAILABLE;
        for _ in 0..100 {
            let r = self.call(
                4,
                &InitProducerIdRequest::default()
                    .with_transactional_id(transactional_id.map(|t| TransactionalId(s(t))))
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id((-1).into())
                    .with_producer_epoch(-1),
            );
            code = r.error_code;
            if ![
                COORDINATOR_LOAD_IN_PROGRESS,
                COORDINATOR_NOT_AVAILABLE,
                NOT_COORDINATOR,
            ]
            .contains(&code)
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        code
    }

    fn create_partitions(&mut self) -> i16 {
        let r = self.call(
            3,
            &CreatePartitionsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(topic(TOPIC))
                    .with_count(2)
                    .with_assignments(None)]),
        );
        r.results[0].error_code
    }

    fn delete_records(&mut self) -> i16 {
        let r = self.call(
            2,
            &DeleteRecordsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![DeleteRecordsTopic::default()
                    .with_name(topic(TOPIC))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(1)])]),
        );
        r.topics[0].partitions[0].error_code
    }

    fn cluster_operations(&mut self) -> (i16, i32) {
        let r = self.call(
            1,
            &DescribeClusterRequest::default().with_include_cluster_authorized_operations(true),
        );
        (r.error_code, r.cluster_authorized_operations)
    }

    fn create_acls(&mut self, creations: Vec<AclCreation>) -> Vec<i16> {
        let r = self.call(3, &CreateAclsRequest::default().with_creations(creations));
        r.results.iter().map(|r| r.error_code).collect()
    }

    fn describe_acls(&mut self, principal: Option<&str>) -> (i16, usize) {
        let r = self.call(
            3,
            &DescribeAclsRequest::default()
                .with_resource_type_filter(RT_ANY)
                .with_resource_name_filter(None)
                .with_host_filter(None)
                .with_pattern_type_filter(PT_ANY)
                .with_principal_filter(principal.map(s))
                .with_operation(OP_ANY)
                .with_permission_type(PERM_ANY),
        );
        (r.error_code, r.resources.iter().map(|r| r.acls.len()).sum())
    }

    fn delete_acls(&mut self, principal: &str) -> (i16, usize) {
        let r = self.call(
            3,
            &DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
                .with_resource_type_filter(RT_ANY)
                .with_resource_name_filter(None)
                .with_host_filter(None)
                .with_pattern_type_filter(PT_ANY)
                .with_principal_filter(Some(s(principal)))
                .with_operation(OP_ANY)
                .with_permission_type(PERM_ANY)]),
        );
        let f = &r.filter_results[0];
        (f.error_code, f.matching_acls.len())
    }
}

fn acl(rt: i8, name: &str, pt: i8, op: i8, perm: i8) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pt)
        .with_principal(s("User:alice"))
        .with_host(s("*"))
        .with_operation(op)
        .with_permission_type(perm)
}

/// What alice needs for every API of the matrix.
fn grants() -> Vec<AclCreation> {
    let mut grants: Vec<AclCreation> = [
        OP_DESCRIBE,
        OP_READ,
        OP_WRITE,
        OP_DELETE,
        OP_ALTER,
        OP_DESCRIBE_CONFIGS,
        OP_ALTER_CONFIGS,
    ]
    .into_iter()
    .map(|op| acl(RT_TOPIC, TOPIC, PT_LITERAL, op, PERM_ALLOW))
    .collect();
    grants.push(acl(RT_GROUP, "acl-", PT_PREFIXED, OP_READ, PERM_ALLOW));
    grants.push(acl(
        RT_CLUSTER,
        "kafka-cluster",
        PT_LITERAL,
        OP_CREATE,
        PERM_ALLOW,
    ));
    grants.push(acl(
        RT_CLUSTER,
        "kafka-cluster",
        PT_LITERAL,
        OP_IDEMPOTENT_WRITE,
        PERM_ALLOW,
    ));
    grants.push(acl(
        RT_CLUSTER,
        "kafka-cluster",
        PT_LITERAL,
        OP_DESCRIBE,
        PERM_ALLOW,
    ));
    grants.push(acl(RT_TXN, TXN, PT_LITERAL, OP_WRITE, PERM_ALLOW));
    grants
}

/// The matrix, against a broker started with [`kafka_settings`] on `plain` and `sasl`.
fn run_matrix(plain: SocketAddr, sasl: SocketAddr) {
    let mut admin = Client::new(wire::connect(plain));
    assert_eq!(
        admin.create_topic(TOPIC),
        0,
        "the super user creates {TOPIC}"
    );
    let mut alice = Client::new(login(sasl, "alice", "alice-secret"));

    // Without ACLs, each API is refused with Kafka's code.
    let no_operations = i32::MIN;
    assert_eq!(
        alice.metadata(),
        (TOPIC_AUTHORIZATION_FAILED, no_operations),
        "Metadata"
    );
    assert_eq!(alice.produce(), TOPIC_AUTHORIZATION_FAILED, "Produce");
    assert_eq!(alice.fetch(), TOPIC_AUTHORIZATION_FAILED, "Fetch");
    assert_eq!(
        alice.list_offsets(),
        TOPIC_AUTHORIZATION_FAILED,
        "ListOffsets"
    );
    assert_eq!(
        alice.find_coordinator(0),
        GROUP_AUTHORIZATION_FAILED,
        "FindCoordinator"
    );
    assert_eq!(
        alice.find_coordinator(1),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "FindCoordinator for a transactional id"
    );
    assert_eq!(
        alice.offset_commit(),
        GROUP_AUTHORIZATION_FAILED,
        "OffsetCommit"
    );
    assert_eq!(
        alice.offset_fetch(),
        GROUP_AUTHORIZATION_FAILED,
        "OffsetFetch"
    );
    assert_eq!(
        alice.describe_groups().0,
        GROUP_AUTHORIZATION_FAILED,
        "DescribeGroups"
    );
    assert_eq!(
        alice.create_topic(NEW_TOPIC),
        TOPIC_AUTHORIZATION_FAILED,
        "CreateTopics"
    );
    assert_eq!(
        alice.delete_topic(TOPIC),
        TOPIC_AUTHORIZATION_FAILED,
        "DeleteTopics"
    );
    assert_eq!(
        alice.describe_configs(),
        TOPIC_AUTHORIZATION_FAILED,
        "DescribeConfigs"
    );
    assert_eq!(
        alice.alter_configs(),
        TOPIC_AUTHORIZATION_FAILED,
        "IncrementalAlterConfigs"
    );
    assert_eq!(
        alice.init_producer_id(None),
        CLUSTER_AUTHORIZATION_FAILED,
        "InitProducerId"
    );
    assert_eq!(
        alice.init_producer_id(Some(TXN)),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "InitProducerId with a transactional id"
    );
    assert_eq!(
        alice.create_partitions(),
        TOPIC_AUTHORIZATION_FAILED,
        "CreatePartitions"
    );
    assert_eq!(
        alice.delete_records(),
        TOPIC_AUTHORIZATION_FAILED,
        "DeleteRecords"
    );
    assert_eq!(
        alice.cluster_operations(),
        (0, 0),
        "DescribeCluster: no operations"
    );
    assert_eq!(
        alice.create_acls(vec![acl(RT_TOPIC, TOPIC, PT_LITERAL, OP_READ, PERM_ALLOW)]),
        [CLUSTER_AUTHORIZATION_FAILED],
        "CreateAcls"
    );
    assert_eq!(
        alice.describe_acls(None).0,
        CLUSTER_AUTHORIZATION_FAILED,
        "DescribeAcls"
    );
    assert_eq!(
        alice.delete_acls("User:alice").0,
        CLUSTER_AUTHORIZATION_FAILED,
        "DeleteAcls"
    );

    // The super user grants what each API needs.
    let grants = grants();
    let count = grants.len();
    assert_eq!(admin.create_acls(grants), vec![0; count]);
    assert_eq!(admin.describe_acls(Some("User:alice")), (0, count));
    // Granting the same again stores nothing new.
    assert_eq!(admin.create_acls(self::grants()), vec![0; count]);
    assert_eq!(admin.describe_acls(Some("User:alice")), (0, count));

    // Now each API is served. READ, WRITE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS and
    // ALTER_CONFIGS on the topic; CREATE, DESCRIBE and IDEMPOTENT_WRITE on the cluster (without
    // DESCRIBE on the cluster, DescribeCluster reports no operations at all, as Kafka).
    let topic_operations = [3, 4, 6, 7, 8, 10, 11]
        .iter()
        .fold(0, |b, op| b | (1 << op));
    assert_eq!(alice.metadata(), (0, topic_operations), "Metadata");
    assert_eq!(alice.produce(), 0, "Produce");
    assert_eq!(alice.fetch(), 0, "Fetch");
    assert_eq!(alice.list_offsets(), 0, "ListOffsets");
    assert_eq!(alice.find_coordinator(0), 0, "FindCoordinator");
    assert_eq!(
        alice.find_coordinator(1),
        0,
        "FindCoordinator for a transactional id"
    );
    assert_eq!(alice.offset_commit(), 0, "OffsetCommit");
    assert_eq!(alice.offset_fetch(), 0, "OffsetFetch");
    // READ on the group implies DESCRIBE: READ(3) and DESCRIBE(8) are reported.
    assert_eq!(
        alice.describe_groups(),
        (0, (1 << 3) | (1 << 8)),
        "DescribeGroups"
    );
    assert_eq!(
        alice.create_topic(NEW_TOPIC),
        0,
        "CreateTopics with CREATE on the cluster"
    );
    assert_eq!(alice.describe_configs(), 0, "DescribeConfigs");
    assert_eq!(alice.alter_configs(), 0, "IncrementalAlterConfigs");
    assert_eq!(alice.init_producer_id(None), 0, "InitProducerId");
    assert_eq!(
        alice.init_producer_id(Some(TXN)),
        0,
        "InitProducerId with a transactional id"
    );
    assert_eq!(alice.create_partitions(), 0, "CreatePartitions");
    assert_eq!(alice.delete_records(), 0, "DeleteRecords");
    assert_eq!(
        alice.cluster_operations(),
        (0, (1 << 5) | (1 << 8) | (1 << 12)),
        "DescribeCluster"
    );
    // No ACL names the new topic: creating it did not make alice its owner.
    assert_eq!(
        alice.delete_topic(NEW_TOPIC),
        TOPIC_AUTHORIZATION_FAILED,
        "DeleteTopics"
    );

    // A DENY wins over the ALLOW; DENY of READ does not take DESCRIBE away.
    assert_eq!(
        admin.create_acls(vec![acl(RT_TOPIC, "acl-", PT_PREFIXED, OP_READ, PERM_DENY)]),
        [0]
    );
    assert_eq!(
        alice.fetch(),
        TOPIC_AUTHORIZATION_FAILED,
        "Fetch with a DENY"
    );
    assert_eq!(alice.metadata().0, 0, "Metadata with a DENY of READ");

    // DeleteAcls takes every grant back, and alice is refused again.
    assert_eq!(admin.delete_acls("User:alice"), (0, count + 1));
    assert_eq!(admin.describe_acls(Some("User:alice")), (0, 0));
    assert_eq!(
        alice.produce(),
        TOPIC_AUTHORIZATION_FAILED,
        "Produce after DeleteAcls"
    );
    assert_eq!(admin.delete_topic(TOPIC), 0);
}

#[test]
fn acl_matrix_on_the_wire() {
    // Proves: see the module's doc; plus the denials are logged under Kafka's authorizer
    // logger with the principal, operation, host and resource.
    let (broker, plain, sasl) = start_with_acls(&[]);
    run_matrix(plain, sasl);
    let log = broker.log();
    assert!(
        log.contains("Principal = User:alice is Denied operation = WRITE from host = 127.0.0.1 on resource = Topic:LITERAL:acl-t for request = Produce"),
        "{}",
        broker.log_tail()
    );
}

/// The matrix against Apache Kafka (see the module's doc).
#[test]
#[ignore = "needs a reference Kafka: ACL_MATRIX_KAFKA=PLAIN_PORT,SASL_PORT"]
fn matrix_against_kafka() {
    let ports = std::env::var("ACL_MATRIX_KAFKA").expect("ACL_MATRIX_KAFKA=PLAIN_PORT,SASL_PORT");
    let (plain, sasl) = ports.split_once(',').expect("two ports");
    let addr = |p: &str| SocketAddr::from(([127, 0, 0, 1], p.parse().expect("a port")));
    run_matrix(addr(plain), addr(sasl));
}

#[test]
fn acl_apis_without_an_authorizer_and_allow_everyone() {
    // Proves: without authorizer.class.name the ACL APIs answer SECURITY_DISABLED (54),
    // as Kafka; with allow.everyone.if.no.acl.found=true a resource without ACLs is open
    // to alice, and one ACL on it (for someone else) closes it.
    let broker = Broker::start();
    let mut client = Client::new(wire::connect(broker.addr()));
    assert_eq!(client.describe_acls(None).0, SECURITY_DISABLED);
    assert_eq!(
        client.create_acls(vec![acl(RT_TOPIC, TOPIC, PT_LITERAL, OP_READ, PERM_ALLOW)]),
        [SECURITY_DISABLED]
    );
    assert_eq!(client.delete_acls("User:alice").0, SECURITY_DISABLED);
    drop(broker);

    let (_broker, plain, sasl) = start_with_acls(&["allow.everyone.if.no.acl.found=true"]);
    let mut admin = Client::new(wire::connect(plain));
    assert_eq!(admin.create_topic(TOPIC), 0);
    let mut alice = Client::new(login(sasl, "alice", "alice-secret"));
    assert_eq!(alice.produce(), 0, "no ACL on the topic: everyone may");
    let bob_reads = AclCreation::default()
        .with_resource_type(RT_TOPIC)
        .with_resource_name(s(TOPIC))
        .with_resource_pattern_type(PT_LITERAL)
        .with_principal(s("User:bob"))
        .with_host(s("*"))
        .with_operation(OP_READ)
        .with_permission_type(PERM_ALLOW);
    assert_eq!(admin.create_acls(vec![bob_reads]), [0]);
    assert_eq!(
        alice.produce(),
        TOPIC_AUTHORIZATION_FAILED,
        "the topic has an ACL now"
    );
    assert_eq!(alice.list_offsets(), TOPIC_AUTHORIZATION_FAILED);
}

#[test]
fn kafka_acls_tool_and_java_clients() {
    // Proves (scripts/acl-tools-test, which gives the same answers against Apache Kafka
    // with ACL_TOOLS_KAFKA=1): Kafka's kafka-acls.sh adds --producer and --consumer ACLs
    // and a DENY, lists exactly those lines, and removes the consumer's; Java
    // kafka-clients 4.x as alice produce 3 records to the allowed topic and read them
    // back in the allowed group, and get TopicAuthorizationException,
    // GroupAuthorizationException and ClusterAuthorizationException where Kafka gives them.
    crate::common::run_script("acl-tools-test", &[], "acl-tools-test: 10 passed, 0 failed");
}

#[test]
fn logbook_acl_tool_manages_acls() {
    // Proves: `logbook acl add` grants alice WRITE on the topic (she then produces, code
    // 0, where she was refused with 29), `acl list --json` shows exactly the ACLs added,
    // an unknown operation exits 2 without a request, `acl remove` by principal and
    // operation takes one back (alice refused again) and `acl remove` alone the rest;
    // alice herself may not list ACLs (CLUSTER_AUTHORIZATION_FAILED).
    use std::process::Command;
    let (broker, plain, sasl) = start_with_acls(&[]);
    let bootstrap = plain.to_string();
    let tool = |args: &[&str]| {
        Command::new(integration_tests::broker_binary())
            .args(args)
            .args(["-b", &bootstrap])
            .output()
            .expect("run logbook")
    };
    let mut admin = Client::new(wire::connect(plain));
    assert_eq!(admin.create_topic(TOPIC), 0);
    let mut alice = Client::new(login(sasl, "alice", "alice-secret"));
    assert_eq!(alice.produce(), TOPIC_AUTHORIZATION_FAILED);

    let out = tool(&[
        "acl",
        "add",
        "--topic",
        TOPIC,
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--operation",
        "describe",
    ]);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim()
        ),
        (Some(0), "added 2 ACL(s)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = tool(&[
        "acl",
        "add",
        "--group",
        "g",
        "--resource-pattern-type",
        "prefixed",
        "--deny-principal",
        "User:bob",
        "--operation",
        "Read",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(alice.produce(), 0, "alice may write now");

    let out = tool(&["acl", "list", "--json"]);
    let listed: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("acl list --json prints JSON");
    assert_eq!(
        listed,
        serde_json::json!([
            {"resource_type": "Group", "name": "g", "pattern_type": "Prefixed", "principal": "User:bob", "host": "*", "operation": "Read", "permission": "Deny"},
            {"resource_type": "Topic", "name": TOPIC, "pattern_type": "Literal", "principal": "User:alice", "host": "*", "operation": "Describe", "permission": "Allow"},
            {"resource_type": "Topic", "name": TOPIC, "pattern_type": "Literal", "principal": "User:alice", "host": "*", "operation": "Write", "permission": "Allow"},
        ])
    );

    let out = tool(&[
        "acl",
        "add",
        "--topic",
        TOPIC,
        "--allow-principal",
        "User:alice",
        "--operation",
        "Frob",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown operation Frob"));

    let out = tool(&[
        "acl",
        "remove",
        "--topic",
        TOPIC,
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
    ]);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim()
        ),
        (Some(0), "removed 1 ACL(s)")
    );
    assert_eq!(
        alice.produce(),
        TOPIC_AUTHORIZATION_FAILED,
        "WRITE taken back"
    );
    assert_eq!(alice.describe_acls(None).0, CLUSTER_AUTHORIZATION_FAILED);
    let out = tool(&["acl", "remove"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "removed 2 ACL(s)"
    );
    drop(broker);
}

#[test]
fn tools_log_in_with_command_config() {
    // Proves: `--command-config` takes Kafka's client properties: as admin with SASL/PLAIN
    // (a super user) `topic list` shows the topic; as alice with SCRAM-SHA-256 (a user
    // `logbook user add` made) it shows nothing, since she may not DESCRIBE it, until
    // `acl add` (as admin, through the same file) lets her; a wrong password exits 3 with
    // Kafka's SASL_AUTHENTICATION_FAILED message.
    use std::process::Command;
    let (_broker, plain, sasl) = start_with_acls(&["sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = |name: &str, mechanism: &str, module: &str, user: &str, password: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "# Kafka's client properties\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n\
                 sasl.jaas.config=org.apache.kafka.common.security.{module} required \\\n    username=\"{user}\" password=\"{password}\";\n"
            ),
        )
        .expect("write the config");
        path.to_string_lossy().to_string()
    };
    let admin = config(
        "admin.properties",
        "PLAIN",
        "plain.PlainLoginModule",
        "admin",
        "admin-secret",
    );
    let alice = config(
        "alice.properties",
        "SCRAM-SHA-256",
        "scram.ScramLoginModule",
        "alice",
        "alice-scram",
    );
    let wrong = config(
        "wrong.properties",
        "SCRAM-SHA-256",
        "scram.ScramLoginModule",
        "alice",
        "nope",
    );
    let tool = |bootstrap: &str, args: &[&str]| {
        let out = Command::new(integration_tests::broker_binary())
            .args(args)
            .args(["-b", bootstrap])
            .output()
            .expect("run logbook");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (plain, sasl) = (plain.to_string(), sasl.to_string());
    let out = tool(
        &plain,
        &["user", "add", "alice", "--password", "alice-scram"],
    );
    assert_eq!(out.0, Some(0), "{out:?}");
    let out = tool(
        &sasl,
        &["topic", "create", TOPIC, "--command-config", &admin],
    );
    assert_eq!(out.0, Some(0), "{out:?}");
    let out = tool(
        &sasl,
        &["topic", "list", "--json", "--command-config", &admin],
    );
    assert!(out.1.contains(TOPIC), "admin sees the topic: {out:?}");
    let out = tool(
        &sasl,
        &["topic", "list", "--json", "--command-config", &alice],
    );
    assert_eq!((out.0, out.1.trim()), (Some(0), "[]"), "{out:?}");
    let out = tool(
        &sasl,
        &[
            "acl",
            "add",
            "--topic",
            TOPIC,
            "--allow-principal",
            "User:alice",
            "--operation",
            "Describe",
            "--command-config",
            &admin,
        ],
    );
    assert_eq!(out.0, Some(0), "{out:?}");
    let out = tool(
        &sasl,
        &["topic", "list", "--json", "--command-config", &alice],
    );
    assert!(out.1.contains(TOPIC), "alice sees the topic now: {out:?}");
    let out = tool(&sasl, &["topic", "list", "--command-config", &wrong]);
    assert_eq!(out.0, Some(3), "{out:?}");
    assert!(
        out.2.contains("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"),
        "{out:?}"
    );
}
