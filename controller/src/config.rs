//! Controller settings: who the voters are, where the log lives, Raft timings and network
//! limits. Defaults follow plan §1 and KRaft (`controller.quorum.election.timeout.ms`
//! 1000); tests shorten the timings, never the defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;

use openraft::SnapshotPolicy;

use crate::error::Error;
use crate::raft::types::ControllerNode;

/// Directory of the controller log inside the data dir (Kafka's name for it).
pub const CLUSTER_METADATA_DIR: &str = "__cluster_metadata-0";

/// Raft timings and snapshot policy.
#[derive(Clone, Debug)]
pub struct RaftTimings {
    /// Lower bound of the randomized election timeout. Default 1000 ms.
    pub election_timeout_min_ms: u64,
    /// Upper bound of the randomized election timeout. Default 2000 ms.
    pub election_timeout_max_ms: u64,
    /// Leader heartbeat (empty AppendEntries) interval. Default 500 ms.
    pub heartbeat_interval_ms: u64,
    /// Build a snapshot once this many entries were applied since the last. Default 20000.
    pub snapshot_since_last_entries: u64,
    /// Entries kept in the log behind the newest snapshot, so a follower slightly behind
    /// catches up from the log rather than by snapshot. Default 1000.
    pub logs_to_keep_after_snapshot: u64,
    /// Bytes of snapshot per InstallSnapshot request. Default 1 MiB.
    pub snapshot_chunk_bytes: u64,
    /// Timeout of one InstallSnapshot request. Default 5000 ms.
    pub install_snapshot_timeout_ms: u64,
    /// Most entries per AppendEntries request. Default 32.
    pub append_entries_max: u64,
}

impl Default for RaftTimings {
    fn default() -> Self {
        Self {
            election_timeout_min_ms: 1000,
            election_timeout_max_ms: 2000,
            heartbeat_interval_ms: 500,
            snapshot_since_last_entries: 20_000,
            logs_to_keep_after_snapshot: 1000,
            snapshot_chunk_bytes: 1 << 20,
            install_snapshot_timeout_ms: 5000,
            append_entries_max: 32,
        }
    }
}

/// Bounds of the controller listener and the peer connections.
#[derive(Clone, Debug)]
pub struct NetworkLimits {
    /// Largest frame read or written, checked from the length prefix before allocating.
    /// Must hold `append_entries_max` entries of `entry_bytes_max` and a JSON-encoded
    /// snapshot chunk (up to 4 bytes per byte). Default 64 MiB.
    pub frame_bytes_max: usize,
    /// Inbound connections served at once; more are closed on accept. Default 64.
    pub connections_max: usize,
    /// Requests queued per peer connection. Default 16.
    pub peer_queue_max: usize,
    /// Timeout of one connection attempt to a peer. Default 1000 ms.
    pub connect_timeout_ms: u64,
    /// First delay before dialing a peer again after a failed attempt; doubles per
    /// failure. Default 50 ms.
    pub reconnect_backoff_min_ms: u64,
    /// Largest reconnect delay. Default 2000 ms.
    pub reconnect_backoff_max_ms: u64,
    /// An inbound connection with no request for this long is closed. Default 60000 ms.
    pub connection_idle_ms: u64,
    /// Longest the listener works on one controller RPC before answering
    /// REQUEST_TIMED_OUT (Kafka's `request.timeout.ms`). Default 30000 ms.
    pub request_timeout_ms: u64,
}

impl Default for NetworkLimits {
    fn default() -> Self {
        Self {
            frame_bytes_max: 64 << 20,
            connections_max: 64,
            peer_queue_max: 16,
            connect_timeout_ms: 1000,
            reconnect_backoff_min_ms: 50,
            reconnect_backoff_max_ms: 2000,
            connection_idle_ms: 60_000,
            request_timeout_ms: 30_000,
        }
    }
}

/// Everything a controller node needs to start.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// This node's `node.id`; must be one of `voters`.
    pub node_id: u64,
    /// `controller.quorum.voters`: every voter's id and controller listener.
    pub voters: BTreeMap<u64, ControllerNode>,
    /// The node's data dir; the log goes to `<data_dir>/__cluster_metadata-0/`.
    pub data_dir: PathBuf,
    /// Raft timings and snapshot policy.
    pub timings: RaftTimings,
    /// Network bounds.
    pub limits: NetworkLimits,
    /// Controller log segment size. Default 64 MiB.
    pub segment_bytes: u64,
    /// Largest serialized entry. Default 1 MiB.
    pub entry_bytes_max: u32,
    /// TLS and SASL of the controller listener, both ways. PLAINTEXT by default.
    pub security: crate::net::security::NetworkSecurity,
}

impl ControllerConfig {
    /// A configuration with default timings and limits.
    #[must_use]
    pub fn new(node_id: u64, voters: BTreeMap<u64, ControllerNode>, data_dir: PathBuf) -> Self {
        Self {
            node_id,
            voters,
            data_dir,
            timings: RaftTimings::default(),
            limits: NetworkLimits::default(),
            segment_bytes: 64 << 20,
            entry_bytes_max: 1 << 20,
            security: crate::net::security::NetworkSecurity::default(),
        }
    }

    /// `<data_dir>/__cluster_metadata-0`.
    #[must_use]
    pub fn log_dir(&self) -> PathBuf {
        self.data_dir.join(CLUSTER_METADATA_DIR)
    }

    /// This node's own voter entry.
    ///
    /// # Errors
    /// `Config` if `node_id` is not a voter.
    pub fn own_node(&self) -> Result<&ControllerNode, Error> {
        self.voters.get(&self.node_id).ok_or_else(|| {
            Error::Config(format!(
                "node.id {} is not in controller.quorum.voters {:?}",
                self.node_id,
                self.voters.keys().collect::<Vec<_>>()
            ))
        })
    }

    /// openraft's configuration, validated, after checking that the largest request fits
    /// a frame (else a full AppendEntries or a snapshot chunk would close the connection
    /// every time it is sent, and the peer would never catch up).
    pub(crate) fn openraft_config(&self) -> Result<openraft::Config, Error> {
        let t = &self.timings;
        // Request header, JSON field names and log ids around the entries or chunk.
        const MARGIN_BYTES: u64 = 64 * 1024;
        let entries_bytes = t
            .append_entries_max
            .saturating_mul(u64::from(self.entry_bytes_max));
        // A chunk's bytes travel as a JSON array of numbers: up to 4 bytes per byte.
        let chunk_bytes = t.snapshot_chunk_bytes.saturating_mul(4);
        let needed = entries_bytes.max(chunk_bytes).saturating_add(MARGIN_BYTES);
        if (self.limits.frame_bytes_max as u64) < needed {
            return Err(Error::Config(format!(
                "frame_bytes_max {} is below the {needed} bytes that append_entries_max x \
                 entry_bytes_max or a snapshot chunk needs",
                self.limits.frame_bytes_max
            )));
        }
        openraft::Config {
            cluster_name: "logbook-controller".to_string(),
            election_timeout_min: t.election_timeout_min_ms,
            election_timeout_max: t.election_timeout_max_ms,
            heartbeat_interval: t.heartbeat_interval_ms,
            install_snapshot_timeout: t.install_snapshot_timeout_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(t.snapshot_since_last_entries),
            max_in_snapshot_log_to_keep: t.logs_to_keep_after_snapshot,
            snapshot_max_chunk_size: t.snapshot_chunk_bytes,
            max_payload_entries: t.append_entries_max,
            ..openraft::Config::default()
        }
        .validate()
        .map_err(|e| Error::Config(e.to_string()))
    }
}

/// Parses `controller.quorum.voters`: `id@host:port` entries separated by commas (an IPv6
/// host in brackets), as Kafka writes it.
///
/// # Errors
/// `Config` naming the entry that does not parse, or a repeated id.
pub fn parse_voters(voters: &str) -> Result<BTreeMap<u64, ControllerNode>, Error> {
    let mut out = BTreeMap::new();
    for entry in voters.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || {
            Error::Config(format!(
                "controller.quorum.voters entry {entry:?} is not id@host:port"
            ))
        };
        let (id, address) = entry.split_once('@').ok_or_else(bad)?;
        let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
        let id: u64 = id.parse().map_err(|_| bad())?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad());
        }
        if out.insert(id, ControllerNode::new(host, port)).is_some() {
            return Err(Error::Config(format!(
                "controller.quorum.voters names node {id} twice"
            )));
        }
    }
    if out.is_empty() {
        return Err(Error::Config(
            "controller.quorum.voters is empty".to_string(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Kafka's voter syntax parses, IPv6 included; malformed and duplicate entries are refused.
    #[test]
    fn voters_parse_as_kafka_writes_them() {
        let voters = parse_voters("1@localhost:9093, 2@10.0.0.2:9093,3@[::1]:9094").expect("parse");
        assert_eq!(voters[&1], ControllerNode::new("localhost", 9093));
        assert_eq!(voters[&2], ControllerNode::new("10.0.0.2", 9093));
        assert_eq!(voters[&3], ControllerNode::new("::1", 9094));
        assert_eq!(voters[&3].address(), "[::1]:9094");
        for bad in ["", "1@host", "x@h:1", "1@:9093", "1@h:70000", "1@h:1,1@h:2"] {
            assert!(parse_voters(bad).is_err(), "{bad:?} must not parse");
        }
    }

    // The defaults validate; a frame limit too small for a full AppendEntries is refused.
    #[test]
    fn frame_limit_must_hold_the_largest_request() {
        let voters = parse_voters("1@localhost:9093").expect("parse");
        let mut config = ControllerConfig::new(1, voters, PathBuf::from("/tmp"));
        config.openraft_config().expect("defaults are valid");
        config.limits.frame_bytes_max = 8 << 20;
        assert!(matches!(config.openraft_config(), Err(Error::Config(_))));
        config.timings.append_entries_max = 4;
        config
            .openraft_config()
            .expect("4 x 1 MiB entries fit 8 MiB frames");
    }
}
