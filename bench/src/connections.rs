//! Many concurrent client connections: open them all, then have every one of them send
//! `ApiVersions` at once, twice, while all stay open.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Barrier, Semaphore};

use crate::broker::{api_versions_request, check_api_versions_response};
use crate::Res;

/// Connects in flight at once (keeps the listen backlog from overflowing).
const CONNECTS_IN_FLIGHT: usize = 128;

/// What the connection test saw.
#[derive(Clone, Debug)]
pub struct ConnectionsRun {
    /// Connections that opened.
    pub opened: u64,
    /// Connections answered in both rounds.
    pub served: u64,
    /// Seconds to open all of them.
    pub connect_seconds: f64,
    /// Round-trip times of the second round (all connections at once), microseconds, sorted.
    pub micros: Vec<u64>,
    /// Seconds for the whole second round.
    pub round_seconds: f64,
}

/// Raises the open-files limit to at least `needed`: soft and hard if allowed (root),
/// else the soft limit up to the hard one; returns the soft limit in force afterwards.
pub fn raise_nofile(needed: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    #[expect(
        unsafe_code,
        reason = "getrlimit/setrlimit have no safe wrapper in libc"
    )]
    // SAFETY: `limit` is a valid, exclusively borrowed rlimit for the duration of each call.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) != 0 {
            return 0;
        }
        let both = libc::rlimit {
            rlim_cur: needed,
            rlim_max: needed.max(limit.rlim_max),
        };
        if limit.rlim_cur < needed && libc::setrlimit(libc::RLIMIT_NOFILE, &raw const both) == 0 {
            limit = both;
        }
        if limit.rlim_cur < needed {
            let wanted = libc::rlimit {
                rlim_cur: needed.min(limit.rlim_max),
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const wanted) == 0 {
                limit = wanted;
            }
        }
    }
    limit.rlim_cur
}

/// Opens `count` connections to `addr`, then runs two rounds in which every connection
/// sends one `ApiVersions` and reads the answer; holds all open until both rounds end.
/// `while_open` runs after the first round, with every connection open.
pub fn run(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    count: usize,
    while_open: &(dyn Fn() + Sync),
) -> Res<ConnectionsRun> {
    rt.block_on(async move {
        let connect_gate = Arc::new(Semaphore::new(CONNECTS_IN_FLIGHT));
        let round_gate = Arc::new(Barrier::new(count + 1));
        let after_round = Arc::new(Barrier::new(count + 1));
        let started = Instant::now();
        let mut tasks = Vec::with_capacity(count);
        for i in 0..count {
            let connect_gate = Arc::clone(&connect_gate);
            let round_gate = Arc::clone(&round_gate);
            let after_round = Arc::clone(&after_round);
            tasks.push(tokio::spawn(connection(
                i,
                addr,
                connect_gate,
                round_gate,
                after_round,
            )));
        }
        round_gate.wait().await;
        let connect_seconds = started.elapsed().as_secs_f64();
        after_round.wait().await;
        while_open();
        let round_started = Instant::now();
        round_gate.wait().await;
        after_round.wait().await;
        let round_seconds = round_started.elapsed().as_secs_f64();
        let mut run = ConnectionsRun {
            opened: 0,
            served: 0,
            connect_seconds,
            micros: Vec::with_capacity(count),
            round_seconds,
        };
        for task in tasks {
            let (opened, served, micros) = task.await?;
            run.opened += u64::from(opened);
            run.served += u64::from(served);
            run.micros.extend(micros);
        }
        run.micros.sort_unstable();
        Ok(run)
    })
}

/// Connection `i`: connects (at most `CONNECTS_IN_FLIGHT` at a time), then takes part
/// in both rounds, each between the two barriers (one ApiVersions exchange, if it is
/// open). Returns whether it opened, whether both rounds were answered, and the time of
/// the last answered exchange in µs.
async fn connection(
    i: usize,
    addr: SocketAddr,
    connect_gate: Arc<Semaphore>,
    round_gate: Arc<Barrier>,
    after_round: Arc<Barrier>,
) -> (bool, bool, Option<u64>) {
    let permit = connect_gate.acquire_owned().await;
    let stream = tokio::time::timeout(Duration::from_secs(30), TcpStream::connect(addr)).await;
    drop(permit);
    let mut stream = match stream {
        Ok(Ok(stream)) => Some(stream),
        _ => None,
    };
    let opened = stream.is_some();
    let mut served = 0_u32;
    let mut last_micros = None;
    // Round 1 (all open), a pause for the caller, round 2.
    for round in 0..2 {
        round_gate.wait().await;
        if let Some(s) = stream.as_mut() {
            let correlation_id = i32::try_from(i).unwrap_or(0) * 2 + round;
            let t = Instant::now();
            let answered =
                tokio::time::timeout(Duration::from_secs(60), exchange(s, correlation_id)).await;
            if matches!(answered, Ok(Ok(()))) {
                served += 1;
                last_micros = Some(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
            }
        }
        after_round.wait().await;
    }
    (opened, served == 2, last_micros)
}

async fn exchange(stream: &mut TcpStream, correlation_id: i32) -> Res<()> {
    stream
        .write_all(&api_versions_request(correlation_id)?)
        .await?;
    let size = stream.read_i32().await?;
    let mut body = vec![0_u8; usize::try_from(size)?];
    stream.read_exact(&mut body).await?;
    check_api_versions_response(&body, correlation_id)
}
