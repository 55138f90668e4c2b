//! Starting, killing and restarting the broker under test, and the raw `ApiVersions`
//! exchange used to time start-up and to hold many connections.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::ApiVersionsRequest;
use tempfile::TempDir;

use crate::procfs::{self, Proc};
use crate::Res;

/// How long a spawned broker may take to accept connections before the bench gives up.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);
/// Poll interval while waiting for the listener.
const POLL: Duration = Duration::from_millis(1);

/// How to start brokers: the binary and extra flags.
#[derive(Clone, Debug)]
pub struct BrokerSpec {
    /// Path of the `logbook` binary.
    pub bin: PathBuf,
    /// Extra flags passed to every broker (e.g. `--flush-policy os`).
    pub args: Vec<String>,
    /// Parent of the temporary data directories.
    pub data_root: PathBuf,
}

/// Times from spawning the process to the broker being usable.
#[derive(Clone, Copy, Debug)]
pub struct StartTimes {
    /// Spawn → first TCP connect accepted.
    pub accept: Duration,
    /// Spawn → first `ApiVersions` answered.
    pub api: Duration,
}

/// A broker process owned by the bench, on a free loopback port and a fresh data directory
/// (removed on drop).
pub struct OwnedBroker {
    spec: BrokerSpec,
    child: Option<Child>,
    addr: SocketAddr,
    data_dir: PathBuf,
    log_path: PathBuf,
    _work: TempDir,
}

impl OwnedBroker {
    /// Spawns a broker on an empty data directory and waits until it answers `ApiVersions`.
    pub fn start(spec: &BrokerSpec) -> Res<(OwnedBroker, StartTimes)> {
        std::fs::create_dir_all(&spec.data_root)?;
        let work = tempfile::Builder::new()
            .prefix("logbook-bench-")
            .tempdir_in(&spec.data_root)?;
        let data_dir = work.path().join("data");
        std::fs::create_dir_all(&data_dir)?;
        let mut broker = OwnedBroker {
            spec: spec.clone(),
            child: None,
            addr: SocketAddr::from(([127, 0, 0, 1], free_port()?)),
            log_path: work.path().join("broker.log"),
            data_dir,
            _work: work,
        };
        let times = broker.spawn()?;
        Ok((broker, times))
    }

    /// `HOST:PORT` for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// The listen address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The broker's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The running process's id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL: no flush, no checkpoint.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // An error means it already exited, which is the goal anyway.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the process again on the same port and data directory.
    pub fn restart(&mut self) -> Res<StartTimes> {
        self.kill();
        self.spawn()
    }

    fn spawn(&mut self) -> Res<StartTimes> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)?;
        let started = Instant::now();
        let child = Command::new(&self.spec.bin)
            .arg("--listen")
            .arg(self.addr.to_string())
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.spec.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.spec.bin.display()))?;
        self.child = Some(child);
        let accept = loop {
            if TcpStream::connect(self.addr).is_ok() {
                break started.elapsed();
            }
            self.check_alive(started)?;
            std::thread::sleep(POLL);
        };
        let api = loop {
            if api_versions_blocking(self.addr).is_ok() {
                break started.elapsed();
            }
            self.check_alive(started)?;
            std::thread::sleep(POLL);
        };
        Ok(StartTimes { accept, api })
    }

    fn check_alive(&mut self, started: Instant) -> Res<()> {
        if let Some(child) = self.child.as_mut() {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                return Err(format!(
                    "broker exited during start-up ({status}):\n{}",
                    self.log_tail()
                )
                .into());
            }
        }
        if started.elapsed() > STARTUP_TIMEOUT {
            return Err(format!(
                "broker not accepting after {STARTUP_TIMEOUT:?}:\n{}",
                self.log_tail()
            )
            .into());
        }
        Ok(())
    }

    /// The last few KiB of the broker's stderr.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log_path) {
            let _ = file.read_to_string(&mut text);
        }
        let start = text.len().saturating_sub(4096);
        let start = (start..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        text[start..].to_owned()
    }

    /// Resident memory, MiB.
    pub fn rss_mib(&self) -> Option<f64> {
        self.pid().and_then(|pid| procfs::rss_mib(Proc::Pid(pid)))
    }
}

impl Drop for OwnedBroker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The broker a section runs against: one it started, or one given by `--bootstrap`.
pub enum Target {
    /// Started (and killed) by the bench.
    Owned(OwnedBroker),
    /// Already running; the pid (from `--broker-pid`) enables CPU and memory figures.
    External {
        /// `HOST:PORT`.
        bootstrap: String,
        /// The broker process, if known.
        pid: Option<u32>,
    },
}

impl Target {
    /// `HOST:PORT` for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        match self {
            Target::Owned(broker) => broker.bootstrap(),
            Target::External { bootstrap, .. } => bootstrap.clone(),
        }
    }

    /// The broker's pid, when known.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Target::Owned(broker) => broker.pid(),
            Target::External { pid, .. } => *pid,
        }
    }

    /// Resident memory, MiB.
    pub fn rss_mib(&self) -> Option<f64> {
        self.pid().and_then(|pid| procfs::rss_mib(Proc::Pid(pid)))
    }

    /// Peak resident memory, MiB.
    pub fn peak_rss_mib(&self) -> Option<f64> {
        self.pid()
            .and_then(|pid| procfs::peak_rss_mib(Proc::Pid(pid)))
    }

    /// The data directory, when the bench owns the broker.
    pub fn data_dir(&self) -> Option<&Path> {
        match self {
            Target::Owned(broker) => Some(broker.data_dir()),
            Target::External { .. } => None,
        }
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> Res<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// An `ApiVersions` v0 request frame (size prefix included) with the given correlation id,
/// framed by `logbook-client` as its own requests are.
pub fn api_versions_request(correlation_id: i32) -> Res<Bytes> {
    let mut body =
        logbook_client::encode_request(0, "logbook-bench", &ApiVersionsRequest::default())?;
    logbook_client::set_correlation_id(&mut body, correlation_id)?;
    Ok(logbook_client::with_size_prefix(&body)?)
}

/// Checks an `ApiVersions` v0 response body (after the size prefix): correlation id and
/// error code 0. It reads those two fields, the first six bytes, where
/// `logbook_client::decode_response` would decode the whole list of APIs: the connections
/// section times this exchange on thousands of connections at once on the broker's
/// machine, and the client's own work should stay out of that figure.
pub fn check_api_versions_response(body: &[u8], correlation_id: i32) -> Res<()> {
    let got_id = body
        .get(0..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_be_bytes);
    let error = body
        .get(4..6)
        .and_then(|b| <[u8; 2]>::try_from(b).ok())
        .map(i16::from_be_bytes);
    match (got_id, error) {
        (Some(id), Some(0)) if id == correlation_id => Ok(()),
        other => Err(format!("bad ApiVersions response: {other:?}").into()),
    }
}

/// One blocking `ApiVersions` round trip on a new connection.
fn api_versions_blocking(addr: SocketAddr) -> Res<()> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(&api_versions_request(1)?)?;
    let mut size = [0_u8; 4];
    stream.read_exact(&mut size)?;
    let size = usize::try_from(i32::from_be_bytes(size))?;
    let mut body = vec![0_u8; size];
    stream.read_exact(&mut body)?;
    check_api_versions_response(&body, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The ApiVersions probe is the v0 request the bench always sent: api key 18, version 0,
    // the correlation id, then client id "logbook-bench" and no body.
    #[test]
    fn api_versions_request_is_v0_with_header_v1() {
        let frame = api_versions_request(0x0102_0304).expect("frame");
        let mut expected = vec![0, 0, 0, 23, 0, 18, 0, 0, 1, 2, 3, 4, 0, 13];
        expected.extend_from_slice(b"logbook-bench");
        assert_eq!(&frame[..], &expected[..]);
    }

    // The check takes the answer's correlation id and error code and nothing else.
    #[test]
    fn api_versions_answers_are_checked() {
        assert!(check_api_versions_response(&[0, 0, 0, 7, 0, 0, 9], 7).is_ok());
        assert!(check_api_versions_response(&[0, 0, 0, 7, 0, 35], 7).is_err());
        assert!(check_api_versions_response(&[0, 0, 0, 8, 0, 0], 7).is_err());
        assert!(check_api_versions_response(&[0, 0], 7).is_err());
    }
}
