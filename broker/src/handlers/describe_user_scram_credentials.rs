//! DescribeUserScramCredentials (API key 50, KIP-554): the SCRAM mechanisms and iteration
//! counts of users (never their keys), from this broker's metadata image, as Kafka's
//! broker answers from its metadata cache. All users when none are named; a user named
//! twice gets DUPLICATE_RESOURCE, a user without credentials RESOURCE_NOT_FOUND, with
//! Kafka's messages. Needs DESCRIBE on the cluster.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::authorizer::AclOperation;

/// Versions served (Kafka 4.x serves 0).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// Answers a DescribeUserScramCredentials request.
pub fn handle(
    ctx: &RequestContext,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if !ctx.authorize_cluster(AclOperation::Describe) {
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                super::acls::CLUSTER_AUTHORIZATION_FAILED,
            )));
    }
    let image = ctx.metadata_image();
    let mut known: BTreeMap<&str, Vec<CredentialInfo>> = BTreeMap::new();
    for credential in image.scram_credentials() {
        known.entry(credential.name.as_str()).or_default().push(
            CredentialInfo::default()
                .with_mechanism(credential.mechanism)
                .with_iterations(credential.iterations),
        );
    }
    let named: Vec<&str> = request
        .users
        .iter()
        .flatten()
        .map(|u| u.name.as_str())
        .collect();
    let results = if named.is_empty() {
        known
            .into_iter()
            .map(|(user, infos)| found(user, infos))
            .collect()
    } else {
        named
            .iter()
            .enumerate()
            .filter(|(i, user)| !named[..*i].contains(user))
            .map(|(_, user)| {
                if named.iter().filter(|u| *u == user).count() > 1 {
                    refused(user, ResponseError::DuplicateResource, &format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"))
                } else if let Some(infos) = known.remove(user) {
                    found(user, infos)
                } else {
                    refused(user, ResponseError::ResourceNotFound, &format!("Attempt to describe a user credential that does not exist: {user}"))
                }
            })
            .collect()
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

fn found(user: &str, infos: Vec<CredentialInfo>) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_string()))
        .with_credential_infos(infos)
}

fn refused(user: &str, error: ResponseError, message: &str) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_string()))
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message.to_string())))
}
