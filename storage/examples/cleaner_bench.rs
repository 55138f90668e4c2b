//! Log cleaner throughput: builds a compacted log of `--gib` GiB (default 1) whose keys
//! are 10% live (every key written 10 times, 1 KiB values, 16 records per batch,
//! uncompressed, 100 MiB segments), then runs one cleaner pass over it and prints MB/s
//! of log compacted, CPU-seconds per GB and the process's peak RSS.
//!
//! Back of the envelope before measuring: a pass reads the dirty section twice (map,
//! then rewrite) and writes about 10% of it, so ~2.1 GB of I/O per GB; from the page
//! cache a pass is CPU bound on record parsing + hashing (~1-2 GB/s for 1 KiB records),
//! so expect a few hundred MB/s of log compacted per core and ~1-3 CPU-s per GB. Peak
//! memory should be the pass's offset map (24 bytes a slot, one slot per dirty offset
//! over the load factor: ~28 MiB for 1 GiB of 1 KiB records, capped by the 128 MiB
//! dedupe buffer) plus a 1 MiB read chunk.
//!
//! Run: `cargo run --release -p logbook-storage --example cleaner_bench [-- --gib 1]`.

use std::time::Instant;

use logbook_storage::cleaner::{self, Cleaner, CleanerConfig};
use logbook_storage::{CompactionConfig, Log, LogConfig};

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
}

/// One uncompressed v2 batch of `keys` with `value_bytes`-byte values.
fn batch(keys: &[u64], value_bytes: usize, timestamp: i64) -> Vec<u8> {
    let mut records = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let key = format!("key-{key:012}");
        let mut record = vec![0u8];
        put_varint(&mut record, 0);
        put_varint(&mut record, i as i64);
        put_varint(&mut record, key.len() as i64);
        record.extend(key.as_bytes());
        put_varint(&mut record, value_bytes as i64);
        record.extend(std::iter::repeat_n(b'v', value_bytes));
        put_varint(&mut record, 0);
        put_varint(&mut records, record.len() as i64);
        records.extend(record);
    }
    let mut out = Vec::with_capacity(61 + records.len());
    out.extend(0i64.to_be_bytes());
    out.extend(0i32.to_be_bytes());
    out.extend(0i32.to_be_bytes());
    out.push(2);
    out.extend(0u32.to_be_bytes());
    out.extend(0i16.to_be_bytes());
    out.extend((keys.len() as i32 - 1).to_be_bytes());
    out.extend(timestamp.to_be_bytes());
    out.extend(timestamp.to_be_bytes());
    out.extend((-1i64).to_be_bytes());
    out.extend((-1i16).to_be_bytes());
    out.extend((-1i32).to_be_bytes());
    out.extend((keys.len() as i32).to_be_bytes());
    out.extend(records);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

fn rusage() -> (f64, i64) {
    // SAFETY: getrusage writes a plain C struct we own.
    #[expect(unsafe_code, reason = "getrusage has no safe wrapper in std")]
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime) + secs(usage.ru_stime), usage.ru_maxrss)
}

/// Builds the benchmark's log in `dir`: `gib` GiB of 1 KiB records whose keys are 10%
/// live, all in closed, durable segments, so the pass that follows has it all to clean.
fn build_log(dir: &std::path::Path, gib: f64, now: i64) -> Log {
    let config = LogConfig {
        segment_bytes: 100 << 20,
        compaction: CompactionConfig {
            compact: true,
            min_cleanable_dirty_ratio: 0.0,
            ..CompactionConfig::default()
        },
        ..LogConfig::default()
    };
    let mut log = Log::open(dir, config).expect("open");
    let value_bytes = 1000;
    let record_bytes = 1024_u64;
    let total_records = (gib * f64::from(1u32 << 30)) as u64 / record_bytes;
    let live_keys = total_records / 10;
    let written = Instant::now();
    let mut next = 0_u64;
    while next < total_records {
        let keys: Vec<u64> = (next..(next + 16).min(total_records))
            .map(|i| i % live_keys)
            .collect();
        next += keys.len() as u64;
        log.append_at(&batch(&keys, value_bytes, now), 0, now)
            .expect("append");
    }
    // One more batch so everything above is in closed segments.
    log.append_at(&batch(&[u64::MAX], value_bytes, now), 0, now)
        .expect("append");
    let handle = log.sync_handle().expect("sync handle");
    log.mark_durable(handle.sync().expect("sync"));
    let log_bytes = log.size_bytes();
    let segments_before = log.segment_count();
    eprintln!(
        "built {:.2} GiB, {segments_before} segments, {total_records} records, {live_keys} keys in {:.1}s",
        log_bytes as f64 / f64::from(1u32 << 30),
        written.elapsed().as_secs_f64()
    );
    log
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let gib: f64 = args
        .iter()
        .position(|a| a == "--gib")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    let dir = tempfile::tempdir().expect("tempdir");
    let now = 1_700_000_000_000;
    let mut log = build_log(dir.path(), gib, now);
    let segments_before = log.segment_count();

    let (cpu_before, rss_before) = rusage();
    let started = Instant::now();
    let mut cleaner = Cleaner::new(CleanerConfig::default());
    let job = log
        .cleaning_job(now + 1, logbook_storage::Offset::MAX, -1, false)
        .expect("a pass is due");
    let result = cleaner.clean(&job, now + 1).expect("clean");
    cleaner::write_checkpoint(dir.path(), result.cleaned_to).expect("checkpoint");
    for segment in result.segments {
        assert!(log.replace_with_cleaned(segment).expect("swap"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (cpu_after, rss_after) = rusage();
    let cleaned = job.bytes() as f64;
    let cpu = cpu_after - cpu_before;
    println!(
        "cleaner: {:.0} MB of log compacted in {elapsed:.2}s = {:.1} MB/s; {:.2} CPU-s/GB; \
         {} -> {} segments, {:.1} MB after; records {} -> {}; map entries {}; \
         peak RSS {} MiB (before the pass {} MiB)",
        cleaned / 1e6,
        cleaned / 1e6 / elapsed,
        cpu / (cleaned / 1e9),
        segments_before,
        log.segment_count(),
        log.size_bytes() as f64 / 1e6,
        result.stats.records_read,
        result.stats.records_retained,
        result.stats.map_entries,
        rss_after / 1024,
        rss_before / 1024,
    );
}
