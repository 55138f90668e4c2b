//! `logbook user …`: SCRAM users, as `kafka-configs.sh --entity-type users` manages them
//! (DescribeUserScramCredentials, AlterUserScramCredentials, KIP-554). `add` salts and
//! hashes the password here, as Kafka's admin client does, so the password itself never
//! crosses the wire.

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;
use logbook_client::security::{salted_password, SaslMechanism};
use serde_json::json;

use super::client::{check, CliError, KafkaClient, Node};
use super::output::{json, table};
use super::Connection;

/// `logbook user …`
#[derive(Debug, clap::Args)]
pub struct UserArgs {
    #[command(subcommand)]
    command: UserCommand,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, clap::Subcommand)]
enum UserCommand {
    /// The SCRAM users (all, or those named) with their mechanisms and iterations.
    List {
        /// Users to show (all when none).
        names: Vec<String>,
    },
    /// Add a SCRAM credential for a user, or replace it.
    Add {
        /// The user.
        name: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-256")]
        mechanism: Mechanism,
        /// The password.
        #[arg(long)]
        password: String,
        /// PBKDF2 iterations (4096..=16384).
        #[arg(long, default_value_t = 4096)]
        iterations: i32,
    },
    /// Delete a user's SCRAM credential of one mechanism.
    Delete {
        /// The user.
        name: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-256")]
        mechanism: Mechanism,
    },
}

/// A SCRAM mechanism, as Kafka names and numbers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Mechanism {
    #[value(name = "SCRAM-SHA-256")]
    Sha256,
    #[value(name = "SCRAM-SHA-512")]
    Sha512,
}

impl Mechanism {
    fn code(self) -> i8 {
        match self {
            Mechanism::Sha256 => 1,
            Mechanism::Sha512 => 2,
        }
    }

    fn name_of(code: i8) -> String {
        match code {
            1 => "SCRAM-SHA-256".to_string(),
            2 => "SCRAM-SHA-512".to_string(),
            other => format!("UNKNOWN({other})"),
        }
    }

    /// `Hi(password, salt, iterations)` of RFC 5802.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mechanism = match self {
            Mechanism::Sha256 => SaslMechanism::ScramSha256,
            Mechanism::Sha512 => SaslMechanism::ScramSha512,
        };
        salted_password(mechanism, password, salt, iterations)
    }
}

/// Runs `logbook user`.
///
/// # Errors
/// A broker refused, or none could be reached.
pub async fn run(args: UserArgs) -> Result<(), CliError> {
    let client = args.connection.client()?;
    let as_json = args.connection.json;
    let result = match args.command {
        UserCommand::List { names } => list(&client, &names, as_json).await,
        UserCommand::Add {
            name,
            mechanism,
            password,
            iterations,
        } => add(&client, &name, mechanism, &password, iterations).await,
        UserCommand::Delete { name, mechanism } => {
            let deletion = ScramCredentialDeletion::default()
                .with_name(StrBytes::from_string(name.clone()))
                .with_mechanism(mechanism.code());
            alter(
                &client,
                AlterUserScramCredentialsRequest::default().with_deletions(vec![deletion]),
                &format!(
                    "deleting {} of user {name}",
                    Mechanism::name_of(mechanism.code())
                ),
            )
            .await
        }
    };
    client.shutdown();
    result
}

async fn list(client: &KafkaClient, names: &[String], as_json: bool) -> Result<(), CliError> {
    let users = (!names.is_empty()).then(|| {
        names
            .iter()
            .map(|n| UserName::default().with_name(StrBytes::from_string(n.clone())))
            .collect()
    });
    let response = client
        .send(
            Node::Any,
            &DescribeUserScramCredentialsRequest::default().with_users(users),
        )
        .await?;
    check(
        response.error_code,
        "listing SCRAM users",
        response.error_message.as_ref(),
    )?;
    let mut rows = Vec::new();
    for result in &response.results {
        check(
            result.error_code,
            &format!("describing user {}", result.user),
            result.error_message.as_ref(),
        )?;
        for info in &result.credential_infos {
            rows.push((
                result.user.to_string(),
                Mechanism::name_of(info.mechanism),
                info.iterations,
            ));
        }
    }
    if as_json {
        json(&json!(rows
            .iter()
            .map(|(user, mechanism, iterations)| json!({"user": user, "mechanism": mechanism, "iterations": iterations}))
            .collect::<Vec<_>>()));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(user, mechanism, iterations)| vec![user, mechanism, iterations.to_string()])
        .collect();
    outln!("{}", table(&["USER", "MECHANISM", "ITERATIONS"], &rows));
    Ok(())
}

async fn add(
    client: &KafkaClient,
    name: &str,
    mechanism: Mechanism,
    password: &str,
    iterations: i32,
) -> Result<(), CliError> {
    use ring::rand::SecureRandom;
    let mut salt = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| CliError::Failed("the system's random source failed".to_string()))?;
    let rounds = u32::try_from(iterations)
        .map_err(|_| CliError::Failed(format!("--iterations {iterations}: must be positive")))?;
    let upsertion = ScramCredentialUpsertion::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_mechanism(mechanism.code())
        .with_iterations(iterations)
        .with_salt(Bytes::copy_from_slice(&salt))
        .with_salted_password(Bytes::from(mechanism.salted_password(
            password.as_bytes(),
            &salt,
            rounds,
        )));
    alter(
        client,
        AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]),
        &format!(
            "adding {} for user {name}",
            Mechanism::name_of(mechanism.code())
        ),
    )
    .await
}

async fn alter(
    client: &KafkaClient,
    request: AlterUserScramCredentialsRequest,
    what: &str,
) -> Result<(), CliError> {
    let response = client.send(Node::Any, &request).await?;
    for result in &response.results {
        check(result.error_code, what, result.error_message.as_ref())?;
    }
    outln!("{what}: done");
    Ok(())
}
