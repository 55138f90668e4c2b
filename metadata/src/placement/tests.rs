use super::*;

// Kafka's own example (AdminUtilsTest.testReplicaAssignment, also the rack-unaware
// example in its docs): 5 brokers, 10 partitions, RF 3, fixed start index 0.
#[test]
fn kafka_five_brokers_ten_partitions_rf3() {
    let got = assign(10, 3, &[0, 1, 2, 3, 4], 0, PlacementStart::fixed(0)).expect("assign");
    let expected: Vec<Vec<BrokerId>> = vec![
        vec![0, 1, 2],
        vec![1, 2, 3],
        vec![2, 3, 4],
        vec![3, 4, 0],
        vec![4, 0, 1],
        vec![0, 2, 3],
        vec![1, 3, 4],
        vec![2, 4, 0],
        vec![3, 0, 1],
        vec![4, 1, 2],
    ];
    assert_eq!(got, expected);
}

// Broker ids need not be contiguous or sorted: placement works on the sorted ids, and the
// follower shift grows after each round of n partitions.
#[test]
fn sparse_unsorted_broker_ids() {
    let got = assign(6, 2, &[7, 1, 3], 0, PlacementStart::fixed(0)).expect("assign");
    assert_eq!(
        got,
        vec![
            vec![1, 3],
            vec![3, 7],
            vec![7, 1],
            vec![1, 7],
            vec![3, 1],
            vec![7, 3],
        ]
    );
}

// A start index moves the first replica of partition 0 (Kafka's fixedStartIndex moves
// both starting points). A CreatePartitions starts at the current count: first replicas
// continue the round-robin, but the follower shift restarts from the given start and only
// grows at the next multiple of n, exactly as Kafka's startPartitionId does.
#[test]
fn start_index_and_first_partition_id() {
    let got = assign(3, 3, &[0, 1, 2, 3, 4], 0, PlacementStart::fixed(2)).expect("assign");
    // shift 2: followers 1 + (2 + j) % 4 = 3, 4 places after the first replica.
    assert_eq!(got, vec![vec![2, 0, 1], vec![3, 1, 2], vec![4, 2, 3]]);
    let tail = assign(5, 3, &[0, 1, 2, 3, 4], 6, PlacementStart::fixed(0)).expect("assign");
    assert_eq!(
        tail,
        vec![
            vec![1, 2, 3],
            vec![2, 3, 4],
            vec![3, 4, 0],
            vec![4, 0, 1],
            // Partition 10 starts a new round: shift 1.
            vec![0, 2, 3],
        ]
    );
}

// Kafka's checks: partitions and replication factor above 0, RF at most the usable brokers.
#[test]
fn invalid_partitions_and_replication_factor() {
    assert_eq!(
        assign(0, 1, &[0], 0, PlacementStart::default()),
        Err(Error::InvalidPartitions { partitions: 0 })
    );
    assert_eq!(
        assign(10, 0, &[0, 1], 0, PlacementStart::default()),
        Err(Error::InvalidReplicationFactor {
            replication_factor: 0,
            usable_brokers: 2
        })
    );
    assert_eq!(
        assign(10, 6, &[0, 1, 2, 3, 4], 0, PlacementStart::default()),
        Err(Error::InvalidReplicationFactor {
            replication_factor: 6,
            usable_brokers: 5
        })
    );
    assert_eq!(
        assign(1, 1, &[], 0, PlacementStart::default()),
        Err(Error::InvalidReplicationFactor {
            replication_factor: 1,
            usable_brokers: 0
        })
    );
    // Duplicates in the broker list do not count twice.
    assert_eq!(
        assign(1, 2, &[4, 4], 0, PlacementStart::default()),
        Err(Error::InvalidReplicationFactor {
            replication_factor: 2,
            usable_brokers: 1
        })
    );
}

proptest::proptest! {
    // Leaders spread evenly (counts differ by at most one), a partition never has two
    // replicas on one broker, and whole rounds of n partitions give every broker exactly
    // rf replicas per round, for any starting points.
    #[test]
    fn leaders_and_replicas_spread_evenly(
        n in 1usize..8,
        rounds in 0usize..4,
        extra in 0usize..8,
        rf_seed in 0usize..8,
        start_index in 0usize..100,
        replica_shift in 0usize..100,
    ) {
        let brokers: Vec<BrokerId> = (0..n).map(|b| i32::try_from(b * 10).expect("small")).collect();
        let rf = 1 + rf_seed % n;
        let partitions = (rounds * n + extra % n).max(1);
        let start = PlacementStart { start_index, replica_shift };
        let got = assign(
            i32::try_from(partitions).expect("small"),
            i16::try_from(rf).expect("small"),
            &brokers,
            0,
            start,
        ).expect("assign");
        proptest::prop_assert_eq!(got.len(), partitions);
        let mut leaders = vec![0usize; n];
        for replicas in &got {
            proptest::prop_assert_eq!(replicas.len(), rf);
            let mut sorted = replicas.clone();
            sorted.sort_unstable();
            sorted.dedup();
            proptest::prop_assert_eq!(sorted.len(), rf, "duplicate replica in {:?}", replicas);
            let leader = usize::try_from(replicas[0] / 10).expect("id");
            leaders[leader] += 1;
        }
        let max = leaders.iter().max().copied().unwrap_or(0);
        let min = leaders.iter().min().copied().unwrap_or(0);
        proptest::prop_assert!(max - min <= 1, "leaders {:?}", leaders);
        if partitions % n == 0 {
            let mut replicas_per_broker = vec![0usize; n];
            for r in got.iter().flatten() {
                replicas_per_broker[usize::try_from(*r / 10).expect("id")] += 1;
            }
            let want = partitions / n * rf;
            proptest::prop_assert!(replicas_per_broker.iter().all(|c| *c == want), "{:?}", replicas_per_broker);
        }
    }
}
