//! A second client family, kafka-python (pure Python, its own protocol code):
//! admin, producer and consumer against the broker, with API versions
//! negotiated by the client.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use integration_tests::{target_dir, Broker};

/// The kafka-python release the test installs when none is importable.
const KAFKA_PYTHON: &str = "kafka-python==2.3.3";
/// How long the smoke script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// True if `import <module>` works with `pythonpath` on PYTHONPATH.
fn importable(module: &str, pythonpath: &Path) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .env("PYTHONPATH", pythonpath)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes kafka-python importable, installing it into `<target>/pydeps` if
/// needed; returns the directory to put on PYTHONPATH.
pub(crate) fn ensure_kafka_python() -> PathBuf {
    ensure_python_package(KAFKA_PYTHON, "kafka", "pydeps")
}

/// Makes `module` importable, installing `requirement` with pip into
/// `<target>/<dir>` if needed (three attempts: the registry is sometimes slow);
/// returns the directory to put on PYTHONPATH. Each package has a directory of
/// its own so that tests installing different packages at once do not race.
pub(crate) fn ensure_python_package(requirement: &str, module: &str, dir: &str) -> PathBuf {
    let pydeps = target_dir().join(dir);
    if importable(module, &pydeps) {
        return pydeps;
    }
    let mut last = String::new();
    for attempt in 1..=3 {
        let output = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                "--upgrade",
                "--target",
            ])
            .arg(&pydeps)
            .arg(requirement)
            .output()
            .expect("run python3 -m pip");
        if output.status.success() && importable(module, &pydeps) {
            return pydeps;
        }
        last = format!(
            "attempt {attempt}: {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    panic!("could not install {requirement}:\n{last}");
}

/// Runs `command`, killing it after `timeout`; returns its output.
pub(crate) fn run_with_timeout(mut command: Command, timeout: Duration) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for python3") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break child.wait().expect("reap python3");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
    }
}

#[test]
fn kafka_python_admin_produce_consume() {
    // Proves: kafka-python (auto-negotiated API versions) creates topics with
    // KafkaAdminClient (and gets TopicAlreadyExistsError on a duplicate), sends
    // 100 keyed records acknowledged at offsets 0..99, and reads them back by
    // assign with identical keys, values, headers, timestamps and offsets;
    // end/beginning offsets are 100/0 and offsets_for_times finds offset 50.
    let pythonpath = ensure_kafka_python();
    let broker = Broker::start();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/smoke.py");
    let mut command = Command::new("python3");
    command
        .arg(&script)
        .arg(broker.bootstrap())
        .env("PYTHONPATH", &pythonpath)
        .env("PYTHONUNBUFFERED", "1");
    let output = run_with_timeout(command, SCRIPT_TIMEOUT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "smoke.py failed with {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
    assert_eq!(
        stdout.trim(),
        "kafka-python smoke ok: produced=100 consumed=100 offsets=0..99 admin_topics=py-smoke,py-admin-topic"
    );
}
