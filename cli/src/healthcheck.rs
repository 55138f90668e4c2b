//! `logbook healthcheck`: is the broker on this machine answering?
//!
//! It sends ApiVersions to the listen address (an unspecified address such as `0.0.0.0`
//! means this machine's loopback) and succeeds on a well-formed answer with no error. A
//! broker that has not finished starting does not accept connections yet, so the check
//! fails until it does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::protocol::StrBytes;
use logbook_client::{BrokerEndpoint, InterBrokerClient, InterBrokerConfig};

/// Flags of `logbook healthcheck`.
#[derive(Clone, Debug, clap::Args)]
pub struct HealthcheckArgs {
    /// The broker's client address; the same variable as the broker's own `--listen`, so a
    /// container checks the port it serves on.
    #[arg(long, env = "LOGBOOK_LISTEN", default_value = "127.0.0.1:9092")]
    pub listen: SocketAddr,
    /// Longest wait for the answer, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub timeout_ms: u64,
}

/// Runs the check; `Err` says why the broker is not healthy.
///
/// # Errors
/// The broker could not be reached, did not answer in time, or answered with an error.
pub fn run(args: &HealthcheckArgs) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let target = loopback_if_unspecified(args.listen);
    runtime.block_on(async {
        let client = InterBrokerClient::new(InterBrokerConfig {
            client_id: "logbook-healthcheck".to_owned(),
            request_timeout: Duration::from_millis(args.timeout_ms),
            ..InterBrokerConfig::default()
        });
        let endpoint = BrokerEndpoint {
            id: -1,
            host: target.ip().to_string(),
            port: target.port(),
        };
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("logbook-healthcheck"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let answer = client
            .send(&endpoint, 3, &request)
            .await
            .map_err(|e| format!("{target}: {e}"));
        client.shutdown();
        match answer? {
            a if a.error_code == 0 => Ok(()),
            a => Err(format!("{target}: ApiVersions error code {}", a.error_code)),
        }
    })
}

/// `0.0.0.0:9092` names every local address; connect to the loopback one.
fn loopback_if_unspecified(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port())
        }
        _ => addr,
    }
}
