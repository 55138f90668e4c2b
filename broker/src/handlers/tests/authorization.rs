//! The authorizer seam: every handler asks only what Kafka's `KafkaApis` asks for its API
//! (`authorizer::REQUIRED_CHECKS`), and answers Kafka's authorization error codes when
//! the answer is no, without creating or revealing what it was not allowed to.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, RequestKind};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;

use super::{broker_with, request};
use crate::authorizer::{
    required_checks, AclOperation, Action, Authorizer, RequestIdentity, ResourceType,
    REQUIRED_CHECKS,
};

/// Says yes or no to everything, and records each question.
struct Recording {
    allow: bool,
    asked: Mutex<Vec<(ApiKey, ResourceType, AclOperation, String)>>,
}

impl Recording {
    fn new(allow: bool) -> Arc<Self> {
        Arc::new(Self {
            allow,
            asked: Mutex::new(Vec::new()),
        })
    }
}

impl Authorizer for Recording {
    fn authorize(&self, request: &RequestIdentity<'_>, action: &Action<'_>) -> bool {
        // The authorized-operations fields ask every supported operation; those questions
        // only report what could be done and are not the API's checks.
        if !action.log_if_allowed {
            return self.allow;
        }
        self.asked.lock().push((
            request.api_key,
            action.resource_type,
            action.operation,
            action.name.to_string(),
        ));
        self.allow
    }

    fn authorize_by_resource_type(
        &self,
        request: &RequestIdentity<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        self.asked
            .lock()
            .push((request.api_key, resource_type, operation, "*".to_string()));
        self.allow
    }
}

/// Runs one request of `key` at its highest version on `broker` and returns the
/// response's debug form.
async fn answer(broker: &Arc<crate::broker::Broker>, key: ApiKey, topic_id: uuid::Uuid) -> String {
    let version = super::super::supported(key).expect("served").max;
    let mut body: RequestKind = request(key, version, topic_id).expect("a sample request");
    // The samples name one resource twice, which Kafka refuses before asking the
    // authorizer; one copy is enough here.
    match &mut body {
        RequestKind::AlterConfigs(r) => r.resources.truncate(1),
        RequestKind::IncrementalAlterConfigs(r) => r.resources.truncate(1),
        _ => {}
    }
    let ctx = super::super::RequestContext::new(
        Arc::clone(broker),
        "127.0.0.1:1".parse().expect("address"),
        crate::listeners::ListenerName::new("PLAINTEXT"),
        key,
        version,
        1,
        None,
    );
    let response = super::super::dispatch(&ctx, body).await;
    format!("{:?}", response.map(|r| r.body))
}

// Every served API has a line in the table (or is one of those that check nothing), and
// with an authorizer that allows everything but is asked each time, no handler asks
// anything its line does not list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_ask_only_what_kafka_asks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recording = Recording::new(true);
    let broker = broker_with(dir.path(), recording.clone());
    let topic = broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    let unchecked = [
        ApiKey::ApiVersions,
        ApiKey::SaslHandshake,
        ApiKey::SaslAuthenticate,
    ];
    for api in super::super::APIS {
        let key = api.key;
        let listed = REQUIRED_CHECKS.iter().any(|(k, _)| *k == key);
        assert!(
            listed || unchecked.contains(&key),
            "{key:?} has no line in REQUIRED_CHECKS"
        );
        recording.asked.lock().clear();
        answer(&broker, key, topic.id).await;
        let allowed: BTreeSet<_> = required_checks(key).iter().copied().collect();
        for (asked_by, resource_type, operation, name) in recording.asked.lock().iter() {
            assert_eq!(*asked_by, key, "a check attributed to another API");
            assert!(
                allowed.contains(&(*resource_type, *operation)),
                "{key:?} asked {operation:?} on {resource_type:?} {name}, not in its line {allowed:?}"
            );
        }
    }
}

// With every question answered no, every API that checks something answers one of Kafka's
// authorization codes (TOPIC 29, GROUP 30, CLUSTER 31, TRANSACTIONAL_ID 53), or, for the
// listing APIs, lists nothing; and the topics it was refused are neither created nor
// revealed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_request_gets_kafkas_authorization_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker_with(dir.path(), Recording::new(false));
    let topic = broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    let codes = [
        ResponseError::TopicAuthorizationFailed,
        ResponseError::GroupAuthorizationFailed,
        ResponseError::ClusterAuthorizationFailed,
        ResponseError::TransactionalIdAuthorizationFailed,
    ]
    .map(|e| format!("error_code: {}", e.code()));
    // The listing APIs leave out what may not be described instead of refusing;
    // DescribeCluster reports no authorized operations.
    let listings = [
        ApiKey::ListGroups,
        ApiKey::ListTransactions,
        ApiKey::DescribeCluster,
    ];
    for (key, _) in REQUIRED_CHECKS {
        let response = answer(&broker, *key, topic.id).await;
        if listings.contains(key) {
            assert!(
                !response.contains("transactional_id: TransactionalId(")
                    && !response.contains("group_id: GroupId("),
                "{key:?} listed something: {response}"
            );
            continue;
        }
        assert!(
            codes.iter().any(|c| response.contains(c.as_str())),
            "{key:?} answered no authorization error: {response}"
        );
    }
    // Kafka's message comes with the code where the response has a top-level message
    // (the Java client shows an empty one as is).
    for key in [
        ApiKey::DescribeUserScramCredentials,
        ApiKey::ListPartitionReassignments,
        ApiKey::AlterPartitionReassignments,
        ApiKey::DescribeQuorum,
    ] {
        let response = answer(&broker, key, topic.id).await;
        assert!(
            response.contains("Cluster authorization failed."),
            "{key:?}: {response}"
        );
    }
    // Nothing was created by a refused request (Metadata and Produce auto-create "t"'s
    // neighbours only when allowed; CreateTopics' sample names "t" and "..").
    let names: Vec<String> = broker.topics.all().iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, vec!["t".to_string()]);
}
