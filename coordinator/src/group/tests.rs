//! State-machine tests of the classic group protocol, with tokio's paused clock standing in
//! for session and rebalance timeouts.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::*;
use crate::test_host::TestHost;

fn topics(dir: &std::path::Path) -> Arc<TestHost> {
    TestHost::open(dir, logbook_replication::FlushPolicy::Os)
}

fn config(initial_delay_ms: i32) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: initial_delay_ms,
        offsets_topic_num_partitions: 3,
        ..GroupConfig::default()
    }
}

fn join(member_id: &str, instance: Option<&str>, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member_id.into(),
        group_instance_id: instance.map(Into::into),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout_ms: 10_000,
        session_timeout_ms: 6_000,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| ((*p).to_string(), Bytes::from(format!("meta-{p}"))))
            .collect(),
        require_known_member_id: true,
        supports_skip_assignment: true,
    }
}

async fn recv<T>(rx: oneshot::Receiver<T>) -> T {
    tokio::time::timeout(Duration::from_secs(600), rx)
        .await
        .expect("answered in time")
        .expect("sender kept")
}

/// First join of a member: MEMBER_ID_REQUIRED, then the real join.
async fn join_new(
    c: &GroupCoordinator,
    protocols: &[&str],
) -> (String, oneshot::Receiver<JoinResult>) {
    let first = recv(c.join_group(join("", None, protocols))).await;
    assert_eq!(first.error, Some(GroupError::MemberIdRequired));
    assert!(
        first.member_id.starts_with("client-"),
        "{}",
        first.member_id
    );
    let id = first.member_id.clone();
    (id.clone(), c.join_group(join(&id, None, protocols)))
}

fn sync(
    c: &GroupCoordinator,
    generation: i32,
    member: &str,
    assignments: Vec<(String, Bytes)>,
) -> oneshot::Receiver<SyncResult> {
    c.sync_group(
        "g",
        generation,
        member,
        None,
        Some("consumer"),
        None,
        assignments,
    )
}

fn state(c: &GroupCoordinator) -> GroupState {
    c.describe_group("g").expect("group exists").state
}

#[tokio::test(start_paused = true)]
async fn single_member_joins_syncs_and_heartbeats() {
    // Proves: KIP-394 MEMBER_ID_REQUIRED, generation 1 after the first rebalance, the sole
    // member leads and gets its own metadata, its SyncGroup assignment comes back, and
    // heartbeats succeed only with the right member and generation.
    let dir = tempfile::tempdir().expect("tempdir");
    let c = GroupCoordinator::load(&topics(dir.path()).host(), config(0)).expect("load");
    let (id, rx) = join_new(&c, &["range"]).await;
    let joined = recv(rx).await;
    assert_eq!(joined.error, None);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, id);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(
        joined.members,
        vec![(id.clone(), None, Bytes::from("meta-range"))]
    );
    assert_eq!(state(&c), GroupState::CompletingRebalance);
    let synced = recv(sync(&c, 1, &id, vec![(id.clone(), Bytes::from("A"))])).await;
    assert_eq!(synced.error, None);
    assert_eq!(synced.assignment, Bytes::from("A"));
    assert_eq!(state(&c), GroupState::Stable);
    assert_eq!(c.heartbeat("g", &id, None, 1), Ok(()));
    assert_eq!(
        c.heartbeat("g", &id, None, 0),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        c.heartbeat("g", "nobody", None, 1),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        c.heartbeat("nogroup", &id, None, 1),
        Err(GroupError::UnknownMemberId)
    );
}

#[tokio::test(start_paused = true)]
async fn second_member_triggers_rebalance_and_protocol_vote() {
    // Proves: a joining member moves a Stable group to PreparingRebalance (heartbeat says
    // REBALANCE_IN_PROGRESS), the generation increments, the protocol both support with most
    // votes wins, only the leader gets member metadata, and SyncGroup hands out each
    // member's own assignment; a stale-generation SyncGroup gets ILLEGAL_GENERATION.
    let dir = tempfile::tempdir().expect("tempdir");
    let c = GroupCoordinator::load(&topics(dir.path()).host(), config(0)).expect("load");
    let (a, rx) = join_new(&c, &["roundrobin", "range"]).await;
    assert_eq!(recv(rx).await.generation_id, 1);
    recv(sync(&c, 1, &a, vec![])).await;
    let (b, rx_b) = join_new(&c, &["range", "roundrobin"]).await;
    assert_eq!(state(&c), GroupState::PreparingRebalance);
    assert_eq!(
        c.heartbeat("g", &a, None, 1),
        Err(GroupError::RebalanceInProgress)
    );
    let rx_a = c.join_group(join(&a, None, &["roundrobin", "range"]));
    let (ja, jb) = (recv(rx_a).await, recv(rx_b).await);
    assert_eq!((ja.generation_id, jb.generation_id), (2, 2));
    // One vote each; the tie goes to the leader's preference.
    assert_eq!(ja.protocol_name.as_deref(), Some("roundrobin"));
    assert_eq!(ja.leader, a);
    assert_eq!(ja.members.len(), 2);
    assert!(jb.members.is_empty());
    assert_eq!(
        recv(sync(&c, 1, &b, vec![])).await.error,
        Some(GroupError::IllegalGeneration)
    );
    let rx_b = sync(&c, 2, &b, vec![]);
    let rx_a = sync(
        &c,
        2,
        &a,
        vec![
            (a.clone(), Bytes::from("pa")),
            (b.clone(), Bytes::from("pb")),
        ],
    );
    assert_eq!(recv(rx_a).await.assignment, Bytes::from("pa"));
    assert_eq!(recv(rx_b).await.assignment, Bytes::from("pb"));
    assert_eq!(state(&c), GroupState::Stable);
    // A member with no common protocol is refused.
    let bad = recv(c.join_group(join("", None, &["sticky"]))).await;
    assert_eq!(bad.error, Some(GroupError::InconsistentGroupProtocol));
}

#[tokio::test(start_paused = true)]
async fn session_timeout_evicts_silent_member() {
    // Proves: a member that stops heartbeating is removed after session.timeout.ms, the
    // survivor is told to rejoin, and the next generation has only the survivor.
    let dir = tempfile::tempdir().expect("tempdir");
    let c = GroupCoordinator::load(&topics(dir.path()).host(), config(0)).expect("load");
    let (a, rx) = join_new(&c, &["range"]).await;
    recv(rx).await;
    recv(sync(&c, 1, &a, vec![])).await;
    let (b, rx_b) = join_new(&c, &["range"]).await;
    let rx_a = c.join_group(join(&a, None, &["range"]));
    recv(rx_a).await;
    recv(rx_b).await;
    let rx_b = sync(&c, 2, &b, vec![]);
    recv(sync(&c, 2, &a, vec![])).await;
    recv(rx_b).await;
    // a heartbeats every 2 s; b is silent.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(c.heartbeat("g", &a, None, 2), Ok(()));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        c.heartbeat("g", &b, None, 2),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        c.heartbeat("g", &a, None, 2),
        Err(GroupError::RebalanceInProgress)
    );
    let rejoined = recv(c.join_group(join(&a, None, &["range"]))).await;
    assert_eq!(rejoined.generation_id, 3);
    assert_eq!(rejoined.members.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn rebalance_timeout_removes_member_that_does_not_rejoin() {
    // Proves: the join phase ends after the rebalance timeout even if a member never
    // rejoins; that member is dropped from the new generation.
    let dir = tempfile::tempdir().expect("tempdir");
    let c = GroupCoordinator::load(&topics(dir.path()).host(), config(0)).expect("load");
    let (a, rx) = join_new(&c, &["range"]).await;
    recv(rx).await;
    recv(sync(&c, 1, &a, vec![])).await;
    let (_b, rx_b) = join_new(&c, &["range"]).await;
    // a keeps heartbeating (so its session lives) but never rejoins.
    let hb = async {
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let _ = c.heartbeat("g", &a, None, 1);
        }
    };
    let (jb, ()) = tokio::join!(recv(rx_b), hb);
    assert_eq!(jb.generation_id, 2);
    assert_eq!(jb.members.len(), 1, "only b is in generation 2");
    assert_eq!(
        c.heartbeat("g", &a, None, 1),
        Err(GroupError::UnknownMemberId)
    );
}

#[tokio::test(start_paused = true)]
async fn initial_delay_collects_members_into_one_generation() {
    // Proves: group.initial.rebalance.delay.ms holds the first rebalance open so members
    // joining within it form generation 1 together.
    let dir = tempfile::tempdir().expect("tempdir");
    let c = GroupCoordinator::load(&topics(dir.path()).host(), config(3000)).expect("load");
    let (_a, mut rx_a) = join_new(&c, &["range"]).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        rx_a.try_recv().is_err(),
        "still waiting in the initial delay"
    );
    let (_b, rx_b) = join_new(&c, &["range"]).await;
    let (ja, jb) = (recv(rx_a).await, recv(rx_b).await);
    assert_eq!((ja.generation_id, jb.generation_id), (1, 1));
    assert_eq!(ja.members.len() + jb.members.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn static_member_rejoins_without_rebalance() {
    // Proves: a static member that comes back with a new member id (restart) gets the
    // current generation and its old assignment without a rebalance; the old member id is
    // fenced (FENCED_INSTANCE_ID).
    let dir = tempfile::tempdir().expect("tempdir");
    let c = GroupCoordinator::load(&topics(dir.path()).host(), config(0)).expect("load");
    let old = recv(c.join_group(join("", Some("i1"), &["range"]))).await;
    assert_eq!(old.error, None, "static members get an id at once");
    let old_id = old.member_id;
    recv(sync(
        &c,
        1,
        &old_id,
        vec![(old_id.clone(), Bytes::from("mine"))],
    ))
    .await;
    let again = recv(c.join_group(join("", Some("i1"), &["range"]))).await;
    assert_eq!(again.error, None);
    assert_eq!(again.generation_id, 1, "no rebalance");
    assert_ne!(again.member_id, old_id);
    assert!(
        again.skip_assignment,
        "the static leader skips the assignment"
    );
    assert_eq!(state(&c), GroupState::Stable);
    let synced = recv(c.sync_group("g", 1, &again.member_id, Some("i1"), None, None, vec![])).await;
    assert_eq!(synced.assignment, Bytes::from("mine"));
    assert_eq!(
        c.heartbeat("g", &old_id, Some("i1"), 1),
        Err(GroupError::FencedInstanceId)
    );
    // Before JoinGroup v9 the leader cannot be told to skip the assignment, so it is
    // answered as a follower: no members, and the leader named as it was before this join.
    let leader_before = again.member_id.clone();
    let old_client = recv(c.join_group(JoinRequest {
        supports_skip_assignment: false,
        ..join("", Some("i1"), &["range"])
    }))
    .await;
    assert_eq!(old_client.error, None);
    assert_eq!(old_client.generation_id, 1, "no rebalance");
    assert_ne!(old_client.member_id, leader_before);
    assert_eq!(
        (
            old_client.leader.as_str(),
            old_client.members.len(),
            old_client.skip_assignment
        ),
        (leader_before.as_str(), 0, false)
    );
    let synced = recv(c.sync_group(
        "g",
        1,
        &old_client.member_id,
        Some("i1"),
        None,
        None,
        vec![],
    ))
    .await;
    assert_eq!(synced.assignment, Bytes::from("mine"));
    // LeaveGroup by instance id alone.
    let left = c
        .leave_group("g", &[(String::new(), Some("i1".into()))])
        .expect("leave");
    assert_eq!(left, vec![Ok(())]);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(state(&c), GroupState::Empty);
}

#[tokio::test(start_paused = true)]
async fn commits_survive_reload_and_admin_errors() {
    // Proves: generation checks on OffsetCommit (standalone -1 accepted for an empty group,
    // ILLEGAL_GENERATION for a member of another generation), metadata strings round-trip,
    // offsets and groups reload from __consumer_offsets, DeleteGroups refuses a non-empty
    // group and removes an empty one, and OffsetDelete removes offsets.
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topics(dir.path());
    let c = GroupCoordinator::load(&t.host(), config(0)).expect("load");
    let commit = |p: i32, offset: i64| CommitPartition {
        topic: "t".into(),
        partition: p,
        offset,
        leader_epoch: 3,
        metadata: Some(format!("m{p}")),
    };
    let r = c.commit_offsets("g", -1, "", None, &[commit(0, 10), commit(1, 20)], 8);
    assert_eq!(r.errors, vec![None, None]);
    let r = c.commit_offsets("h", 5, "m", None, &[commit(0, 1)], 8);
    assert_eq!(r.errors, vec![Some(GroupError::IllegalGeneration)]);
    let too_long = CommitPartition {
        metadata: Some("x".repeat(5000)),
        ..commit(2, 1)
    };
    let r = c.commit_offsets("g", -1, "", None, &[too_long], 8);
    assert_eq!(r.errors, vec![Some(GroupError::OffsetMetadataTooLarge)]);
    let (a, rx) = join_new(&c, &["range"]).await;
    recv(rx).await;
    recv(sync(&c, 1, &a, vec![])).await;
    let r = c.commit_offsets("g", 0, &a, None, &[commit(0, 11)], 8);
    assert_eq!(r.errors, vec![Some(GroupError::IllegalGeneration)]);
    let r = c.commit_offsets("g", 1, &a, None, &[commit(0, 12)], 8);
    assert_eq!(r.errors, vec![None]);
    assert_eq!(c.delete_group("g").err(), Some(GroupError::NonEmptyGroup));
    assert_eq!(
        c.delete_group("nope").err(),
        Some(GroupError::GroupIdNotFound)
    );
    c.shutdown();
    drop(c);
    let c = GroupCoordinator::load(&t.host(), config(0)).expect("reload");
    let fetched = c.fetch_offsets("g", None).expect("fetch");
    assert_eq!(fetched.len(), 1);
    let (topic, partitions) = &fetched[0];
    assert_eq!(topic, "t");
    let got: Vec<(i32, i64, String, i32)> = partitions
        .iter()
        .map(|(p, o)| {
            let o = o.as_ref().expect("committed");
            (*p, o.offset, o.metadata.clone(), o.leader_epoch)
        })
        .collect();
    assert_eq!(got, vec![(0, 12, "m0".into(), 3), (1, 20, "m1".into(), 3)]);
    // The member came back from the log, so the group is Stable with generation 1.
    let described = c.describe_group("g").expect("described");
    assert_eq!(described.state, GroupState::Stable);
    assert_eq!(described.members.len(), 1);
    assert_eq!(c.heartbeat("g", &a, None, 1), Ok(()));
    assert_eq!(
        c.leave_group("g", &[(a.clone(), None)]).expect("leave"),
        vec![Ok(())]
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(state(&c), GroupState::Empty);
    assert_eq!(
        c.delete_offsets("g", &[("t".into(), 1)])
            .expect("delete offsets")
            .errors,
        vec![None]
    );
    assert_eq!(c.fetch_offsets("g", None).expect("fetch")[0].1.len(), 1);
    // The deletion hands back its tombstones' append, to be committed before the answer:
    // it ends at the log end after the write, past where the log ended before it.
    let (partition, end) = c
        .delete_group("g")
        .expect("deleted")
        .expect("tombstones written");
    let log_end = partition.offsets().expect("offsets").log_end;
    assert_eq!(end, log_end);
    partition
        .wait_committed(end, Duration::from_secs(5))
        .await
        .expect("tombstones committed");
    assert!(partition.high_watermark() >= end);
    assert_eq!(c.describe_group("g"), Err(GroupError::GroupIdNotFound));
    c.shutdown();
    drop(c);
    let c = GroupCoordinator::load(&t.host(), config(0)).expect("reload");
    assert!(
        c.fetch_offsets("g", None).expect("fetch").is_empty(),
        "deletion survives reload"
    );
    assert!(c.list_groups(&[]).is_empty());
}

#[tokio::test(start_paused = true)]
async fn offsets_of_empty_group_expire() {
    // Proves: offsets.retention.minutes removes a standalone group's offsets once expired,
    // and the group with them.
    let dir = tempfile::tempdir().expect("tempdir");
    let c = GroupCoordinator::load(&topics(dir.path()).host(), config(0)).expect("load");
    let r = c.commit_offsets(
        "g",
        -1,
        "",
        None,
        &[CommitPartition {
            topic: "t".into(),
            partition: 0,
            offset: 5,
            leader_epoch: -1,
            metadata: None,
        }],
        8,
    );
    assert_eq!(r.errors, vec![None]);
    c.expire_offsets(now_ms());
    assert_eq!(
        c.fetch_offsets("g", None).expect("fetch").len(),
        1,
        "not yet expired"
    );
    c.expire_offsets(now_ms() + c.config().offsets_retention_ms + 1);
    assert!(c.fetch_offsets("g", None).expect("fetch").is_empty());
    assert!(c.list_groups(&[]).is_empty());
}

#[test]
fn persisted_records_round_trip() {
    // Proves: the __consumer_offsets key/value codecs decode what they encode.
    let value = persistence::GroupValue {
        protocol_type: "consumer".into(),
        generation_id: 7,
        protocol_name: Some("range".into()),
        leader_id: Some("m1".into()),
        state_timestamp_ms: 42,
        members: vec![persistence::MemberValue {
            member_id: "m1".into(),
            group_instance_id: Some("i".into()),
            client_id: "c".into(),
            client_host: "/h".into(),
            rebalance_timeout_ms: 1,
            session_timeout_ms: 2,
            subscription: Bytes::from("s"),
            assignment: Bytes::from("a"),
        }],
    };
    let decoded = persistence::decode_record(
        &persistence::group_key("g"),
        Some(&persistence::group_value(&value)),
    );
    assert_eq!(
        decoded,
        Ok(Persisted::Group {
            group_id: "g".into(),
            value: Some(value)
        })
    );
    let decoded = persistence::decode_record(&persistence::offset_key("g", "t", 3), None);
    assert_eq!(
        decoded,
        Ok(Persisted::Offset {
            group_id: "g".into(),
            topic: "t".into(),
            partition: 3,
            value: None
        })
    );
}

#[tokio::test(start_paused = true)]
async fn failed_assignment_write_is_an_error_and_a_new_rebalance() {
    // Proves: SyncGroup answers only through the group record's append: when the leader's
    // assignment cannot be written (the group's __consumer_offsets partition is closed, as
    // after a log failure) the leader gets NOT_COORDINATOR (Kafka's mapping of a failed
    // append), no assignment, and the group does not become Stable but rebalances.
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topics(dir.path());
    let c = GroupCoordinator::load(&t.host(), config(0)).expect("load");
    let (id, rx) = join_new(&c, &["range"]).await;
    let joined = recv(rx).await;
    assert_eq!(joined.generation_id, 1);
    assert_eq!(state(&c), GroupState::CompletingRebalance);
    let partition = t
        .replicas
        .partition(crate::GROUP_METADATA_TOPIC_NAME, c.partition_for("g"))
        .expect("offsets partition");
    partition.close().expect("close");
    let synced = recv(sync(&c, 1, &id, vec![(id.clone(), Bytes::from("A"))])).await;
    assert_eq!(synced.error, Some(GroupError::NotCoordinator));
    assert_eq!(synced.assignment, Bytes::new());
    assert_eq!(state(&c), GroupState::PreparingRebalance);
    assert_eq!(
        c.heartbeat("g", &id, None, 1),
        Err(GroupError::RebalanceInProgress)
    );
}

/// [`join_new`] for group `group_id`.
async fn join_new_to(
    c: &GroupCoordinator,
    group_id: &str,
) -> (String, oneshot::Receiver<JoinResult>) {
    let req = |member: &str| JoinRequest {
        group_id: group_id.into(),
        ..join(member, None, &["range"])
    };
    let first = recv(c.join_group(req(""))).await;
    assert_eq!(first.error, Some(GroupError::MemberIdRequired));
    let id = first.member_id.clone();
    (id.clone(), c.join_group(req(&id)))
}

#[tokio::test(start_paused = true)]
async fn unload_answers_not_coordinator_and_load_replays_its_partition_only() {
    // Proves: the groups of an unloaded __consumer_offsets partition answer NOT_COORDINATOR
    // to every group request while other partitions' groups keep working, and loading a
    // partition restores its groups (offsets and members) from that partition alone.
    let dir = tempfile::tempdir().expect("tempdir");
    let c = GroupCoordinator::load(&topics(dir.path()).host(), config(0)).expect("load");
    // Two groups on different partitions of the (3-partition) offsets topic.
    let names: Vec<String> = (0..20).map(|i| format!("grp{i}")).collect();
    let a = names[0].clone();
    let b = names
        .iter()
        .find(|n| c.partition_for(n) != c.partition_for(&a))
        .expect("a group on another partition")
        .clone();
    let (pa, pb) = (c.partition_for(&a), c.partition_for(&b));
    let commit = |offset: i64| CommitPartition {
        topic: "t".into(),
        partition: 0,
        offset,
        leader_epoch: 0,
        metadata: None,
    };
    assert_eq!(
        c.commit_offsets(&a, -1, "", None, &[commit(10)], 8).errors,
        vec![None]
    );
    assert_eq!(
        c.commit_offsets(&b, -1, "", None, &[commit(20)], 8).errors,
        vec![None]
    );
    assert_eq!(c.loaded_partitions(), vec![0, 1, 2]);
    // A member of `a` parked in SyncGroup (its leader has not synced) at unload is answered
    // NOT_COORDINATOR, not left to time out.
    let (m1, rx1) = join_new_to(&c, &a).await;
    assert_eq!(recv(rx1).await.error, None);
    let (m2, rx2) = join_new_to(&c, &a).await;
    let (j1, j2) = (
        recv(c.join_group(JoinRequest {
            group_id: a.clone(),
            ..join(&m1, None, &["range"])
        })),
        recv(rx2),
    );
    let (j1, j2) = tokio::join!(j1, j2);
    let follower = if j1.leader == m1 { &m2 } else { &m1 };
    assert_eq!((j1.generation_id, j2.generation_id), (2, 2));
    let parked = c.sync_group(&a, 2, follower, None, Some("consumer"), None, vec![]);

    c.unload_partition(pa);
    assert_eq!(recv(parked).await.error, Some(GroupError::NotCoordinator));
    assert_eq!(
        c.fetch_offsets(&a, None).err(),
        Some(GroupError::NotCoordinator)
    );
    assert_eq!(
        c.commit_offsets(&a, -1, "", None, &[commit(11)], 8).errors,
        vec![Some(GroupError::NotCoordinator)]
    );
    assert_eq!(c.describe_group(&a).err(), Some(GroupError::NotCoordinator));
    assert_eq!(
        c.heartbeat(&a, "m", None, 1),
        Err(GroupError::NotCoordinator)
    );
    assert_eq!(c.delete_group(&a).err(), Some(GroupError::NotCoordinator));
    let joined = recv(c.join_group(JoinRequest {
        group_id: a.clone(),
        ..join("", None, &["range"])
    }))
    .await;
    assert_eq!(joined.error, Some(GroupError::NotCoordinator));
    assert!(c.list_groups(&[]).iter().all(|g| g.group_id != a));
    // The other partition's group is untouched.
    assert_eq!(
        c.fetch_offsets(&b, None).expect("b")[0].1[0]
            .1
            .as_ref()
            .map(|v| v.offset),
        Some(20)
    );

    // Unload both, load only `a`'s partition: `a` comes back from its log, `b` does not.
    c.unload_partition(pb);
    c.load_partition(pa).expect("reload");
    let fetched = c.fetch_offsets(&a, None).expect("a reloaded");
    assert_eq!(fetched[0].1[0].1.as_ref().map(|v| v.offset), Some(10));
    assert_eq!(
        c.fetch_offsets(&b, None).err(),
        Some(GroupError::NotCoordinator)
    );
    let listed: Vec<String> = c.list_groups(&[]).into_iter().map(|g| g.group_id).collect();
    assert_eq!(listed, vec![a.clone()]);
    let mut expected = vec![0, 1, 2];
    expected.retain(|p| *p != pb);
    assert_eq!(c.loaded_partitions(), expected);
}

// The committed view undoes every change above the high watermark, whatever mixes of
// commits and removals of the same key sit there, and pruning keeps the answer.
#[test]
fn group_offsets_answer_the_state_at_the_high_watermark() {
    use super::offsets::{GroupOffsets, OffsetAndMetadata};
    let at = |offset: i64| OffsetAndMetadata {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: 0,
    };
    let key = ("t".to_string(), 0);
    let mut offsets = GroupOffsets::default();
    offsets.apply(key.clone(), Some(at(1)), None); // replayed: committed
    offsets.apply(key.clone(), Some(at(2)), Some(10));
    offsets.apply(key.clone(), Some(at(3)), Some(12));
    offsets.apply(key.clone(), None, Some(14));
    offsets.apply(("u".to_string(), 0), Some(at(7)), Some(16));
    let committed = |o: &GroupOffsets, hw| o.committed(&key, hw).map(|v| v.offset);
    assert_eq!(committed(&offsets, 9), Some(1));
    assert_eq!(committed(&offsets, 10), Some(2));
    assert_eq!(committed(&offsets, 13), Some(3));
    assert_eq!(committed(&offsets, 14), None);
    assert_eq!(offsets.latest().get(&key), None);
    assert_eq!(offsets.all_committed(12).len(), 1);
    assert_eq!(offsets.all_committed(16).len(), 1);
    assert_eq!(offsets.all_committed(16)[0].0 .0, "u");
    offsets.prune(12);
    assert_eq!(committed(&offsets, 12), Some(3));
    assert_eq!(committed(&offsets, 20), None);
}

// A group that commits and never fetches does not keep every change: each commit forgets
// the ones the high watermark has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_forget_changes_under_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topics(dir.path());
    let c = GroupCoordinator::load(&t.host(), config(0)).expect("load");
    let commit = |offset: i64| CommitPartition {
        topic: "t".into(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: None,
    };
    for offset in 0..20 {
        let r = c.commit_offsets("g", -1, "", None, &[commit(offset)], 8);
        assert_eq!(r.errors, vec![None]);
        let (partition, end) = r.durable.expect("appended");
        partition
            .wait_committed(end, Duration::from_secs(10))
            .await
            .expect("durable");
    }
    let group = c.lookup("g").expect("loaded").expect("group");
    assert_eq!(group.lock().offsets.uncommitted_changes(), 1);
}

/// Every group's offsets (latest view) and pending transactional offsets, by group id.
type OffsetState = std::collections::BTreeMap<
    String,
    (
        std::collections::BTreeMap<offsets::OffsetKey, offsets::OffsetAndMetadata>,
        std::collections::BTreeMap<
            i64,
            std::collections::BTreeMap<offsets::OffsetKey, offsets::OffsetAndMetadata>,
        >,
    ),
>;

fn offset_state(c: &GroupCoordinator) -> OffsetState {
    c.all_groups()
        .iter()
        .map(|group| {
            let g = group.lock();
            let pending = g
                .pending_txn_offsets
                .iter()
                .map(|(producer, offsets)| (*producer, offsets.clone()))
                .collect();
            (g.group_id.clone(), (g.offsets.latest().clone(), pending))
        })
        .collect()
}

// What a live write installs is what a reload rebuilds from the log: commits, transactional
// commits (one completed by its marker, one still pending), OffsetDelete and topic-deletion
// tombstones (one of them removing an emptied group) leave the same offsets, pending
// offsets and groups in memory as replaying __consumer_offsets does, and OffsetFetch
// answers the same.
#[tokio::test]
async fn live_writes_install_what_a_reload_rebuilds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = topics(dir.path());
    let c = GroupCoordinator::load(&t.host(), config(0)).expect("load");
    let commit = |topic: &str, partition: i32, offset: i64| CommitPartition {
        topic: topic.into(),
        partition,
        offset,
        leader_epoch: 1,
        metadata: Some(format!("{topic}{partition}")),
    };
    let r = c.commit_offsets(
        "g",
        -1,
        "",
        None,
        &[commit("t", 0, 10), commit("t", 1, 20), commit("u", 0, 5)],
        8,
    );
    assert_eq!(r.errors, vec![None, None, None]);
    let r = c.txn_commit_offsets(
        "g",
        7,
        0,
        -1,
        "",
        None,
        &[commit("t", 0, 30), commit("v", 0, 1)],
    );
    assert_eq!(r.errors, vec![None, None]);
    let r = c.txn_commit_offsets("g", 8, 0, -1, "", None, &[commit("t", 1, 40)]);
    assert_eq!(r.errors, vec![None]);
    assert_eq!(
        c.delete_offsets("g", &[("u".into(), 0)]).map(|r| r.errors),
        Ok(vec![None])
    );
    let index = c.partition_for("g");
    let partition = c.runtime.partition(index).expect("hosted");
    let marker = partition.write_txn_marker(7, 0, 0, true).expect("marker");
    c.complete_txn_offsets(index, 7, true, marker);
    let r = c.commit_offsets("h", -1, "", None, &[commit("t", 2, 1)], 8);
    assert_eq!(r.errors, vec![None]);
    c.on_topics_deleted(&["t".to_string()]);

    let live = offset_state(&c);
    assert_eq!(
        live.keys().collect::<Vec<_>>(),
        vec!["g"],
        "h emptied and removed"
    );
    let (latest, pending) = &live["g"];
    assert_eq!(
        latest.keys().collect::<Vec<_>>(),
        vec![&("v".to_string(), 0)]
    );
    assert_eq!(pending.keys().collect::<Vec<_>>(), vec![&8]);
    for i in c.loaded_partitions() {
        let p = c.runtime.partition(i).expect("hosted");
        let log_end = p.offsets().expect("offsets").log_end;
        p.wait_committed(log_end, Duration::from_secs(10))
            .await
            .expect("durable");
    }
    let live_fetch = c.fetch_offsets("g", None).expect("fetch");
    assert_eq!(live_fetch.len(), 1);
    c.shutdown();
    drop(c);

    let c = GroupCoordinator::load(&t.host(), config(0)).expect("reload");
    assert_eq!(offset_state(&c), live);
    assert_eq!(c.fetch_offsets("g", None).expect("fetch"), live_fetch);
}
