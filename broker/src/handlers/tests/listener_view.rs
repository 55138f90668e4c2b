//! Metadata as the clients of one listener see it (KRaftMetadataCache's rules): a replica
//! whose broker has no endpoint on the listener is offline, and a leader without one is
//! not named: LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE before.

use kafka_protocol::messages::metadata_response::MetadataResponsePartition;
use kafka_protocol::messages::BrokerId;
use kafka_protocol::ResponseError;

use crate::cluster::views::BrokerView;
use crate::handlers::metadata::fit_to_listener;

fn partition(leader: i32) -> MetadataResponsePartition {
    MetadataResponsePartition::default()
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(4)
        .with_replica_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
        .with_isr_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
        .with_offline_replicas(vec![BrokerId(3)])
}

/// Brokers 1 and 3 have the listener (3 is fenced, hence already offline); 2 does not.
fn on_listener() -> Vec<BrokerView> {
    vec![BrokerView {
        node_id: 1,
        host: "h1".into(),
        port: 1,
        rack: None,
    }]
}

#[test]
fn a_leader_without_the_listener_is_not_named() {
    let mut p = partition(2);
    fit_to_listener(&mut p, &on_listener(), 12);
    assert_eq!(p.error_code, ResponseError::ListenerNotFound.code());
    assert_eq!(p.leader_id, BrokerId(-1));
    assert_eq!(p.leader_epoch, 4, "the epoch is still shown");
    assert_eq!(
        p.replica_nodes.len(),
        3,
        "replicas are listed whole from v1"
    );
    assert_eq!(p.isr_nodes.len(), 3);
    assert_eq!(p.offline_replicas, [BrokerId(3), BrokerId(2)]);

    let mut p = partition(2);
    fit_to_listener(&mut p, &on_listener(), 5);
    assert_eq!(p.error_code, ResponseError::LeaderNotAvailable.code());
    assert_eq!(p.leader_id, BrokerId(-1));
}

#[test]
fn a_leader_with_the_listener_is_unchanged() {
    let mut p = partition(1);
    fit_to_listener(&mut p, &on_listener(), 12);
    assert_eq!(p.error_code, 0);
    assert_eq!(p.leader_id, BrokerId(1));
    assert_eq!(p.offline_replicas, [BrokerId(3), BrokerId(2)]);
    // No leader: nothing to hide, the image's own error stands.
    let mut p = partition(-1).with_error_code(ResponseError::LeaderNotAvailable.code());
    fit_to_listener(&mut p, &on_listener(), 12);
    assert_eq!(p.error_code, ResponseError::LeaderNotAvailable.code());
}
