//! Requests for the controller listener (the metadata quorum's own port): Kafka framing
//! with request header v1 and private api keys whose bodies are JSON (32000
//! AppendEntries, 32001 Vote, 32002 InstallSnapshot: openraft 0.9's serde layout;
//! 32004 controller RPC: a `ControllerRequest`). The listener does not serve ApiVersions,
//! so these keys are what there is to fuzz; Kafka-keyed requests are sent to it too.

use std::net::SocketAddr;
use std::time::Duration;

use crate::wire;

/// AppendEntries.
pub const APPEND_ENTRIES: i16 = 32_000;
/// Vote.
pub const VOTE: i16 = 32_001;
/// InstallSnapshot.
pub const INSTALL_SNAPSHOT: i16 = 32_002;
/// Controller RPC.
pub const CONTROLLER_RPC: i16 = 32_004;
/// The private keys, each served at version 0 only.
pub const KEYS: [i16; 4] = [APPEND_ENTRIES, VOTE, INSTALL_SNAPSHOT, CONTROLLER_RPC];

/// Request header v1 (key, version, correlation id, client id) then `body`.
#[must_use]
pub fn payload(key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let client_id = b"logbook-wire-fuzz";
    let mut out = Vec::with_capacity(10 + client_id.len() + body.len());
    out.extend_from_slice(&key.to_be_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    out.extend_from_slice(&i16::try_from(client_id.len()).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(client_id);
    out.extend_from_slice(body);
    out
}

/// Bytes of the header `payload` writes.
pub const HEADER_BYTES: usize = 10 + 17;

/// Whether Raft bodies may carry current or future terms (a forged leader or candidate);
/// without it every term is 0, which a voter refuses as stale.
pub static FORGE_TERMS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// A term: stale (harmless), or when forging, ones from the future or the edge.
fn term(rng: &mut fastrand::Rng, hostile: bool) -> u64 {
    if hostile && FORGE_TERMS.load(std::sync::atomic::Ordering::Relaxed) {
        [0, 1, u64::MAX, u64::MAX - 1, 1 << 53, rng.u64(..)][rng.usize(..6)]
    } else {
        0
    }
}

fn node(rng: &mut fastrand::Rng, hostile: bool) -> u64 {
    if hostile {
        [0, 1, 2, 3, 99, u64::MAX][rng.usize(..6)]
    } else {
        rng.u64(1..4)
    }
}

fn log_id(rng: &mut fastrand::Rng, hostile: bool) -> String {
    if rng.bool() {
        return "null".to_owned();
    }
    let index = if hostile {
        [0, 1, u64::MAX, 1 << 40][rng.usize(..4)]
    } else {
        rng.u64(0..5)
    };
    format!(
        r#"{{"leader_id":{{"term":{},"node_id":{}}},"index":{index}}}"#,
        term(rng, hostile),
        node(rng, hostile)
    )
}

fn vote(rng: &mut fastrand::Rng, hostile: bool) -> String {
    format!(
        r#"{{"leader_id":{{"term":{},"node_id":{}}},"committed":{}}}"#,
        term(rng, hostile),
        node(rng, hostile),
        hostile && rng.bool()
    )
}

/// The JSON body of a request of private `key`.
#[must_use]
pub fn body(key: i16, rng: &mut fastrand::Rng, hostile: bool) -> String {
    match key {
        VOTE => format!(
            r#"{{"vote":{},"last_log_id":{}}}"#,
            vote(rng, hostile),
            log_id(rng, hostile)
        ),
        APPEND_ENTRIES => {
            let entries = if hostile && rng.bool() {
                format!(
                    r#"[{{"log_id":{},"payload":"Blank"}},{{"log_id":{},"payload":{{"Normal":{{"junk":[1,2,3]}}}}}}]"#,
                    log_id(rng, hostile),
                    log_id(rng, hostile)
                )
            } else {
                "[]".to_owned()
            };
            format!(
                r#"{{"vote":{},"prev_log_id":{},"entries":{entries},"leader_commit":{}}}"#,
                vote(rng, hostile),
                log_id(rng, hostile),
                log_id(rng, hostile)
            )
        }
        INSTALL_SNAPSHOT => format!(
            r#"{{"vote":{},"meta":{{"last_log_id":{},"last_membership":{{"log_id":null,"membership":{{"configs":[[1,2,3]],"nodes":{{"1":{{"host":"127.0.0.1","port":1}}}}}}}},"snapshot_id":"fuzz-{}"}},"offset":{},"data":[{}],"done":{}}}"#,
            vote(rng, hostile),
            log_id(rng, hostile),
            rng.u32(..),
            if hostile { u64::MAX } else { 0 },
            (0..rng.usize(0..16))
                .map(|_| rng.u8(..).to_string())
                .collect::<Vec<_>>()
                .join(","),
            hostile && rng.bool()
        ),
        _ => {
            let name = format!("fuzz-absent-{}", rng.u32(..));
            match rng.u32(0..6) {
                0 => r#""DescribeQuorum""#.to_owned(),
                1 => format!(r#"{{"DeleteTopics":{{"names":["{name}"]}}}}"#),
                2 => r#"{"ElectLeaders":{"election":"Preferred","partitions":[["fuzz-a",0]]}}"#
                    .to_owned(),
                3 => format!(
                    r#"{{"AllocateProducerIds":{{"broker_id":{},"broker_epoch":-1}}}}"#,
                    node(rng, hostile)
                ),
                4 => format!(
                    r#"{{"CreatePartitions":{{"topics":[{{"name":"{name}","count":{}}}]}}}}"#,
                    if hostile { i32::MAX } else { 2 }
                ),
                _ => r#"{"NoSuchRequest":{}}"#.to_owned(),
            }
        }
    }
}

/// Whether the controller listener answers a stale Vote (term 0): a harmless request,
/// used as its health check when it does.
#[must_use]
pub fn answers_stale_vote(addr: SocketAddr, timeout: Duration) -> bool {
    let mut rng = fastrand::Rng::with_seed(1);
    let body = body(VOTE, &mut rng, false);
    let Ok(mut stream) = wire::connect(addr, timeout) else {
        return false;
    };
    let frame = crate::mutate::honest(&payload(VOTE, 0, 1, body.as_bytes()));
    wire::write_all(&mut stream, &frame) && wire::read_frame(&mut stream).is_ok()
}

/// Health of the controller listener: it accepts a connection and, if it answered a
/// stale Vote before fuzzing, answers one now.
///
/// # Errors
/// What failed.
pub fn health(addr: SocketAddr, vote_answered: bool, timeout: Duration) -> Result<(), String> {
    if vote_answered {
        if answers_stale_vote(addr, timeout) {
            Ok(())
        } else {
            Err("controller listener did not answer a stale Vote".to_owned())
        }
    } else {
        wire::connect(addr, timeout)
            .map(drop)
            .map_err(|e| format!("controller listener: connect: {e}"))
    }
}
