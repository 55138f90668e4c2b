//! Request quotas (Kafka's `ClientRequestQuotaManager`): `request_percentage` bounds the
//! time the broker spends on one user's or client id's requests, in percent of one
//! thread (`request_percentage=50`: half a thread's time). Each request's time is recorded
//! as a percentage against the quota's rate (the same 11 one-second samples as the byte
//! rates); a request that finds the rate over the quota is answered with
//! `throttle_time_ms` set and its connection muted for that long (KIP-219), never more
//! than one sample window (Kafka's `boundedThrottleTime`).
//!
//! Kafka counts the request thread's time. A Logbook request runs in two parts: the
//! ordered part (`handlers::dispatch`, on the connection's task) and the future it returns,
//! which may wait on fsyncs, replication or a fetch's `max_wait_ms`. The time counted is
//! the ordered part plus the time spent *polling* that future, not the time it waits, so
//! a long-polling fetch or an acks=all produce waiting on followers is not charged for
//! the wait, as Kafka does not charge purgatory time. The ordered part is charged at once
//! and decides the throttle; the future's share is charged when it completes, and so
//! counts toward the client's next requests (Kafka does the same with its network thread
//! time). A throttled fetch is answered without records, as Kafka answers it.
//!
//! Exempt, as in Kafka: requests between brokers (follower fetches, WriteTxnMarkers), the
//! SASL exchange, and acks=0 produces (which have no answer to carry a throttle time).
//!
//! Nothing is timed while no quota is set (one lock-free look at the image per request).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{RequestKind, ResponseKind};

use crate::broker::Broker;
use crate::client_quota_manager::{now_ms, Applied};
use crate::handlers::{RequestContext, Response, ResponseFuture};

/// Kafka's `NanosToPercentagePerSecond`: a second of one thread's time is 100 percent.
#[allow(clippy::cast_precision_loss)]
fn percentage(spent: Duration) -> f64 {
    spent.as_nanos() as f64 * 100.0 / 1e9
}

/// Whether Kafka leaves `body` out of the request quota.
fn exempt(body: &RequestKind) -> bool {
    match body {
        RequestKind::Fetch(fetch) => {
            fetch.replica_id.0 >= 0 || fetch.replica_state.replica_id.0 >= 0
        }
        RequestKind::Produce(produce) => produce.acks == 0,
        RequestKind::WriteTxnMarkers(_)
        | RequestKind::SaslHandshake(_)
        | RequestKind::SaslAuthenticate(_) => true,
        _ => false,
    }
}

/// The request quota that applies to the request `ctx` is about to run, if any (`None`
/// at once when no quota is set anywhere).
#[must_use]
pub fn applied(ctx: &RequestContext, body: &RequestKind) -> Option<Applied> {
    let applied = ctx.quota(&ctx.broker.quotas.request)?;
    (!exempt(body)).then_some(applied)
}

/// Charges the ordered part of a request (`spent`) to `applied`, mutes the connection for
/// the throttle time if the client is over its quota, and returns `response` wrapped so
/// that the time spent polling it is charged too and the answer carries the throttle time.
pub fn charge(
    ctx: &RequestContext,
    applied: Applied,
    spent: Duration,
    response: ResponseFuture,
) -> ResponseFuture {
    let throttle_ms = ctx
        .broker
        .quotas
        .request
        .record(&applied, percentage(spent), now_ms());
    ctx.throttle(throttle_ms);
    Box::pin(Charged {
        inner: response,
        broker: Arc::clone(&ctx.broker),
        applied,
        throttle_ms,
        polling: Duration::ZERO,
    })
}

/// A response future whose polling time is charged to a request quota when it completes.
struct Charged {
    inner: ResponseFuture,
    broker: Arc<Broker>,
    applied: Applied,
    throttle_ms: i32,
    polling: Duration,
}

impl Future for Charged {
    type Output = Option<Response>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let started = Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        self.polling += started.elapsed();
        let Poll::Ready(response) = polled else {
            return Poll::Pending;
        };
        // Charged, never throttled on: the decision was made when the request came in.
        let _ =
            self.broker
                .quotas
                .request
                .record(&self.applied, percentage(self.polling), now_ms());
        let throttle_ms = self.throttle_ms;
        Poll::Ready(response.map(|mut response| {
            if throttle_ms > 0 {
                throttle(&mut response, throttle_ms);
            }
            response
        }))
    }
}

/// Sets a throttled request's `throttle_time_ms` (the larger of the quotas' times when a
/// byte-rate quota throttled it too); a fetch is answered without records, as Kafka's.
fn throttle(response: &mut Response, ms: i32) {
    macro_rules! with_throttle_time {
        ($($api:ident),* $(,)?) => {
            match &mut response.body {
                ResponseKind::Fetch(fetch) => {
                    let ms = fetch.throttle_time_ms.max(ms);
                    *fetch = crate::handlers::fetch::throttled(std::mem::take(fetch), ms);
                    response.records = logbook_protocol::FileRecords::default();
                }
                $(ResponseKind::$api(body) => {
                    body.throttle_time_ms = body.throttle_time_ms.max(ms);
                })*
                // No throttle_time_ms to carry: the mute alone holds the client back.
                _ => {}
            }
        };
    }
    with_throttle_time!(
        Produce,
        ListOffsets,
        Metadata,
        OffsetCommit,
        OffsetFetch,
        FindCoordinator,
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        DescribeGroups,
        ListGroups,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        InitProducerId,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        DescribeTransactions,
        ListTransactions,
        DescribeConfigs,
        DeleteGroups,
        CreatePartitions,
        OffsetDelete,
        DeleteRecords,
        DescribeLogDirs,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        DescribeCluster,
        DescribeTopicPartitions,
        AlterConfigs,
        IncrementalAlterConfigs,
        DescribeProducers,
        OffsetForLeaderEpoch,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        DescribeClientQuotas,
        AlterClientQuotas,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{BrokerId, FetchRequest, MetadataRequest, ProduceRequest};

    #[test]
    fn a_second_of_one_thread_is_a_hundred_percent() {
        assert!((percentage(Duration::from_secs(1)) - 100.0).abs() < 1e-9);
        assert!((percentage(Duration::from_micros(50)) - 0.005).abs() < 1e-12);
    }

    #[test]
    fn kafkas_exemptions() {
        let follower = FetchRequest::default().with_replica_id(BrokerId(2));
        let consumer = FetchRequest::default().with_replica_id(BrokerId(-1));
        assert!(exempt(&RequestKind::Fetch(follower)));
        assert!(!exempt(&RequestKind::Fetch(consumer)));
        assert!(exempt(&RequestKind::Produce(
            ProduceRequest::default().with_acks(0)
        )));
        assert!(!exempt(&RequestKind::Produce(
            ProduceRequest::default().with_acks(-1)
        )));
        assert!(!exempt(&RequestKind::Metadata(MetadataRequest::default())));
    }
}
