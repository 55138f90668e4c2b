//! Counting, watching and remembering: per-API counters, the broker processes' liveness
//! and RSS from `/proc`, the log of frames sent since the last good health check (saved
//! as a replayable text file on a crash or hang), the replay itself, and the summary.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use crate::wire::{self, ApiRange};

/// Which listener a frame went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// The client listener (`--listen`).
    Client,
    /// The controller listener.
    Controller,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Client => "client",
            Target::Controller => "controller",
        }
    }
}

/// One frame as written to a connection.
#[derive(Clone, Debug)]
pub struct Sent {
    /// Connection number: frames of one connection are replayed on one connection.
    pub conn: u64,
    /// Listener.
    pub target: Target,
    /// Api key the frame was built as (before mutation).
    pub key: i16,
    /// Api version it was built at.
    pub version: i16,
    /// `valid`, `hostile`, or the mutations applied.
    pub what: String,
    /// The bytes written, size prefix included.
    pub bytes: Vec<u8>,
}

/// How a request ended.
#[derive(Clone, Copy, Debug)]
pub enum Ended {
    /// A response frame came back.
    Answered,
    /// The broker closed the connection.
    Closed,
    /// No answer within the read timeout.
    Timeout,
    /// A response whose size prefix cannot be right.
    Implausible,
}

/// Counters of one (listener, api key).
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    frames: u64,
    answered: u64,
    closed: u64,
    timeouts: u64,
    implausible: u64,
}

/// Counters for the whole run.
#[derive(Default)]
pub struct Stats {
    per_api: Mutex<BTreeMap<(Target, i16), Counts>>,
    versions: Mutex<BTreeSet<(i16, i16)>>,
    unencodable: Mutex<BTreeSet<(i16, i16)>>,
    connect_failures: Mutex<u64>,
}

impl Stats {
    fn with(&self, sent: &Sent, f: impl FnOnce(&mut Counts)) {
        if let Ok(mut map) = self.per_api.lock() {
            f(map.entry((sent.target, sent.key)).or_default());
        }
    }

    /// A frame was written.
    pub fn sent(&self, sent: &Sent) {
        self.with(sent, |c| c.frames += 1);
        if sent.target == Target::Client {
            if let Ok(mut v) = self.versions.lock() {
                v.insert((sent.key, sent.version));
            }
        }
    }

    /// A request ended this way.
    pub fn ended(&self, sent: &Sent, ended: Ended) {
        self.with(sent, |c| match ended {
            Ended::Answered => c.answered += 1,
            Ended::Closed => c.closed += 1,
            Ended::Timeout => c.timeouts += 1,
            Ended::Implausible => c.implausible += 1,
        });
    }

    /// No filled request of this (key, version) encoded; its bare header was sent.
    pub fn unencodable(&self, key: i16, version: i16) {
        if let Ok(mut u) = self.unencodable.lock() {
            u.insert((key, version));
        }
    }

    /// A connection could not be opened.
    pub fn connect_failed(&self) {
        if let Ok(mut n) = self.connect_failures.lock() {
            *n += 1;
        }
    }

    /// Frames written so far.
    pub fn total_frames(&self) -> u64 {
        self.per_api
            .lock()
            .map(|m| m.values().map(|c| c.frames).sum())
            .unwrap_or(0)
    }

    /// The summary table and the machine-readable last line.
    pub fn print(&self, apis: &[ApiRange], outcome: &Outcome) {
        let map = self.per_api.lock().map(|m| m.clone()).unwrap_or_default();
        let versions = self.versions.lock().map(|v| v.clone()).unwrap_or_default();
        let total = print_table(&map, &versions);
        let missing: Vec<String> = apis
            .iter()
            .flat_map(|a| (a.min..=a.max).map(move |v| (a.key, v)))
            .filter(|kv| !versions.contains(kv))
            .map(|(k, v)| format!("{k}v{v}"))
            .collect();
        let unencodable: Vec<String> = self
            .unencodable
            .lock()
            .map(|u| u.iter().map(|(k, v)| format!("{k}v{v}")).collect())
            .unwrap_or_default();
        let connect_failures = self.connect_failures.lock().map_or(0, |n| *n);
        println!(
            "unencodable (bare header sent): [{}]",
            unencodable.join(",")
        );
        println!("advertised versions never sent: [{}]", missing.join(","));
        println!("connect failures: {connect_failures}");
        println!(
            "rss KiB: start {:?} peak {:?} end {:?}; of it anonymous: start {:?} peak {:?} end {:?}",
            outcome.rss_start,
            outcome.rss_peak,
            outcome.rss_now,
            outcome.anon_start,
            outcome.anon_peak,
            outcome.anon_now
        );
        let crashes = outcome
            .failures
            .iter()
            .filter(|f| f.starts_with("crash"))
            .count();
        let hangs = outcome.failures.len() - crashes;
        for f in &outcome.failures {
            println!("failure: {f}");
        }
        let mut line = String::new();
        let _ = write!(
            line,
            "SUMMARY frames={} answered={} closed_by_broker={} timeouts={} implausible={} crashes={crashes} hangs={hangs} rss_start_kib={} rss_peak_kib={} rss_end_kib={} anon_peak_kib={} anon_end_kib={} apis=",
            total.frames,
            total.answered,
            total.closed,
            total.timeouts,
            total.implausible,
            outcome.rss_start.unwrap_or(0),
            outcome.rss_peak.unwrap_or(0),
            outcome.rss_now.unwrap_or(0),
            outcome.anon_peak.unwrap_or(0),
            outcome.anon_now.unwrap_or(0),
        );
        let per_key: Vec<String> = map
            .iter()
            .filter(|((t, _), _)| *t == Target::Client)
            .map(|((_, k), c)| format!("{k}:{}", c.frames))
            .collect();
        line.push_str(&per_key.join(","));
        println!("{line}");
    }
}

/// The per-listener, per-key table (frames and how each ended, and for client keys how
/// many versions were sent), returning the totals for the summary line.
fn print_table(map: &BTreeMap<(Target, i16), Counts>, versions: &BTreeSet<(i16, i16)>) -> Counts {
    println!(
        "{:<10} {:>6} {:<28} {:>9} {:>9} {:>9} {:>8} {:>5} {:>8}",
        "listener", "key", "api", "frames", "answered", "closed", "timeout", "bad", "versions"
    );
    let mut total = Counts::default();
    for ((target, key), c) in map {
        let name =
            ApiKey::try_from(*key).map_or_else(|()| "(private)".to_owned(), |k| format!("{k:?}"));
        let covered = versions.iter().filter(|(k, _)| k == key).count();
        println!(
            "{:<10} {:>6} {:<28} {:>9} {:>9} {:>9} {:>8} {:>5} {:>8}",
            target.name(),
            key,
            name,
            c.frames,
            c.answered,
            c.closed,
            c.timeouts,
            c.implausible,
            if *target == Target::Client {
                covered.to_string()
            } else {
                "-".to_owned()
            }
        );
        total.frames += c.frames;
        total.answered += c.answered;
        total.closed += c.closed;
        total.timeouts += c.timeouts;
        total.implausible += c.implausible;
    }
    total
}

/// Frames sent since the last good health check, capped in bytes (oldest dropped).
#[derive(Default)]
pub struct SentLog {
    frames: VecDeque<Sent>,
    bytes: usize,
}

/// Bytes of frames kept for a replay file.
const SENT_LOG_BYTES_MAX: usize = 256 * 1024 * 1024;

impl SentLog {
    /// Remembers a frame.
    pub fn push(&mut self, sent: Sent) {
        self.bytes += sent.bytes.len();
        self.frames.push_back(sent);
        while self.bytes > SENT_LOG_BYTES_MAX {
            match self.frames.pop_front() {
                Some(old) => self.bytes -= old.bytes.len(),
                None => break,
            }
        }
    }

    /// Takes every frame remembered, leaving the log empty.
    pub fn take(&mut self) -> Vec<Sent> {
        self.bytes = 0;
        self.frames.drain(..).collect()
    }
}

/// What the watcher saw.
#[derive(Debug, Default)]
pub struct Outcome {
    /// First RSS sample (sum over the watched processes), KiB.
    pub rss_start: Option<u64>,
    /// Largest sample.
    pub rss_peak: Option<u64>,
    /// Latest sample.
    pub rss_now: Option<u64>,
    /// The anonymous part (heap) of the first, largest and latest samples: the rest of
    /// VmRSS is mapped files (log segments, indexes) the kernel may drop.
    pub anon_start: Option<u64>,
    /// Largest anonymous RSS, KiB.
    pub anon_peak: Option<u64>,
    /// Latest anonymous RSS, KiB.
    pub anon_now: Option<u64>,
    /// Bytes of each watched broker log already searched for panics.
    pub log_offsets: BTreeMap<std::path::PathBuf, u64>,
    /// `crash: …` and `hang: …` descriptions.
    pub failures: Vec<String>,
}

/// A `/proc/<pid>/status` field in KiB (`VmRSS`, `RssAnon`), `None` if the process is gone.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Whether `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

impl Outcome {
    /// Samples the summed RSS of `pids`.
    pub fn sample_rss(&mut self, pids: &[u32]) {
        if pids.is_empty() {
            return;
        }
        let total: u64 = pids.iter().filter_map(|p| status_kib(*p, "VmRSS")).sum();
        if total == 0 {
            return;
        }
        let anon: u64 = pids.iter().filter_map(|p| status_kib(*p, "RssAnon")).sum();
        self.anon_start.get_or_insert(anon);
        self.anon_now = Some(anon);
        self.anon_peak = Some(self.anon_peak.map_or(anon, |p| p.max(anon)));
        self.rss_start.get_or_insert(total);
        self.rss_now = Some(total);
        self.rss_peak = Some(self.rss_peak.map_or(total, |p| p.max(total)));
    }

    /// The first `panicked at` line written to a watched log since the last look.
    pub fn panics(&mut self, logs: &[std::path::PathBuf]) -> Option<String> {
        for log in logs {
            use std::io::{Read, Seek, SeekFrom};
            let Ok(mut file) = std::fs::File::open(log) else {
                continue;
            };
            let from = self.log_offsets.get(log).copied().unwrap_or(0);
            let mut bytes = Vec::new();
            if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut bytes).is_err() {
                continue;
            }
            self.log_offsets
                .insert(log.clone(), from + u64::try_from(bytes.len()).unwrap_or(0));
            let text = String::from_utf8_lossy(&bytes);
            let mut lines = text.lines();
            if let Some(at) = lines.by_ref().find(|l| l.contains("panicked at")) {
                let why = lines.next().unwrap_or("");
                return Some(format!("{}: {at} {why}", log.display()));
            }
        }
        None
    }

    /// `Some("pid N is gone")` if a watched process died.
    #[must_use]
    pub fn dead_pids(&self, pids: &[u32]) -> Option<String> {
        let dead: Vec<String> = pids
            .iter()
            .filter(|p| !alive(**p))
            .map(u32::to_string)
            .collect();
        (!dead.is_empty()).then(|| format!("broker pid {} is gone", dead.join(",")))
    }
}

/// Writes `frames` as a replay file: one line per frame,
/// `conn listener key version what hex`.
///
/// # Errors
/// The file cannot be written.
pub fn save(path: &Path, seed: u64, frames: &[Sent]) -> std::io::Result<()> {
    let mut text = format!(
        "# logbook-wire-fuzz seed {seed}: {} frames sent since the last good health check\n# conn listener api_key api_version mutations frame_hex (size prefix included)\n",
        frames.len()
    );
    for f in frames {
        let hex: String =
            f.bytes
                .iter()
                .fold(String::with_capacity(f.bytes.len() * 2), |mut s, b| {
                    let _ = write!(s, "{b:02x}");
                    s
                });
        let _ = writeln!(
            text,
            "{} {} {} {} {} {hex}",
            f.conn,
            f.target.name(),
            f.key,
            f.version,
            f.what.replace(' ', "_")
        );
    }
    std::fs::write(path, text)
}

fn parse_line(line: &str) -> Option<Sent> {
    let mut parts = line.split_whitespace();
    let conn = parts.next()?.parse().ok()?;
    let target = match parts.next()? {
        "controller" => Target::Controller,
        _ => Target::Client,
    };
    let key = parts.next()?.parse().ok()?;
    let version = parts.next()?.parse().ok()?;
    let what = parts.next()?.to_owned();
    let hex = parts.next().unwrap_or("");
    let bytes = (0..hex.len() / 2)
        .map(|i| {
            hex.get(2 * i..2 * i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()?;
    Some(Sent {
        conn,
        target,
        key,
        version,
        what,
        bytes,
    })
}

/// Sends a saved file's frames again, one connection per saved connection in the saved
/// order (each connection's frames pipelined, then its answers drained), and checks the
/// broker after. `Ok(true)` if it survived.
///
/// # Errors
/// The file cannot be read.
pub fn replay(
    file: &Path,
    client: SocketAddr,
    controller: Option<SocketAddr>,
    pids: &[u32],
    apis: &[ApiRange],
    timeout: Duration,
) -> Result<bool, String> {
    let text =
        std::fs::read_to_string(file).map_err(|e| format!("read {}: {e}", file.display()))?;
    let frames: Vec<Sent> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(parse_line)
        .collect();
    let mut order: Vec<u64> = Vec::new();
    for f in &frames {
        if !order.contains(&f.conn) {
            order.push(f.conn);
        }
    }
    println!(
        "replaying {} frames on {} connections",
        frames.len(),
        order.len()
    );
    let short = Duration::from_millis(300);
    for conn in order {
        let group: Vec<&Sent> = frames.iter().filter(|f| f.conn == conn).collect();
        let addr = match group.first().map(|f| f.target) {
            Some(Target::Controller) => controller.unwrap_or(client),
            _ => client,
        };
        let Ok(mut stream) = wire::connect(addr, short) else {
            println!("conn {conn}: connect failed");
            continue;
        };
        for f in &group {
            if !wire::write_all(&mut stream, &f.bytes) {
                break;
            }
        }
        let mut answers = 0;
        while wire::read_frame(&mut stream).is_ok() {
            answers += 1;
        }
        println!("conn {conn}: {} frames, {answers} answers", group.len());
    }
    let mut outcome = Outcome::default();
    outcome.sample_rss(pids);
    if let Some(dead) = outcome.dead_pids(pids) {
        println!("REPLAY crash: {dead}");
        return Ok(false);
    }
    match wire::health(client, apis, timeout * 2) {
        Ok(()) => {
            println!(
                "REPLAY ok: broker alive and answering; rss {:?} KiB",
                outcome.rss_now
            );
            Ok(true)
        }
        Err(e) => {
            println!("REPLAY hang: {e}");
            Ok(false)
        }
    }
}
