//! A TxnOffsetCommit that reaches the group coordinator after its transaction ended (held
//! in a stopped broker's socket, or resent by a client that gave up) is refused, as
//! Kafka's coordinators refuse it after verifying the transaction (KIP-890 part 1), rather
//! than written after the abort marker and left pending with no marker to come.

use integration_tests::Broker;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{ProducerId, TxnOffsetCommitRequest};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::Consumer;
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

use super::txn_requests::describe;
use super::{fetch_committed, records, send_in_txn, transactional, SMALL_INTERNAL_TOPICS};
use crate::common::{consumer, create_topic, CLIENT_TIMEOUT};
use crate::wire::{connect, round_trip};

/// INVALID_TXN_STATE: the group's partition is not in an open transaction of the producer.
const INVALID_TXN_STATE: i16 = 48;

#[test]
fn an_offset_commit_after_its_transaction_was_aborted_is_refused() {
    // Proves: after a transaction with offsets is aborted, a TxnOffsetCommit of the same
    // producer id and epoch is answered INVALID_TXN_STATE and writes nothing, so a
    // read_committed OffsetFetch (require_stable) answers at once with no offset; before,
    // it was written and held pending forever, and OffsetFetch answered
    // UNSTABLE_OFFSET_COMMIT until the client gave up (the chaos trials' stuck rewinds).
    let broker = Broker::start_with(SMALL_INTERNAL_TOPICS);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "late-input", 1, &[]);
    create_topic(&bootstrap, "late-output", 1, &[]);
    let group_consumer = consumer(&bootstrap, &[("group.id", "late-group")]);
    let metadata = group_consumer.group_metadata().expect("group metadata");
    let p = transactional(&bootstrap, "late-offsets-id", "60000");
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("late-input", 0, Offset::Offset(7))
        .expect("offset");
    p.begin_transaction().expect("begin");
    send_in_txn(&p, "late-output", &records(0, "out", 1));
    p.send_offsets_to_transaction(&offsets, &metadata, CLIENT_TIMEOUT)
        .expect("send offsets");
    p.abort_transaction(CLIENT_TIMEOUT).expect("abort");
    // EndTxn answers once the abort is decided; the markers follow.
    let deadline = std::time::Instant::now() + CLIENT_TIMEOUT;
    let state = loop {
        let state = describe(broker.addr(), "late-offsets-id");
        if state.transaction_state.as_str() == "CompleteAbort"
            || std::time::Instant::now() > deadline
        {
            break state;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        (state.error_code, state.transaction_state.as_str()),
        (0, "CompleteAbort"),
        "the abort completed (markers written)"
    );

    // The late request: the same producer id and epoch, offset 9, as TxnOffsetCommit v3.
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(StrBytes::from_static_str("late-offsets-id").into())
        .with_group_id(StrBytes::from_static_str("late-group").into())
        .with_producer_id(ProducerId(state.producer_id.0))
        .with_producer_epoch(state.producer_epoch)
        .with_generation_id(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(StrBytes::from_static_str("late-input").into())
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(9)
                .with_committed_leader_epoch(-1)])]);
    let response = round_trip(&mut connect(broker.addr()), 3, 7, &request);
    let codes: Vec<(String, i32, i16)> = response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    assert_eq!(codes, vec![("late-input".to_owned(), 0, INVALID_TXN_STATE)]);

    // Nothing is pending: a read_committed fetch (require_stable) answers at once.
    assert_eq!(
        fetch_committed(
            &bootstrap,
            "late-group",
            "late-input",
            0,
            "read_committed",
            std::time::Duration::from_secs(10),
        )
        .expect("no pending offset after the refused commit"),
        None
    );
    // And the producer's next transaction still commits its offsets.
    let mut next = TopicPartitionList::new();
    next.add_partition_offset("late-input", 0, Offset::Offset(11))
        .expect("offset");
    p.begin_transaction().expect("begin");
    send_in_txn(&p, "late-output", &records(0, "out", 1));
    p.send_offsets_to_transaction(&next, &metadata, CLIENT_TIMEOUT)
        .expect("send offsets");
    p.commit_transaction(CLIENT_TIMEOUT).expect("commit");
    assert_eq!(
        fetch_committed(
            &bootstrap,
            "late-group",
            "late-input",
            0,
            "read_committed",
            CLIENT_TIMEOUT,
        )
        .expect("stable after commit"),
        Some(11)
    );
}
