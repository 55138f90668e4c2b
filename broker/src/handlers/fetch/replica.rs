//! The replication side of Fetch: a follower's partition read (through
//! `Partition::fetch_for_follower`: up to the log end, or the diverging epoch), and the
//! current leader that NOT_LEADER_OR_FOLLOWER answers carry (KIP-951).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::ResponseError;
use logbook_protocol::{FileRecords, FileRegion};
use logbook_replication::{FollowerFetch, FollowerFetchResult, Partition};

use super::error_partition;
use crate::broker::Broker;
use crate::errors;

/// One partition of a follower's fetch (see `Partition::fetch_for_follower`).
pub(super) fn follower_partition(
    partition: &Partition,
    fetch: &FollowerFetch,
    records: &mut FileRecords,
) -> PartitionData {
    let index = partition.topic_partition().partition;
    let now_ms = logbook_common::now_ms();
    let result = partition
        .fetch_for_follower(fetch, now_ms)
        .and_then(|result| match result {
            FollowerFetchResult::Records { read, offsets } => {
                let regions = read
                    .slices
                    .iter()
                    .map(|slice| FileRegion {
                        file: Arc::clone(&slice.file),
                        position: slice.position,
                        len: slice.len,
                    })
                    .collect();
                let set = records
                    .records(regions)
                    .map_err(logbook_storage::Error::from)?;
                Ok(PartitionData::default()
                    .with_partition_index(index)
                    .with_high_watermark(offsets.high_watermark.get())
                    .with_last_stable_offset(offsets.last_stable_offset.get())
                    .with_log_start_offset(offsets.log_start_offset.get())
                    .with_preferred_read_replica(BrokerId(-1))
                    .with_records(Some(set)))
            }
            FollowerFetchResult::Diverging {
                epoch,
                end_offset,
                offsets,
            } => Ok(PartitionData::default()
                .with_partition_index(index)
                .with_high_watermark(offsets.high_watermark.get())
                .with_last_stable_offset(offsets.last_stable_offset.get())
                .with_log_start_offset(offsets.log_start_offset.get())
                .with_diverging_epoch(
                    EpochEndOffset::default()
                        .with_epoch(epoch.0)
                        .with_end_offset(end_offset.get()),
                )
                .with_preferred_read_replica(BrokerId(-1))
                .with_records(Some(Bytes::new()))),
        });
    match result {
        Ok(data) => data,
        Err(e) => {
            let offsets = partition.offsets().ok();
            error_partition(index, errors::replication_error(&e))
                .with_high_watermark(offsets.map_or(-1, |o| o.high_watermark.get()))
                .with_log_start_offset(offsets.map_or(-1, |o| o.log_start_offset.get()))
        }
    }
}

/// KIP-951: NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH answers name the leader this
/// broker knows (node endpoints come with the cluster metadata image).
pub(super) fn fill_current_leaders(broker: &Broker, response: &mut [FetchableTopicResponse]) {
    for topic in response {
        let name = topic.topic.to_string();
        for p in &mut topic.partitions {
            let not_leader = p.error_code == ResponseError::NotLeaderOrFollower.code()
                || p.error_code == ResponseError::FencedLeaderEpoch.code();
            if !not_leader {
                continue;
            }
            if let Some(partition) = broker.replicas.partition(&name, p.partition_index) {
                let (leader, epoch) = partition.current_leader();
                p.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch.0);
            }
        }
    }
}
