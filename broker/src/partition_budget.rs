//! How many partitions this broker may host in total.
//!
//! Each partition keeps its active segment's log file open (one file descriptor; indexes
//! are read and written without keeping a descriptor, see ARCHITECTURE.md), so the
//! process's `RLIMIT_NOFILE` bounds the partition count together with the connections.
//! Without a bound, one CreateTopics asking for 100,000 partitions ran out of descriptors
//! half-way, and new connections were refused while it lasted. The limit is checked
//! before anything is created (`Topics`), so a refused request costs nothing.
//!
//! Memory is not the binding constraint: a partition's in-memory state (its indexes and
//! producer state) grows with the data written to it, not with the partition count.

use crate::config::Limits;

/// Descriptors kept for the broker itself beyond partitions and connections: the
/// listener, the flusher, metadata and checkpoint files, index files while a segment
/// rolls, and segment files held open by in-flight fetch responses.
pub const FD_HEADROOM: u64 = 512;

/// The partition limit in effect: `limits.partitions_max` when set (non-zero), else
/// derived from the descriptor budget after raising the soft `RLIMIT_NOFILE` to the
/// hard one (as the JVM does for Kafka): the limit less one descriptor per allowed
/// connection (`connections_max`) and [`FD_HEADROOM`] (see [`derive`]).
#[must_use]
pub fn partitions_max(limits: &Limits) -> u64 {
    if limits.partitions_max > 0 {
        return limits.partitions_max;
    }
    let nofile = raise_nofile_limit();
    let derived = derive(nofile, limits.connections_max);
    if derived < 1000 {
        tracing::warn!(
            nofile,
            connections_max = limits.connections_max,
            partitions_max = derived,
            "few file descriptors left for partitions; raise RLIMIT_NOFILE or lower --connections-max"
        );
    } else {
        tracing::info!(
            nofile,
            partitions_max = derived,
            "partition limit derived from RLIMIT_NOFILE"
        );
    }
    derived
}

/// Partitions that fit in `nofile` descriptors next to `connections_max` connections
/// and the broker's own headroom. On a small budget connections get at most half of it
/// and the headroom at most an eighth, so a broker with the default `connections_max`
/// under a 1024-descriptor limit can still host a few hundred partitions, as it could
/// before the limit existed (its connections then run out of descriptors first).
#[must_use]
pub fn derive(nofile: u64, connections_max: usize) -> u64 {
    let connections = u64::try_from(connections_max)
        .unwrap_or(u64::MAX)
        .min(nofile / 2);
    let headroom = FD_HEADROOM.min(nofile / 8);
    nofile.saturating_sub(connections).saturating_sub(headroom)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns the soft limit in
/// effect afterwards (unchanged if raising fails; `u64::MAX` when unlimited).
fn raise_nofile_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    #[expect(
        unsafe_code,
        reason = "getrlimit/setrlimit have no safe wrapper in libc or std"
    )]
    // SAFETY: `limit` is a valid, exclusively borrowed `rlimit` for the duration of each
    // call, which only reads or writes that struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
    }
    limit.rlim_cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_limit_leaves_room_for_connections_and_the_broker() {
        assert_eq!(derive(20_000, 10_000), 20_000 - 10_000 - FD_HEADROOM);
        assert_eq!(derive(1_048_576, 10_000), 1_048_576 - 10_000 - FD_HEADROOM);
        // A small budget: half to connections, an eighth to the broker.
        assert_eq!(derive(1024, 10_000), 1024 - 512 - 128);
        assert_eq!(derive(0, 10_000), 0);
    }
}
