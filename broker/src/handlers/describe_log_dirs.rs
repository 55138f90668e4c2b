//! DescribeLogDirs (API key 35): the log directory and the size of each partition in it,
//! as `kafka-log-dirs.sh --describe` shows them. Logbook has one log directory, the data
//! directory; a partition's size is the bytes of its segments, its offset lag 0 (no
//! future replica is ever being moved here).

use std::path::Path;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::RequestContext;
use crate::authorizer::AclOperation;
use crate::broker::Broker;
use kafka_protocol::ResponseError;

/// Versions served (Kafka 4.x serves 1-4).
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 4 };

/// (total, usable) bytes of the file system holding `dir` (Java's `FileStore`
/// `getTotalSpace` / `getUsableSpace`), or -1 each when it cannot be read.
fn space(dir: &Path) -> (i64, i64) {
    match rustix::fs::statvfs(dir) {
        Ok(s) => {
            let bytes =
                |blocks: u64| i64::try_from(blocks.saturating_mul(s.f_frsize)).unwrap_or(i64::MAX);
            (bytes(s.f_blocks), bytes(s.f_bavail))
        }
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "statvfs failed");
            (-1, -1)
        }
    }
}

/// One topic's partitions in the log directory; `only` limits them to the listed ones.
fn describe_topic(
    broker: &Broker,
    name: &str,
    only: Option<&[i32]>,
) -> Option<DescribeLogDirsTopic> {
    let partitions: Vec<DescribeLogDirsPartition> = broker
        .replicas
        .partitions_of(name)
        .iter()
        .filter(|p| only.is_none_or(|only| only.contains(&p.topic_partition().partition)))
        .filter_map(|p| {
            let size = p.size_bytes().ok()?;
            Some(
                DescribeLogDirsPartition::default()
                    .with_partition_index(p.topic_partition().partition)
                    .with_partition_size(i64::try_from(size).unwrap_or(i64::MAX))
                    .with_offset_lag(0)
                    .with_is_future_key(false),
            )
        })
        .collect();
    (!partitions.is_empty()).then(|| {
        DescribeLogDirsTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_partitions(partitions)
    })
}

/// Answers a DescribeLogDirs request (sizes read from memory; statvfs under
/// `block_in_place`).
pub fn handle(ctx: &RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    let broker = &ctx.broker;
    if !ctx.authorize_cluster(AclOperation::Describe) {
        // No log dirs; the code is carried from v3 on.
        return DescribeLogDirsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let topics: Vec<DescribeLogDirsTopic> = match &request.topics {
        None => {
            let mut names: Vec<String> =
                broker.topics.all().iter().map(|t| t.name.clone()).collect();
            names.sort();
            names
                .iter()
                .filter_map(|name| describe_topic(broker, name, None))
                .collect()
        }
        Some(wanted) => wanted
            .iter()
            .filter_map(|t| describe_topic(broker, t.topic.as_str(), Some(&t.partitions)))
            .collect(),
    };
    let data_dir = &broker.config.data_dir;
    let log_dir = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.clone());
    let (total_bytes, usable_bytes) = if ctx.api_version >= 4 {
        tokio::task::block_in_place(|| space(&log_dir))
    } else {
        (-1, -1)
    };
    let result = DescribeLogDirsResult::default()
        .with_error_code(crate::errors::NONE)
        .with_log_dir(StrBytes::from_string(log_dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(total_bytes)
        .with_usable_bytes(usable_bytes);
    DescribeLogDirsResponse::default().with_results(vec![result])
}
