use super::*;

fn voters(s: &str) -> QuorumVoters {
    s.parse().expect("valid voters")
}

fn cluster(node_id: i32, roles: &str, voter_list: &str) -> Result<ClusterConfig, String> {
    ClusterConfig::new(node_id, roles.parse()?, voter_list.parse()?)
}

// process.roles takes Kafka's three forms, in either order, and refuses unknown,
// duplicate and empty roles.
#[test]
fn process_roles() {
    assert_eq!(
        "broker,controller".parse::<ProcessRoles>(),
        Ok(ProcessRoles::COMBINED)
    );
    assert_eq!(
        " controller , broker ".parse::<ProcessRoles>(),
        Ok(ProcessRoles::COMBINED)
    );
    let broker: ProcessRoles = "broker".parse().expect("broker");
    assert_eq!((broker.broker, broker.controller), (true, false));
    assert_eq!(broker.to_string(), "broker");
    let controller: ProcessRoles = "controller".parse().expect("controller");
    assert_eq!((controller.broker, controller.controller), (false, true));
    assert_eq!(ProcessRoles::COMBINED.to_string(), "broker,controller");
    let e = "broker,zookeeper"
        .parse::<ProcessRoles>()
        .expect_err("unknown");
    assert!(e.contains("unknown process role 'zookeeper'"), "{e}");
    let e = "broker,broker"
        .parse::<ProcessRoles>()
        .expect_err("duplicate");
    assert!(e.contains("duplicate role 'broker'"), "{e}");
    let e = "".parse::<ProcessRoles>().expect_err("empty");
    assert!(e.contains("at least one"), "{e}");
}

// Voters parse as id@host:port (IPv6 in brackets) and print back the same way.
#[test]
fn voters_parse_and_print() {
    let v = voters("1@127.0.0.1:19811, 2@localhost:19821,3@[::1]:19831");
    assert_eq!(
        v.0,
        vec![
            QuorumVoter {
                node_id: 1,
                host: "127.0.0.1".into(),
                port: 19811
            },
            QuorumVoter {
                node_id: 2,
                host: "localhost".into(),
                port: 19821
            },
            QuorumVoter {
                node_id: 3,
                host: "::1".into(),
                port: 19831
            },
        ]
    );
    assert_eq!(
        v.to_string(),
        "1@127.0.0.1:19811,2@localhost:19821,3@[::1]:19831"
    );
    assert_eq!(voters(""), QuorumVoters::default());
    assert_eq!(voters("  "), QuorumVoters::default());
}

// Each malformed entry is refused with a message naming it and what is wrong.
#[test]
fn bad_voters() {
    let cases = [
        ("1@127.0.0.1:9093,1@127.0.0.2:9093", "duplicate voter id 1"),
        ("127.0.0.1:9093", "no '@'"),
        ("x@127.0.0.1:9093", "id is not an integer"),
        ("-1@127.0.0.1:9093", "id is negative"),
        ("1@127.0.0.1", "no ':port'"),
        ("1@127.0.0.1:99999", "port is not a number"),
        ("1@127.0.0.1:0", "port is 0"),
        ("1@:9093", "host is empty"),
        ("1@ho st:9093", "host is empty or has characters"),
        ("1@::1:9093", "IPv6 host must be written in brackets"),
        ("1@[::1:9093", "unclosed '['"),
        ("1@0.0.0.0:9093", "wildcard"),
        ("1@127.0.0.1:9093,", "is not id@host:port"),
    ];
    for (value, expected) in cases {
        let e = value
            .parse::<QuorumVoters>()
            .expect_err(&format!("'{value}' must be refused"));
        assert!(e.contains(expected), "'{value}': {e}");
    }
}

// The roles and the voter list must agree with node.id, as KafkaConfig requires.
#[test]
fn roles_voters_and_node_id_agree() {
    let v = "1@127.0.0.1:19811,2@127.0.0.1:19821,3@127.0.0.1:19831";
    let c = cluster(2, "broker,controller", v).expect("combined voter");
    assert!(!c.is_single_node());
    assert_eq!(c.voters.len(), 3);
    assert_eq!(
        c.controller_address.as_ref().map(QuorumVoter::address),
        Some("127.0.0.1:19821".to_string())
    );
    let c = cluster(3, "controller", v).expect("controller-only voter");
    assert_eq!(c.controller_address.map(|a| a.port), Some(19831));
    let c = cluster(4, "broker", v).expect("broker-only node");
    assert_eq!(c.controller_address, None);

    let e = cluster(4, "broker,controller", v).expect_err("controller not a voter");
    assert!(
        e.contains("node.id 4 must be one of controller.quorum.voters=1@127.0.0.1:19811"),
        "{e}"
    );
    let e = cluster(4, "controller", v).expect_err("controller-only not a voter");
    assert!(e.contains("node.id 4 must be one of"), "{e}");
    let e = cluster(1, "broker", v).expect_err("broker-only voter");
    assert!(e.contains("node.id 1 must not be one of"), "{e}");
    let e = cluster(1, "controller", "").expect_err("controller-only alone");
    assert!(e.contains("needs controller.quorum.voters"), "{e}");
    let e = cluster(1, "broker", "").expect_err("broker-only alone");
    assert!(e.contains("needs controller.quorum.voters"), "{e}");
}

// No voters is a single node, as before clustering; a quorum of combined nodes, a
// broker of a remote quorum and a controller-only voter are accepted.
#[test]
fn single_node_quorum_and_split_roles() {
    let c = cluster(1, "broker,controller", "").expect("default");
    assert!(c.is_single_node());
    assert_eq!(c.controller_address, None);

    let alone = cluster(7, "broker,controller", "7@127.0.0.1:9093").expect("one voter");
    assert!(!alone.is_single_node());

    cluster(1, "broker,controller", "1@127.0.0.1:9093,2@127.0.0.1:9094").expect("two voters");
    let c = cluster(3, "broker", "1@127.0.0.1:9093").expect("broker of a remote quorum");
    assert_eq!(c.controller_address, None);
    let c = cluster(1, "controller", "1@127.0.0.1:9093").expect("controller-only voter");
    assert_eq!(c.controller_address.map(|v| v.port), Some(9093));
}
