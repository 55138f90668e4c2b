//! The divergence model: three replicas of one partition driven through the fetcher by
//! random produces, fetch rounds, leader changes and crashes that lose a leader's
//! uncommitted tail, and process restarts that recover a replica's log from disk. Every
//! replica is in the ISR, so the leader's high watermark is the smallest fetch offset of
//! all followers and any replica may be elected. Checked after
//! every step: no replica ever holds anything but the committed bytes below the highest
//! high watermark reached (offsets below the committed point never change); at the end,
//! once everyone caught up, all three logs are byte-identical with the same epochs.

use std::sync::Arc;

use logbook_storage::{LeaderEpoch, Offset};
use parking_lot::Mutex;
use proptest::prelude::*;
use uuid::Uuid;

use super::super::{FetcherConfig, InitialFetchState, ReplicaFetcher};
use super::support::{batch, FlushMode, InMemoryLeader, LeaderState, Replica};

const REPLICAS: usize = 3;

#[derive(Clone, Debug)]
enum Step {
    /// The leader appends a batch of this many records.
    Produce(usize),
    /// This replica's fetcher runs this many rounds (nothing if it leads).
    Fetch(usize, usize),
    /// This replica becomes leader in a new epoch.
    Elect(usize),
    /// The leader loses its last `n` batches above the committed point (a crash that
    /// lost unsynced data, or an unclean restart), then a new epoch starts with the
    /// replica `to` leading.
    Crash { lose: usize, to: usize },
    /// This replica's process restarts: its log is recovered from disk (no clean
    /// shutdown). A restarted leader loses leadership to itself in a new epoch; a
    /// follower gets a fresh fetcher.
    Restart(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1usize..4).prop_map(Step::Produce),
        5 => (0..REPLICAS, 1usize..3).prop_map(|(r, n)| Step::Fetch(r, n)),
        2 => (0..REPLICAS).prop_map(Step::Elect),
        1 => (1usize..3, 0..REPLICAS).prop_map(|(lose, to)| Step::Crash { lose, to }),
        1 => (0..REPLICAS).prop_map(Step::Restart),
    ]
}

type Fetcher = ReplicaFetcher<InMemoryLeader, Replica>;

struct Cluster {
    replicas: Vec<Arc<Replica>>,
    leader_index: usize,
    epoch: i32,
    leader: Arc<Mutex<LeaderState>>,
    fetchers: Vec<Option<Fetcher>>,
    /// The highest high watermark reached and the leader's bytes below it then.
    committed: Offset,
    committed_bytes: Vec<u8>,
}

impl Cluster {
    fn new(dir: &std::path::Path) -> Self {
        let replicas: Vec<_> = (0..REPLICAS)
            .map(|i| Replica::open(&dir.join(format!("r{i}")), FlushMode::Inline))
            .collect();
        let leader = LeaderState::new(Arc::clone(&replicas[0]), 1, vec![]);
        let mut cluster = Self {
            replicas,
            leader_index: 0,
            epoch: 1,
            leader,
            fetchers: Vec::new(),
            committed: Offset(0),
            committed_bytes: Vec::new(),
        };
        cluster.elect(0);
        cluster
    }

    /// `index` leads in a new epoch; every other replica gets a fresh fetcher for it (the
    /// partition moves to the new leader's fetcher, as Kafka's fetcher manager does).
    fn elect(&mut self, index: usize) {
        self.epoch += 1;
        self.leader_index = index;
        let followers = (0..REPLICAS as i32)
            .filter(|&i| i as usize != index)
            .collect();
        self.leader = LeaderState::new(Arc::clone(&self.replicas[index]), self.epoch, followers);
        self.fetchers = (0..REPLICAS)
            .map(|i| (i != index).then(|| self.follower_fetcher(i)))
            .collect();
    }

    fn follower_fetcher(&self, i: usize) -> Fetcher {
        let endpoint = InMemoryLeader::new(&self.leader, i as i32, &self.replicas[i]);
        let mut fetcher = ReplicaFetcher::new(endpoint, FetcherConfig::default());
        fetcher
            .add_partitions(vec![InitialFetchState {
                log: Arc::clone(&self.replicas[i]),
                topic_id: Uuid::nil(),
                current_leader_epoch: LeaderEpoch(self.epoch),
            }])
            .expect("add");
        fetcher
    }

    fn leader_replica(&self) -> &Arc<Replica> {
        &self.replicas[self.leader_index]
    }

    async fn apply(&mut self, step: &Step) {
        match *step {
            Step::Produce(records) => {
                let epoch = self.epoch;
                self.leader_replica()
                    .append_as_leader(&batch(records, None), epoch);
            }
            Step::Fetch(index, rounds) => {
                if let Some(fetcher) = self.fetchers[index].as_mut() {
                    for _ in 0..rounds {
                        fetcher.do_work().await;
                    }
                }
            }
            Step::Elect(index) => self.elect(index),
            Step::Crash { lose, to } => {
                let leader = Arc::clone(self.leader_replica());
                let bases = leader.batch_bases(self.committed);
                if let Some(&cut) = bases
                    .len()
                    .checked_sub(lose)
                    .and_then(|i| bases.get(i))
                    .or(bases.first())
                {
                    leader.truncate(Offset(cut));
                }
                self.elect(to);
            }
            Step::Restart(index) => {
                self.replicas[index].restart();
                if index == self.leader_index {
                    self.elect(index);
                } else {
                    self.fetchers[index] = Some(self.follower_fetcher(index));
                }
            }
        }
        self.note_committed();
    }

    /// Records a higher high watermark with the leader's bytes below it; those bytes must
    /// extend the previous committed bytes.
    fn note_committed(&mut self) {
        let hw = self.leader_replica().hw();
        if hw <= self.committed {
            return;
        }
        let bytes = self.leader_replica().bytes_below(hw);
        assert!(
            bytes.starts_with(&self.committed_bytes),
            "committed bytes below {} changed when the high watermark reached {hw}",
            self.committed
        );
        self.committed = hw;
        self.committed_bytes = bytes;
    }

    fn check_committed(&self) {
        for (i, replica) in self.replicas.iter().enumerate() {
            let end = replica.end();
            let below = replica.bytes_below(self.committed);
            if end >= self.committed {
                assert_eq!(
                    below, self.committed_bytes,
                    "replica {i} lost or changed committed data below {}",
                    self.committed
                );
            } else {
                assert!(
                    self.committed_bytes.starts_with(&below),
                    "replica {i} (log end {end}) holds data that differs from the committed log"
                );
            }
        }
    }

    /// Runs every follower until all logs end where the leader's does.
    async fn converge(&mut self) {
        for _ in 0..50 {
            for fetcher in self.fetchers.iter_mut().flatten() {
                fetcher.do_work().await;
            }
            self.note_committed();
            self.check_committed();
            let end = self.leader_replica().end();
            let caught_up = self.replicas.iter().all(|r| r.end() == end);
            let hw = self.leader_replica().hw();
            if caught_up && hw == end {
                return;
            }
        }
        let ends: Vec<_> = self.replicas.iter().map(|r| r.end()).collect();
        panic!("replicas did not converge: log ends {ends:?}");
    }
}

/// The epoch cache without a last epoch that wrote nothing yet (a leader records its
/// epoch's start when elected; followers learn epochs from batches).
fn epochs_with_data(replica: &Replica) -> Vec<(i32, i64)> {
    let mut epochs = replica.epochs();
    if epochs
        .last()
        .is_some_and(|&(_, start)| start == replica.end().get())
    {
        epochs.pop();
    }
    epochs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn logs_converge_and_committed_offsets_never_change(steps in proptest::collection::vec(step(), 1..40)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        runtime.block_on(async {
            let mut cluster = Cluster::new(dir.path());
            for step in &steps {
                cluster.apply(step).await;
                cluster.check_committed();
            }
            cluster.converge().await;
            let leader = Arc::clone(cluster.leader_replica());
            let expected = leader.bytes_below(Offset::MAX);
            for (i, replica) in cluster.replicas.iter().enumerate() {
                assert_eq!(replica.bytes_below(Offset::MAX), expected, "replica {i} differs from the leader");
                assert_eq!(epochs_with_data(replica), epochs_with_data(&leader), "replica {i}'s epochs differ");
            }
            assert!(expected.starts_with(&cluster.committed_bytes));
        });
    }
}
