//! Model test: random appends, reads, truncations, DeleteRecords and reopens (clean or
//! crash) against a `Vec` of batches, sled's `fuzz_model` style. Small segments make
//! rolls frequent so reads and recovery cross segment boundaries.

use proptest::prelude::*;

use super::*;

#[derive(Clone, Debug)]
enum Op {
    /// Append batches of (records, value bytes).
    Append(Vec<(usize, usize)>),
    /// Read at a fraction (per mille) of the readable range.
    Read {
        at: u16,
        max_bytes: usize,
        min_one_batch: bool,
        hw_back: u8,
    },
    TruncateTo {
        at: u16,
    },
    DeleteRecordsBefore {
        at: u16,
    },
    Reopen {
        clean: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop::collection::vec((1usize..6, 0usize..300), 1..4).prop_map(Op::Append),
        4 => (0u16..1000, 1usize..3000, any::<bool>(), 0u8..3)
            .prop_map(|(at, max_bytes, min_one_batch, hw_back)| Op::Read { at, max_bytes, min_one_batch, hw_back }),
        1 => (0u16..1000).prop_map(|at| Op::TruncateTo { at }),
        1 => (0u16..1000).prop_map(|at| Op::DeleteRecordsBefore { at }),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

/// The model: batches as stored (offsets assigned), plus log start and end.
struct Model {
    batches: Vec<(i64, Vec<u8>)>,
    start: i64,
    end: i64,
}

impl Model {
    fn pick(&self, at: u16) -> i64 {
        self.start + (self.end - self.start) * i64::from(at) / 1000
    }

    /// Expected `read` output, per the contract in `Log::read`.
    fn read(&self, offset: i64, max_bytes: usize, max_offset: i64, min_one: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let eligible = self.batches.iter().filter(|(_, b)| {
            let h = RecordBatchHeader::parse(b).expect("model batch");
            h.last_offset() >= offset
        });
        for (i, (_, b)) in eligible.enumerate() {
            let h = RecordBatchHeader::parse(b).expect("model batch");
            if h.last_offset() >= max_offset {
                break;
            }
            if out.len() + b.len() > max_bytes {
                if i == 0 && min_one {
                    out.extend(b);
                }
                break;
            }
            out.extend(b);
        }
        out
    }
}

fn run(config: LogConfig, ops: Vec<Op>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Some(Log::open(dir.path(), config.clone()).expect("open"));
    let mut model = Model {
        batches: Vec::new(),
        start: 0,
        end: 0,
    };
    for op in ops {
        let l = log.as_mut().expect("log is open between ops");
        match op {
            Op::Append(specs) => {
                let mut buf = Vec::new();
                for (records, value) in specs {
                    buf.extend(batch(records, value, model.end));
                }
                let info = l
                    .append(&buf, 1)
                    .expect("append")
                    .appended()
                    .expect("appended");
                assert_eq!(info.first_offset, model.end);
                assign_offsets(&mut buf, info.first_offset.get(), 1);
                for (p, h) in iter_headers(&buf) {
                    model
                        .batches
                        .push((h.base_offset, buf[p..p + h.total_bytes()].to_vec()));
                }
                model.end = info.log_end_offset.get();
            }
            Op::Read {
                at,
                max_bytes,
                min_one_batch,
                hw_back,
            } => {
                let offset = model.pick(at);
                let max_offset = model.end - i64::from(hw_back);
                let got = l
                    .read(Offset(offset), max_bytes, Offset(max_offset), min_one_batch)
                    .expect("read");
                assert_eq!(
                    (got.log_start_offset.get(), got.log_end_offset.get()),
                    (model.start, model.end)
                );
                let want = model.read(offset, max_bytes, max_offset, min_one_batch);
                assert_eq!(
                    got.records.len(),
                    want.len(),
                    "read at {offset} max {max_bytes} hw {max_offset}"
                );
                assert!(got.records[..] == want[..], "read bytes differ at {offset}");
            }
            Op::TruncateTo { at } => {
                let offset = model.pick(at);
                l.truncate_to(Offset(offset)).expect("truncate");
                if offset < model.end {
                    let last_of = |b: &Vec<u8>| {
                        RecordBatchHeader::parse(b)
                            .expect("model batch")
                            .last_offset()
                    };
                    let cut = model.batches.partition_point(|(_, b)| last_of(b) < offset);
                    let new_end = model.batches.get(cut).map_or(model.end, |(base, _)| *base);
                    if offset < model.start || new_end < model.start {
                        model.batches.clear();
                        model.start = offset;
                        model.end = offset;
                    } else {
                        model.batches.truncate(cut);
                        model.end = new_end;
                    }
                }
                assert_eq!(l.log_end_offset(), model.end);
                assert_eq!(l.log_start_offset(), model.start);
            }
            Op::DeleteRecordsBefore { at } => {
                let offset = model.pick(at);
                l.delete_records_before(Offset(offset))
                    .expect("delete records");
                model.start = model.start.max(offset);
                assert_eq!(l.log_start_offset(), model.start);
            }
            Op::Reopen { clean } => {
                let old = log.take().expect("open");
                if clean {
                    old.close().expect("close");
                } else {
                    drop(old);
                }
                let l = Log::open(dir.path(), config.clone()).expect("reopen");
                assert_eq!(
                    l.log_end_offset(),
                    model.end,
                    "log end after reopen (clean {clean})"
                );
                assert_eq!(
                    l.log_start_offset(),
                    model.start,
                    "log start after reopen (clean {clean})"
                );
                log = Some(l);
            }
        }
    }
    let l = log.as_ref().expect("open");
    let want = model.read(model.start, usize::MAX, i64::MAX, true);
    let got = l
        .read(Offset(model.start), usize::MAX, Offset::MAX, true)
        .expect("read all");
    assert!(got.records[..] == want[..], "final contents differ");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    // The log behaves like the model under any sequence of operations.
    #[test]
    fn log_matches_model(
        segment_bytes in 300u64..4000,
        index_interval_bytes in 0u32..600,
        ops in prop::collection::vec(op(), 1..40),
    ) {
        run(LogConfig { segment_bytes, index_interval_bytes, ..LogConfig::default() }, ops);
    }
}
