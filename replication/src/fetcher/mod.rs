//! Replica fetchers: how a follower copies its leader's log (Kafka's
//! `AbstractFetcherThread` / `ReplicaFetcherThread`, one task per source broker).
//!
//! A [`ReplicaFetcher`] holds the partitions this broker follows on one leader broker. Each
//! round it truncates the partitions that must find where they diverged from the leader
//! (OffsetsForLeaderEpoch, the KIP-279 loop), then sends one Fetch for the others and
//! appends what comes back with `Log::append_as_follower`. The leader sits behind the
//! [`LeaderEndPoint`] trait (Kafka's name): [`RemoteLeaderEndPoint`] speaks Fetch v17 and
//! OffsetsForLeaderEpoch v4 over TCP; tests use an in-process one. The local replica sits
//! behind [`FollowerLog`], so the fetcher is tested against real `storage::Log`s without a
//! broker.
//!
//! Durability: under `FlushPolicy::EveryWrite` the next Fetch goes out only once what the
//! last one appended is fsync'd, so the fetch offset the leader counts toward the high
//! watermark is always durable here (plan §0). A failed fsync stops fetching that partition
//! for good (logged), as a failed fsync fails the log.

mod dyn_end_point;
mod follower_log;
mod leader_end_point;
mod manager;
mod remote_leader_end_point;
mod replica_fetcher;
mod truncation;

pub use dyn_end_point::{BoxedLeaderEndPoint, DynLeaderEndPoint, EndPointFuture};
pub use follower_log::FollowerLog;
pub use leader_end_point::{
    EndPointError, EpochEndOffset, EpochRequest, EpochResult, FetchPartition, FetchRequest,
    FetchedPartition, LeaderEndPoint, LeaderError,
};
pub use manager::{
    BrokerEndpoints, LeaderEndPointFactory, RemoteLeaderEndPoints, ReplicaFetcherManager,
};
pub use remote_leader_end_point::{RemoteLeaderEndPoint, RemoteLeaderEndPointConfig};
pub use replica_fetcher::{
    Description, FailureReason, FetchStateView, FetcherConfig, FetcherError, InitialFetchState,
    ReplicaFetcher, ReplicaFetcherHandle,
};

#[cfg(test)]
mod tests;
