//! The fault injector's admin API, served on the metrics listener: `POST /faults` arms a
//! fault (or runs `rebalance`/`fence` at once) from a JSON [`FaultSpec`], `GET /faults`
//! lists them, `DELETE /faults` clears every one and `DELETE /faults/<id>` one. Answers
//! are JSON; a refused spec gets 400 with `{"error": …}`, and a broker started without
//! `--fault-injection` answers 404 to all of it.

use std::sync::Arc;
use std::time::Duration;

use crate::coordinator::transaction::TxnError;
use hyper::StatusCode;

use super::{FaultKind, FaultSpec, FaultView};
use crate::broker::Broker;

/// Largest request body the API reads.
pub const BODY_BYTES_MAX: usize = 64 * 1024;

/// How long a `fence` keeps asking while the fenced producer's transaction aborts.
const FENCE_TIMEOUT: Duration = Duration::from_secs(30);

/// The answer to `method` on `path` (under `/faults`) with `body`: status and JSON.
pub async fn answer(
    broker: Option<&Arc<Broker>>,
    method: &hyper::Method,
    path: &str,
    body: &[u8],
) -> (StatusCode, String) {
    let Some(broker) = broker else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the broker is still starting",
        );
    };
    let Some(injector) = broker.faults.as_deref() else {
        return error(
            StatusCode::NOT_FOUND,
            "fault injection is off: start the broker with --fault-injection (LOGBOOK_FAULT_INJECTION=true)",
        );
    };
    let id = path.strip_prefix("/faults").unwrap_or("").trim_matches('/');
    match (method.as_str(), id) {
        ("GET", "") => json(StatusCode::OK, &injector.list()),
        ("DELETE", "") => json(
            StatusCode::OK,
            &serde_json::json!({ "cleared": injector.clear(None) }),
        ),
        ("DELETE", id) => match id.parse::<u64>() {
            Ok(id) => match injector.clear(Some(id)) {
                0 => error(StatusCode::NOT_FOUND, &format!("no fault {id}")),
                n => json(StatusCode::OK, &serde_json::json!({ "cleared": n })),
            },
            Err(_) => error(StatusCode::NOT_FOUND, "not found: /faults or /faults/<id>"),
        },
        ("POST", "") => {
            let spec: FaultSpec = match serde_json::from_slice(body) {
                Ok(spec) => spec,
                Err(e) => return error(StatusCode::BAD_REQUEST, &format!("fault spec: {e}")),
            };
            let result = match spec.kind {
                Some(FaultKind::Rebalance) => rebalance(broker, spec),
                Some(FaultKind::Fence) => fence(broker, spec).await,
                _ => injector.add(spec),
            };
            match result {
                Ok(view) => json(StatusCode::OK, &view),
                Err(e) => error(StatusCode::BAD_REQUEST, &e),
            }
        }
        _ => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET /faults, POST /faults, DELETE /faults[/<id>]",
        ),
    }
}

/// A forced rebalance of `spec.group`, now.
fn rebalance(broker: &Broker, spec: FaultSpec) -> Result<FaultView, String> {
    let injector = broker.faults.as_deref().ok_or("fault injection is off")?;
    let group = spec.group.clone().ok_or("a rebalance needs group")?;
    let started = broker
        .groups
        .force_rebalance(&group, "forced by the fault injector")
        .map_err(|e| format!("group {group}: {e}"))?;
    if !started {
        return Err(format!(
            "group {group} has no stable generation to rebalance (unknown, empty or already rebalancing)"
        ));
    }
    metrics::counter!("logbook_faults_injected_total", "kind" => "rebalance").increment(1);
    let id = injector.next_id();
    tracing::warn!(id, group, "fault injection: group forced to rebalance");
    Ok(done(id, spec, format!("group {group} is rebalancing")))
}

/// Fences `spec.transactional_id`'s producer now: a new producer epoch, as a second
/// producer's InitProducerId would give, so the current one is fenced and its open
/// transaction aborted.
async fn fence(broker: &Broker, spec: FaultSpec) -> Result<FaultView, String> {
    let injector = broker.faults.as_deref().ok_or("fault injection is off")?;
    let id = spec
        .transactional_id
        .clone()
        .ok_or("a fence needs transactional_id")?;
    let current = broker
        .transactions
        .describe(&id)
        .map_err(|e| format!("transactional id {id}: {e}"))?;
    let deadline = tokio::time::Instant::now() + FENCE_TIMEOUT;
    let (producer_id, epoch) = loop {
        match broker
            .transactions
            .init_producer_id(&id, current.timeout_ms, None)
            .await
        {
            Ok(fenced) => break fenced,
            // The open transaction is being aborted; Kafka's client retries the same way.
            Err(TxnError::ConcurrentTransactions | TxnError::CoordinatorLoadInProgress)
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(format!("transactional id {id}: {e}")),
        }
    };
    metrics::counter!("logbook_faults_injected_total", "kind" => "fence").increment(1);
    let fault_id = injector.next_id();
    tracing::warn!(
        id = fault_id,
        transactional_id = id,
        producer_id,
        epoch,
        previous_epoch = current.producer_epoch,
        "fault injection: transactional producer fenced"
    );
    Ok(done(
        fault_id,
        spec,
        format!(
            "producer {producer_id} is at epoch {epoch} (was {})",
            current.producer_epoch
        ),
    ))
}

fn done(id: u64, spec: FaultSpec, outcome: String) -> FaultView {
    FaultView {
        id,
        injected: 1,
        armed: false,
        outcome: Some(outcome),
        spec,
    }
}

fn json(status: StatusCode, value: &impl serde::Serialize) -> (StatusCode, String) {
    let mut body =
        serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    body.push('\n');
    (status, body)
}

fn error(status: StatusCode, message: &str) -> (StatusCode, String) {
    json(status, &serde_json::json!({ "error": message }))
}
