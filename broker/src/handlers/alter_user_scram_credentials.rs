//! AlterUserScramCredentials (API key 51, KIP-554): what `kafka-configs.sh --alter
//! --add-config 'SCRAM-SHA-256=[password=…]' --entity-type users` sends. The client sends
//! the salt and the salted password; this broker checks each change as Kafka's
//! `ScramControlManager` does (one change per user per request, a known mechanism, a
//! user name, 4096..=16384 iterations), derives the stored and server keys, and has the
//! controller commit them to the metadata log (`QuorumController::
//! alter_user_scram_credentials`, which refuses a deletion of a credential that does not
//! exist). Needs ALTER on the cluster. The answer comes once this broker's own image has
//! the change, so a login right after it finds the credential here.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use logbook_controller::quorum::ScramChange;

use super::RequestContext;
use crate::authorizer::AclOperation;
use crate::errors;
use crate::sasl::scram::ScramMechanism;

/// Versions served (Kafka 4.x serves 0).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// A user's refusal: Kafka's code and message.
type Refusal = (ResponseError, String);

/// Answers an AlterUserScramCredentials request.
pub fn handle(
    ctx: &RequestContext,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let users = request
        .deletions
        .iter()
        .map(|d| d.name.clone())
        .chain(request.upsertions.iter().map(|u| u.name.clone()));
    if !ctx.authorize_cluster(AclOperation::Alter) {
        let results = users
            .map(|user| {
                result(
                    user,
                    Err((ResponseError::ClusterAuthorizationFailed, String::new())),
                )
            })
            .collect();
        return AlterUserScramCredentialsResponse::default().with_results(results);
    }
    let image = ctx.metadata_image();
    let (changes, mut refused) = checked_changes(&request, |name, mechanism| {
        image.scram_credential(name, mechanism).is_some()
    });
    let outcomes = commit(ctx, &changes);
    let mut results = Vec::new();
    for (change, outcome) in changes.iter().zip(outcomes) {
        let user = StrBytes::from_string(change.user().to_string());
        match outcome {
            Ok(()) => results.push(result(user, Ok(()))),
            Err(refusal) => {
                refused.insert(user, refusal);
            }
        }
    }
    results.extend(
        refused
            .into_iter()
            .map(|(user, refusal)| result(user, Err(refusal))),
    );
    AlterUserScramCredentialsResponse::default().with_results(results)
}

fn result(user: StrBytes, outcome: Result<(), Refusal>) -> AlterUserScramCredentialsResult {
    let r = AlterUserScramCredentialsResult::default().with_user(user);
    match outcome {
        Ok(()) => r,
        Err((error, message)) => r
            .with_error_code(error.code())
            .with_error_message((!message.is_empty()).then(|| StrBytes::from_string(message))),
    }
}

/// The changes to commit (deletions first, then upsertions) and the users refused before
/// the controller is asked, as Kafka's `ScramControlManager::alterCredentials` sorts them.
/// A deletion of a credential that `exists` does not know refuses its user at once, so an
/// upsertion of the same user later in the request is not looked at (Kafka validates
/// deletions first); the controller checks existence again when it commits.
fn checked_changes(
    request: &AlterUserScramCredentialsRequest,
    exists: impl Fn(&str, i8) -> bool,
) -> (Vec<ScramChange>, BTreeMap<StrBytes, Refusal>) {
    let duplicate = || {
        (
            ResponseError::DuplicateResource,
            "A user credential cannot be altered twice in the same request".to_string(),
        )
    };
    let mut refused: BTreeMap<StrBytes, Refusal> = BTreeMap::new();
    let mut wanted: BTreeMap<StrBytes, ScramChange> = BTreeMap::new();
    let mut order = Vec::new();
    let deletions = request
        .deletions
        .iter()
        .map(|d| (&d.name, d.mechanism, None));
    let upsertions = request
        .upsertions
        .iter()
        .map(|u| (&u.name, u.mechanism, Some(u)));
    for (name, mechanism, upsertion) in deletions.chain(upsertions) {
        if refused.contains_key(name) {
            continue;
        }
        if wanted.remove(name).is_some() {
            refused.insert(name.clone(), duplicate());
            continue;
        }
        let change = check_user(name, mechanism).and_then(|mechanism| match upsertion {
            None if !exists(name, mechanism.code()) => Err((
                ResponseError::ResourceNotFound,
                "Attempt to delete a user credential that does not exist".to_string(),
            )),
            None => Ok(ScramChange::Delete {
                name: name.to_string(),
                mechanism: mechanism.code(),
            }),
            Some(u) => {
                if u.iterations < ScramMechanism::MIN_ITERATIONS {
                    return Err((
                        ResponseError::UnacceptableCredential,
                        "Too few iterations".to_string(),
                    ));
                }
                if u.iterations > ScramMechanism::MAX_ITERATIONS {
                    return Err((
                        ResponseError::UnacceptableCredential,
                        "Too many iterations".to_string(),
                    ));
                }
                let credential =
                    mechanism.credential(u.salt.to_vec(), &u.salted_password, u.iterations);
                Ok(ScramChange::Upsert(
                    credential.into_record(name.to_string()),
                ))
            }
        });
        match change {
            Ok(change) => {
                order.push(name.clone());
                wanted.insert(name.clone(), change);
            }
            Err(refusal) => {
                refused.insert(name.clone(), refusal);
            }
        }
    }
    let changes = order
        .iter()
        .filter_map(|name| wanted.remove(name))
        .collect();
    (changes, refused)
}

fn check_user(name: &str, mechanism: i8) -> Result<ScramMechanism, Refusal> {
    if name.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty".to_string(),
        ));
    }
    ScramMechanism::from_code(mechanism).ok_or_else(|| {
        (
            ResponseError::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism".to_string(),
        )
    })
}

/// Has the controller commit `changes`, then waits for this broker's image to have them;
/// each change's outcome in order.
fn commit(ctx: &RequestContext, changes: &[ScramChange]) -> Vec<Result<(), Refusal>> {
    if changes.is_empty() {
        return Vec::new();
    }
    let failed = |error: ResponseError, message: String| vec![Err((error, message)); changes.len()];
    let Some(cluster) = ctx.broker.topics.cluster() else {
        return failed(ResponseError::UnsupportedVersion, String::new());
    };
    let controller = match cluster.controller() {
        Ok(controller) => controller,
        Err(e) => return failed(errors::quorum_error(&e), e.to_string()),
    };
    let outcome = cluster.block_on(
        controller
            .client()
            .alter_user_scram_credentials(changes.to_vec()),
    );
    let results = match outcome {
        None => return failed(ResponseError::RequestTimedOut, String::new()),
        Some(Err(e)) => return failed(errors::quorum_error(&e), e.to_string()),
        Some(Ok(results)) => results,
    };
    if !cluster.wait_for_controller_offset() {
        tracing::warn!("AlterUserScramCredentials committed, but this broker's metadata has not caught up in time");
    }
    results
        .into_iter()
        .map(|r| r.map_err(|e| (errors::quorum_error(&e), e.to_string())))
        .collect()
}
