//! DescribeCluster (API key 60): the cluster id, the controller and the brokers, as the
//! Java AdminClient's `describeCluster` asks for them: the live brokers of the metadata
//! image, as Metadata lists them.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::metadata::OPERATIONS_NOT_REQUESTED;
use super::RequestContext;

/// Versions served (Kafka 4.x serves 0-2).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// Kafka's `EndpointType.BROKER`: a broker answers only for broker endpoints.
const ENDPOINT_TYPE_BROKER: i8 = 1;

/// Answers a DescribeCluster request.
pub fn handle(ctx: &RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse {
    let broker = &ctx.broker;
    let (brokers, controller_id) =
        super::metadata::brokers_and_controller(broker, &ctx.listener_name);
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(ENDPOINT_TYPE_BROKER)
        .with_cluster_id(StrBytes::from_string(broker.topics.cluster_id()))
        .with_controller_id(BrokerId(controller_id))
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED);
    // v1+ may ask for controller endpoints; a broker refuses (Kafka's KafkaApis).
    if ctx.api_version >= 1 && request.endpoint_type != ENDPOINT_TYPE_BROKER {
        let error = ResponseError::UnsupportedEndpointType;
        return response
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "The target broker only supports the broker endpoints type",
            )))
            .with_controller_id(BrokerId(-1));
    }
    let brokers = brokers
        .into_iter()
        .map(|b| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.node_id))
                .with_host(StrBytes::from_string(b.host))
                .with_port(b.port)
                .with_rack(b.rack.map(StrBytes::from_string))
        })
        .collect();
    let operations = if request.include_cluster_authorized_operations {
        ctx.authorizer.cluster_authorized_operations()
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    response
        .with_brokers(brokers)
        .with_cluster_authorized_operations(operations)
}
