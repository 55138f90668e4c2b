//! `logbook group`: what `kafka-consumer-groups.sh` does.

use std::collections::{BTreeMap, HashMap};

use bytes::Buf;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, DeleteGroupsRequest, DescribeGroupsRequest, GroupId,
    ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use serde_json::json;

use super::client::{check, CliError, KafkaClient, Node, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use super::output::{json, table};
use super::Connection;

/// OffsetFetch and OffsetCommit name topics (v10 names them by id only).
const OFFSETS_VERSION_MAX: i16 = 9;

/// `logbook group …`
#[derive(Debug, clap::Args)]
pub struct GroupArgs {
    #[command(subcommand)]
    command: GroupCommand,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, clap::Subcommand)]
enum GroupCommand {
    /// List the groups of every broker.
    List,
    /// A group's state, members, and per partition its committed offset, the log end
    /// offset and the lag.
    Describe {
        /// The group id.
        group: String,
    },
    /// Delete groups (they must have no members).
    Delete {
        /// The group ids.
        #[arg(required = true)]
        groups: Vec<String>,
    },
    /// Move a group's committed offsets (the group must have no members). Without
    /// `--execute` this is a dry run that prints the new offsets, as kafka-consumer-groups.sh.
    ResetOffsets(ResetArgs),
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["to_earliest", "to_latest", "to_offset", "to_datetime", "shift_by"])))]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["topic", "all_topics"])))]
struct ResetArgs {
    /// The group id.
    group: String,
    /// A topic, `TOPIC` or `TOPIC:P1,P2` (repeatable).
    #[arg(long)]
    topic: Vec<String>,
    /// Every topic the group has committed offsets for.
    #[arg(long)]
    all_topics: bool,
    /// To each partition's first offset.
    #[arg(long)]
    to_earliest: bool,
    /// To each partition's end.
    #[arg(long)]
    to_latest: bool,
    /// To this offset (within each partition's range).
    #[arg(long)]
    to_offset: Option<i64>,
    /// To the first record at or after this time: RFC 3339 (`2026-12-01T10:00:00Z`) or
    /// `YYYY-MM-DDTHH:MM:SS[.sss]` in UTC.
    #[arg(long)]
    to_datetime: Option<String>,
    /// Move the committed offsets by N (negative: back), within each partition's range.
    #[arg(long, allow_hyphen_values = true)]
    shift_by: Option<i64>,
    /// Print the new offsets without committing them (the default).
    #[arg(long, conflicts_with = "execute")]
    dry_run: bool,
    /// Commit the new offsets.
    #[arg(long)]
    execute: bool,
}

/// Runs `logbook group`.
///
/// # Errors
/// A broker refused, or none could be reached.
pub async fn run(args: GroupArgs) -> Result<(), CliError> {
    let client = args.connection.client()?;
    let as_json = args.connection.json;
    let result = match args.command {
        GroupCommand::List => list(&client, as_json).await,
        GroupCommand::Describe { group } => describe(&client, &group, as_json).await,
        GroupCommand::Delete { groups } => delete(&client, &groups, as_json).await,
        GroupCommand::ResetOffsets(reset) => reset_offsets(&client, &reset, as_json).await,
    };
    client.shutdown();
    result
}

async fn list(client: &KafkaClient, as_json: bool) -> Result<(), CliError> {
    // Each broker knows only the groups it coordinates.
    let metadata = client.metadata(Some(&[])).await?;
    let mut groups: BTreeMap<String, (String, String)> = BTreeMap::new();
    for broker in &metadata.brokers {
        let response = client
            .send(Node::Id(broker.node_id.0), &ListGroupsRequest::default())
            .await?;
        check(response.error_code, "listing groups", None)?;
        for g in response.groups {
            groups.insert(
                g.group_id.to_string(),
                (g.group_state.to_string(), g.protocol_type.to_string()),
            );
        }
    }
    if as_json {
        json(&json!(groups
            .iter()
            .map(|(id, (state, protocol))| json!({"group": id, "state": state, "protocol_type": protocol}))
            .collect::<Vec<_>>()));
    } else {
        let rows: Vec<Vec<String>> = groups
            .iter()
            .map(|(id, (state, protocol))| vec![id.clone(), state.clone(), protocol.clone()])
            .collect();
        outln!("{}", table(&["GROUP", "STATE", "PROTOCOL-TYPE"], &rows));
    }
    Ok(())
}

/// A group as DescribeGroups tells it: state, and the members with their partitions.
struct GroupView {
    state: String,
    /// (topic, partition) → (member id, client id, host).
    owners: HashMap<(String, i32), (String, String, String)>,
    members: usize,
}

async fn describe_group(
    client: &KafkaClient,
    coordinator: i32,
    group: &str,
) -> Result<GroupView, CliError> {
    let request = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_string(group.to_string()))]);
    let response = client.send(Node::Id(coordinator), &request).await?;
    let described = response
        .groups
        .first()
        .ok_or_else(|| CliError::Failed("DescribeGroups answered nothing".into()))?;
    check(
        described.error_code,
        &format!("describing group {group}"),
        None,
    )?;
    let mut owners = HashMap::new();
    for member in &described.members {
        if described.protocol_type.as_str() != "consumer" {
            continue;
        }
        let mut bytes = member.member_assignment.clone();
        if bytes.remaining() < 2 {
            continue;
        }
        let version = bytes.get_i16();
        let Ok(assignment) = ConsumerProtocolAssignment::decode(&mut bytes, version.clamp(0, 3))
        else {
            continue;
        };
        for tp in assignment.assigned_partitions {
            for p in tp.partitions {
                owners.insert(
                    (tp.topic.to_string(), p),
                    (
                        member.member_id.to_string(),
                        member.client_id.to_string(),
                        member.client_host.to_string(),
                    ),
                );
            }
        }
    }
    Ok(GroupView {
        state: described.group_state.to_string(),
        owners,
        members: described.members.len(),
    })
}

/// The end offsets of `partitions`, leaving out those that cannot be had (a deleted
/// topic, a partition without a leader): `describe` prints `-` for them, as Kafka's tool.
async fn end_offsets(
    client: &KafkaClient,
    partitions: &[(String, i32)],
) -> HashMap<(String, i32), i64> {
    if partitions.is_empty() {
        return HashMap::new();
    }
    if let Ok(all) = client.list_offsets(partitions, LATEST_TIMESTAMP).await {
        return all;
    }
    // One at a time, so one partition's failure leaves the others.
    let mut ends = HashMap::new();
    for partition in partitions {
        if let Ok(found) = client
            .list_offsets(std::slice::from_ref(partition), LATEST_TIMESTAMP)
            .await
        {
            ends.extend(found);
        }
    }
    ends
}

/// One line of `group describe`: a partition's committed offset, end and lag, and the
/// member (id, client id, host) it is assigned to.
struct PartitionLag<'a> {
    topic: String,
    partition: i32,
    committed: Option<i64>,
    end: Option<i64>,
    lag: Option<i64>,
    owner: Option<&'a (String, String, String)>,
}

/// The group's committed offsets, `(topic, partition) → offset`.
async fn committed(
    client: &KafkaClient,
    coordinator: i32,
    group: &str,
) -> Result<BTreeMap<(String, i32), i64>, CliError> {
    let response = client
        .send_capped(Node::Id(coordinator), OFFSETS_VERSION_MAX, |version| {
            if version >= 8 {
                OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                    .with_topics(None)])
            } else {
                OffsetFetchRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                    .with_topics(None)
            }
        })
        .await?;
    let what = format!("fetching the offsets of group {group}");
    check(response.error_code, &what, None)?;
    let mut offsets = BTreeMap::new();
    for g in &response.groups {
        check(g.error_code, &what, None)?;
        for t in &g.topics {
            for p in &t.partitions {
                check(p.error_code, &what, None)?;
                if p.committed_offset >= 0 {
                    offsets.insert((t.name.to_string(), p.partition_index), p.committed_offset);
                }
            }
        }
    }
    for t in &response.topics {
        for p in &t.partitions {
            check(p.error_code, &what, None)?;
            if p.committed_offset >= 0 {
                offsets.insert((t.name.to_string(), p.partition_index), p.committed_offset);
            }
        }
    }
    Ok(offsets)
}

async fn describe(client: &KafkaClient, group: &str, as_json: bool) -> Result<(), CliError> {
    let coordinator = client.group_coordinator(group).await?;
    let view = describe_group(client, coordinator, group).await?;
    let committed = committed(client, coordinator, group).await?;
    if view.state == "Dead" && committed.is_empty() {
        return Err(CliError::kafka(
            69,
            &format!("group {group}"),
            Some(&format!("Consumer group '{group}' does not exist.")),
        ));
    }
    // Every partition with a commit or an owner.
    let mut partitions: Vec<(String, i32)> = committed.keys().cloned().collect();
    partitions.extend(view.owners.keys().cloned());
    partitions.sort();
    partitions.dedup();
    let ends = end_offsets(client, &partitions).await;
    let rows: Vec<PartitionLag<'_>> = partitions
        .iter()
        .map(|(topic, partition)| {
            let key = (topic.clone(), *partition);
            let committed = committed.get(&key).copied();
            let end = ends.get(&key).copied();
            PartitionLag {
                topic: topic.clone(),
                partition: *partition,
                committed,
                end,
                lag: committed.zip(end).map(|(c, e)| (e - c).max(0)),
                owner: view.owners.get(&key),
            }
        })
        .collect();
    if as_json {
        json(&json!({
            "group": group,
            "state": view.state,
            "members": view.members,
            "partitions": rows.iter().map(|row| json!({
                "topic": row.topic,
                "partition": row.partition,
                "committed_offset": row.committed,
                "log_end_offset": row.end,
                "lag": row.lag,
                "member_id": row.owner.map(|o| &o.0),
                "client_id": row.owner.map(|o| &o.1),
                "host": row.owner.map(|o| &o.2),
            })).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    print_lag_table(group, &view, &rows);
    Ok(())
}

/// The group's state and per-partition lag, laid out as `kafka-consumer-groups.sh
/// --describe` prints them, so scripts written against Kafka's output keep working.
fn print_lag_table(group: &str, view: &GroupView, rows: &[PartitionLag<'_>]) {
    outln!("GROUP    {group}");
    outln!("STATE    {}", view.state);
    outln!("MEMBERS  {}", view.members);
    outln!();
    let dash = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let owner = |field: fn(&(String, String, String)) -> &String| {
                row.owner
                    .map_or_else(|| "-".to_string(), |o| field(o).clone())
            };
            vec![
                row.topic.clone(),
                row.partition.to_string(),
                dash(row.committed),
                dash(row.end),
                dash(row.lag),
                owner(|o| &o.0),
                owner(|o| &o.2),
                owner(|o| &o.1),
            ]
        })
        .collect();
    outln!(
        "{}",
        table(
            &[
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID"
            ],
            &table_rows
        )
    );
}

async fn delete(client: &KafkaClient, groups: &[String], as_json: bool) -> Result<(), CliError> {
    let mut failure = None;
    let mut deleted = Vec::new();
    for group in groups {
        let coordinator = client.group_coordinator(group).await?;
        let request = DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(StrBytes::from_string(group.clone()))]);
        let response = client.send(Node::Id(coordinator), &request).await?;
        for result in &response.results {
            match check(
                result.error_code,
                &format!("deleting group {}", result.group_id.as_str()),
                None,
            ) {
                Ok(()) => deleted.push(result.group_id.to_string()),
                Err(e) => {
                    eprintln!("logbook: {e}");
                    failure.get_or_insert(e);
                }
            }
        }
    }
    if as_json {
        json(&json!({ "deleted": deleted }));
    } else {
        for group in &deleted {
            outln!("Deleted group {group}.");
        }
    }
    failure.map_or(Ok(()), Err)
}

/// `TOPIC` or `TOPIC:P1,P2`.
fn parse_topic(spec: &str) -> Result<(String, Option<Vec<i32>>), CliError> {
    match spec.split_once(':') {
        None => Ok((spec.to_string(), None)),
        Some((topic, list)) => {
            let partitions: Result<Vec<i32>, _> =
                list.split(',').map(|p| p.trim().parse::<i32>()).collect();
            partitions
                .map(|p| (topic.to_string(), Some(p)))
                .map_err(|_| CliError::Failed(format!("'{spec}' is not TOPIC or TOPIC:P1,P2")))
        }
    }
}

/// Milliseconds since the epoch of `--to-datetime`.
fn parse_datetime(text: &str) -> Result<i64, CliError> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp_millis());
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc().timestamp_millis());
        }
    }
    Err(CliError::Failed(format!(
        "'{text}' is not a date-time: use 2026-12-01T10:00:00Z or 2026-12-01T10:00:00.000 (UTC)"
    )))
}

async fn reset_offsets(
    client: &KafkaClient,
    args: &ResetArgs,
    as_json: bool,
) -> Result<(), CliError> {
    let group = &args.group;
    let coordinator = client.group_coordinator(group).await?;
    let view = describe_group(client, coordinator, group).await?;
    if view.state != "Empty" && view.state != "Dead" {
        return Err(CliError::Failed(format!(
            "Assignments can only be reset if the group '{group}' is inactive, but the current state is {}.",
            view.state
        )));
    }
    let committed = committed(client, coordinator, group).await?;
    let partitions = partitions_to_reset(client, args, &committed).await?;
    if partitions.is_empty() {
        return Err(CliError::Failed(format!(
            "group {group} has no offsets to reset"
        )));
    }
    let targets = reset_targets(client, args, &partitions, &committed).await?;
    if args.execute {
        commit(client, coordinator, group, &targets).await?;
    } else if !as_json {
        eprintln!("Dry run: nothing was committed (add --execute to commit these offsets).");
    }
    if as_json {
        json(&json!({
            "group": group,
            "executed": args.execute,
            "partitions": targets.iter().map(|((topic, partition), offset)| json!({
                "topic": topic, "partition": partition, "new_offset": offset,
                "previous_offset": committed.get(&(topic.clone(), *partition)),
            })).collect::<Vec<_>>(),
        }));
    } else {
        let rows: Vec<Vec<String>> = targets
            .iter()
            .map(|((topic, partition), offset)| {
                vec![
                    group.clone(),
                    topic.clone(),
                    partition.to_string(),
                    offset.to_string(),
                ]
            })
            .collect();
        outln!(
            "{}",
            table(&["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], &rows)
        );
    }
    Ok(())
}

/// The partitions `--all-topics` and `--topic` select, sorted, each once. A topic named
/// without partitions means all of its partitions, which only the cluster's metadata
/// knows (as `kafka-consumer-groups.sh` resolves it).
async fn partitions_to_reset(
    client: &KafkaClient,
    args: &ResetArgs,
    committed: &BTreeMap<(String, i32), i64>,
) -> Result<Vec<(String, i32)>, CliError> {
    let mut partitions: Vec<(String, i32)> = Vec::new();
    if args.all_topics {
        partitions.extend(committed.keys().cloned());
    }
    for spec in &args.topic {
        let (topic, only) = parse_topic(spec)?;
        match only {
            Some(list) => partitions.extend(list.into_iter().map(|p| (topic.clone(), p))),
            None => {
                let metadata = client.metadata(Some(std::slice::from_ref(&topic))).await?;
                let t = metadata
                    .topics
                    .first()
                    .ok_or_else(|| CliError::Failed(format!("no metadata for topic {topic}")))?;
                check(t.error_code, &format!("topic {topic}"), None)?;
                partitions.extend(
                    t.partitions
                        .iter()
                        .map(|p| (topic.clone(), p.partition_index)),
                );
            }
        }
    }
    partitions.sort();
    partitions.dedup();
    Ok(partitions)
}

/// The new offset of each partition, by the option given. An offset given or shifted to
/// is clamped to the partition's current log (earliest..latest), as Kafka's tool does, so
/// a reset does not point a consumer outside it.
async fn reset_targets(
    client: &KafkaClient,
    args: &ResetArgs,
    partitions: &[(String, i32)],
    committed: &BTreeMap<(String, i32), i64>,
) -> Result<Vec<((String, i32), i64)>, CliError> {
    let earliest = client.list_offsets(partitions, EARLIEST_TIMESTAMP).await?;
    let latest = client.list_offsets(partitions, LATEST_TIMESTAMP).await?;
    let at_time = match &args.to_datetime {
        Some(text) => Some(
            client
                .list_offsets(partitions, parse_datetime(text)?)
                .await?,
        ),
        None => None,
    };
    let mut targets: Vec<((String, i32), i64)> = Vec::new();
    for key in partitions {
        let low = earliest.get(key).copied().unwrap_or(0);
        let high = latest.get(key).copied().unwrap_or(low);
        let clamp = |o: i64| o.clamp(low, high.max(low));
        let target = if args.to_earliest {
            low
        } else if args.to_latest {
            high
        } else if let Some(offset) = args.to_offset {
            clamp(offset)
        } else if let Some(by) = args.shift_by {
            clamp(
                committed
                    .get(key)
                    .copied()
                    .unwrap_or(high)
                    .saturating_add(by),
            )
        } else if let Some(found) = &at_time {
            // No record that recent: the end, as Kafka's tool does.
            found.get(key).copied().filter(|o| *o >= 0).unwrap_or(high)
        } else {
            return Err(CliError::Failed(
                "give one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by"
                    .into(),
            ));
        };
        targets.push((key.clone(), target));
    }
    Ok(targets)
}

/// Commits `targets` for `group` as an inactive group's offsets (generation -1, no member).
async fn commit(
    client: &KafkaClient,
    coordinator: i32,
    group: &str,
    targets: &[((String, i32), i64)],
) -> Result<(), CliError> {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for ((topic, partition), offset) in targets {
        let entry = OffsetCommitRequestPartition::default()
            .with_partition_index(*partition)
            .with_committed_offset(*offset)
            .with_committed_leader_epoch(-1)
            .with_committed_metadata(Some(StrBytes::from_static_str("")));
        match topics.iter_mut().find(|t| t.name.as_str() == topic) {
            Some(t) => t.partitions.push(entry),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![entry]),
            ),
        }
    }
    let response = client
        .send_capped(Node::Id(coordinator), OFFSETS_VERSION_MAX, |_| {
            OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(StrBytes::from_static_str(""))
                .with_retention_time_ms(-1)
                .with_topics(topics)
        })
        .await?;
    for t in &response.topics {
        for p in &t.partitions {
            check(
                p.error_code,
                &format!(
                    "committing {}-{} for group {group}",
                    t.name.as_str(),
                    p.partition_index
                ),
                None,
            )?;
        }
    }
    Ok(())
}
