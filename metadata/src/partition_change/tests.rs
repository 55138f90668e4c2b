use super::*;
use crate::records::PartitionRecord;
use crate::test_support::topic_id;

fn registration(
    replicas: &[BrokerId],
    isr: &[BrokerId],
    leader: BrokerId,
) -> PartitionRegistration {
    PartitionRegistration::from_record(&PartitionRecord {
        topic_id: topic_id(1),
        partition_id: 0,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        removing_replicas: Vec::new(),
        adding_replicas: Vec::new(),
        leader,
        leader_epoch: 5,
        partition_epoch: 9,
        leader_recovery_state: LeaderRecoveryState::Recovered,
        elr: Vec::new(),
        last_known_elr: Vec::new(),
    })
}

fn builder<'a>(
    p: &'a PartitionRegistration,
    alive: &'a [BrokerId],
) -> PartitionChangeBuilder<'a, impl Fn(BrokerId) -> bool + 'a> {
    PartitionChangeBuilder::new(p, topic_id(1), 0, move |b| alive.contains(&b))
}

fn change() -> PartitionChangeRecord {
    PartitionChangeRecord {
        topic_id: topic_id(1),
        partition_id: 0,
        partition_epoch: 9,
        ..PartitionChangeRecord::default()
    }
}

// Nothing to change: no record (the controller writes nothing).
#[test]
fn no_change_is_none() {
    let p = registration(&[1, 2, 3], &[1, 2, 3], 1);
    assert_eq!(builder(&p, &[1, 2, 3]).build(), None);
    assert_eq!(
        builder(&p, &[1, 2, 3])
            .with_target_isr(vec![1, 2, 3])
            .build(),
        None
    );
}

// An ISR shrink keeps the leader and does not bump the leader epoch (metadata.version
// 3.6+, KAFKA-15021); applying it bumps only the partition epoch.
#[test]
fn isr_shrink_keeps_leader_epoch() {
    let p = registration(&[1, 2, 3], &[1, 2, 3], 1);
    let record = builder(&p, &[1, 2, 3]).with_target_isr(vec![1, 2]).build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            isr: Some(vec![1, 2]),
            ..change()
        })
    );
    let merged = p.merge(&record.expect("change"));
    assert_eq!(
        (merged.leader, merged.leader_epoch, merged.partition_epoch),
        (1, 5, 10)
    );
}

// Fencing the leader: it leaves the ISR, and ONLINE takes the first replica in assignment
// order that is in the new ISR and alive (not the first alive one outside the ISR).
#[test]
fn online_election_after_leader_fenced() {
    let p = registration(&[1, 2, 3], &[1, 3], 1);
    let record = builder(&p, &[2, 3]).with_target_isr(vec![3]).build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            leader: Some(3),
            isr: Some(vec![3]),
            ..change()
        })
    );
    let merged = p.merge(&record.expect("change"));
    assert_eq!(
        (merged.leader, merged.leader_epoch, merged.partition_epoch),
        (3, 6, 10)
    );
}

// The ISR is never emptied: fencing its last member leaves it in the ISR and the partition
// without a leader, so only that replica (which has every acknowledged record) can lead
// again.
#[test]
fn last_isr_member_is_kept_and_leader_goes_offline() {
    let p = registration(&[1, 2, 3], &[1], 1);
    let record = builder(&p, &[2, 3]).with_target_isr(vec![]).build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            leader: Some(NO_LEADER),
            ..change()
        })
    );
    let merged = p.merge(&record.expect("change"));
    assert_eq!(
        (merged.isr.clone(), merged.leader, merged.leader_epoch),
        (vec![1], NO_LEADER, 6)
    );
    // When broker 1 is back, an ONLINE election takes it (and only it).
    let back = builder(&merged, &[1, 2, 3]).build();
    assert_eq!(
        back,
        Some(PartitionChangeRecord {
            leader: Some(1),
            partition_epoch: 10,
            ..change()
        })
    );
    // While it is away, ONLINE elects nobody: no record.
    assert_eq!(builder(&merged, &[2, 3]).build(), None);
}

// UNCLEAN takes an alive replica outside the ISR only when no ISR member can lead, resets
// the ISR to it and marks it RECOVERING; ONLINE in the same state stays offline.
#[test]
fn unclean_election() {
    let p = registration(&[1, 2, 3], &[1], NO_LEADER);
    assert_eq!(builder(&p, &[2, 3]).build(), None);
    let record = builder(&p, &[2, 3])
        .with_election(Election::Unclean)
        .build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            leader: Some(2),
            isr: Some(vec![2]),
            leader_recovery_state: Some(LeaderRecoveryState::Recovering),
            ..change()
        })
    );
    // With an ISR member alive, UNCLEAN is a clean election.
    let p = registration(&[1, 2, 3], &[1, 3], 1);
    let record = builder(&p, &[2, 3])
        .with_target_isr(vec![3])
        .with_election(Election::Unclean)
        .build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            leader: Some(3),
            isr: Some(vec![3]),
            ..change()
        })
    );
    // A recovered leader's AlterPartition clears RECOVERING.
    let mut recovering = registration(&[1, 2, 3], &[2], 2);
    recovering.leader_recovery_state = LeaderRecoveryState::Recovering;
    let record = builder(&recovering, &[2])
        .with_target_leader_recovery_state(LeaderRecoveryState::Recovered)
        .build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            leader_recovery_state: Some(LeaderRecoveryState::Recovered),
            ..change()
        })
    );
}

// PREFERRED moves leadership to replicas[0] when it is in the ISR and alive; otherwise it
// keeps the current leader.
#[test]
fn preferred_election() {
    let p = registration(&[1, 2, 3], &[1, 2, 3], 2);
    assert_eq!(
        builder(&p, &[1, 2, 3]).build(),
        None,
        "ONLINE keeps a valid leader"
    );
    assert_eq!(
        builder(&p, &[1, 2, 3])
            .with_election(Election::Preferred)
            .build(),
        Some(PartitionChangeRecord {
            leader: Some(1),
            ..change()
        })
    );
    assert_eq!(
        builder(&p, &[2, 3])
            .with_election(Election::Preferred)
            .build(),
        None
    );
    let out_of_isr = registration(&[1, 2, 3], &[2, 3], 2);
    assert_eq!(
        builder(&out_of_isr, &[1, 2, 3])
            .with_election(Election::Preferred)
            .build(),
        None
    );
}

// Controlled shutdown: the shutting-down leader is not acceptable, so leadership moves
// even though it is still in the ISR.
#[test]
fn controlled_shutdown_moves_leadership() {
    let p = registration(&[1, 2, 3], &[1, 2, 3], 1);
    assert_eq!(
        builder(&p, &[2, 3]).build(),
        Some(PartitionChangeRecord {
            leader: Some(2),
            ..change()
        })
    );
}

// A reassignment completes once every target replica is in the ISR: the removing replicas
// leave replicas and ISR in one change, the leader moves off a removed replica, and the
// leader epoch is bumped even when the leader stays.
#[test]
fn reassignment_completion() {
    // Moving [1, 2, 3] to [2, 3, 4]: replicas = target + removing.
    let mut p = registration(&[2, 3, 4, 1], &[1, 2, 3], 1);
    p.adding_replicas = vec![4];
    p.removing_replicas = vec![1];
    // 4 not caught up yet: nothing completes.
    assert_eq!(builder(&p, &[1, 2, 3, 4]).build(), None);
    // 4 joins the ISR (the leader's AlterPartition): the reassignment completes.
    let record = builder(&p, &[1, 2, 3, 4])
        .with_target_isr(vec![1, 2, 3, 4])
        .build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            leader: Some(2),
            isr: Some(vec![2, 3, 4]),
            replicas: Some(vec![2, 3, 4]),
            removing_replicas: Some(vec![]),
            adding_replicas: Some(vec![]),
            ..change()
        })
    );
    // Removing a follower keeps the leader but still bumps its epoch (the removed
    // replica's fetches must be fenced).
    let mut p = registration(&[1, 2, 3], &[1, 2, 3], 1);
    p.removing_replicas = vec![3];
    let record = builder(&p, &[1, 2, 3]).build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            leader: Some(1),
            isr: Some(vec![1, 2]),
            replicas: Some(vec![1, 2]),
            removing_replicas: Some(vec![]),
            ..change()
        })
    );
    let merged = p.merge(&record.expect("change"));
    assert_eq!((merged.leader, merged.leader_epoch), (1, 6));
    // Only adding (growing RF): no replica leaves, no epoch bump.
    let mut p = registration(&[1, 2, 3], &[1, 2], 1);
    p.adding_replicas = vec![3];
    let record = builder(&p, &[1, 2, 3])
        .with_target_isr(vec![1, 2, 3])
        .build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            isr: Some(vec![1, 2, 3]),
            adding_replicas: Some(vec![]),
            ..change()
        })
    );
}
