//! `Topics` creation rules: internal names are refused to clients and allowed to
//! coordinators, the broker-wide partition limit is checked before anything is created,
//! and a creation that fails half-way leaves neither directories nor a registry entry.

use std::path::Path;
use std::sync::Arc;

use super::*;

fn topics(dir: &Path, partitions_total_max: u64) -> Topics {
    let replicas = Arc::new(logbook_replication::ReplicaManager::new(
        dir,
        logbook_replication::FlushPolicy::EveryWrite,
        1,
    ));
    Topics::open(
        dir,
        Arc::clone(&replicas),
        BrokerDefaults::new(1_048_588, 1 << 30, -1),
        1000,
    )
    .expect("open topics")
    .with_partitions_total_max(partitions_total_max)
}

fn new_topic(name: &str, partitions: i32) -> NewTopic<'_> {
    NewTopic {
        name,
        partitions,
        replication_factor: 1,
        config: TopicConfig::default(),
    }
}

fn partition_dirs(dir: &Path, topic: &str) -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(dir)
        .expect("read data dir")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_type().expect("file type").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.strip_prefix(topic).is_some_and(|p| p.starts_with('-')))
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn only_kafkas_internal_topics_are_internal() {
    assert!(is_internal("__consumer_offsets"));
    assert!(is_internal("__transaction_state"));
    assert!(is_internal("__share_group_state"));
    assert!(!is_internal("__events"));
    assert!(!is_internal("__cluster_metadata"));
    assert!(!is_internal("consumer_offsets"));
}

#[test]
fn clients_cannot_create_internal_topics_but_coordinators_can() {
    let dir = tempfile::tempdir().expect("tempdir");
    let topics = topics(dir.path(), 100);
    assert!(matches!(
        topics.create(new_topic("__consumer_offsets", 1)),
        Err(TopicError::Internal(_))
    ));
    assert!(matches!(
        topics.get_or_create("__transaction_state", true, 1, 1),
        Err(TopicError::Internal(_))
    ));
    assert!(matches!(
        topics.create_internal(new_topic("user", 1)),
        Err(TopicError::Internal(_))
    ));
    let offsets = topics
        .create_internal(new_topic("__consumer_offsets", 5))
        .expect("coordinator creates its topic");
    assert_eq!(offsets.partition_count as usize, 5);
    assert!(matches!(
        topics.delete("__consumer_offsets"),
        Err(TopicError::Internal(_))
    ));
    assert!(matches!(
        topics.add_partitions("__consumer_offsets", 6, false),
        Err(TopicError::Internal(_))
    ));
    topics.create(new_topic("__events", 1)).expect("user topic");
    topics
        .add_partitions("__events", 2, false)
        .expect("user topic grows");
}

#[test]
fn partition_limit_counts_every_topic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let topics = topics(dir.path(), 10);
    topics.create(new_topic("a", 6)).expect("6 of 10");
    match topics.create(new_topic("b", 5)) {
        Err(TopicError::PartitionLimit {
            requested: 5,
            in_use: 6,
            limit: 10,
        }) => {}
        other => panic!(
            "expected the partition limit, got {:?}",
            other.map(|t| t.id)
        ),
    }
    assert!(partition_dirs(dir.path(), "b").is_empty());
    assert!(matches!(
        topics.add_partitions("a", 11, false),
        Err(TopicError::PartitionLimit { requested: 5, .. })
    ));
    assert!(matches!(
        topics.check_request_partitions(PARTITIONS_PER_REQUEST_MAX + 1),
        Err(TopicError::RequestTooLarge { .. })
    ));
    topics.create(new_topic("b", 4)).expect("exactly the limit");
}

#[test]
fn a_creation_failing_half_way_is_rolled_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let topics = topics(dir.path(), 100);
    std::fs::write(dir.path().join("t-2"), b"x").expect("obstacle");
    assert!(topics.create(new_topic("t", 4)).is_err());
    assert!(partition_dirs(dir.path(), "t").is_empty());
    assert!(topics.get("t").is_none());

    topics.create(new_topic("g", 2)).expect("create");
    std::fs::write(dir.path().join("g-3"), b"x").expect("obstacle");
    assert!(topics.add_partitions("g", 5, false).is_err());
    assert_eq!(partition_dirs(dir.path(), "g"), vec!["g-0", "g-1"]);
    assert_eq!(topics.get("g").map(|t| t.partition_count as usize), Some(2));
}
