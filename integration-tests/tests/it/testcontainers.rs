//! Testcontainers in the test command (issue 27): Testcontainers' own Java
//! `org.testcontainers.kafka.KafkaContainer`, made for `apache/kafka`, with only the image name
//! changed, and our Java `LogbookContainer` module's tests (JUnit 5: produce and consume in a
//! group, SASL/PLAIN, TLS, the fault injector's "no message lost when the leader moves", a
//! 3-node cluster that loses its leader), each on an image made from the binary under test by
//! `scripts/testcontainers-examples`. The Python, Go and Rust modules run after the test
//! command in `.ci/run` (slower: a venv, a Go build, a Rust build).
//!
//! It needs a Docker engine. `.ci/run` starts one and sets `LOGBOOK_DOCKER_TESTS=required`,
//! under which a missing engine fails the test; elsewhere, with no engine answering, the test
//! says so on stderr and does nothing.

use std::process::{Command, Stdio};

use crate::common::run_script;

fn docker_answers() -> bool {
    Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn stock_kafka_container_and_our_java_module_run_on_the_built_image() {
    if !docker_answers() {
        assert!(
            std::env::var("LOGBOOK_DOCKER_TESTS").as_deref() != Ok("required"),
            "LOGBOOK_DOCKER_TESTS=required but no Docker engine answers `docker info`"
        );
        eprintln!("no Docker engine answers `docker info`: the Testcontainers tests did not run");
        return;
    }
    // Proves: the stock KafkaContainer starts the kafka-compat image, waits for its log line,
    // and its client produces 10 records at offsets 0..9 and reads them back in a group; our
    // module's JUnit tests pass on the shell-less image.
    run_script(
        "testcontainers-examples",
        &["stock-java", "java"],
        "testcontainers-examples: 2 passed, 0 failed",
    );
}
