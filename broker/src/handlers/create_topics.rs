//! CreateTopics (API key 19): create topics with a partition count, replication factor and
//! config overrides, or only validate the request (`validate_only`).

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::errors;
use crate::topic_config::TopicConfig;
use crate::topics::{NewTopic, TopicError};
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 2, max: 7 };

/// Creates (or only validates) one topic of the request. A manual assignment goes to the
/// controller as it is, which checks its brokers (registered, at least one active per
/// partition) as Kafka's does.
fn create_one(
    broker: &Broker,
    t: &CreatableTopic,
    validate_only: bool,
) -> Result<(uuid::Uuid, i32, i16, TopicConfig), TopicError> {
    let config = TopicConfig::from_pairs(
        t.configs
            .iter()
            .map(|c| (c.name.as_str(), c.value.as_ref().map(StrBytes::as_str))),
    )?;
    let (partitions, replication_factor) = partitions_and_factor(broker, t)?;
    let mut by_index: Vec<
        &kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment,
    > = t.assignments.iter().collect();
    by_index.sort_by_key(|a| a.partition_index);
    let assignment: Vec<Vec<i32>> = by_index
        .iter()
        .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
        .collect();
    let new = NewTopic {
        name: t.name.as_str(),
        partitions,
        replication_factor,
        config,
    };
    if validate_only {
        broker.topics.validate_assigned(&new, &assignment)?;
        return Ok((
            uuid::Uuid::nil(),
            partitions,
            replication_factor,
            new.config,
        ));
    }
    let topic = tokio::task::block_in_place(|| broker.topics.create_assigned(new, &assignment))?;
    Ok((
        topic.id,
        partitions,
        replication_factor,
        topic.config.clone(),
    ))
}

/// The topic's partition count and replication factor: the request's (-1 for the broker's
/// defaults), or those a manual assignment implies. An assignment must come alone, number
/// its partitions 0..n and give each the same replica count, as Kafka requires.
fn partitions_and_factor(broker: &Broker, t: &CreatableTopic) -> Result<(i32, i16), TopicError> {
    if t.assignments.is_empty() {
        let partitions = if t.num_partitions == -1 {
            broker.config.num_partitions
        } else {
            t.num_partitions
        };
        let factor = if t.replication_factor == -1 {
            broker.config.default_replication_factor
        } else {
            t.replication_factor
        };
        return Ok((partitions, factor));
    }
    if t.num_partitions != -1 || t.replication_factor != -1 {
        return Err(TopicError::InvalidReplicaAssignment(
            "both an assignment and a partition count or replication factor were given".into(),
        ));
    }
    let mut indexes: Vec<i32> = t.assignments.iter().map(|a| a.partition_index).collect();
    indexes.sort_unstable();
    if indexes.iter().zip(0..).any(|(i, expected)| *i != expected) {
        return Err(TopicError::InvalidReplicaAssignment(
            "partitions must be numbered 0..n".into(),
        ));
    }
    if t.assignments.iter().any(|a| a.broker_ids.is_empty()) {
        return Err(TopicError::InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list.".into(),
        ));
    }
    let factor = t.assignments[0].broker_ids.len();
    for a in &t.assignments {
        if a.broker_ids.len() != factor {
            return Err(TopicError::InvalidReplicaAssignment(
                "all partitions need the same replica count".into(),
            ));
        }
    }
    Ok((
        i32::try_from(t.assignments.len()).unwrap_or(i32::MAX),
        i16::try_from(factor).unwrap_or(i16::MAX),
    ))
}

/// Partitions one topic of the request asks for, counted as Kafka's controller counts
/// them for its per-request cap: the assignment's size, else the count (the default for
/// -1; nothing for an invalid count, which fails on its own).
fn requested_partitions(broker: &Broker, t: &CreatableTopic) -> u64 {
    if !t.assignments.is_empty() {
        return u64::try_from(t.assignments.len()).unwrap_or(u64::MAX);
    }
    let count = if t.num_partitions == -1 {
        broker.config.num_partitions
    } else {
        t.num_partitions
    };
    u64::try_from(count).unwrap_or(0)
}

/// TOPIC_AUTHORIZATION_FAILED for a topic whose configs the sender may not see (the
/// answer then leaves them out), else NONE.
fn describe_configs_error(ctx: &super::RequestContext, topic: &str) -> i16 {
    if ctx
        .authorizer
        .authorize_quietly(AclOperation::DescribeConfigs, ResourceType::Topic, topic)
    {
        errors::NONE
    } else {
        ResponseError::TopicAuthorizationFailed.code()
    }
}

/// Answers a CreateTopics request.
pub fn handle(ctx: &super::RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let broker = &ctx.broker;
    // The whole request is checked against the partition limits before any topic of it
    // is created, so a request that cannot be completed leaves nothing behind.
    let requested = request
        .topics
        .iter()
        .map(|t| requested_partitions(broker, t))
        .fold(0_u64, u64::saturating_add);
    if let Err(e) = broker.topics.check_request_partitions(requested) {
        tracing::info!(requested, error = %e, "create topics refused");
        let topics = request
            .topics
            .iter()
            .map(|t| {
                CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(errors::topic_error(&e).code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string())))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
            })
            .collect();
        return CreateTopicsResponse::default().with_topics(topics);
    }
    let mut seen = std::collections::HashSet::new();
    // CREATE on the cluster, or else on each topic.
    let may_create_any = ctx
        .authorizer
        .authorize_cluster_quietly(AclOperation::Create);
    let topics = request
        .topics
        .iter()
        .map(|t| {
            // A created topic's message is null, as Kafka's (the default is "").
            let result = CreatableTopicResult::default()
                .with_name(t.name.clone())
                .with_error_message(None);
            if !seen.insert(t.name.as_str().to_string()) {
                return result
                    .with_error_code(kafka_protocol::ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "duplicate topic in request",
                    )));
            }
            authorize_and_create(ctx, t, request.validate_only, may_create_any, result)
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

/// One topic's result: CREATE checked first (on the cluster, else on the topic), then the
/// topic created or validated. Its configs are returned (v5+) only with DESCRIBE_CONFIGS
/// on it, as Kafka does, since they may hold what the sender may not read.
fn authorize_and_create(
    ctx: &super::RequestContext,
    t: &CreatableTopic,
    validate_only: bool,
    may_create_any: bool,
    result: CreatableTopicResult,
) -> CreatableTopicResult {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    if !may_create_any && !ctx.authorize(AclOperation::Create, ResourceType::Topic, &t.name) {
        return result
            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str("Authorization failed.")))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_topic_config_error_code(describe_configs_error(ctx, &t.name));
    }
    let config_error = describe_configs_error(ctx, &t.name);
    match create_one(broker, t, validate_only) {
        Ok((id, partitions, factor, _)) if config_error != errors::NONE => result
            .with_topic_id(id)
            .with_num_partitions(partitions)
            .with_replication_factor(factor)
            .with_topic_config_error_code(config_error),
        Ok((id, partitions, factor, config)) => {
            let configs = (version >= 5).then(|| {
                config
                    .describe(broker.topics.defaults())
                    .into_iter()
                    .map(|(name, value, source)| {
                        CreatableTopicConfigs::default()
                            .with_name(StrBytes::from_string(name))
                            .with_value(Some(StrBytes::from_string(value)))
                            .with_config_source(source.code())
                    })
                    .collect()
            });
            result
                .with_topic_id(id)
                .with_num_partitions(partitions)
                .with_replication_factor(factor)
                .with_configs(configs)
        }
        Err(e) => {
            tracing::info!(topic = %t.name.as_str(), error = %e, "create topic refused");
            result
                .with_error_code(errors::topic_error(&e).code())
                .with_error_message(Some(StrBytes::from_string(e.to_string())))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
        }
    }
}
