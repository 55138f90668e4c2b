//! Model test of transactions: any interleaving of transactional batches, plain batches,
//! commits and aborts from several producers, with rolls and reopens (clean, crash, crash
//! with every producer snapshot deleted); the first unstable offset and the aborted
//! transactions (with their last stable offsets) always equal a simple model's.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::end_transaction_marker::{EndTransactionMarker, TxnResult};
use crate::test_util::transactional_batch;

const PRODUCERS: i64 = 3;

#[derive(Clone, Debug)]
enum Op {
    /// A transactional batch of `records` from producer `pid`.
    Txn {
        pid: i64,
        records: usize,
    },
    /// A batch without a producer.
    Plain {
        records: usize,
    },
    /// A marker for producer `pid`.
    End {
        pid: i64,
        abort: bool,
    },
    Reopen {
        clean: bool,
        drop_snapshots: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..PRODUCERS, 1usize..4).prop_map(|(pid, records)| Op::Txn { pid, records }),
        1 => (1usize..4).prop_map(|records| Op::Plain { records }),
        3 => (0..PRODUCERS, any::<bool>()).prop_map(|(pid, abort)| Op::End { pid, abort }),
        1 => (any::<bool>(), any::<bool>())
            .prop_map(|(clean, drop_snapshots)| Op::Reopen { clean, drop_snapshots }),
    ]
}

#[derive(Default)]
struct Model {
    end: i64,
    /// pid → first offset of its open transaction.
    open: BTreeMap<i64, i64>,
    aborted: Vec<AbortedTxn>,
    sequence: BTreeMap<i64, i32>,
}

impl Model {
    fn first_unstable(&self) -> Option<i64> {
        self.open.values().min().copied()
    }
}

fn remove_snapshots(dir: &Path) {
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            fs::remove_file(path).expect("remove snapshot");
        }
    }
}

fn run(ops: &[Op]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        segment_bytes: 400,
        ..LogConfig::default()
    };
    let mut log = Some(open(dir.path(), config.clone()));
    let mut model = Model::default();
    for op in ops {
        let l = log.as_mut().expect("log open");
        match op {
            Op::Txn { pid, records } => {
                let seq = model.sequence.entry(*pid).or_insert(0);
                let b = transactional_batch(*records, *pid, 0, *seq);
                l.append(&b, 0).expect("append");
                *seq += i32::try_from(*records).expect("small");
                model.open.entry(*pid).or_insert(model.end);
                model.end += *records as i64;
            }
            Op::Plain { records } => {
                let b = crate::test_util::batch(*records, 4, 1_000);
                l.append(&b, 0).expect("append");
                model.end += *records as i64;
            }
            Op::End { pid, abort } => {
                let result = if *abort {
                    TxnResult::Abort
                } else {
                    TxnResult::Commit
                };
                let marker = EndTransactionMarker {
                    result,
                    coordinator_epoch: 0,
                };
                let info = l.append_txn_marker(*pid, 0, marker, 0).expect("marker");
                assert_eq!(info.first_offset.get(), model.end);
                if let Some(first) = model.open.remove(pid) {
                    if *abort {
                        model.aborted.push(AbortedTxn {
                            producer_id: *pid,
                            first_offset: first,
                            last_offset: model.end,
                            last_stable_offset: model.first_unstable().unwrap_or(model.end + 1),
                        });
                    }
                }
                model.end += 1;
            }
            Op::Reopen {
                clean,
                drop_snapshots,
            } => {
                let taken = log.take().expect("log open");
                if *clean {
                    taken.close().expect("close");
                } else {
                    drop(taken);
                }
                if *drop_snapshots {
                    remove_snapshots(dir.path());
                }
                log = Some(open(dir.path(), config.clone()));
            }
        }
        let l = log.as_mut().expect("log open");
        let end = l.log_end_offset();
        assert_eq!(end.get(), model.end);
        assert_eq!(
            l.first_unstable_offset(end).map(Offset::get),
            model.first_unstable(),
            "after {op:?}"
        );
        assert_eq!(
            l.collect_aborted_transactions(Offset(0), end),
            model.aborted,
            "after {op:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn transactions_match_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        run(&ops);
    }
}
