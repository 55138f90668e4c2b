//! `logbook-wire-fuzz`: a raw-socket protocol fuzzer for Logbook. It asks the broker
//! which APIs and versions it serves, builds valid requests of each (filled with the
//! broker's own topics, partitions and producer), mutates them (`mutate`), and sends
//! them over many concurrent connections, pipelined or not, sometimes closing mid-frame.
//! Between batches it checks that every given broker process is alive and that the
//! listener still answers ApiVersions + Metadata on a fresh connection; a dead process is
//! a crash, no answer within the timeout (with fuzzing paused) a hang. Every frame sent
//! since the last good check is saved on failure, for `--replay`.
//!
//! Exit status: 0 if nothing crashed or hung, 1 otherwise, 2 on a usage or setup error.

mod controller;
mod mutate;
mod report;
mod requests;
mod wire;

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use kafka_protocol::messages::ApiKey;

use crate::report::{Ended, Sent, Stats, Target};
use crate::requests::{Corpus, Gen};
use crate::wire::{ApiRange, ReadEnd};

/// Command line.
#[derive(Parser, Debug)]
#[command(version, about = "Raw-socket protocol fuzzer for a Logbook broker")]
struct Args {
    /// The broker's client listener.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// The controller listener (an entry of `--controller-quorum-voters`), also fuzzed.
    #[arg(long)]
    controller: Option<String>,
    /// Process id of a broker to watch (repeatable: the client listener's and the
    /// controller listener's nodes).
    #[arg(long)]
    pid: Vec<u32>,
    /// PRNG seed (default: from the clock; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// How long to fuzz, in seconds.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Concurrent fuzzing connections.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Milliseconds between health checks.
    #[arg(long, default_value_t = 2000)]
    check_interval_ms: u64,
    /// Milliseconds the broker has to answer a health check (twice this with fuzzing
    /// paused before it counts as a hang).
    #[arg(long, default_value_t = 5000)]
    health_timeout_ms: u64,
    /// Milliseconds to wait for a fuzzed request's response.
    #[arg(long, default_value_t = 1500)]
    read_timeout_ms: u64,
    /// Directory the frames preceding a crash or hang are saved in.
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
    /// A broker log to watch (repeatable): a `panicked at` line in it is a crash even if
    /// the process lives on (a panicked task).
    #[arg(long)]
    broker_log: Vec<PathBuf>,
    /// Send Raft requests with current and future terms (a forged leader or candidate),
    /// not only stale ones.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    forge_raft_terms: bool,
    /// Fuzz only these api keys of the client listener (comma-separated), e.g. to chase
    /// one finding; default: every advertised one.
    #[arg(long, value_delimiter = ',')]
    apis: Vec<i16>,
    /// Replay a saved frames file instead of fuzzing, then check the broker.
    #[arg(long)]
    replay: Option<PathBuf>,
}

/// What every worker shares.
struct Shared {
    args: Args,
    client: SocketAddr,
    controller: Option<SocketAddr>,
    /// (api, version) pairs of the client listener, visited in turn.
    pairs: Vec<(ApiKey, i16)>,
    client_keys: Vec<i16>,
    corpus: Corpus,
    stats: Stats,
    next_pair: AtomicUsize,
    next_conn: AtomicU64,
    stop: AtomicBool,
    paused: AtomicBool,
    active: AtomicUsize,
    /// Frames sent since the last good health check, for the replay file.
    sent: Mutex<report::SentLog>,
}

fn main() {
    let args = Args::parse();
    let code = match run(args) {
        Ok(clean) => i32::from(!clean),
        Err(e) => {
            eprintln!("logbook-wire-fuzz: {e}");
            2
        }
    };
    std::process::exit(code);
}

fn run(args: Args) -> Result<bool, String> {
    let client = wire::resolve(&args.bootstrap)?;
    let controller = args.controller.as_deref().map(wire::resolve).transpose()?;
    let timeout = Duration::from_millis(args.health_timeout_ms);
    controller::FORGE_TERMS.store(args.forge_raft_terms, Ordering::Relaxed);
    let apis = wire::api_versions(client, timeout)?;
    if let Some(file) = args.replay.clone() {
        return report::replay(&file, client, controller, &args.pid, &apis, timeout);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| {
                u64::try_from(d.as_nanos() % u128::from(u64::MAX)).unwrap_or(1)
            })
    });
    println!("seed {seed}");
    let mut pairs = version_pairs(&apis, &args.apis);
    if pairs.is_empty() {
        return Err("no (api, version) pair to fuzz".to_owned());
    }
    fastrand::Rng::with_seed(seed).shuffle(&mut pairs);
    println!(
        "client listener {client}: {} APIs, {} (api, version) pairs",
        apis.len(),
        pairs.len()
    );
    let vote_answered = match controller {
        Some(addr) => controller_probe(addr, timeout),
        None => false,
    };
    let corpus = wire::prepare(client, &apis, timeout)?;
    println!(
        "corpus: {} topics, brokers {:?}, producer {:?}",
        corpus.topics.len(),
        corpus.brokers,
        corpus.producer
    );
    let shared = Arc::new(Shared {
        client_keys: apis.iter().map(|a| a.key).collect(),
        pairs,
        corpus,
        client,
        controller,
        stats: Stats::default(),
        next_pair: AtomicUsize::new(0),
        next_conn: AtomicU64::new(1),
        stop: AtomicBool::new(false),
        paused: AtomicBool::new(false),
        active: AtomicUsize::new(0),
        sent: Mutex::new(report::SentLog::default()),
        args,
    });
    let workers = spawn_workers(&shared, seed);
    let outcome = monitor(&shared, &apis, vote_answered, seed);
    shared.stop.store(true, Ordering::SeqCst);
    shared.paused.store(false, Ordering::SeqCst);
    for w in workers {
        let _ = w.join();
    }
    shared.stats.print(&apis, &outcome);
    Ok(outcome.failures.is_empty())
}

/// One worker thread per connection (`--connections`, at least one), each drawing from
/// its own seed derived from the run's `seed`.
fn spawn_workers(shared: &Arc<Shared>, seed: u64) -> Vec<std::thread::JoinHandle<()>> {
    (0..shared.args.connections.max(1))
        .map(|i| {
            let shared = Arc::clone(shared);
            let worker_seed = seed.wrapping_add(
                u64::try_from(i)
                    .unwrap_or(0)
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            std::thread::spawn(move || worker(&shared, worker_seed))
        })
        .collect()
}

/// Every (api, version) pair the client listener advertises, limited to `only` when it
/// names keys. An API kafka-protocol does not know is reported and left out.
fn version_pairs(apis: &[ApiRange], only: &[i16]) -> Vec<(ApiKey, i16)> {
    let mut pairs = Vec::new();
    for api in apis {
        if !only.is_empty() && !only.contains(&api.key) {
            continue;
        }
        let Ok(key) = ApiKey::try_from(api.key) else {
            println!(
                "api {}: unknown to kafka-protocol, fuzzed as raw bytes only",
                api.key
            );
            continue;
        };
        for version in api.min..=api.max {
            pairs.push((key, version));
        }
    }
    pairs
}

/// Asks the controller listener for ApiVersions (and reports what it did), then whether
/// it answers a stale Vote.
fn controller_probe(addr: SocketAddr, timeout: Duration) -> bool {
    match wire::api_versions(addr, timeout) {
        Ok(apis) => println!("controller listener {addr}: ApiVersions lists {} APIs", apis.len()),
        Err(e) => println!(
            "controller listener {addr}: no ApiVersions ({e}); fuzzing its private keys {:?} and Kafka keys",
            controller::KEYS
        ),
    }
    let answered = controller::answers_stale_vote(addr, timeout);
    println!("controller listener {addr}: stale Vote answered: {answered}");
    answered
}

/// Health checks and RSS samples until the duration ends or something fails.
fn monitor(shared: &Shared, apis: &[ApiRange], vote_answered: bool, seed: u64) -> report::Outcome {
    let args = &shared.args;
    let timeout = Duration::from_millis(args.health_timeout_ms);
    let deadline = Instant::now() + Duration::from_secs(args.duration);
    let mut outcome = report::Outcome::default();
    outcome.sample_rss(&args.pid);
    let mut last_progress = Instant::now();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(args.check_interval_ms));
        let pending = shared.sent.lock().map(|mut s| s.take()).unwrap_or_default();
        outcome.sample_rss(&args.pid);
        let mut failure = outcome
            .dead_pids(&args.pid)
            .map(|d| format!("crash: {d}"))
            .or_else(|| {
                outcome
                    .panics(&args.broker_log)
                    .map(|p| format!("crash: {p}"))
            });
        if failure.is_none() {
            failure = check(shared, apis, vote_answered, timeout).err();
            if let Some(first) = &failure {
                // Overload is not a hang: pause fuzzing, let connections finish, ask again.
                eprintln!("health check failed ({first}); pausing fuzzing and asking again");
                shared.paused.store(true, Ordering::SeqCst);
                let quiet = Instant::now() + Duration::from_secs(10);
                while shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < quiet {
                    std::thread::sleep(Duration::from_millis(50));
                }
                failure = outcome
                    .dead_pids(&args.pid)
                    .map(|d| format!("crash: {d}"))
                    .or_else(|| {
                        check(shared, apis, vote_answered, timeout * 2)
                            .err()
                            .map(|e| format!("hang: {e} (first attempt: {first})"))
                    });
                shared.paused.store(false, Ordering::SeqCst);
            }
        }
        if let Some(failure) = failure {
            let mut frames = pending;
            if let Ok(mut s) = shared.sent.lock() {
                frames.extend(s.take());
            }
            let path = args.out_dir.join(format!("wire-fuzz-{seed}.frames"));
            match report::save(&path, seed, &frames) {
                Ok(()) => println!("saved {} frames to {}", frames.len(), path.display()),
                Err(e) => eprintln!("could not save frames to {}: {e}", path.display()),
            }
            eprintln!("FAILURE: {failure}");
            outcome.failures.push(failure);
            break;
        }
        if last_progress.elapsed() >= Duration::from_secs(30) {
            last_progress = Instant::now();
            println!(
                "progress: {} frames, rss {:?} KiB (anonymous {:?})",
                shared.stats.total_frames(),
                outcome.rss_now,
                outcome.anon_now
            );
        }
    }
    outcome.sample_rss(&args.pid);
    outcome
}

fn check(
    shared: &Shared,
    apis: &[ApiRange],
    vote_answered: bool,
    timeout: Duration,
) -> Result<(), String> {
    wire::health(shared.client, apis, timeout).map_err(|e| format!("client listener: {e}"))?;
    if let Some(addr) = shared.controller {
        controller::health(addr, vote_answered, timeout)?;
    }
    Ok(())
}

/// One frame to send: the bytes, what they are, and the response header version.
struct Frame {
    sent: Sent,
}

fn worker(shared: &Shared, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    while !shared.stop.load(Ordering::SeqCst) {
        if shared.paused.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        session(shared, &mut rng);
        shared.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One connection: a few frames, lockstep, pipelined, or cut off mid-frame.
fn session(shared: &Shared, rng: &mut fastrand::Rng) {
    let target = match shared.controller {
        Some(_) if rng.u32(0..100) < 20 => Target::Controller,
        _ => Target::Client,
    };
    let addr = match target {
        Target::Client => shared.client,
        Target::Controller => shared.controller.unwrap_or(shared.client),
    };
    let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let frames: Vec<Frame> = (0..rng.usize(1..=6))
        .map(|i| make_frame(shared, rng, target, conn, i32::try_from(i).unwrap_or(0)))
        .collect();
    let read_timeout = Duration::from_millis(shared.args.read_timeout_ms);
    let Ok(mut stream) = wire::connect(addr, read_timeout) else {
        shared.stats.connect_failed();
        return;
    };
    match rng.u32(0..100) {
        0..50 => {
            for frame in &frames {
                if !send(shared, &mut stream, frame) {
                    return;
                }
                if !receive(shared, &mut stream, &frame.sent) {
                    return;
                }
            }
        }
        50..85 => {
            for frame in &frames {
                if !send(shared, &mut stream, frame) {
                    return;
                }
            }
            for frame in &frames {
                if !receive(shared, &mut stream, &frame.sent) {
                    return;
                }
            }
        }
        _ => {
            // All but the last frame whole, the last one cut short, then close.
            let Some((last, whole)) = frames.split_last() else {
                return;
            };
            for frame in whole {
                if !send(shared, &mut stream, frame) {
                    return;
                }
            }
            let cut = rng.usize(..last.sent.bytes.len().max(1));
            let mut partial = last.sent.clone();
            partial.bytes.truncate(cut);
            partial.what.push_str(&format!("+closed_after({cut})"));
            let _ = wire::write_all(&mut stream, &partial.bytes);
            shared.stats.sent(&partial);
            if let Ok(mut s) = shared.sent.lock() {
                s.push(partial);
            }
        }
    }
}

fn send(shared: &Shared, stream: &mut TcpStream, frame: &Frame) -> bool {
    if let Ok(mut s) = shared.sent.lock() {
        s.push(frame.sent.clone());
    }
    shared.stats.sent(&frame.sent);
    if wire::write_all(stream, &frame.sent.bytes) {
        true
    } else {
        shared.stats.ended(&frame.sent, Ended::Closed);
        false
    }
}

fn receive(shared: &Shared, stream: &mut TcpStream, sent: &Sent) -> bool {
    match wire::read_frame(stream) {
        Ok(_) => {
            shared.stats.ended(sent, Ended::Answered);
            true
        }
        Err(ReadEnd::Closed) => {
            shared.stats.ended(sent, Ended::Closed);
            false
        }
        Err(ReadEnd::Timeout) => {
            shared.stats.ended(sent, Ended::Timeout);
            false
        }
        Err(ReadEnd::Implausible(size)) => {
            eprintln!(
                "implausible response size {size} to api {} v{} ({})",
                sent.key, sent.version, sent.what
            );
            shared.stats.ended(sent, Ended::Implausible);
            false
        }
    }
}

/// Builds one frame: a valid request (10%), a hostile valid one (20%) or a mutated one.
fn make_frame(
    shared: &Shared,
    rng: &mut fastrand::Rng,
    target: Target,
    conn: u64,
    correlation_id: i32,
) -> Frame {
    let roll = rng.u32(0..100);
    let hostile = (10..30).contains(&roll);
    let mutated = roll >= 30;
    let Unmutated {
        key,
        version,
        payload,
        layout: layout_info,
        needles,
    } = if target == Target::Controller && rng.u32(0..100) < 75 {
        controller_request(rng, hostile, correlation_id)
    } else {
        client_request(shared, rng, hostile, correlation_id)
    };
    let (bytes, what) = if mutated {
        let layout = mutate::Layout {
            header_bytes: layout_info.0,
            header_tagged: layout_info.1,
            flexible: layout_info.2,
            needles: &needles,
            keys: &shared.client_keys,
        };
        let m = mutate::mutate(rng, &payload, &layout);
        (m.bytes, m.what)
    } else {
        (
            mutate::honest(&payload),
            if hostile {
                "hostile".to_owned()
            } else {
                "valid".to_owned()
            },
        )
    };
    Frame {
        sent: Sent {
            conn,
            target,
            key,
            version,
            what,
            bytes,
        },
    }
}

/// One request before any mutation: key and version as sent, its bytes, the layout a
/// mutation needs (header bytes, whether the header has tagged fields, whether the body
/// is flexible) and the strings in it (where a length can be made to lie).
struct Unmutated {
    key: i16,
    version: i16,
    payload: Vec<u8>,
    layout: (usize, bool, bool),
    needles: Vec<Vec<u8>>,
}

/// A request in the controller listener's own JSON protocol: one of its keys, mostly at
/// version 0 (sometimes -1..3), with a body hostile when the frame is, or at random.
fn controller_request(rng: &mut fastrand::Rng, hostile: bool, correlation_id: i32) -> Unmutated {
    let key = controller::KEYS[rng.usize(..controller::KEYS.len())];
    let version = if rng.u32(0..10) == 0 {
        rng.i16(-1..3)
    } else {
        0
    };
    let hostile_body = hostile || rng.bool();
    let body = controller::body(key, rng, hostile_body);
    let needles = json_strings(&body);
    let payload = controller::payload(key, version, correlation_id, body.as_bytes());
    Unmutated {
        key,
        version,
        payload,
        layout: (controller::HEADER_BYTES, false, false),
        needles,
    }
}

/// A Kafka request: the next (api, version) pair in the shuffled round, filled valid or
/// hostile.
fn client_request(
    shared: &Shared,
    rng: &mut fastrand::Rng,
    hostile: bool,
    correlation_id: i32,
) -> Unmutated {
    let i = shared.next_pair.fetch_add(1, Ordering::Relaxed);
    let (key, version) = shared.pairs[i % shared.pairs.len()];
    let (payload, needles) = valid_payload(shared, rng, key, version, correlation_id, hostile);
    let header_version = key.request_header_version(version);
    let header_bytes = 10 + "logbook-wire-fuzz".len() + usize::from(header_version >= 2);
    let flexible = header_version >= 2;
    Unmutated {
        key: key as i16,
        version,
        payload,
        layout: (header_bytes, flexible, flexible),
        needles,
    }
}

/// A valid encoded request (header and body) of `key` at `version`, and the strings in it.
fn valid_payload(
    shared: &Shared,
    rng: &mut fastrand::Rng,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    hostile: bool,
) -> (Vec<u8>, Vec<Vec<u8>>) {
    // A filled request may set a field its version lacks; draw again, then tamer.
    for attempt in 0..8 {
        let mut g = Gen {
            corpus: &shared.corpus,
            rng,
            hostile: hostile && attempt < 4,
            big_used: false,
            version,
        };
        let Some(request) = requests::build(key, &mut g) else {
            break;
        };
        if let Some(payload) = requests::encode(
            key,
            version,
            correlation_id,
            Some("logbook-wire-fuzz"),
            &request,
        ) {
            let needles = shared
                .corpus
                .topics
                .iter()
                .map(|t| t.name.as_bytes().to_vec())
                .chain(
                    ["fuzz-group", "fuzz-txn", "member-1", "consumer", "range"]
                        .map(|s| s.as_bytes().to_vec()),
                )
                .collect();
            return (payload, needles);
        }
    }
    shared.stats.unencodable(key as i16, version);
    // The bare header: the broker must cope with a missing body too.
    let header = requests::encode(
        ApiKey::ApiVersions,
        0,
        correlation_id,
        Some("logbook-wire-fuzz"),
        &kafka_protocol::messages::RequestKind::ApiVersions(Default::default()),
    )
    .unwrap_or_default();
    let mut payload = header;
    if let Some(k) = payload.get_mut(..2) {
        k.copy_from_slice(&(key as i16).to_be_bytes());
    }
    if let Some(v) = payload.get_mut(2..4) {
        v.copy_from_slice(&version.to_be_bytes());
    }
    (payload, Vec::new())
}

/// The string values of a JSON body, whose quotes the mutator can lie about.
fn json_strings(body: &str) -> Vec<Vec<u8>> {
    body.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| !s.is_empty())
        .map(|s| s.as_bytes().to_vec())
        .collect()
}
