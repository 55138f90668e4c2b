//! A `LeaderEndPoint` behind a box, so the fetcher manager can hold the real TCP end point
//! and a test's in-process one alike (the trait's async methods are not object-safe; this
//! boxes each returned future, one allocation per request).

use std::future::Future;
use std::pin::Pin;

use logbook_storage::{LeaderEpoch, Offset};

use super::leader_end_point::{
    EndPointError, EpochRequest, EpochResult, FetchRequest, FetchedPartition, LeaderEndPoint,
};
use crate::TopicPartition;

/// A boxed future of a leader's answer.
pub type EndPointFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, EndPointError>> + Send + 'a>>;

/// [`LeaderEndPoint`] in object-safe form; every `LeaderEndPoint` is one.
pub trait DynLeaderEndPoint: Send {
    /// See [`LeaderEndPoint::broker_id`].
    fn broker_id(&self) -> i32;
    /// See [`LeaderEndPoint::fetch`].
    fn fetch(&mut self, request: FetchRequest) -> EndPointFuture<'_, Vec<FetchedPartition>>;
    /// See [`LeaderEndPoint::fetch_epoch_end_offsets`].
    fn fetch_epoch_end_offsets(
        &mut self,
        partitions: Vec<EpochRequest>,
    ) -> EndPointFuture<'_, Vec<EpochResult>>;
    /// See [`LeaderEndPoint::fetch_earliest_offset`].
    fn fetch_earliest_offset<'a>(
        &'a mut self,
        topic_partition: &'a TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> EndPointFuture<'a, Offset>;
    /// See [`LeaderEndPoint::fetch_latest_offset`].
    fn fetch_latest_offset<'a>(
        &'a mut self,
        topic_partition: &'a TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> EndPointFuture<'a, Offset>;
}

impl<E: LeaderEndPoint> DynLeaderEndPoint for E {
    fn broker_id(&self) -> i32 {
        LeaderEndPoint::broker_id(self)
    }

    fn fetch(&mut self, request: FetchRequest) -> EndPointFuture<'_, Vec<FetchedPartition>> {
        Box::pin(LeaderEndPoint::fetch(self, request))
    }

    fn fetch_epoch_end_offsets(
        &mut self,
        partitions: Vec<EpochRequest>,
    ) -> EndPointFuture<'_, Vec<EpochResult>> {
        Box::pin(LeaderEndPoint::fetch_epoch_end_offsets(self, partitions))
    }

    fn fetch_earliest_offset<'a>(
        &'a mut self,
        topic_partition: &'a TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> EndPointFuture<'a, Offset> {
        Box::pin(LeaderEndPoint::fetch_earliest_offset(
            self,
            topic_partition,
            current_leader_epoch,
        ))
    }

    fn fetch_latest_offset<'a>(
        &'a mut self,
        topic_partition: &'a TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> EndPointFuture<'a, Offset> {
        Box::pin(LeaderEndPoint::fetch_latest_offset(
            self,
            topic_partition,
            current_leader_epoch,
        ))
    }
}

/// A boxed end point is an end point.
pub struct BoxedLeaderEndPoint(pub Box<dyn DynLeaderEndPoint>);

impl LeaderEndPoint for BoxedLeaderEndPoint {
    fn broker_id(&self) -> i32 {
        self.0.broker_id()
    }

    fn fetch(
        &mut self,
        request: FetchRequest,
    ) -> impl Future<Output = Result<Vec<FetchedPartition>, EndPointError>> + Send {
        self.0.fetch(request)
    }

    fn fetch_epoch_end_offsets(
        &mut self,
        partitions: Vec<EpochRequest>,
    ) -> impl Future<Output = Result<Vec<EpochResult>, EndPointError>> + Send {
        self.0.fetch_epoch_end_offsets(partitions)
    }

    fn fetch_earliest_offset(
        &mut self,
        topic_partition: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> impl Future<Output = Result<Offset, EndPointError>> + Send {
        // The answer's future may not borrow the name (the trait's signature does not
        // tie its lifetime to the future's).
        let tp = topic_partition.clone();
        async move {
            self.0
                .fetch_earliest_offset(&tp, current_leader_epoch)
                .await
        }
    }

    fn fetch_latest_offset(
        &mut self,
        topic_partition: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> impl Future<Output = Result<Offset, EndPointError>> + Send {
        let tp = topic_partition.clone();
        async move { self.0.fetch_latest_offset(&tp, current_leader_epoch).await }
    }
}
