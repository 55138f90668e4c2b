use super::*;

fn settings(listeners: &str, advertised: Option<&str>, map: Option<&str>) -> ListenerSettings {
    ListenerSettings {
        listeners: Some(listeners.into()),
        advertised_listeners: advertised.map(Into::into),
        protocol_map: map.map(Into::into),
        ..ListenerSettings::default()
    }
}

// The Docker set-up: containers use the service name, host clients localhost; the
// CONTROLLER entry is left to the quorum.
#[test]
fn two_listeners_with_their_own_advertised_hosts() {
    let l = Listeners::resolve(&ListenerSettings {
        inter_broker_listener_name: Some("internal".into()),
        ..settings(
            "PLAINTEXT://:9092,INTERNAL://0.0.0.0:19092,CONTROLLER://:9093",
            Some("PLAINTEXT://localhost:9092,INTERNAL://logbook:19092"),
            Some("PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"),
        )
    })
    .expect("valid");
    let bound: Vec<String> = l.bound.iter().map(ToString::to_string).collect();
    assert_eq!(bound, ["PLAINTEXT://:9092", "INTERNAL://0.0.0.0:19092"]);
    assert_eq!(
        l.bound[0].bind_address().expect("bind"),
        "0.0.0.0:9092".parse().expect("addr")
    );
    let internal = l
        .advertised(&ListenerName::new("INTERNAL"))
        .expect("INTERNAL");
    assert_eq!((internal.host.as_str(), internal.port), ("logbook", 19092));
    assert_eq!(l.inter_broker.as_str(), "INTERNAL");
    assert_eq!(l.controller, [ListenerName::new("CONTROLLER")]);
}

#[test]
fn defaults_are_kafkas() {
    let l = Listeners::resolve(&ListenerSettings::default()).expect("defaults");
    assert_eq!(l.bound.len(), 1);
    assert_eq!(l.bound[0].to_string(), "PLAINTEXT://:9092");
    assert_eq!(l.advertised, l.bound);
    assert_eq!(l.inter_broker.as_str(), "PLAINTEXT");
    // Protocols by the default map; SASL_SSL listener by name.
    let l = Listeners::resolve(&ListenerSettings {
        security_inter_broker_protocol: Some("SASL_SSL".into()),
        ..settings("SASL_SSL://127.0.0.1:9094,SSL://127.0.0.1:9093", None, None)
    })
    .expect("valid");
    assert_eq!(l.bound[0].protocol, SecurityProtocol::SaslSsl);
    assert_eq!(l.bound[0].protocol.id(), 3);
    assert_eq!(l.bound[1].protocol, SecurityProtocol::Ssl);
    assert_eq!(l.inter_broker.as_str(), "SASL_SSL");
}

#[test]
fn names_are_case_insensitive_and_ipv6_hosts_bracketed() {
    let l = Listeners::resolve(&settings(
        "plaintext://[::1]:9092",
        Some("PLAINTEXT://[::1]:9092"),
        None,
    ))
    .expect("valid");
    assert_eq!(l.bound[0].name.as_str(), "PLAINTEXT");
    assert_eq!(l.bound[0].host, "::1");
    assert_eq!(l.bound[0].to_string(), "PLAINTEXT://[::1]:9092");
    assert_eq!(l.bound[0].name.config_prefix(), "listener.name.plaintext.");
}

#[test]
fn kafkas_refusals() {
    let refused = |s: ListenerSettings, expected: &str| {
        let e = Listeners::resolve(&s).expect_err(expected);
        assert!(e.contains(expected), "{e:?} lacks {expected:?}");
    };
    refused(
        settings("INTERNAL://:9092", None, None),
        "listener INTERNAL has no security protocol",
    );
    refused(
        settings("PLAINTEXT://:9092,PLAINTEXT://:9093", None, None),
        "Each listener must have a different name",
    );
    refused(
        settings("PLAINTEXT://:9092,SSL://:9092", None, None),
        "Each listener must have a different port",
    );
    refused(
        settings("PLAINTEXT://:9092", Some("PLAINTEXT://0.0.0.0:9092"), None),
        "nonroutable meta-address",
    );
    refused(
        settings("PLAINTEXT://:9092", Some("SSL://h:9093"), None),
        "must be equal to or a subset of the ones defined in listeners",
    );
    refused(
        settings("PLAINTEXT://:9092", None, Some("PLAINTEXT:TLS")),
        "unknown security protocol TLS",
    );
    refused(settings("PLAINTEXT://:x", None, None), "no valid port");
    // One IPv4 and one IPv6 address may share a port; not two IPv4 ones.
    Listeners::resolve(&settings(
        "PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092",
        None,
        None,
    ))
    .expect("IPv4 and IPv6 on one port");
    refused(
        settings("localhost:9092", None, None),
        "not NAME://host:port",
    );
    refused(
        ListenerSettings {
            inter_broker_listener_name: Some("PLAINTEXT".into()),
            security_inter_broker_protocol: Some("PLAINTEXT".into()),
            ..ListenerSettings::default()
        },
        "only one of inter.broker.listener.name and security.inter.broker.protocol",
    );
    refused(
        ListenerSettings {
            inter_broker_listener_name: Some("REPLICATION".into()),
            ..ListenerSettings::default()
        },
        "inter.broker.listener.name must be a listener name defined in advertised.listeners",
    );
    refused(
        settings(
            "PLAINTEXT://:9092,CONTROLLER://:9093",
            Some("CONTROLLER://h:9093"),
            None,
        ),
        "must not contain the controller listener",
    );
}

// A controller-only node names only its controller listener.
#[test]
fn a_controller_only_node_binds_no_client_listener() {
    let l = Listeners::resolve(&settings("CONTROLLER://:9093", None, None)).expect("valid");
    assert!(l.bound.is_empty());
    assert!(l.advertised.is_empty());
}
