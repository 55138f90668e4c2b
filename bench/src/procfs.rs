//! What the bench reads from `/proc`: CPU time, memory and disk reads of the broker
//! process and of the bench itself, and the load average.

use std::time::Instant;

/// A process whose counters are read from `/proc`.
#[derive(Clone, Copy, Debug)]
pub enum Proc {
    /// This process (the clients: librdkafka threads and the bench's own).
    Me,
    /// Another process, e.g. the broker.
    Pid(u32),
}

impl Proc {
    fn path(self, file: &str) -> String {
        match self {
            Proc::Me => format!("/proc/self/{file}"),
            Proc::Pid(pid) => format!("/proc/{pid}/{file}"),
        }
    }
}

/// Clock ticks per second of `utime`/`stime` in `/proc/<pid>/stat`.
fn clock_ticks_per_second() -> f64 {
    #[expect(unsafe_code, reason = "sysconf has no safe wrapper in libc")]
    // SAFETY: sysconf takes a constant name, touches no memory of ours and is thread-safe.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        #[expect(
            clippy::cast_precision_loss,
            reason = "a small positive constant (100)"
        )]
        let ticks = ticks as f64;
        ticks
    } else {
        100.0
    }
}

/// User plus system CPU seconds the process (all its threads, living and exited) used.
pub fn cpu_seconds(proc: Proc) -> Option<f64> {
    let stat = std::fs::read_to_string(proc.path("stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after its closing ')' do not.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    #[expect(
        clippy::cast_precision_loss,
        reason = "tick counts stay far below 2^52"
    )]
    let seconds = (utime + stime) as f64 / clock_ticks_per_second();
    Some(seconds)
}

/// On-CPU nanoseconds of each living thread of a process, from
/// `/proc/<pid>/task/<tid>/schedstat`. `stat`'s utime + stime come in 10 ms ticks, which
/// on a quick run (about 0.1 CPU-s per scenario) is a step of 5-10% per tick: too coarse
/// for a guard that must see a 30% rise. A thread that exits takes its time with it, so
/// [`Usage::since`] checks these sums against `stat`'s.
#[derive(Clone, Debug, Default)]
pub struct ThreadTimes(std::collections::BTreeMap<u32, u64>);

impl ThreadTimes {
    /// The threads of `proc` now; `None` if the process is gone.
    pub fn sample(proc: Proc) -> Option<ThreadTimes> {
        let mut times = std::collections::BTreeMap::new();
        for entry in std::fs::read_dir(proc.path("task")).ok()? {
            let Ok(entry) = entry else { continue };
            let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            // A thread may exit between the listing and the read: it is left out.
            let Ok(schedstat) = std::fs::read_to_string(entry.path().join("schedstat")) else {
                continue;
            };
            if let Some(ns) = schedstat
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
            {
                times.insert(tid, ns);
            }
        }
        Some(ThreadTimes(times))
    }

    /// CPU seconds the threads living now used since `earlier` (a thread born since then
    /// counts whole).
    pub fn seconds_since(&self, earlier: &ThreadTimes) -> f64 {
        let ns: u64 = self
            .0
            .iter()
            .map(|(tid, now)| now.saturating_sub(earlier.0.get(tid).copied().unwrap_or(0)))
            .sum();
        #[expect(
            clippy::cast_precision_loss,
            reason = "nanosecond sums of a bench run stay far below 2^52"
        )]
        let seconds = ns as f64 / 1e9;
        seconds
    }
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MiB.
pub fn status_mib(proc: Proc, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(proc.path("status")).ok()?;
    let line = status
        .lines()
        .find(|line| line.split(':').next() == Some(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    #[expect(clippy::cast_precision_loss, reason = "KiB counts stay far below 2^52")]
    let mib = kib as f64 / 1024.0;
    Some(mib)
}

/// Resident memory now, MiB.
pub fn rss_mib(proc: Proc) -> Option<f64> {
    status_mib(proc, "VmRSS")
}

/// Peak resident memory since the process started, MiB.
pub fn peak_rss_mib(proc: Proc) -> Option<f64> {
    status_mib(proc, "VmHWM")
}

/// Bytes the process caused to be read from the block device (not page-cache hits).
pub fn disk_read_bytes(proc: Proc) -> Option<u64> {
    let io = std::fs::read_to_string(proc.path("io")).ok()?;
    io.lines()
        .find_map(|line| line.strip_prefix("read_bytes:"))?
        .trim()
        .parse()
        .ok()
}

/// The 1-, 5- and 15-minute load averages, as `/proc/loadavg` prints them.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").ok().map_or_else(
        || "?".to_owned(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// Dirty plus under-writeback page-cache data on the whole machine, MiB (`/proc/meminfo`).
pub fn dirty_mib() -> Option<f64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = meminfo.lines().find(|l| l.starts_with(name))?;
        let kib: f64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib / 1024.0)
    };
    Some(field("Dirty:")? + field("Writeback:")?)
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
pub fn mem_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line["MemAvailable:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// CPU time of the broker and of the bench, and the broker's disk reads, at one instant.
#[derive(Clone, Debug)]
pub struct Usage {
    at: Instant,
    broker_cpu: Option<f64>,
    broker_threads: Option<ThreadTimes>,
    client_cpu: Option<f64>,
    broker_read: Option<u64>,
}

/// What happened between two `Usage` samples.
#[derive(Clone, Copy, Debug)]
pub struct UsageDelta {
    /// Wall-clock seconds.
    pub wall: f64,
    /// Broker CPU seconds (user + system), if the broker's pid is known.
    pub broker_cpu: Option<f64>,
    /// Bench (client) CPU seconds.
    pub client_cpu: Option<f64>,
    /// Bytes the broker read from the block device.
    pub broker_disk_read: Option<u64>,
}

impl Usage {
    /// Samples now; `broker` is `None` when benchmarking a broker whose pid is unknown.
    pub fn sample(broker: Option<u32>) -> Usage {
        Usage {
            at: Instant::now(),
            broker_cpu: broker.and_then(|pid| cpu_seconds(Proc::Pid(pid))),
            broker_threads: broker.and_then(|pid| ThreadTimes::sample(Proc::Pid(pid))),
            client_cpu: cpu_seconds(Proc::Me),
            broker_read: broker.and_then(|pid| disk_read_bytes(Proc::Pid(pid))),
        }
    }

    /// The difference from this sample to a new one taken now.
    pub fn since(&self, broker: Option<u32>) -> UsageDelta {
        let now = Usage::sample(broker);
        UsageDelta {
            wall: now.at.duration_since(self.at).as_secs_f64(),
            broker_cpu: precise_cpu(
                now.broker_cpu.zip(self.broker_cpu).map(|(b, a)| b - a),
                now.broker_threads
                    .as_ref()
                    .zip(self.broker_threads.as_ref())
                    .map(|(b, a)| b.seconds_since(a)),
            ),
            client_cpu: now.client_cpu.zip(self.client_cpu).map(|(b, a)| b - a),
            broker_disk_read: now
                .broker_read
                .zip(self.broker_read)
                .map(|(b, a)| b.saturating_sub(a)),
        }
    }
}

/// Ticks `stat` may be off at each end of an interval, plus rounding: when the threads'
/// exact sum trails `stat`'s delta by more, a thread exited with its time.
const TICK_SLACK_S: f64 = 0.025;

/// The exact per-thread sum when it accounts for `stat`'s tick-grained delta, else the
/// delta (a thread that did work exited in between).
fn precise_cpu(ticks: Option<f64>, threads: Option<f64>) -> Option<f64> {
    match (ticks, threads) {
        (Some(ticks), Some(threads)) if ticks <= threads + TICK_SLACK_S => Some(threads),
        (ticks, _) => ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_times_are_exact_and_fall_back_to_ticks_when_a_thread_took_its_time_away() {
        assert_eq!(precise_cpu(Some(0.12), Some(0.1234)), Some(0.1234));
        assert_eq!(precise_cpu(Some(0.14), Some(0.1234)), Some(0.1234));
        assert_eq!(precise_cpu(Some(0.30), Some(0.1234)), Some(0.30));
        assert_eq!(precise_cpu(None, Some(0.1234)), None);

        // Spin until the thread sums see 30 ms: exact sums grow by what was used, where
        // ticks could not tell 30 ms from 20 or 40.
        let me = Proc::Me;
        let before = ThreadTimes::sample(me).expect("own threads");
        let ticks_before = cpu_seconds(me).expect("own stat");
        let spin = Instant::now();
        let mut used = 0.0;
        let mut x = 0_u64;
        while used < 0.03 && spin.elapsed().as_secs() < 10 {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            used = ThreadTimes::sample(me)
                .expect("own threads")
                .seconds_since(&before);
        }
        assert!(used >= 0.03, "{used}");
        let ticks = cpu_seconds(me).expect("own stat") - ticks_before;
        assert!(
            ticks + 2.0 * TICK_SLACK_S >= used,
            "ticks {ticks} threads {used}"
        );
    }
}
