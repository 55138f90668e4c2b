//! Where a follower truncates after the leader told it where an epoch ends (Kafka's
//! `AbstractFetcherThread.getOffsetTruncationState`, KIP-101 and KIP-279). Pure: the
//! inputs are the leader's answer and the follower's own epoch lookup.

use logbook_storage::{LeaderEpoch, Offset};

use super::leader_end_point::EpochEndOffset;

/// Where to truncate, and whether that is final.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OffsetTruncationState {
    /// Truncate the local log to this offset (everything at or above it goes).
    pub(crate) offset: Offset,
    /// `false`: the follower never had the leader's epoch; after truncating it must ask
    /// again with its (now smaller) latest epoch (the KIP-279 loop).
    pub(crate) complete: bool,
}

/// The truncation for a leader's `answer` about an epoch the follower asked for.
///
/// - Undefined end offset (the leader knows no epoch at or below the one asked): truncate
///   to the follower's high watermark, the only offset known committed.
/// - Undefined epoch with an end offset (an old leader): truncate to that offset.
/// - Otherwise `follower_floor` is the follower's own largest epoch at or below the
///   answer's, with where it ends here (`LeaderEpochFileCache::floor_end_offset`). Same epoch: both logs agree below the smaller of the two ends.
///   A smaller epoch: the follower never had the answer's epoch, so its data after its own
///   epoch ends is suspect; truncate there and ask again. None (no epochs here): the
///   leader's end.
///
/// Never above the follower's log end.
pub(crate) fn offset_truncation_state(
    answer: EpochEndOffset,
    follower_floor: Option<(LeaderEpoch, Offset)>,
    log_end: Offset,
    high_watermark: Offset,
) -> OffsetTruncationState {
    let complete = |offset: Offset| OffsetTruncationState {
        offset: offset.min(log_end),
        complete: true,
    };
    if answer.end_offset < 0 {
        return complete(high_watermark);
    }
    let leader_end = Offset(answer.end_offset);
    if answer.leader_epoch < 0 {
        return complete(leader_end);
    }
    match follower_floor {
        Some((epoch, end)) if epoch.0 != answer.leader_epoch => OffsetTruncationState {
            offset: end.min(log_end),
            complete: false,
        },
        Some((_, end)) => complete(end.min(leader_end)),
        None => complete(leader_end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(leader_epoch: i32, end_offset: i64) -> EpochEndOffset {
        EpochEndOffset {
            leader_epoch,
            end_offset,
        }
    }

    // Each branch of Kafka's getOffsetTruncationState, never past the log end.
    #[test]
    fn truncation_follows_kafkas_rules() {
        let end = Offset(50);
        let hw = Offset(20);
        let floor = |e: i32| match e {
            0..=2 => Some((LeaderEpoch(1), Offset(30))),
            3..=4 => Some((LeaderEpoch(3), Offset(45))),
            _ => Some((LeaderEpoch(5), end)),
        };
        let done = |offset| OffsetTruncationState {
            offset: Offset(offset),
            complete: true,
        };
        assert_eq!(
            offset_truncation_state(answer(-1, -1), floor(-1), end, hw),
            done(20)
        );
        assert_eq!(
            offset_truncation_state(answer(-1, 40), floor(-1), end, hw),
            done(40)
        );
        assert_eq!(
            offset_truncation_state(answer(3, 40), floor(3), end, hw),
            done(40)
        );
        assert_eq!(
            offset_truncation_state(answer(3, 48), floor(3), end, hw),
            done(45)
        );
        assert_eq!(
            offset_truncation_state(answer(5, 70), floor(5), end, hw),
            done(50)
        );
        assert_eq!(
            offset_truncation_state(answer(2, 40), floor(2), end, hw),
            OffsetTruncationState {
                offset: Offset(30),
                complete: false
            },
            "the follower never had epoch 2: truncate to where its epoch 1 ends, ask again"
        );
        assert_eq!(
            offset_truncation_state(answer(2, 40), None, end, hw),
            done(40)
        );
    }
}
