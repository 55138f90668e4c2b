use super::*;
use crate::test_support::{partition, register, topic_id};

fn one_of_each() -> Vec<MetadataRecord> {
    vec![
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: "metadata.version".to_string(),
            level: 21,
        }),
        MetadataRecord::ClusterId(ClusterIdRecord {
            cluster_id: "MkU3OEVBNTcwNTJENDM2Qg".to_string(),
        }),
        register(1, 10),
        MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id: 1,
            broker_epoch: 10,
        }),
        MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            broker_id: 2,
            broker_epoch: 11,
            fenced: Some(true),
            in_controlled_shutdown: None,
        }),
        MetadataRecord::Topic(TopicRecord {
            name: "orders".to_string(),
            topic_id: topic_id(1),
        }),
        MetadataRecord::RemoveTopic(RemoveTopicRecord {
            topic_id: topic_id(1),
        }),
        partition(topic_id(1), 0, &[1, 2, 3]),
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: topic_id(1),
            partition_id: 0,
            partition_epoch: 4,
            leader: Some(NO_LEADER),
            isr: Some(vec![2]),
            leader_recovery_state: Some(LeaderRecoveryState::Recovering),
            ..PartitionChangeRecord::default()
        }),
        MetadataRecord::Config(ConfigRecord {
            resource_type: ConfigResourceType::Broker,
            resource_name: String::new(),
            name: "log.retention.ms".to_string(),
            value: None,
        }),
        MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: 1,
            broker_epoch: 10,
            next_producer_id: 2000,
        }),
    ]
}

// Every record kind survives encode/decode unchanged.
#[test]
fn every_record_kind_round_trips() {
    let batch = MetadataBatch(one_of_each());
    assert_eq!(MetadataBatch::decode(&batch.encode()), Ok(batch));
}

// The JSON shape is the contract with data already on disk: the envelope's `v`, the
// record's `type` next to its fields, Kafka's enum spellings.
#[test]
fn encoding_is_stable() {
    let batch = MetadataBatch(vec![
        MetadataRecord::Topic(TopicRecord {
            name: "orders".to_string(),
            topic_id: topic_id(1),
        }),
        MetadataRecord::Config(ConfigRecord {
            resource_type: ConfigResourceType::Topic,
            resource_name: "orders".to_string(),
            name: "cleanup.policy".to_string(),
            value: Some("compact".to_string()),
        }),
    ]);
    let json = String::from_utf8(batch.encode()).expect("utf-8");
    assert_eq!(
        json,
        concat!(
            r#"{"v":1,"records":["#,
            r#"{"type":"TopicRecord","name":"orders","topic_id":"5eed0000-0000-0000-0000-000000000001"},"#,
            r#"{"type":"ConfigRecord","resource_type":"TOPIC","resource_name":"orders","name":"cleanup.policy","value":"compact"}"#,
            "]}"
        )
    );
}

// A newer writer's extra fields are ignored, and fields added after v1 (the reserved ELR
// lists, the reassignment lists, the recovery state) default when absent.
#[test]
fn unknown_fields_ignored_and_new_fields_default() {
    let json = concat!(
        r#"{"v":1,"future_envelope_field":true,"records":[{"type":"PartitionRecord","#,
        r#""topic_id":"5eed0000-0000-0000-0000-000000000001","partition_id":0,"#,
        r#""replicas":[1,2],"isr":[1],"leader":1,"leader_epoch":3,"partition_epoch":5,"#,
        r#""directories":["x"]}]}"#
    );
    let batch = MetadataBatch::decode(json.as_bytes()).expect("decode");
    let MetadataBatch(records) = batch;
    let [MetadataRecord::Partition(p)] = records.as_slice() else {
        panic!("one partition record expected, got {records:?}");
    };
    assert_eq!(p.replicas, vec![1, 2]);
    assert_eq!(p.isr, vec![1]);
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 3, 5));
    assert!(p.removing_replicas.is_empty() && p.adding_replicas.is_empty());
    assert!(p.elr.is_empty() && p.last_known_elr.is_empty());
    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovered);
}

// A registration without `fenced` is fenced (the safe default).
#[test]
fn registration_defaults_to_fenced() {
    let json = concat!(
        r#"{"v":1,"records":[{"type":"RegisterBrokerRecord","broker_id":3,"#,
        r#""incarnation_id":"00000000-0000-0000-0000-000000000009","broker_epoch":4,"endpoints":[]}]}"#
    );
    let MetadataBatch(records) = MetadataBatch::decode(json.as_bytes()).expect("decode");
    let [MetadataRecord::RegisterBroker(r)] = records.as_slice() else {
        panic!("one registration expected, got {records:?}");
    };
    assert!(r.fenced);
    assert!(!r.in_controlled_shutdown);
    assert_eq!(r.rack, None);
}

// A newer encoding version and an unknown record type are refused, not misread.
#[test]
fn newer_version_and_unknown_type_refused() {
    assert_eq!(
        MetadataBatch::decode(br#"{"v":2,"records":[{"type":"RecordOfTheFuture"}]}"#),
        Err(Error::UnsupportedEncodingVersion {
            version: 2,
            supported: 1
        })
    );
    let unknown = MetadataBatch::decode(br#"{"v":1,"records":[{"type":"DelegationTokenRecord"}]}"#);
    assert!(
        matches!(&unknown, Err(Error::Decode { reason }) if reason.contains("DelegationTokenRecord")),
        "{unknown:?}"
    );
    assert!(matches!(
        MetadataBatch::decode(b"not json"),
        Err(Error::Decode { .. })
    ));
}
