//! DescribeQuorum (API 55, KIP-595/KIP-836): the state of the metadata log's replication as
//! the active controller sees it, for `kafka-metadata-quorum.sh describe --status` and
//! `--replication`. Voters are the Raft voters with the log end openraft has matched on each;
//! observers are the brokers that are not voters (broker-only nodes), with the metadata
//! offset their last heartbeat reported.
//!
//! Offsets follow Kafka's convention for a log: a log end offset and a high watermark are
//! one past the last entry (Raft index + 1). Timestamps are wall-clock milliseconds. openraft
//! reports no per-follower fetch times, so a voter's are the leader's last quorum
//! acknowledgement when it has matched the whole log, and -1 (unknown, as Kafka reports a
//! replica it never heard from) when it lags.

use std::time::{Duration, Instant, SystemTime};

use logbook_metadata::BrokerId;
use serde::{Deserialize, Serialize};

use super::{BrokerSessions, QuorumController, QuorumError};

/// One replica of the metadata log in a [`QuorumDescription`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaProgress {
    /// Its node id.
    pub node_id: BrokerId,
    /// One past the last entry it holds (-1: unknown).
    pub log_end_offset: i64,
    /// When it last fetched, in ms since the epoch (-1: unknown).
    pub last_fetch_timestamp: i64,
    /// When it was last caught up with the leader, in ms since the epoch (-1: unknown).
    pub last_caught_up_timestamp: i64,
}

/// The metadata quorum as the active controller sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumDescription {
    /// The active controller.
    pub leader_id: BrokerId,
    /// Its Raft term (Kafka's leader epoch of the metadata log).
    pub leader_epoch: i32,
    /// One past the last committed entry.
    pub high_watermark: i64,
    /// The voters, leader included.
    pub voters: Vec<ReplicaProgress>,
    /// Brokers that fetch the metadata log without voting.
    pub observers: Vec<ReplicaProgress>,
    /// Each voter's controller listener (host, port).
    pub endpoints: Vec<(BrokerId, String, u16)>,
}

use logbook_common::time::unix_ms as wall_ms;

fn end_of(index: Option<u64>) -> i64 {
    index.map_or(0, |i| {
        i64::try_from(i).unwrap_or(i64::MAX).saturating_add(1)
    })
}

impl QuorumController {
    /// DescribeQuorum (see the module docs).
    ///
    /// # Errors
    /// `NotController` unless this node leads.
    pub async fn describe_quorum(&self) -> Result<QuorumDescription, QuorumError> {
        let active = self.activate().await?;
        let metrics = self.raft.metrics().borrow().clone();
        let now = SystemTime::now();
        let now_ms = wall_ms(now);
        let leader = self.raft.node_id();
        let leader_end = end_of(metrics.last_log_index);
        let acked_ms = metrics.millis_since_quorum_ack.map_or(now_ms, |ago| {
            now_ms.saturating_sub(i64::try_from(ago).unwrap_or(0))
        });
        let matched = metrics.replication.clone().unwrap_or_default();
        let membership = metrics.membership_config.membership().clone();
        let voter_ids: Vec<u64> = membership.voter_ids().collect();
        let voters = voter_ids
            .iter()
            .map(|&id| {
                let node_id = BrokerId::try_from(id).unwrap_or(BrokerId::MAX);
                if id == leader {
                    return ReplicaProgress {
                        node_id,
                        log_end_offset: leader_end,
                        last_fetch_timestamp: now_ms,
                        last_caught_up_timestamp: now_ms,
                    };
                }
                let end = matched
                    .get(&id)
                    .map_or(-1, |log_id| end_of(log_id.map(|l| l.index)));
                let caught_up = end >= leader_end;
                ReplicaProgress {
                    node_id,
                    log_end_offset: end,
                    last_fetch_timestamp: if caught_up { acked_ms } else { -1 },
                    last_caught_up_timestamp: if caught_up { acked_ms } else { -1 },
                }
            })
            .collect();
        let observers = observer_progress(&active.sessions, &voter_ids, now, self.clock.now());
        // A sole voter binds no controller socket (a single node): no endpoint to show.
        let listening = self.raft.local_addr().is_some();
        let endpoints = voter_ids
            .iter()
            .filter(|_| listening)
            .filter_map(|id| {
                let node = membership.get_node(id)?;
                Some((BrokerId::try_from(*id).ok()?, node.host.clone(), node.port))
            })
            .collect();
        drop(active);
        Ok(QuorumDescription {
            leader_id: BrokerId::try_from(leader).unwrap_or(BrokerId::MAX),
            leader_epoch: i32::try_from(metrics.current_term).unwrap_or(i32::MAX),
            high_watermark: end_of(metrics.last_applied.map(|l| l.index)),
            voters,
            observers,
            endpoints,
        })
    }
}

/// The observers' progress: each broker with a session that is not a voter, its log
/// end one past the metadata offset its last heartbeat reported, and that heartbeat's
/// time (on the controller's clock `clock_now`, turned into wall time from `now`) as its
/// last fetch and catch-up (Kafka's observers in DescribeQuorum).
fn observer_progress(
    sessions: &BrokerSessions,
    voter_ids: &[u64],
    now: SystemTime,
    clock_now: Instant,
) -> Vec<ReplicaProgress> {
    sessions
        .iter()
        .filter(|(id, _)| u64::try_from(*id).map_or(true, |id| !voter_ids.contains(&id)))
        .map(|(node_id, session)| {
            let heard = session.last_heartbeat.map_or(-1, |at| {
                let ago = clock_now.saturating_duration_since(at);
                wall_ms(now.checked_sub(ago).unwrap_or(now - Duration::ZERO))
            });
            ReplicaProgress {
                node_id,
                log_end_offset: if session.metadata_offset < 0 {
                    -1
                } else {
                    session.metadata_offset.saturating_add(1)
                },
                last_fetch_timestamp: heard,
                last_caught_up_timestamp: heard,
            }
        })
        .collect()
}
