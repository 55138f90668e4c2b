//! `logbook acl …`: ACLs, as `kafka-acls.sh` manages them (DescribeAcls, CreateAcls,
//! DeleteAcls). One resource per command (`--topic`, `--group`, `--cluster` or
//! `--transactional-id`); `list` and `remove` without one mean every resource.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

use super::client::{check, CliError, KafkaClient, Node};
use super::output::{json, table};
use super::Connection;

/// `logbook acl …`
#[derive(Debug, clap::Args)]
pub struct AclArgs {
    #[command(subcommand)]
    command: AclCommand,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, clap::Subcommand)]
enum AclCommand {
    /// The ACLs matching the resource and principal given (all when none).
    List {
        #[command(flatten)]
        resource: Resource,
        /// Only ACLs of this principal (`User:alice`).
        #[arg(long)]
        principal: Option<String>,
    },
    /// Allow or deny principals operations on one resource.
    Add {
        #[command(flatten)]
        resource: Resource,
        #[command(flatten)]
        entry: Entry,
    },
    /// Remove the ACLs matching the resource, principals and operations given.
    Remove {
        #[command(flatten)]
        resource: Resource,
        #[command(flatten)]
        entry: Entry,
    },
}

/// Which resource (Kafka's `ResourcePattern`).
#[derive(Debug, clap::Args)]
struct Resource {
    /// A topic (`*` for every topic).
    #[arg(long, group = "resource")]
    topic: Option<String>,
    /// A consumer group (`*` for every group).
    #[arg(long, group = "resource")]
    group: Option<String>,
    /// The cluster.
    #[arg(long, group = "resource")]
    cluster: bool,
    /// A transactional id (`*` for every one).
    #[arg(long, group = "resource")]
    transactional_id: Option<String>,
    /// How the name matches: literal or prefixed (and, for list and remove, any or match).
    #[arg(long, default_value = "literal")]
    resource_pattern_type: PatternType,
}

/// Who may or may not do what (Kafka's `AccessControlEntry`).
#[derive(Debug, clap::Args)]
struct Entry {
    /// Principals allowed (`User:alice`, `User:*`).
    #[arg(long)]
    allow_principal: Vec<String>,
    /// Principals denied.
    #[arg(long)]
    deny_principal: Vec<String>,
    /// Operations (Read, Write, Create, Delete, Alter, Describe, ClusterAction,
    /// DescribeConfigs, AlterConfigs, IdempotentWrite, All).
    #[arg(long = "operation", value_parser = parse_operation)]
    operations: Vec<i8>,
    /// The client address the ACLs apply to (every host by default).
    #[arg(long, default_value = "*")]
    host: String,
}

/// Kafka's `PatternType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum PatternType {
    Any,
    Match,
    Literal,
    Prefixed,
}

impl PatternType {
    fn code(self) -> i8 {
        match self {
            PatternType::Any => 1,
            PatternType::Match => 2,
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }
}

/// Kafka's `AclOperation` names and codes, as `kafka-acls.sh --operation` takes them.
const OPERATIONS: &[(&str, i8)] = &[
    ("All", 2),
    ("Read", 3),
    ("Write", 4),
    ("Create", 5),
    ("Delete", 6),
    ("Alter", 7),
    ("Describe", 8),
    ("ClusterAction", 9),
    ("DescribeConfigs", 10),
    ("AlterConfigs", 11),
    ("IdempotentWrite", 12),
    ("CreateTokens", 13),
    ("DescribeTokens", 14),
];

fn parse_operation(name: &str) -> Result<i8, String> {
    let wanted: String = name.chars().filter(|c| *c != '_').collect();
    OPERATIONS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(&wanted))
        .map(|(_, code)| *code)
        .ok_or_else(|| {
            let names: Vec<&str> = OPERATIONS.iter().map(|(n, _)| *n).collect();
            format!("unknown operation {name}; one of {}", names.join(", "))
        })
}

fn operation_name(code: i8) -> String {
    OPERATIONS
        .iter()
        .find(|(_, c)| *c == code)
        .map_or_else(|| format!("UNKNOWN({code})"), |(n, _)| n.to_string())
}

fn resource_type_name(code: i8) -> &'static str {
    match code {
        2 => "Topic",
        3 => "Group",
        4 => "Cluster",
        5 => "TransactionalId",
        6 => "DelegationToken",
        7 => "User",
        _ => "Unknown",
    }
}

fn pattern_type_name(code: i8) -> &'static str {
    match code {
        3 => "Literal",
        4 => "Prefixed",
        _ => "Unknown",
    }
}

impl Resource {
    /// (resource type code, name); ANY (1) and no name when none was given.
    fn pattern(&self) -> (i8, Option<String>) {
        if let Some(t) = &self.topic {
            (2, Some(t.clone()))
        } else if let Some(g) = &self.group {
            (3, Some(g.clone()))
        } else if self.cluster {
            (4, Some("kafka-cluster".to_string()))
        } else if let Some(t) = &self.transactional_id {
            (5, Some(t.clone()))
        } else {
            (1, None)
        }
    }
}

impl Entry {
    /// (principal, permission code) pairs: ALLOW is 3, DENY 2.
    fn principals(&self) -> Vec<(&str, i8)> {
        let allow = self.allow_principal.iter().map(|p| (p.as_str(), 3));
        let deny = self.deny_principal.iter().map(|p| (p.as_str(), 2));
        allow.chain(deny).collect()
    }
}

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

/// Runs `logbook acl`.
///
/// # Errors
/// A broker refused, or none could be reached, or the arguments name no ACL.
pub async fn run(args: AclArgs) -> Result<(), CliError> {
    let client = args.connection.client()?;
    let as_json = args.connection.json;
    let result = match args.command {
        AclCommand::List {
            resource,
            principal,
        } => list(&client, &resource, principal.as_deref(), as_json).await,
        AclCommand::Add { resource, entry } => add(&client, &resource, &entry).await,
        AclCommand::Remove { resource, entry } => remove(&client, &resource, &entry).await,
    };
    client.shutdown();
    result
}

async fn list(
    client: &KafkaClient,
    resource: &Resource,
    principal: Option<&str>,
    as_json: bool,
) -> Result<(), CliError> {
    let (resource_type, name) = resource.pattern();
    let pattern_type = if name.is_none() {
        PatternType::Any
    } else {
        resource.resource_pattern_type
    };
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(resource_type)
        .with_resource_name_filter(name.as_deref().map(s))
        .with_pattern_type_filter(pattern_type.code())
        .with_principal_filter(principal.map(s))
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let response = client.send(Node::Any, &request).await?;
    check(
        response.error_code,
        "listing ACLs",
        response.error_message.as_ref(),
    )?;
    let mut rows = Vec::new();
    for r in &response.resources {
        for acl in &r.acls {
            rows.push(vec![
                resource_type_name(r.resource_type).to_string(),
                r.resource_name.to_string(),
                pattern_type_name(r.pattern_type).to_string(),
                acl.principal.to_string(),
                acl.host.to_string(),
                operation_name(acl.operation),
                if acl.permission_type == 3 {
                    "Allow"
                } else {
                    "Deny"
                }
                .to_string(),
            ]);
        }
    }
    rows.sort();
    if as_json {
        json(&json!(rows
            .iter()
            .map(|r| json!({"resource_type": r[0], "name": r[1], "pattern_type": r[2], "principal": r[3], "host": r[4], "operation": r[5], "permission": r[6]}))
            .collect::<Vec<_>>()));
        return Ok(());
    }
    outln!(
        "{}",
        table(
            &[
                "RESOURCE",
                "NAME",
                "PATTERN",
                "PRINCIPAL",
                "HOST",
                "OPERATION",
                "PERMISSION"
            ],
            &rows
        )
    );
    Ok(())
}

async fn add(client: &KafkaClient, resource: &Resource, entry: &Entry) -> Result<(), CliError> {
    let (resource_type, Some(name)) = resource.pattern() else {
        return Err(CliError::Failed(
            "name one resource: --topic, --group, --cluster or --transactional-id".to_string(),
        ));
    };
    if entry.principals().is_empty() || entry.operations.is_empty() {
        return Err(CliError::Failed(
            "name at least one --allow-principal or --deny-principal and one --operation"
                .to_string(),
        ));
    }
    let mut creations = Vec::new();
    for (principal, permission) in entry.principals() {
        for operation in &entry.operations {
            creations.push(
                AclCreation::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(s(&name))
                    .with_resource_pattern_type(resource.resource_pattern_type.code())
                    .with_principal(s(principal))
                    .with_host(s(&entry.host))
                    .with_operation(*operation)
                    .with_permission_type(permission),
            );
        }
    }
    let count = creations.len();
    let response = client
        .send(
            Node::Any,
            &CreateAclsRequest::default().with_creations(creations),
        )
        .await?;
    for result in &response.results {
        check(
            result.error_code,
            "adding an ACL",
            result.error_message.as_ref(),
        )?;
    }
    outln!("added {count} ACL(s)");
    Ok(())
}

async fn remove(client: &KafkaClient, resource: &Resource, entry: &Entry) -> Result<(), CliError> {
    let (resource_type, name) = resource.pattern();
    let pattern_type = if name.is_none() {
        PatternType::Any
    } else {
        resource.resource_pattern_type
    };
    let principals: Vec<(Option<&str>, i8)> = if entry.principals().is_empty() {
        vec![(None, 1)]
    } else {
        entry
            .principals()
            .into_iter()
            .map(|(p, perm)| (Some(p), perm))
            .collect()
    };
    let operations: Vec<i8> = if entry.operations.is_empty() {
        vec![1]
    } else {
        entry.operations.clone()
    };
    let host = (entry.host != "*").then_some(entry.host.as_str());
    let mut filters = Vec::new();
    for (principal, permission) in &principals {
        for operation in &operations {
            filters.push(
                DeleteAclsFilter::default()
                    .with_resource_type_filter(resource_type)
                    .with_resource_name_filter(name.as_deref().map(s))
                    .with_pattern_type_filter(pattern_type.code())
                    .with_principal_filter(principal.map(s))
                    .with_host_filter(host.map(s))
                    .with_operation(*operation)
                    .with_permission_type(*permission),
            );
        }
    }
    let response = client
        .send(
            Node::Any,
            &DeleteAclsRequest::default().with_filters(filters),
        )
        .await?;
    let mut removed = 0;
    for result in &response.filter_results {
        check(
            result.error_code,
            "removing ACLs",
            result.error_message.as_ref(),
        )?;
        removed += result.matching_acls.len();
    }
    outln!("removed {removed} ACL(s)");
    Ok(())
}
