//! `logbook fault …`: the fault injector's admin API from the command line. Each
//! subcommand is one HTTP call to a broker started with `--fault-injection`, and prints
//! the broker's JSON answer.

use clap::{Args, Subcommand};
use http_body_util::{BodyExt, Full, Limited};

use super::{ErrorName, FaultKind, FaultSpec};

/// `logbook fault`: arm, list and clear faults on a running broker.
#[derive(Debug, Args)]
pub struct FaultArgs {
    /// The broker's metrics listener (where `--fault-injection` serves `/faults`).
    #[arg(
        long,
        env = "LOGBOOK_FAULT_URL",
        default_value = "http://127.0.0.1:9644"
    )]
    pub url: String,
    /// What to do.
    #[command(subcommand)]
    pub action: FaultAction,
}

/// A `logbook fault` subcommand.
#[derive(Debug, Subcommand)]
pub enum FaultAction {
    /// Arm a fault that lasts: error, delay, drop_connection or partition_unavailable.
    Add(Box<AddArgs>),
    /// List every fault, with how often each acted.
    List,
    /// Clear one fault by id, or every fault.
    Clear {
        /// The fault's id (every fault when left out).
        id: Option<u64>,
    },
    /// Make a consumer group rebalance now.
    Rebalance {
        /// The group.
        #[arg(long)]
        group: String,
    },
    /// Fence a transactional id's producer now (a new producer epoch; its open
    /// transaction is aborted).
    Fence {
        /// The transactional id.
        #[arg(long)]
        transactional_id: String,
    },
}

/// `logbook fault add`: the fields of a fault spec (see `fault_injector`).
#[derive(Debug, Args)]
pub struct AddArgs {
    /// error, delay, drop_connection or partition_unavailable.
    #[arg(long, value_parser = ["error", "delay", "drop_connection", "partition_unavailable"])]
    pub kind: String,
    /// Only requests of this API (`Produce`, `Fetch`, `FindCoordinator`, …).
    #[arg(long)]
    pub api: Option<String>,
    /// Only requests with this client id.
    #[arg(long)]
    pub client_id: Option<String>,
    /// Only this topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// Only this partition of `--topic`.
    #[arg(long)]
    pub partition: Option<i32>,
    /// Only this consumer group.
    #[arg(long)]
    pub group: Option<String>,
    /// Only this transactional id.
    #[arg(long)]
    pub transactional_id: Option<String>,
    /// The Kafka error to answer with, by name (NOT_LEADER_OR_FOLLOWER) or code.
    #[arg(long)]
    pub error: Option<String>,
    /// Delay, fixed part, in milliseconds.
    #[arg(long)]
    pub delay_ms: Option<u64>,
    /// Delay, uniform random part added to `--delay-ms`.
    #[arg(long)]
    pub jitter_ms: Option<u64>,
    /// Request bytes let through before a connection is dropped.
    #[arg(long)]
    pub after_bytes: Option<u64>,
    /// How many times the fault acts (unlimited when left out).
    #[arg(long)]
    pub count: Option<u64>,
    /// How long the fault stays armed (forever when left out).
    #[arg(long)]
    pub duration_ms: Option<u64>,
}

impl AddArgs {
    fn spec(&self) -> FaultSpec {
        let kind = match self.kind.as_str() {
            "error" => FaultKind::Error,
            "delay" => FaultKind::Delay,
            "drop_connection" => FaultKind::DropConnection,
            _ => FaultKind::PartitionUnavailable,
        };
        FaultSpec {
            kind: Some(kind),
            api: self.api.clone(),
            client_id: self.client_id.clone(),
            topic: self.topic.clone(),
            partition: self.partition,
            group: self.group.clone(),
            transactional_id: self.transactional_id.clone(),
            error: self.error.clone().map(ErrorName::Name),
            delay_ms: self.delay_ms,
            jitter_ms: self.jitter_ms,
            after_bytes: self.after_bytes,
            count: self.count,
            duration_ms: self.duration_ms,
        }
    }
}

/// Runs `logbook fault …`: 0 when the broker accepted the call, 1 otherwise (its
/// answer or the reason printed).
#[must_use]
pub fn run(args: &FaultArgs) -> u8 {
    let (method, path, body) = match &args.action {
        FaultAction::Add(add) => ("POST", "/faults".to_string(), json(&add.spec())),
        FaultAction::List => ("GET", "/faults".to_string(), String::new()),
        FaultAction::Clear { id: Some(id) } => ("DELETE", format!("/faults/{id}"), String::new()),
        FaultAction::Clear { id: None } => ("DELETE", "/faults".to_string(), String::new()),
        FaultAction::Rebalance { group } => (
            "POST",
            "/faults".to_string(),
            json(&FaultSpec {
                kind: Some(FaultKind::Rebalance),
                group: Some(group.clone()),
                ..FaultSpec::default()
            }),
        ),
        FaultAction::Fence { transactional_id } => (
            "POST",
            "/faults".to_string(),
            json(&FaultSpec {
                kind: Some(FaultKind::Fence),
                transactional_id: Some(transactional_id.clone()),
                ..FaultSpec::default()
            }),
        ),
    };
    let url = format!("{}{path}", args.url.trim_end_matches('/'));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("logbook fault: {e}");
            return 1;
        }
    };
    match runtime.block_on(call(method, &url, body)) {
        Ok((status, answer)) => {
            print!("{answer}");
            u8::from(!status.is_success())
        }
        Err(e) => {
            eprintln!("logbook fault: {url}: {e}");
            1
        }
    }
}

fn json(spec: &FaultSpec) -> String {
    serde_json::to_string(spec).unwrap_or_default()
}

/// One HTTP/1.1 call; the status and body.
async fn call(
    method: &str,
    url: &str,
    body: String,
) -> Result<(hyper::StatusCode, String), String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err("the fault API is served over http://".to_string());
    }
    let host = uri
        .host()
        .ok_or("no host")?
        .trim_matches(['[', ']'])
        .to_string();
    let port = uri.port_u16().unwrap_or(80);
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let request = hyper::Request::builder()
        .method(method)
        .uri(uri.path())
        .header(
            hyper::header::HOST,
            uri.authority().map_or("", |a| a.as_str()),
        )
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(bytes::Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = Limited::new(response.into_body(), super::admin::BODY_BYTES_MAX * 16)
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok((
        status,
        String::from_utf8_lossy(&body.to_bytes()).into_owned(),
    ))
}
