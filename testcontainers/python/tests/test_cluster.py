"""LogbookCluster against the real image: a three-node cluster loses a partition's leader.

As the Java module's ``LogbookClusterTest``: every record acknowledged with ``acks=all`` before
and after the leader's container is killed (SIGKILL, no graceful shutdown) is read back from
the survivors exactly once, in order, at the offset it was acknowledged at. Needs a Docker
engine and the image (``LOGBOOK_IMAGE``, default ``logbook:latest``).
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any, Optional

import docker.errors
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from testcontainers.core.docker_client import DockerClient

from testcontainers_logbook import LogbookCluster

TIMEOUT_S = 30
TOPIC = "replicated"


class Reports:
    """Delivery reports in the order librdkafka gives them: (error, offset, value)."""

    def __init__(self) -> None:
        self.items: list[tuple[Optional[KafkaError], int, str]] = []

    def __call__(self, err: Optional[KafkaError], msg: Any) -> None:
        self.items.append((err, msg.offset(), msg.value().decode()))


def partition_zero(bootstrap: str) -> Any:
    """Partition 0 of the topic as the cluster's metadata describes it (leader, replicas, isrs)."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=TIMEOUT_S)
    topic = metadata.topics[TOPIC]
    assert topic.error is None, topic.error
    return topic.partitions[0]


def produce(producer: Producer, first: int, count: int) -> list[tuple[Optional[KafkaError], int, str]]:
    """Sends ``v<first>..`` to partition 0 and waits for every acknowledgement."""
    reports = Reports()
    for i in range(first, first + count):
        producer.produce(TOPIC, key="k", value=f"v{i}", partition=0, on_delivery=reports)
        producer.poll(0)
    assert producer.flush(90) == 0
    return reports.items


def test_a_killed_leader_loses_nothing_acknowledged() -> None:
    with LogbookCluster(3) as cluster:
        container_ids = [node.get_container_id() for node in cluster.nodes]
        network_name = cluster.network.name
        bootstrap = cluster.get_bootstrap_server()
        assert re.fullmatch(r"[^:,]+:\d+(,[^:,]+:\d+){2}", bootstrap), bootstrap
        assert cluster.network_bootstrap_server() == "logbook-1:9093,logbook-2:9093,logbook-3:9093"
        assert [node.network_bootstrap_server() for node in cluster.nodes] == [
            "logbook-1:9093",
            "logbook-2:9093",
            "logbook-3:9093",
        ]

        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic(TOPIC, num_partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
        for future in admin.create_topics([topic]).values():
            assert future.result(TIMEOUT_S) is None
        assert sorted(partition_zero(bootstrap).replicas) == [1, 2, 3]

        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                # Java's delivery.timeout.ms: long enough for the dead leader to be fenced
                # (broker session timeout, 9 s) and a new one elected.
                "message.timeout.ms": 60000,
            }
        )
        assert produce(producer, 0, 100) == [(None, i, f"v{i}") for i in range(100)]

        leader = partition_zero(bootstrap).leader
        assert leader in (1, 2, 3), leader
        doomed = cluster.node(leader)
        doomed.get_wrapped_container().kill()  # docker kill: SIGKILL, nothing flushed or handed over
        survivors = [node for node in cluster.nodes if node is not doomed]
        survivor_bootstrap = ",".join(node.get_bootstrap_server() for node in survivors)
        # The cluster's bootstrap list now names exactly the running nodes.
        assert cluster.get_bootstrap_server() == survivor_bootstrap

        assert produce(producer, 100, 100) == [(None, i, f"v{i}") for i in range(100, 200)]

        new_leader = partition_zero(survivor_bootstrap).leader
        assert new_leader != leader
        assert new_leader in {1, 2, 3} - {leader}, new_leader

        consumer = Consumer(
            {
                "bootstrap.servers": survivor_bootstrap,
                "group.id": f"reader-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            }
        )
        seen: list[str] = []
        try:
            consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
            deadline = time.monotonic() + TIMEOUT_S
            while len(seen) < 200 and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    seen.append(f"{msg.offset()}:{msg.value().decode()}")
            # Nothing after them: a duplicate would show up here.
            quiet_until = time.monotonic() + 1.0
            while time.monotonic() < quiet_until:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    seen.append(f"{msg.offset()}:{msg.value().decode()}")
        finally:
            consumer.close()
        assert seen == [f"{i}:v{i}" for i in range(200)]

    # Leaving the block removed every node, the killed one too, and then the network.
    engine = DockerClient().client  # the engine the module used (DOCKER_HOST or testcontainers' settings)
    try:
        for container_id in container_ids:
            with pytest.raises(docker.errors.NotFound):
                engine.containers.get(container_id)
        with pytest.raises(docker.errors.NotFound):
            engine.networks.get(network_name)
    finally:
        engine.close()
    cluster.stop()  # a second stop finds nothing left and raises nothing


def test_node_ids_are_one_based_and_bounded() -> None:
    """No container needed: ``node(0)`` or ``node(-1)`` must not silently pick another node."""
    cluster = LogbookCluster(2)
    assert cluster.node(1) is cluster.nodes[0] and cluster.node(2) is cluster.nodes[1]
    for bad in (0, 3, -1):
        try:
            cluster.node(bad)
        except IndexError as e:
            assert str(e) == f"no node {bad}: the cluster has nodes 1..2"
        else:
            raise AssertionError(f"node({bad}) did not raise")
    assert cluster.node(2).env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@logbook-1:9094,2@logbook-2:9094"
    assert cluster.node(2).env["KAFKA_DEFAULT_REPLICATION_FACTOR"] == "2"
    assert cluster.node(2).env["KAFKA_MIN_INSYNC_REPLICAS"] == "1"
    assert cluster.get_bootstrap_server() == ""  # nothing running yet
    try:
        LogbookCluster(0)
    except ValueError as e:
        assert str(e) == "a cluster needs at least one node"
    else:
        raise AssertionError("LogbookCluster(0) did not raise")
