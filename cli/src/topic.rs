//! `logbook topic`: what `kafka-topics.sh` and `kafka-configs.sh --entity-type topics` do.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

use super::client::{check, CliError, KafkaClient, Node};
use super::output::{json, table};
use super::Connection;

/// Kafka's `ConfigResource.Type.TOPIC`.
const TOPIC_RESOURCE: i8 = 2;
/// How long the broker may take over a topic operation.
const ADMIN_TIMEOUT_MS: i32 = 30_000;

/// `logbook topic …`
#[derive(Debug, clap::Args)]
pub struct TopicArgs {
    #[command(subcommand)]
    command: TopicCommand,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, clap::Subcommand)]
enum TopicCommand {
    /// Create a topic.
    Create {
        /// The topic's name.
        name: String,
        /// Partitions (default: the broker's num.partitions).
        #[arg(short, long)]
        partitions: Option<i32>,
        /// Replicas of each partition (default: the broker's default.replication.factor).
        #[arg(short, long)]
        replication_factor: Option<i16>,
        /// A topic config, `KEY=VALUE` (repeatable), e.g. `cleanup.policy=compact`.
        #[arg(short, long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
        /// Only check that the broker would create it.
        #[arg(long)]
        dry_run: bool,
    },
    /// List topics.
    List {
        /// Leave out internal topics (`__consumer_offsets`, `__transaction_state`).
        #[arg(long)]
        exclude_internal: bool,
    },
    /// Partitions (leader, replicas, ISR) and configs of a topic.
    Describe {
        /// The topic's name.
        name: String,
    },
    /// Delete a topic.
    Delete {
        /// The topic's name.
        name: String,
    },
    /// Set or remove configs of a topic.
    AlterConfig {
        /// The topic's name.
        name: String,
        /// Set a config, `KEY=VALUE` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Remove a config, back to the broker's default (repeatable).
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
    },
    /// Grow a topic to more partitions.
    AddPartitions {
        /// The topic's name.
        name: String,
        /// The topic's partition count afterwards.
        #[arg(long)]
        total: i32,
    },
}

/// Runs `logbook topic`.
///
/// # Errors
/// A broker refused, or none could be reached.
pub async fn run(args: TopicArgs) -> Result<(), CliError> {
    let client = args.connection.client()?;
    let result = dispatch(&client, args.command, args.connection.json).await;
    client.shutdown();
    result
}

async fn dispatch(
    client: &KafkaClient,
    command: TopicCommand,
    as_json: bool,
) -> Result<(), CliError> {
    match command {
        TopicCommand::Create {
            name,
            partitions,
            replication_factor,
            configs,
            dry_run,
        } => {
            create(
                client,
                &name,
                partitions,
                replication_factor,
                &configs,
                dry_run,
                as_json,
            )
            .await
        }
        TopicCommand::List { exclude_internal } => list(client, exclude_internal, as_json).await,
        TopicCommand::Describe { name } => describe(client, &name, as_json).await,
        TopicCommand::Delete { name } => delete(client, &name, as_json).await,
        TopicCommand::AlterConfig { name, set, delete } => {
            alter_config(client, &name, &set, &delete, as_json).await
        }
        TopicCommand::AddPartitions { name, total } => {
            add_partitions(client, &name, total, as_json).await
        }
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// `KEY=VALUE` pairs.
fn key_values(pairs: &[String]) -> Result<Vec<(String, String)>, CliError> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .ok_or_else(|| CliError::Failed(format!("'{pair}' is not KEY=VALUE")))
        })
        .collect()
}

async fn create(
    client: &KafkaClient,
    name: &str,
    partitions: Option<i32>,
    replication_factor: Option<i16>,
    configs: &[String],
    dry_run: bool,
    as_json: bool,
) -> Result<(), CliError> {
    let configs = key_values(configs)?;
    let topic = CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions.unwrap_or(-1))
        .with_replication_factor(replication_factor.unwrap_or(-1))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.clone()))
                        .with_value(Some(StrBytes::from_string(v.clone())))
                })
                .collect(),
        );
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(ADMIN_TIMEOUT_MS)
        .with_validate_only(dry_run);
    let response = client.send(Node::Any, &request).await?;
    let result = response
        .topics
        .first()
        .ok_or_else(|| CliError::Failed("CreateTopics answered no topic".into()))?;
    check(
        result.error_code,
        &format!("creating topic {name}"),
        result.error_message.as_ref(),
    )?;
    if as_json {
        json(&json!({
            "topic": name,
            "partitions": result.num_partitions,
            "replication_factor": result.replication_factor,
            "created": !dry_run,
        }));
    } else if dry_run {
        outln!("Topic {name} can be created.");
    } else {
        outln!("Created topic {name}.");
    }
    Ok(())
}

async fn list(client: &KafkaClient, exclude_internal: bool, as_json: bool) -> Result<(), CliError> {
    let metadata = client.metadata(None).await?;
    let mut topics: Vec<(String, usize, usize, bool)> = metadata
        .topics
        .iter()
        .filter(|t| !(exclude_internal && t.is_internal))
        .filter_map(|t| {
            let name = t.name.as_ref()?.to_string();
            let replicas = t.partitions.first().map_or(0, |p| p.replica_nodes.len());
            Some((name, t.partitions.len(), replicas, t.is_internal))
        })
        .collect();
    topics.sort();
    if as_json {
        json(&json!(topics
            .iter()
            .map(|(name, partitions, replicas, internal)| json!({
                "topic": name,
                "partitions": partitions,
                "replication_factor": replicas,
                "internal": internal,
            }))
            .collect::<Vec<_>>()));
    } else {
        let rows: Vec<Vec<String>> = topics
            .iter()
            .map(|(name, partitions, replicas, _)| {
                vec![name.clone(), partitions.to_string(), replicas.to_string()]
            })
            .collect();
        outln!("{}", table(&["NAME", "PARTITIONS", "REPLICAS"], &rows));
    }
    Ok(())
}

/// The Metadata of one topic, or UNKNOWN_TOPIC_OR_PARTITION.
async fn topic_metadata(client: &KafkaClient, name: &str) -> Result<MetadataResponse, CliError> {
    let metadata = client.metadata(Some(&[name.to_string()])).await?;
    let topic = metadata
        .topics
        .first()
        .ok_or_else(|| CliError::Failed(format!("Metadata answered nothing for topic {name}")))?;
    check(topic.error_code, &format!("topic {name}"), None)?;
    Ok(metadata)
}

async fn describe(client: &KafkaClient, name: &str, as_json: bool) -> Result<(), CliError> {
    let metadata = topic_metadata(client, name).await?;
    let Some(topic) = metadata.topics.first() else {
        return Err(CliError::Failed(format!("no metadata for topic {name}")));
    };
    let mut partitions: Vec<_> = topic.partitions.iter().collect();
    partitions.sort_by_key(|p| p.partition_index);
    let configs = topic_configs(client, name).await?;
    let ids = |nodes: &[kafka_protocol::messages::BrokerId]| {
        nodes.iter().map(|n| n.0).collect::<Vec<i32>>()
    };
    if as_json {
        json(&json!({
            "topic": name,
            "topic_id": topic.topic_id.to_string(),
            "internal": topic.is_internal,
            "partitions": partitions.iter().map(|p| json!({
                "partition": p.partition_index,
                "leader": p.leader_id.0,
                "leader_epoch": p.leader_epoch,
                "replicas": ids(&p.replica_nodes),
                "isr": ids(&p.isr_nodes),
                "offline_replicas": ids(&p.offline_replicas),
                "error": (p.error_code != 0).then(|| super::client::error_name(p.error_code)),
            })).collect::<Vec<_>>(),
            "configs": configs.iter().map(|(k, (v, source))| (k.clone(), json!({"value": v, "source": source}))).collect::<serde_json::Map<_, _>>(),
        }));
        return Ok(());
    }
    print_topic(name, topic, &partitions, &configs);
    Ok(())
}

/// The topic, its partitions and its config overrides as tables, the way
/// `kafka-topics.sh --describe` shows them (overrides only: the defaults would bury them).
fn print_topic(
    name: &str,
    topic: &MetadataResponseTopic,
    partitions: &[&MetadataResponsePartition],
    configs: &BTreeMap<String, (Option<String>, String)>,
) {
    let list = |nodes: &[kafka_protocol::messages::BrokerId]| {
        nodes
            .iter()
            .map(|n| n.0.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    outln!("NAME        {name}");
    outln!("TOPIC ID    {}", topic.topic_id);
    outln!("INTERNAL    {}", topic.is_internal);
    outln!("PARTITIONS  {}", partitions.len());
    outln!();
    let rows: Vec<Vec<String>> = partitions
        .iter()
        .map(|p| {
            vec![
                p.partition_index.to_string(),
                p.leader_id.0.to_string(),
                p.leader_epoch.to_string(),
                list(&p.replica_nodes),
                list(&p.isr_nodes),
                list(&p.offline_replicas),
            ]
        })
        .collect();
    outln!(
        "{}",
        table(
            &["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"],
            &rows
        )
    );
    let overrides: Vec<Vec<String>> = configs
        .iter()
        .filter(|(_, (_, source))| source == "topic")
        .map(|(k, (v, _))| vec![k.clone(), v.clone().unwrap_or_default()])
        .collect();
    if !overrides.is_empty() {
        outln!();
        outln!("{}", table(&["CONFIG", "VALUE"], &overrides));
    }
}

/// Every config of a topic: value and where it comes from (`topic` for an override).
async fn topic_configs(
    client: &KafkaClient,
    name: &str,
) -> Result<BTreeMap<String, (Option<String>, String)>, CliError> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(None)]);
    let response = client.send(Node::Any, &request).await?;
    let result = response
        .results
        .first()
        .ok_or_else(|| CliError::Failed("DescribeConfigs answered nothing".into()))?;
    check(
        result.error_code,
        &format!("describing the configs of topic {name}"),
        result.error_message.as_ref(),
    )?;
    Ok(result
        .configs
        .iter()
        .map(|c| {
            let source = match c.config_source {
                1 => "topic",
                2..=4 => "broker",
                _ => "default",
            };
            (
                c.name.to_string(),
                (
                    c.value.as_ref().map(ToString::to_string),
                    source.to_string(),
                ),
            )
        })
        .collect())
}

async fn delete(client: &KafkaClient, name: &str, as_json: bool) -> Result<(), CliError> {
    let response = client
        .send_with(Node::Any, |version| {
            let request = DeleteTopicsRequest::default().with_timeout_ms(ADMIN_TIMEOUT_MS);
            if version >= 6 {
                request.with_topics(vec![
                    DeleteTopicState::default().with_name(Some(topic_name(name)))
                ])
            } else {
                request.with_topic_names(vec![topic_name(name)])
            }
        })
        .await?;
    let result = response
        .responses
        .first()
        .ok_or_else(|| CliError::Failed("DeleteTopics answered nothing".into()))?;
    check(
        result.error_code,
        &format!("deleting topic {name}"),
        result.error_message.as_ref(),
    )?;
    if as_json {
        json(&json!({ "topic": name, "deleted": true }));
    } else {
        outln!("Deleted topic {name}.");
    }
    Ok(())
}

async fn alter_config(
    client: &KafkaClient,
    name: &str,
    set: &[String],
    delete: &[String],
    as_json: bool,
) -> Result<(), CliError> {
    if set.is_empty() && delete.is_empty() {
        return Err(CliError::Failed(
            "nothing to change: give --set KEY=VALUE or --delete KEY".into(),
        ));
    }
    let set = key_values(set)?;
    let mut configs: Vec<AlterableConfig> = set
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(v.clone())))
        })
        .collect();
    configs.extend(delete.iter().map(|k| {
        AlterableConfig::default()
            .with_name(StrBytes::from_string(k.clone()))
            .with_config_operation(1)
            .with_value(None)
    }));
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configs(configs),
    ]);
    let response = client.send(Node::Any, &request).await?;
    let result = response
        .responses
        .first()
        .ok_or_else(|| CliError::Failed("IncrementalAlterConfigs answered nothing".into()))?;
    check(
        result.error_code,
        &format!("changing the configs of topic {name}"),
        result.error_message.as_ref(),
    )?;
    if as_json {
        json(&json!({
            "topic": name,
            "set": set.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "deleted": delete,
        }));
    } else {
        outln!("Altered the configs of topic {name}.");
    }
    Ok(())
}

async fn add_partitions(
    client: &KafkaClient,
    name: &str,
    total: i32,
    as_json: bool,
) -> Result<(), CliError> {
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name(name))
            .with_count(total)
            .with_assignments(None)])
        .with_timeout_ms(ADMIN_TIMEOUT_MS);
    let response = client.send(Node::Any, &request).await?;
    let result = response
        .results
        .first()
        .ok_or_else(|| CliError::Failed("CreatePartitions answered nothing".into()))?;
    check(
        result.error_code,
        &format!("adding partitions to topic {name}"),
        result.error_message.as_ref(),
    )?;
    if as_json {
        json(&json!({ "topic": name, "partitions": total }));
    } else {
        outln!("Topic {name} now has {total} partitions.");
    }
    Ok(())
}
