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
    // A target ISR without the alive current leader, nobody in it alive: UNCLEAN keeps the
    // leader (no epoch bump) alone in the ISR, never an ISR without its leader.
    let p = registration(&[0, 2, 3], &[2, 3], 3);
    let record = builder(&p, &[3])
        .with_target_isr(vec![2])
        .with_election(Election::Unclean)
        .build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            isr: Some(vec![3]),
            ..change()
        })
    );
    // ONLINE takes the partition offline instead.
    let record = builder(&p, &[3]).with_target_isr(vec![2]).build();
    assert_eq!(
        record,
        Some(PartitionChangeRecord {
            leader: Some(NO_LEADER),
            isr: Some(vec![2]),
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

/// A valid registration from random choices: replicas from 0..6, an ISR subset, a leader
/// in it (or none), a reassignment in progress or not.
fn arb_registration() -> impl proptest::strategy::Strategy<Value = PartitionRegistration> {
    use proptest::prelude::*;
    (
        proptest::sample::subsequence((0..6).collect::<Vec<BrokerId>>(), 1..=5).prop_shuffle(),
        any::<u8>(),
        any::<usize>(),
        0usize..3,
        0i32..5,
    )
        .prop_map(|(replicas, isr_mask, leader_pick, reassign, epoch)| {
            let mut isr: Vec<BrokerId> = replicas
                .iter()
                .copied()
                .enumerate()
                .filter(|(i, _)| isr_mask & (1 << i) != 0)
                .map(|(_, r)| r)
                .collect();
            if isr.is_empty() {
                isr.push(replicas[0]);
            }
            let leader = if leader_pick % 4 == 0 {
                NO_LEADER
            } else {
                isr[leader_pick % isr.len()]
            };
            let mut p = registration(&replicas, &isr, leader);
            p.leader_epoch = epoch;
            p.partition_epoch = epoch * 2;
            // A reassignment moving the last replica out (removing) and/or the first in
            // (adding), when there are at least two replicas.
            if replicas.len() >= 2 && reassign > 0 {
                p.removing_replicas = vec![replicas[replicas.len() - 1]];
                if reassign == 2 {
                    p.adding_replicas = vec![replicas[0]];
                }
            }
            p
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

    // For any valid registration, alive set, target ISR and election: the change (if any)
    // applies cleanly; a clean election picks an alive member of the target ISR; an unclean
    // one picks an alive replica and leaves it alone in the ISR; the ISR is never emptied;
    // epochs only grow, the leader epoch exactly when the leader field is set; and with no
    // change there is no record.
    #[test]
    fn builder_properties(
        p in arb_registration(),
        alive_mask in proptest::prelude::any::<u8>(),
        target_mask in proptest::prelude::any::<u8>(),
        election in proptest::prop_oneof![
            proptest::strategy::Just(Election::Online),
            proptest::strategy::Just(Election::Preferred),
            proptest::strategy::Just(Election::Unclean)
        ],
    ) {
        let alive = |b: BrokerId| alive_mask & (1 << b) != 0;
        let target: Vec<BrokerId> = p.isr.iter().copied().filter(|b| target_mask & (1 << b) != 0).collect();
        let Some(record) = PartitionChangeBuilder::new(&p, topic_id(1), 0, alive)
            .with_target_isr(target.clone())
            .with_election(election)
            .build()
        else {
            return Ok(());
        };
        proptest::prop_assert_eq!(record.partition_epoch, p.partition_epoch);
        let merged = p.merge(&record);
        proptest::prop_assert_eq!(merged.validate(topic_id(1), 0), Ok(()));
        proptest::prop_assert_ne!(&merged, &p);
        proptest::prop_assert_eq!(merged.partition_epoch, p.partition_epoch + 1);
        proptest::prop_assert_eq!(merged.leader_epoch, p.leader_epoch + i32::from(record.leader.is_some()));
        proptest::prop_assert!(!merged.isr.is_empty());
        if merged.leader != NO_LEADER && merged.leader != p.leader {
            proptest::prop_assert!(alive(merged.leader));
            if !target.contains(&merged.leader) {
                proptest::prop_assert_eq!(election, Election::Unclean);
                proptest::prop_assert_eq!(&merged.isr, &vec![merged.leader]);
                proptest::prop_assert_eq!(merged.leader_recovery_state, LeaderRecoveryState::Recovering);
            }
        }
        // The last ISR member stays unless an unclean election replaced it or a completed
        // reassignment removed it.
        if let [last] = p.isr.as_slice() {
            let completed = p.is_reassigning() && !merged.is_reassigning();
            proptest::prop_assert!(
                merged.isr.contains(last) || election == Election::Unclean || completed,
                "last ISR member {} removed: {:?} -> {:?}", last, p, merged
            );
        }
    }
}
