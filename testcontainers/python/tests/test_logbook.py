"""LogbookContainer against the real image, with confluent-kafka (librdkafka) as the client.

Each test is also an example of the module's use, and each asserts the exact records, offsets
and fault counts, never only that nothing raised. Needs a Docker engine and the image
(``LOGBOOK_IMAGE``, default ``logbook:latest``); where Ryuk cannot be pulled, run with
``TESTCONTAINERS_RYUK_DISABLED=true``.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any, Optional

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from testcontainers_logbook import LogbookContainer

TIMEOUT_S = 30


def create_topic(config: dict[str, Any], topic: str, partitions: int = 1) -> None:
    """Creates ``topic`` and waits for the broker's answer (a refusal raises)."""
    admin = AdminClient(config)
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(TIMEOUT_S)


def read_all(config: dict[str, Any], topic: str, count: int) -> list[tuple[int, str]]:
    """(offset, value) of partition 0 of ``topic`` from the start: ``count`` records and any after them."""
    consumer = Consumer(
        {**config, "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False, "enable.partition.eof": False}
    )
    out: list[tuple[int, str]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                out.append((msg.offset(), msg.value().decode()))
        # Nothing after them: a duplicate would show up here.
        quiet_until = time.monotonic() + 1.0
        while time.monotonic() < quiet_until:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append((msg.offset(), msg.value().decode()))
    finally:
        consumer.close()
    return out


class Reports:
    """Delivery reports in the order librdkafka gives them: (error, offset, value)."""

    def __init__(self) -> None:
        self.items: list[tuple[Optional[KafkaError], int, str]] = []

    def __call__(self, err: Optional[KafkaError], msg: Any) -> None:
        self.items.append((err, msg.offset(), msg.value().decode()))


def test_produces_and_consumes_in_a_group_through_the_mapped_port() -> None:
    with LogbookContainer() as logbook:
        bootstrap = logbook.get_bootstrap_server()
        assert re.fullmatch(r"[^:]+:\d+", bootstrap), bootstrap
        config = {"bootstrap.servers": bootstrap}
        create_topic(config, "orders")

        reports = Reports()
        producer = Producer(config)
        for i in range(10):
            producer.produce("orders", key=f"k{i}", value=f"v{i}", on_delivery=reports)
        assert producer.flush(TIMEOUT_S) == 0
        assert reports.items == [(None, i, f"v{i}") for i in range(10)]

        consumer = Consumer({**config, "group.id": "billing", "auto.offset.reset": "earliest", "enable.auto.commit": False})
        seen: list[tuple[int, str]] = []
        try:
            consumer.subscribe(["orders"])
            deadline = time.monotonic() + TIMEOUT_S
            while len(seen) < 10 and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    seen.append((msg.offset(), msg.value().decode()))
            consumer.commit(asynchronous=False)
            committed = consumer.committed([TopicPartition("orders", 0)], timeout=TIMEOUT_S)
        finally:
            consumer.close()
        assert seen == [(i, f"v{i}") for i in range(10)]
        assert [(tp.topic, tp.partition, tp.offset) for tp in committed] == [("orders", 0, 10)]


def test_no_message_lost_when_the_leader_moves() -> None:
    """An idempotent producer loses and duplicates nothing while the leader is gone for 2 s and
    while three of its produces are refused with NOT_LEADER_OR_FOLLOWER: librdkafka refreshes
    metadata, waits for a leader and retries, and the broker's sequence checks keep each record
    once, in order."""
    with LogbookContainer().with_fault_injection() as logbook:
        config = {"bootstrap.servers": logbook.get_bootstrap_server()}
        create_topic(config, "out")
        reports = Reports()
        producer = Producer({**config, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
        gone = refused = None
        for i in range(100):
            if i == 20:
                # The first 20 are written and the producer knows the leader; now it goes away.
                assert producer.flush(TIMEOUT_S) == 0
                gone = logbook.add_fault({"kind": "partition_unavailable", "topic": "out", "duration_ms": 2000})
            if i == 60:
                # 20..59 wait for the leader to come back (the fault ends after 2 s).
                assert producer.flush(TIMEOUT_S) == 0
                refused = logbook.add_fault(
                    {"kind": "error", "api": "Produce", "topic": "out", "error": "NOT_LEADER_OR_FOLLOWER", "count": 3}
                )
            producer.produce("out", key=f"k{i}", value=f"order-{i}", on_delivery=reports)
            producer.poll(0)
            if 20 <= i < 60:
                time.sleep(0.05)  # keep producing across the 2 s without a leader
        assert producer.flush(TIMEOUT_S) == 0

        assert reports.items == [(None, i, f"order-{i}") for i in range(100)]
        faults = {f["id"]: f for f in logbook.faults()}
        assert faults[refused]["injected"] == 3, faults
        assert faults[refused]["armed"] is False, faults
        assert faults[refused]["kind"] == "error" and faults[refused]["error"] == "NOT_LEADER_OR_FOLLOWER", faults
        assert faults[gone]["kind"] == "partition_unavailable" and faults[gone]["injected"] >= 1, faults
        assert read_all(config, "out", 100) == [(i, f"order-{i}") for i in range(100)]

        logbook.clear_fault(gone)
        assert [f["id"] for f in logbook.faults()] == [refused]
        logbook.clear_faults()
        assert logbook.faults() == []


def test_sasl_plain_users_log_in_and_others_are_refused() -> None:
    with LogbookContainer().with_sasl_plain_user("alice", "secret") as logbook:
        alice = {
            "bootstrap.servers": logbook.get_bootstrap_server(),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "secret",
        }
        create_topic(alice, "secured")
        reports = Reports()
        producer = Producer(alice)
        producer.produce("secured", key="k", value="v", on_delivery=reports)
        assert producer.flush(TIMEOUT_S) == 0
        assert reports.items == [(None, 0, "v")]

        errors: list[KafkaError] = []
        refused = Reports()
        intruder = Producer({**alice, "sasl.password": "wrong", "message.timeout.ms": 5000, "error_cb": errors.append})
        intruder.produce("secured", key="k", value="intruder", on_delivery=refused)
        assert intruder.flush(TIMEOUT_S) == 0
        assert len(refused.items) == 1, refused.items
        err, _, value = refused.items[0]
        assert value == "intruder"
        # librdkafka keeps retrying the login, so the record times out; the reason comes to error_cb.
        assert err is not None and err.code() == KafkaError._MSG_TIMED_OUT, err
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
        assert "Invalid username or password" in errors[0].str(), errors[0]
        # Nothing of the refused client was written.
        assert read_all(alice, "secured", 1) == [(0, "v")]


def _openssl(directory: str, *args: str) -> None:
    import subprocess

    done = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True)
    assert done.returncode == 0, f"openssl {args}: {done.stderr}"


def test_tls_with_sasl_serves_the_host_listener_and_refuses_an_untrusted_client(tmp_path: Any) -> None:
    d = str(tmp_path)
    _openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
             "-keyout", "ca.key", "-out", "ca.pem")
    _openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
             "-out", "server.csr")
    # The names a Testcontainers host may be reached by: localhost, or Docker's gateway from a container.
    (tmp_path / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1,IP:172.17.0.1\n")
    _openssl(d, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.ext", "-out", "server.pem")
    _openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=other-ca",
             "-keyout", "other.key", "-out", "other.pem")
    chain = (tmp_path / "server.pem").read_text()
    key = (tmp_path / "server.key").read_text()
    with LogbookContainer().with_tls(chain, key).with_sasl_plain_user("alice", "secret") as logbook:
        alice = {
            "bootstrap.servers": logbook.get_bootstrap_server(),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(tmp_path / "ca.pem"),
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "secret",
        }
        reports = Reports()
        producer = Producer(alice)
        producer.produce("private", key="k", value="v", on_delivery=reports)
        assert producer.flush(TIMEOUT_S) == 0
        assert reports.items == [(None, 0, "v")]

        errors: list[KafkaError] = []
        refused = Reports()
        untrusting = Producer({**alice, "ssl.ca.location": str(tmp_path / "other.pem"),
                               "message.timeout.ms": 5000, "error_cb": errors.append})
        untrusting.produce("private", key="k", value="unsent", on_delivery=refused)
        assert untrusting.flush(TIMEOUT_S) == 0
        assert len(refused.items) == 1 and refused.items[0][0].code() == KafkaError._MSG_TIMED_OUT, refused.items
        assert errors and errors[0].code() == KafkaError._SSL, errors
        assert read_all(alice, "private", 1) == [(0, "v")]


def test_containers_on_the_network_use_the_broker_listener() -> None:
    with Network() as network:
        with LogbookContainer().with_network(network).with_network_aliases("logbook") as logbook:
            assert logbook.network_bootstrap_server() == "logbook:9093"
            # The image's own CLI in a second container, over the network listener.
            tool = (
                DockerContainer(logbook.image)
                .with_network(network)
                .with_command(["topic", "create", "from-the-network", "--partitions", "3", "-b", "logbook:9093"])
            )
            with tool:
                assert tool.wait() == 0, tool.get_logs()
            metadata = AdminClient({"bootstrap.servers": logbook.get_bootstrap_server()}).list_topics(
                "from-the-network", timeout=TIMEOUT_S
            )
            assert sorted(metadata.topics["from-the-network"].partitions) == [0, 1, 2]
