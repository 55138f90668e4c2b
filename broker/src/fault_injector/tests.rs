use super::*;

#[test]
fn errors_and_apis_by_kafka_name_or_code() {
    assert_eq!(
        error_by_name(&ErrorName::Name("NOT_LEADER_OR_FOLLOWER".into())),
        Ok(ResponseError::NotLeaderOrFollower)
    );
    assert_eq!(
        error_by_name(&ErrorName::Code(15)),
        Ok(ResponseError::CoordinatorNotAvailable)
    );
    assert_eq!(
        error_by_name(&ErrorName::Name("7".into())),
        Ok(ResponseError::RequestTimedOut)
    );
    assert!(error_by_name(&ErrorName::Name("NO_SUCH_ERROR".into())).is_err());
    assert!(error_by_name(&ErrorName::Code(0)).is_err());
    assert_eq!(api_by_name("Produce"), Ok(ApiKey::Produce));
    assert_eq!(api_by_name("FIND_COORDINATOR"), Ok(ApiKey::FindCoordinator));
    assert!(api_by_name("Nope").is_err());
}

fn spec(json: &str) -> FaultSpec {
    serde_json::from_str(json).expect("spec")
}

#[test]
fn a_counted_error_fault_acts_count_times_on_its_partition_only() {
    let injector = FaultInjector::new();
    let view = injector
        .add(spec(r#"{"kind":"error","topic":"t","partition":1,"error":"NOT_LEADER_OR_FOLLOWER","count":2}"#))
        .expect("armed");
    let scope = FaultScope {
        api: ApiKey::Produce,
        client_id: "c".into(),
    };
    assert_eq!(injector.partition_error(&scope, "t", 0), None);
    assert_eq!(injector.partition_error(&scope, "u", 1), None);
    for _ in 0..2 {
        assert_eq!(
            injector.partition_error(&scope, "t", 1),
            Some(ResponseError::NotLeaderOrFollower)
        );
    }
    assert_eq!(injector.partition_error(&scope, "t", 1), None);
    let listed = injector.list();
    assert_eq!(
        (listed[0].id, listed[0].injected, listed[0].armed),
        (view.id, 2, false)
    );
    assert_eq!(injector.clear(None), 1);
    assert!(injector.list().is_empty());
}

#[test]
fn an_unavailable_partition_refuses_until_cleared() {
    let injector = FaultInjector::new();
    let view = injector
        .add(spec(r#"{"kind":"partition_unavailable","topic":"t"}"#))
        .expect("armed");
    let scope = FaultScope {
        api: ApiKey::Fetch,
        client_id: String::new(),
    };
    for partition in 0..3 {
        assert_eq!(
            injector.partition_error(&scope, "t", partition),
            Some(ResponseError::NotLeaderOrFollower)
        );
    }
    assert_eq!(injector.clear(Some(view.id + 1)), 0);
    assert_eq!(injector.clear(Some(view.id)), 1);
    assert_eq!(injector.partition_error(&scope, "t", 0), None);
}

#[test]
fn incomplete_or_unservable_specs_are_refused_with_a_reason() {
    let injector = FaultInjector::new();
    for (json, says) in [
        (r#"{"kind":"error","api":"Produce"}"#, "needs error"),
        (
            r#"{"kind":"error","error":"REQUEST_TIMED_OUT"}"#,
            "needs api",
        ),
        (
            r#"{"kind":"error","api":"DescribeAcls","error":7}"#,
            "error faults are served for",
        ),
        (r#"{"kind":"delay"}"#, "needs delay_ms"),
        (r#"{"kind":"partition_unavailable"}"#, "needs topic"),
        (r#"{"kind":"rebalance","group":"g"}"#, "acts at once"),
        (
            r#"{"kind":"delay","delay_ms":5,"partition":1}"#,
            "partition needs topic",
        ),
    ] {
        let e = injector.add(spec(json)).expect_err(json);
        assert!(e.contains(says), "{json}: {e}");
    }
    assert!(serde_json::from_str::<FaultSpec>(r#"{"kind":"delay","dealy_ms":5}"#).is_err());
    assert!(injector.list().is_empty());
}

#[test]
fn every_error_response_encodes_at_every_served_version() {
    // A field set that a version lacks makes the encoder refuse, and the connection close
    // instead of answering with the error (FindCoordinator v4+ did).
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    let group = GroupId(StrBytes::from_static_str("g"));
    let bodies = [
        RequestKind::FindCoordinator(
            FindCoordinatorRequest::default()
                .with_key(StrBytes::from_static_str("g"))
                .with_coordinator_keys(vec![StrBytes::from_static_str("g")]),
        ),
        RequestKind::JoinGroup(JoinGroupRequest::default().with_group_id(group.clone())),
        RequestKind::SyncGroup(SyncGroupRequest::default().with_group_id(group.clone())),
        RequestKind::Heartbeat(HeartbeatRequest::default().with_group_id(group.clone())),
        RequestKind::LeaveGroup(LeaveGroupRequest::default().with_group_id(group.clone())),
        RequestKind::OffsetCommit(OffsetCommitRequest::default().with_group_id(group.clone())),
        RequestKind::InitProducerId(InitProducerIdRequest::default()),
        RequestKind::AddPartitionsToTxn(AddPartitionsToTxnRequest::default()),
        RequestKind::AddOffsetsToTxn(AddOffsetsToTxnRequest::default().with_group_id(group)),
        RequestKind::EndTxn(EndTxnRequest::default()),
    ];
    assert_eq!(bodies.len(), responses::TOP_LEVEL.len());
    for (api, body) in responses::TOP_LEVEL.iter().zip(&bodies) {
        let versions = crate::handlers::supported(*api).expect("served");
        for version in versions.min..=versions.max {
            let response =
                responses::error_response(version, body, ResponseError::CoordinatorNotAvailable)
                    .expect("a response");
            let mut buf = bytes::BytesMut::new();
            response
                .encode(&mut buf, version)
                .unwrap_or_else(|e| panic!("{api:?} v{version}: {e:#}"));
        }
    }
}

#[test]
fn the_largest_durations_and_delays_are_armed_without_overflow() {
    // A hostile or careless spec (u64::MAX ms) must not panic the admin API: a deadline
    // past what an Instant holds means "never expires".
    let injector = FaultInjector::new();
    let max = u64::MAX;
    let spec = spec(&format!(
        r#"{{"kind":"delay","delay_ms":{max},"jitter_ms":{max},"duration_ms":{max}}}"#
    ));
    let view = injector.add(spec).expect("armed");
    assert!(view.armed);
    assert!(injector.list()[0].armed);
}
