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

async fn info(client: &KafkaClient, as_json: bool) -> Result<(), CliError> {
    let metadata = client.metadata(Some(&[])).await?;
    let described = client
        .send(Node::Any, &DescribeClusterRequest::default())
        .await;
    let (cluster_id, controller, mut brokers) = match described {
        Ok(d) => {
            check(
                d.error_code,
                "describing the cluster",
                d.error_message.as_ref(),
            )?;
            (
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
            )
        }
        // A broker without DescribeCluster (before Kafka 2.8): Metadata says the same.
        Err(CliError::Failed(_)) => (
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
        ),
        Err(e) => return Err(e),
    };
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
