//! Test harness shared by the integration tests: starts the real `logbook` binary
//! on a free loopback port with its own data directory, so every test gets a broker
//! of its own and tests can run in parallel.
//!
//! The binary is built once per test process (see `broker_binary`) into the
//! target directory the tests themselves were built in; `LOGBOOK_BIN`
//! overrides the path and skips the build.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub mod cluster;

/// How long a freshly spawned broker may take to accept its first TCP connection
/// (env `LOGBOOK_IT_STARTUP_TIMEOUT_SECS` overrides it, e.g. for a JVM reference broker).
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a SIGTERM'd broker may take to exit before the harness gives up.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(15);
/// How many bytes of the broker log to print when a test fails.
const LOG_TAIL_BYTES: u64 = 16 * 1024;

/// A running (or stopped) `logbook` process owned by one test.
///
/// Drop kills the process and removes its data directory (when the harness
/// created it). If the test is panicking, Drop first prints the tail of the
/// broker's stderr, which is captured in `broker.log` beside the data directory.
pub struct Broker {
    child: Option<Child>,
    port: u16,
    data_dir: PathBuf,
    log_path: PathBuf,
    extra_args: Vec<String>,
    extra_env: Vec<(String, String)>,
    /// Holds the data directory (and the log) alive for the broker's lifetime.
    _work_dir: TempDir,
}

impl Broker {
    /// Starts a broker with default flags on a fresh data directory.
    pub fn start() -> Broker {
        Broker::start_with(&[])
    }

    /// Starts a broker with extra command-line flags (e.g.
    /// `["--message-max-bytes", "1000"]`) on a fresh data directory.
    pub fn start_with(extra_args: &[&str]) -> Broker {
        Broker::start_with_env(extra_args, &[])
    }

    /// Starts a broker with extra flags and extra environment variables (e.g.
    /// `[("LOGBOOK_NUM_PARTITIONS", "3")]`) on a fresh data directory.
    pub fn start_with_env(extra_args: &[&str], env: &[(&str, &str)]) -> Broker {
        Broker::start_on(free_port(), extra_args, env)
    }

    /// [`Broker::start_with_env`] with `port` as the `--listen` port the harness waits on
    /// (a test that configures `listeners` itself names this port in them).
    pub fn start_on(port: u16, extra_args: &[&str], env: &[(&str, &str)]) -> Broker {
        let work_dir = tempfile::Builder::new()
            .prefix("logbook-it-")
            .tempdir()
            .expect("create a temporary directory for the broker");
        let data_dir = work_dir.path().join("data");
        std::fs::create_dir_all(&data_dir).expect("create the data directory");
        let log_path = work_dir.path().join("broker.log");
        let mut broker = Broker {
            child: None,
            port,
            data_dir,
            log_path,
            extra_args: extra_args.iter().map(|s| (*s).to_owned()).collect(),
            extra_env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            _work_dir: work_dir,
        };
        broker.spawn();
        broker
    }

    /// Starts a broker with extra flags whose data directory is `data_dir` (created if
    /// missing; e.g. a small tmpfs a test mounted to run the disk full). The harness's
    /// own temporary directory still holds the broker log.
    pub fn start_in(data_dir: &Path, extra_args: &[&str]) -> Broker {
        let work_dir = tempfile::Builder::new()
            .prefix("logbook-it-")
            .tempdir()
            .expect("create a temporary directory for the broker");
        std::fs::create_dir_all(data_dir).expect("create the data directory");
        let log_path = work_dir.path().join("broker.log");
        let mut broker = Broker {
            child: None,
            port: free_port(),
            data_dir: data_dir.to_path_buf(),
            log_path,
            extra_args: extra_args.iter().map(|s| (*s).to_owned()).collect(),
            extra_env: Vec::new(),
            _work_dir: work_dir,
        };
        broker.spawn();
        broker
    }

    /// `"127.0.0.1:PORT"`, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The socket address the broker listens on.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The broker's `--data-dir`.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Everything the broker wrote to stderr so far (across restarts).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Whether the broker's log shows `needle` within `within`. A log line
    /// about a closed connection may be written just after the peer saw the
    /// close, so a test that asserts on it polls rather than reads once.
    #[must_use]
    pub fn wait_for_log(&self, needle: &str, within: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        loop {
            if self.log().contains(needle) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The process id of the running broker.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("broker is running").id()
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL: the broker gets no chance to flush or checkpoint anything.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // An error here means it already exited, which is what we want anyway.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait for a clean exit; returns the exit status.
    /// Panics (after a SIGKILL) if the broker does not exit within `SHUTDOWN_TIMEOUT`.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("broker is running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill -TERM");
        assert!(
            status.success(),
            "kill -TERM {} failed: {status}",
            child.id()
        );
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().expect("wait for the broker") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "broker did not exit within {SHUTDOWN_TIMEOUT:?} of SIGTERM\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Replaces the flags the broker is started with from its next `restart` on (e.g. a
    /// test disarming a failpoint flag before restarting a broker the failpoint stopped).
    pub fn set_extra_args(&mut self, extra_args: &[&str]) {
        self.extra_args = extra_args.iter().map(|s| (*s).to_owned()).collect();
    }

    /// Starts the broker again on the same port, data directory and flags.
    /// Kills it first if it is still running.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Starts a stopped broker again (same as `restart` without the kill).
    fn spawn(&mut self) {
        assert!(self.child.is_none(), "broker already running");
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("open the broker log");
        let mut command = Command::new(broker_binary());
        command
            .arg("--listen")
            .arg(self.bootstrap())
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.extra_args)
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", broker_binary().display()));
        self.child = Some(child);
        self.wait_until_accepting();
    }

    /// Polls TCP connect until it succeeds, the process dies, or the timeout passes.
    fn wait_until_accepting(&mut self) {
        let timeout = startup_timeout();
        let deadline = Instant::now() + timeout;
        loop {
            if TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200)).is_ok() {
                return;
            }
            let child = self.child.as_mut().expect("broker spawned");
            if let Some(status) = child.try_wait().expect("check the broker process") {
                self.child = None;
                panic!(
                    "broker exited during startup with {status}\n{}",
                    self.log_tail()
                );
            }
            if Instant::now() > deadline {
                self.kill();
                panic!(
                    "broker did not accept connections on {} within {timeout:?}\n{}",
                    self.addr(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The last `LOG_TAIL_BYTES` of the broker log, framed for a panic message.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log_path) {
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            let skip = len.saturating_sub(LOG_TAIL_BYTES);
            let mut bytes = Vec::new();
            if std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(skip)).is_ok() {
                let _ = file.read_to_end(&mut bytes);
            }
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        format!(
            "----- broker log ({}) -----\n{text}\n----- end of broker log -----",
            self.log_path.display()
        )
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("{}", self.log_tail());
        }
    }
}

/// `STARTUP_TIMEOUT`, or `LOGBOOK_IT_STARTUP_TIMEOUT_SECS` when set.
pub(crate) fn startup_timeout() -> Duration {
    std::env::var("LOGBOOK_IT_STARTUP_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(STARTUP_TIMEOUT, Duration::from_secs)
}

/// A port that was free a moment ago: bind port 0, read it, drop the listener.
pub fn free_port() -> u16 {
    let [port] = free_ports();
    port
}

/// `N` distinct free ports on 127.0.0.1. All `N` stay bound until every one is chosen:
/// ports asked for one at a time can repeat (a CI run drew the same port for a broker's
/// PLAINTEXT and SSL listeners, and the broker rightly refused to start).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: [TcpListener; N] =
        std::array::from_fn(|_| TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port"));
    listeners.map(|l| l.local_addr().expect("local address").port())
}

/// Path of the `logbook` binary, built once per test process (`LOGBOOK_BIN` overrides it).
pub fn broker_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| match std::env::var("LOGBOOK_BIN") {
        Ok(path) => PathBuf::from(path),
        Err(_) => workspace_binary("logbook-broker", "logbook"),
    })
}

/// Path of the binary `bin` of workspace member `package`, in this test's target
/// directory, after building every workspace binary once per test process.
///
/// The build has the same feature unification as `cargo test --release --workspace`
/// (dev-dependencies of every member active), so every artifact that command just built
/// is reused and only binaries are linked: seconds, not the minutes a `-p` build with
/// its own feature set takes (the fuzzer's `-p logbook-wire-fuzz` build recompiled
/// kafka-protocol, zstd and clap for 1.5 minutes in CI). If another member's tests do
/// not compile, `bin` is built from its package alone.
pub fn workspace_binary(package: &str, bin: &str) -> PathBuf {
    static WORKSPACE_BUILT: OnceLock<bool> = OnceLock::new();
    let target_dir = target_dir();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("integration-tests lives inside the workspace")
        .to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let build = |args: &[&str]| {
        let mut command = Command::new(&cargo);
        without_cargo_test_env(&mut command);
        command
            .current_dir(&workspace)
            .env("CARGO_TARGET_DIR", &target_dir)
            .args(args)
            .status()
            .expect("run cargo build")
            .success()
    };
    let built = *WORKSPACE_BUILT
        .get_or_init(|| build(&["build", "--release", "--workspace", "--tests", "--bins"]))
        || build(&["build", "--release", "-p", package, "--bin", bin]);
    assert!(built, "cargo build of {package}'s {bin} failed");
    let binary = target_dir.join("release").join(bin);
    assert!(binary.is_file(), "{} missing after build", binary.display());
    binary
}

/// Removes from `command`'s environment what `cargo test` sets for the test process
/// it runs (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, …). A nested cargo must not see them:
/// build scripts that read them through `rerun-if-env-changed` (ring's reads
/// `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME`) then count as dirty, and the nested build
/// recompiles ring, rustls and every crate above them. In CI that was 13 minutes before
/// the bench guard's first run, and the guard then measured a disk still writing the
/// build's output back.
fn without_cargo_test_env(command: &mut Command) {
    const SET_BY_CARGO: [&str; 9] = [
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
        "DEBUG",
        "OPT_LEVEL",
        "PROFILE",
    ];
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || name.starts_with("CARGO_BIN_EXE_")
            || name.starts_with("CARGO_CFG_")
            || SET_BY_CARGO.contains(&name)
        {
            command.env_remove(name);
        }
    }
}

/// The target directory this test binary was built into: `CARGO_TARGET_DIR` if
/// set, else derived from the test executable's own path
/// (`<target>/<profile>/deps/it-<hash>`), so the broker lands beside it.
pub fn target_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        let dir = PathBuf::from(dir);
        if dir.is_absolute() {
            return dir;
        }
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("integration-tests lives inside the workspace");
        return workspace.join(dir);
    }
    let exe = std::env::current_exe().expect("path of the test executable");
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("test executable lives in <target>/<profile>/deps/")
        .to_path_buf()
}
