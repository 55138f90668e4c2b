//! `logbook cluster info`: the cluster id, the controller and the brokers (DescribeCluster,
//! or Metadata from brokers that lack it).

use kafka_protocol::messages::DescribeClusterRequest;
use serde_json::json;

use super::client::{check, CliError, KafkaClient, Node};
use super::output::{json, table};
use super::Connection;

/// `logbook cluster …`
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, clap::Subcommand)]
enum ClusterCommand {
    /// The cluster id, the active controller (as brokers report it) and every broker.
    Info,
}

/// Runs `logbook cluster`.
///
/// # Errors
/// A broker refused, or none could be reached.
pub async fn run(args: ClusterArgs) -> Result<(), CliError> {
    let client = args.connection.client()?;
    let result = match args.command {
        ClusterCommand::Info => info(&client, args.connection.json).await,
    };
    client.shutdown();
    result
}

/// A broker as `cluster info` lists it: id, host, port, rack.
type BrokerRow = (i32, String, i32, Option<String>);

async fn info(client: &KafkaClient, as_json: bool) -> Result<(), CliError> {
    let (cluster_id, controller, mut brokers) = describe_cluster(client).await?;
    brokers.sort();
    if as_json {
        json(&json!({
            "cluster_id": cluster_id,
            "controller": controller,
            "brokers": brokers.iter().map(|(id, host, port, rack)| json!({"id": id, "host": host, "port": port, "rack": rack})).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    outln!("CLUSTER     {cluster_id}");
    outln!("CONTROLLER  {controller}");
    outln!();
    let rows: Vec<Vec<String>> = brokers
        .iter()
        .map(|(id, host, port, rack)| {
            vec![
                id.to_string(),
                host.clone(),
                port.to_string(),
                rack.clone().unwrap_or_else(|| "-".to_string()),
            ]
        })
        .collect();
    outln!("{}", table(&["ID", "HOST", "PORT", "RACK"], &rows));
    Ok(())
}

/// The cluster id, the controller and the brokers, from DescribeCluster, or from Metadata
/// for a broker without DescribeCluster (before Kafka 2.8), which says the same.
async fn describe_cluster(client: &KafkaClient) -> Result<(String, i32, Vec<BrokerRow>), CliError> {
    let metadata = client.metadata(Some(&[])).await?;
    let described = client
        .send(Node::Any, &DescribeClusterRequest::default())
        .await;
    match described {
        Ok(d) => {
            check(
                d.error_code,
                "describing the cluster",
                d.error_message.as_ref(),
            )?;
            Ok((
                d.cluster_id.to_string(),
                d.controller_id.0,
                d.brokers
                    .iter()
                    .map(|b| {
                        (
                            b.broker_id.0,
                            b.host.to_string(),
                            b.port,
                            b.rack.as_ref().map(ToString::to_string),
                        )
                    })
                    .collect::<Vec<_>>(),
            ))
        }
        // A broker without DescribeCluster (before Kafka 2.8): Metadata says the same.
        Err(CliError::Failed(_)) => Ok((
            metadata
                .cluster_id
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            metadata.controller_id.0,
            metadata
                .brokers
                .iter()
                .map(|b| {
                    (
                        b.node_id.0,
                        b.host.to_string(),
                        b.port,
                        b.rack.as_ref().map(ToString::to_string),
                    )
                })
                .collect(),
        )),
        Err(e) => Err(e),
    }
}
