use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::*;

fn key(topic: &str, partition: i32) -> PartitionKey {
    PartitionKey::new(false, Uuid::nil(), topic, partition)
}

fn part(partition: i32, offset: i64) -> FetchPartition {
    FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20)
}

fn answer(hw: i64) -> Answer {
    Answer {
        high_watermark: hw,
        log_start_offset: 0,
        ..Answer::default()
    }
}

/// A session over t-0, t-1, t-2, each answered with high watermark 10.
fn session(cache: &FetchSessionCache, now: Instant) -> i32 {
    let parts = (0..3)
        .map(|p| (key("t", p), part(p, 10), answer(10)))
        .collect();
    cache.create(false, false, parts, now)
}

/// One topic `t` answering each `(partition, high watermark, record bytes, error)`.
fn response(parts: &[(i32, i64, usize, i16)]) -> Vec<FetchableTopicResponse> {
    vec![FetchableTopicResponse::default()
        .with_topic(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(
            parts
                .iter()
                .map(|&(p, hw, bytes, error)| {
                    PartitionData::default()
                        .with_partition_index(p)
                        .with_high_watermark(hw)
                        .with_log_start_offset(0)
                        .with_error_code(error)
                        .with_records(Some(bytes::Bytes::from(vec![0; bytes])))
                })
                .collect(),
        )]
}

fn answer_of(p: &PartitionData) -> Answer {
    Answer {
        records_bytes: p.records.as_ref().map_or(0, bytes::Bytes::len),
        high_watermark: p.high_watermark,
        log_start_offset: p.log_start_offset,
        error: p.error_code != 0,
        ..Answer::default()
    }
}

fn incremental(cache: &FetchSessionCache, id: i32, epoch: i32) -> (i32, Vec<(PartitionKey, i64)>) {
    match cache.new_context(id, epoch, false, &[], &[], Instant::now()) {
        FetchContext::Incremental {
            epoch, partitions, ..
        } => (
            epoch,
            partitions
                .into_iter()
                .map(|(k, p)| (k, p.fetch_offset))
                .collect(),
        ),
        other => panic!("expected an incremental context, got {other:?}"),
    }
}

fn indexes(topics: &[FetchableTopicResponse]) -> Vec<i32> {
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.partition_index))
        .collect()
}

#[test]
fn epochs_ids_and_topic_id_use_are_checked_as_kafka_does() {
    let cache = FetchSessionCache::new(10, 1000);
    let id = session(&cache, Instant::now());
    assert_ne!(id, INVALID_SESSION_ID);
    let context = |id, epoch, by_id| cache.new_context(id, epoch, by_id, &[], &[], Instant::now());
    assert!(matches!(
        context(id + 1, 1, false),
        FetchContext::Error(ResponseError::FetchSessionIdNotFound)
    ));
    assert!(matches!(
        context(id, 2, false),
        FetchContext::Error(ResponseError::InvalidFetchSessionEpoch)
    ));
    assert!(matches!(
        context(id, 1, true),
        FetchContext::Error(ResponseError::FetchSessionTopicIdError)
    ));
    let (epoch, partitions) = incremental(&cache, id, 1);
    assert_eq!(epoch, 2);
    assert_eq!(partitions.len(), 3);
    // The same epoch again (a resent request) is refused: the session moved on.
    assert!(matches!(
        context(id, 1, false),
        FetchContext::Error(ResponseError::InvalidFetchSessionEpoch)
    ));
    // A full fetch naming the session closes it; epoch -1 creates none.
    assert!(matches!(
        context(id, FINAL_EPOCH, false),
        FetchContext::Sessionless
    ));
    assert!(cache.is_empty());
    assert!(matches!(
        context(0, INITIAL_EPOCH, false),
        FetchContext::Full
    ));
}

#[test]
fn an_incremental_answer_carries_only_what_changed_and_rotates_partitions_with_records() {
    let cache = FetchSessionCache::new(10, 1000);
    let id = session(&cache, Instant::now());
    let (epoch, _) = incremental(&cache, id, 1);
    // Nothing changed: nothing is sent.
    let mut topics = response(&[(0, 10, 0, 0), (1, 10, 0, 0), (2, 10, 0, 0)]);
    cache
        .finish_incremental(id, epoch, &mut topics, answer_of)
        .expect("finish");
    assert!(topics.is_empty(), "{topics:?}");

    // Records on 0, a new high watermark on 2, an error on 1.
    let (epoch, _) = incremental(&cache, id, epoch);
    let mut topics = response(&[(0, 11, 100, 0), (1, -1, 0, 6), (2, 12, 0, 0)]);
    cache
        .finish_incremental(id, epoch, &mut topics, answer_of)
        .expect("finish");
    assert_eq!(indexes(&topics), vec![0, 1, 2]);

    // Partition 0 returned records, so it is read last now. The error is gone from 1, and
    // since an error forgets what the client knew, 1 is sent again with its watermark.
    let (epoch, order) = incremental(&cache, id, epoch);
    assert_eq!(
        order.iter().map(|(k, _)| k.partition).collect::<Vec<_>>(),
        vec![1, 2, 0]
    );
    let mut topics = response(&[(1, 10, 0, 0), (2, 12, 0, 0), (0, 11, 0, 0)]);
    cache
        .finish_incremental(id, epoch, &mut topics, answer_of)
        .expect("finish");
    assert_eq!(indexes(&topics), vec![1]);

    // An answer for an epoch the session has left is refused whole.
    let mut topics = response(&[(1, 10, 0, 0)]);
    assert_eq!(
        cache.finish_incremental(id, epoch - 1, &mut topics, answer_of),
        Err(ResponseError::InvalidFetchSessionEpoch)
    );
}

#[test]
fn requests_update_positions_and_forgetting_every_partition_closes_the_session() {
    let cache = FetchSessionCache::new(10, 1000);
    let id = session(&cache, Instant::now());
    let context = cache.new_context(
        id,
        1,
        false,
        &[(key("t", 1), part(1, 42)), (key("u", 0), part(0, 7))],
        &[key("t", 0)],
        Instant::now(),
    );
    let FetchContext::Incremental { partitions, .. } = context else {
        panic!("expected an incremental context, got {context:?}");
    };
    let got: Vec<(String, i32, i64)> = partitions
        .iter()
        .map(|(k, p)| (k.topic.clone(), k.partition, p.fetch_offset))
        .collect();
    assert_eq!(
        got,
        vec![("t".into(), 1, 42), ("t".into(), 2, 10), ("u".into(), 0, 7)]
    );
    let forget = [key("t", 1), key("t", 2), key("u", 0)];
    assert!(matches!(
        cache.new_context(id, 2, false, &[], &forget, Instant::now()),
        FetchContext::Sessionless
    ));
    assert!(cache.is_empty());
}

#[test]
fn eviction_follows_kafkas_rules() {
    let cache = FetchSessionCache::new(1, 1000);
    let t0 = Instant::now();
    let consumer = session(&cache, t0);
    assert_ne!(consumer, INVALID_SESSION_ID);
    // A young consumer session keeps its slot against a larger consumer session...
    let big: Vec<_> = (0..5)
        .map(|p| (key("t", p), part(p, 0), answer(0)))
        .collect();
    assert_eq!(
        cache.create(false, false, big.clone(), t0),
        INVALID_SESSION_ID
    );
    // ...but not against a follower's.
    let follower = cache.create(true, false, big.clone(), t0);
    assert_ne!(follower, INVALID_SESSION_ID);
    assert_eq!(cache.len(), 1);
    // A young follower session is kept from a consumer.
    assert_eq!(
        cache.create(false, false, big.clone(), t0),
        INVALID_SESSION_ID
    );
    // Once unused for the eviction time, anyone may take the slot.
    let later = t0 + Duration::from_millis(EVICTION_MS + 1);
    let small = vec![(key("t", 0), part(0, 0), answer(0))];
    assert_ne!(cache.create(false, false, small, later), INVALID_SESSION_ID);
    assert_eq!(cache.len(), 1);
}

#[test]
fn no_slots_means_no_sessions() {
    let cache = FetchSessionCache::new(0, 1000);
    assert_eq!(session(&cache, Instant::now()), INVALID_SESSION_ID);
}

#[test]
fn epochs_wrap_to_one() {
    assert_eq!(next_epoch(0), 1);
    assert_eq!(next_epoch(i32::MAX), 1);
    assert_eq!(next_epoch(-1), FINAL_EPOCH);
}

#[test]
fn the_partition_bound_holds_for_new_and_growing_sessions() {
    let cache = FetchSessionCache::new(10, 5);
    let now = Instant::now();
    let id = session(&cache, now);
    assert_eq!(cache.partitions(), 3);
    // Three more would make six: not cached (both sessions are young consumers).
    assert_eq!(session(&cache, now), INVALID_SESSION_ID);
    // Growing the session to five is fine; to six closes it.
    let two = [(key("u", 0), part(0, 0)), (key("u", 1), part(1, 0))];
    assert!(matches!(
        cache.new_context(id, 1, false, &two, &[], now),
        FetchContext::Incremental { .. }
    ));
    assert_eq!(cache.partitions(), 5);
    let one = [(key("u", 2), part(2, 0))];
    assert!(matches!(
        cache.new_context(id, 2, false, &one, &[], now),
        FetchContext::Error(ResponseError::FetchSessionIdNotFound)
    ));
    assert_eq!(cache.partitions(), 0);
    assert!(cache.is_empty());
}
