//! The workspace's layering, enforced (as rust-analyzer's tidy test does): reads
//! `cargo metadata` and fails if a crate gains a dependency its layer forbids.
//!
//! - common (the clock, durable file replacement) is the floor: no workspace crate;
//! - storage and protocol-adapter are leaves above it: no other workspace crate, and
//!   storage never sees the wire protocol (no `kafka-protocol`) or the async runtime;
//! - metadata (image, records) is pure: nothing but common;
//! - replication may use storage (and protocol-adapter, for the follower's fetch
//!   client), nothing above them;
//! - the controller's Raft layer uses only metadata and common: never a partition or log;
//! - both may use the client crate for one thing: its `ConnectionSecurity` (TLS, then a
//!   SASL login) on the connections they open, the one implementation the tools and the
//!   transaction markers use too; the client depends on protocol-adapter alone, so it
//!   brings no partition, log or broker into either layer;
//! - the Kafka-protocol client (`logbook-client`) uses protocol-adapter only;
//! - the admin tools (`logbook-cli`) reach brokers only through that client: never the
//!   broker, storage, replication or the controller;
//! - the coordinators (`logbook-coordinator`) see the broker's logs only through their
//!   own traits: never the broker, storage, replication or the controller; they use the
//!   client (markers and KIP-890 checks to other brokers) and common;
//! - only the broker sits on top.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Normal (non-dev) dependencies of each workspace package.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let mut out = BTreeMap::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("name").to_string();
        let deps = package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().expect("dependency name").to_string())
            .collect();
        out.insert(name, deps);
    }
    out
}

fn assert_none(deps: &BTreeMap<String, BTreeSet<String>>, package: &str, forbidden: &[&str]) {
    let have = deps
        .get(package)
        .unwrap_or_else(|| panic!("{package} is not in the workspace"));
    for f in forbidden {
        assert!(
            !have.contains(*f),
            "{package} must not depend on {f} (see ARCHITECTURE.md, invariants)"
        );
    }
}

#[test]
fn crates_keep_their_layers() {
    let deps = dependencies();
    let workspace = [
        "logbook-protocol",
        "logbook-storage",
        "logbook-replication",
        "logbook-broker",
    ];
    // Every workspace crate (`--no-deps` lists only those), so a crate added later counts too.
    let members: Vec<&str> = deps.keys().map(String::as_str).collect();
    // common is the floor: the clock and the durable file replacement, nothing else.
    let all_but = |allowed: &[&str]| -> Vec<&str> {
        members
            .iter()
            .copied()
            .filter(|name| !allowed.contains(name))
            .collect()
    };
    assert_none(&deps, "logbook-common", &all_but(&[]));
    // The metadata image and records are pure: no other workspace crate but common.
    assert_none(&deps, "logbook-metadata", &all_but(&["logbook-common"]));
    // The controller sees only the metadata crate (and common), never partitions or logs;
    // the client only for securing its connections (see the module docs).
    assert_none(
        &deps,
        "logbook-controller",
        &all_but(&["logbook-common", "logbook-metadata", "logbook-client"]),
    );
    assert_none(&deps, "logbook-storage", &all_but(&["logbook-common"]));
    assert_none(
        &deps,
        "logbook-storage",
        &["kafka-protocol", "tokio", "tokio-util"],
    );
    assert_none(&deps, "logbook-protocol", &workspace);
    assert_none(
        &deps,
        "logbook-replication",
        &all_but(&[
            "logbook-common",
            "logbook-storage",
            "logbook-protocol",
            "logbook-client",
        ]),
    );
    // The Raft layer knows no broker, partition or log: its state machine is a trait.
    assert_none(&deps, "logbook-controller", &workspace);
    // The client speaks the protocol through protocol-adapter's framing and nothing else,
    // so the tools that use it do not drag the broker in.
    let not_protocol: Vec<&str> = members
        .iter()
        .copied()
        .filter(|name| *name != "logbook-protocol" && *name != "logbook-common")
        .collect();
    assert_none(&deps, "logbook-client", &not_protocol);
    assert_none(
        &deps,
        "logbook-coordinator",
        &all_but(&["logbook-common", "logbook-client"]),
    );
    assert_none(
        &deps,
        "logbook-cli",
        &[
            "logbook-broker",
            "logbook-storage",
            "logbook-replication",
            "logbook-controller",
        ],
    );
}
