//! `ReplicaManager::append_records` and `read`, the handlers' entry: each step refuses
//! before anything is appended, in Kafka's order (partition, validation, the caller's
//! check, the append), and a successful append is read back below the high watermark.

use std::time::Duration;

use bytes::Bytes;
use logbook_storage::log_validator::{AppendOrigin, ValidatorConfig};

use super::*;
use crate::{AppendRecords, AppendRecordsError, FetchIsolation, FlushPolicy, ReplicaManager};

fn validator() -> ValidatorConfig {
    ValidatorConfig {
        origin: AppendOrigin::Client,
        log_append_time: false,
        compacted: false,
        max_message_bytes: 1 << 20,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        now_ms: 1_000,
        decompressed_bytes_max: 1 << 20,
        target_codec: None,
    }
}

fn request<'a>(
    topic_partition: &'a TopicPartition,
    records: &'a Bytes,
    validator: &'a ValidatorConfig,
) -> AppendRecords<'a> {
    AppendRecords {
        topic_partition,
        records,
        validator,
        off_worker: crate::OffWorker {
            bytes_min: 1 << 20,
            compressed_bytes_min: 1 << 20,
        },
        required_acks: -1,
        min_insync_replicas: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_step_refuses_before_the_append_and_an_append_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = ReplicaManager::new(dir.path(), FlushPolicy::EveryWrite, 1).with_broker_id(1);
    let partition = manager
        .create_partitions("t", 0..1, &LogConfig::default())
        .expect("create")
        .remove(0);
    let tp = TopicPartition {
        topic: "t".into(),
        partition: 0,
    };
    let validator = validator();
    let good = Bytes::from(batch());
    let pass = |_: &Partition, _: &ValidatedBatches| Ok::<(), &str>(());

    // An unknown partition: refused first, whatever the payload.
    let unknown = TopicPartition {
        topic: "t".into(),
        partition: 1,
    };
    let corrupt = {
        let mut b = batch();
        let last = b.len() - 1;
        b[last] ^= 0xff;
        Bytes::from(b)
    };
    match manager.append_records(&request(&unknown, &corrupt, &validator), pass) {
        Err(AppendRecordsError::Partition(Error::UnknownTopicOrPartition(p))) => {
            assert_eq!(p, unknown);
        }
        other => panic!("expected UnknownTopicOrPartition, got {:?}", other.err()),
    }
    // A payload failing its CRC: refused by validation, the check never runs.
    let refused = manager.append_records(&request(&tp, &corrupt, &validator), |_, _| {
        panic!("the check must not see an invalid payload")
    });
    assert!(matches!(refused, Err(AppendRecordsError::<()>::Invalid(_))));
    // The caller's check refuses: nothing appended.
    let refused = manager.append_records(&request(&tp, &good, &validator), |_, v| {
        assert_eq!(v.record_count(), 1);
        Err("not in the transaction")
    });
    assert!(matches!(
        refused,
        Err(AppendRecordsError::Refused("not in the transaction"))
    ));
    assert_eq!(partition.log_end_offset(), Offset(0));

    // All steps pass: appended at offset 0, acknowledged once durable.
    let appended = manager
        .append_records(&request(&tp, &good, &validator), pass)
        .expect("append");
    match &appended.outcome {
        AppendOutcome::Appended(info) => {
            assert_eq!(info.first_offset, Offset(0));
            assert_eq!(info.log_end_offset, Offset(1));
        }
        AppendOutcome::Duplicate(_) => panic!("not a retry"),
    }
    let pending = [appended.pending_ack(1)];
    let acked = ReplicaManager::wait_for_acks_all(&pending, Duration::from_secs(5)).await;
    assert_eq!(acked.len(), 1);
    assert!(acked[0].is_ok(), "{:?}", acked[0]);

    for isolation in [FetchIsolation::HighWatermark, FetchIsolation::TxnCommitted] {
        let read = manager
            .read(&partition, Offset(0), 1 << 20, true, isolation)
            .expect("read");
        assert_eq!(read.read.bytes, good.len(), "{isolation:?}");
        let offsets = read.offsets.expect("offsets");
        assert_eq!(offsets.high_watermark, Offset(1));
        assert_eq!(offsets.last_stable_offset, Offset(1));
        assert_eq!(
            read.aborted_transactions.map(|a| a.len()),
            (isolation == FetchIsolation::TxnCommitted).then_some(0)
        );
    }
    manager.shutdown();
}
