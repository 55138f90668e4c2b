//! What the three ACL APIs share (Kafka's `AclApis`): without an authorizer they answer
//! SECURITY_DISABLED, as Kafka does when `authorizer.class.name` is unset; changes go to
//! the controller, and the answer waits until this broker's image has them, so a
//! DescribeAcls or an authorization right after sees the change.

use kafka_protocol::ResponseError;
use std::sync::Arc;

use logbook_controller::client::ControllerClient;
use logbook_controller::quorum::QuorumError;

use super::RequestContext;
use crate::errors;

/// Kafka's message when no authorizer is configured.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// Kafka's default message for CLUSTER_AUTHORIZATION_FAILED.
pub const CLUSTER_AUTHORIZATION_FAILED: &str = "Cluster authorization failed.";

/// A failure of a whole ACL request: Kafka's code and message.
pub type Refusal = (ResponseError, String);

/// Whether this broker has an authorizer to keep ACLs for.
pub fn enabled(ctx: &RequestContext) -> bool {
    ctx.broker.config.authorizer.standard
}

/// Runs `call` on the active controller's client, then waits for this broker's image to
/// reach what it committed.
///
/// # Errors
/// The request's failure as Kafka's code and message.
pub fn commit<T, F, Fut>(ctx: &RequestContext, api: &str, call: F) -> Result<T, Refusal>
where
    F: FnOnce(Arc<ControllerClient>) -> Fut,
    Fut: std::future::Future<Output = Result<T, QuorumError>>,
{
    let Some(cluster) = ctx.broker.topics.cluster() else {
        return Err((ResponseError::UnsupportedVersion, String::new()));
    };
    let controller = cluster
        .controller()
        .map_err(|e| (errors::quorum_error(&e), e.to_string()))?;
    let outcome = cluster.block_on(call(Arc::clone(controller.client())));
    let value = match outcome {
        None => return Err((ResponseError::RequestTimedOut, String::new())),
        Some(Err(e)) => return Err((errors::quorum_error(&e), e.to_string())),
        Some(Ok(value)) => value,
    };
    if !cluster.wait_for_controller_offset() {
        tracing::warn!(
            api,
            "ACLs committed, but this broker's metadata has not caught up in time"
        );
    }
    Ok(value)
}
