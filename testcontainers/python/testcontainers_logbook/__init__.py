"""Testcontainers module for Logbook, a broker that speaks Kafka's wire protocol.

:class:`LogbookContainer` starts the shell-less ``logbook`` image (the default target of the
repository's ``Dockerfile``) the way every Logbook module does (``testcontainers/README.md``),
and drives the broker's fault injector (README "Fault injection") when asked to.
:class:`LogbookCluster` runs several such nodes on one Docker network as a replicated
cluster, for failover tests.

Example::

    from confluent_kafka import Producer
    from testcontainers_logbook import LogbookContainer

    with LogbookContainer().with_fault_injection() as logbook:
        producer = Producer({"bootstrap.servers": logbook.get_bootstrap_server()})
        logbook.add_fault({"kind": "partition_unavailable", "topic": "orders", "duration_ms": 2000})
        ...
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import time
import urllib.error
import urllib.request
from typing import Any, Optional

import docker.errors  # testcontainers' own Docker client
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network
from testcontainers.core.wait_strategies import LogMessageWaitStrategy

from typing_extensions import Self  # a testcontainers dependency; typing.Self needs 3.11

__all__ = ["LogbookCluster", "LogbookContainer"]
__version__ = "0.1.0"


class LogbookContainer(DockerContainer):
    """The Logbook broker in a container.

    Clients on the host connect to :meth:`get_bootstrap_server`; containers on the same Docker
    network to :meth:`network_bootstrap_server`.

    Why :meth:`start` is more than ``docker run``: a Kafka client is told by the broker (in
    Metadata) which address to connect to, so the broker must advertise the *host's* mapped
    port, which Docker only picks once the container has been created. Kafka images learn it
    from a start script the module writes after start; the ``logbook`` image has no shell, so
    the broker is started with ``LOGBOOK_CONFIG`` naming a file that does not exist yet and
    ``LOGBOOK_CONFIG_WAIT_MS``: it binds nothing and waits. Once the port is mapped, the
    module copies in that file, one ``advertised.listeners`` line, and then waits for the
    broker's ``Kafka Server started`` line.

    Two listeners: ``EXTERNAL`` (9092, mapped, what the host reaches) and ``BROKER`` (9093,
    for containers on the same network, which reach the broker by its alias, not by the
    host's address). The admin port 9644 serves metrics, health and the fault injector.
    """

    KAFKA_PORT = 9092
    """The listener for clients on the host (mapped to a random host port)."""
    BROKER_PORT = 9093
    """The listener for containers on the same Docker network (not mapped)."""
    ADMIN_PORT = 9644
    """Metrics, health and the fault injector's HTTP API (mapped)."""
    TLS_KEYSTORE = "/tmp/logbook-tls.pem"
    """Where :meth:`with_tls` puts the key and chain."""
    ADVERTISED_FILE = "/tmp/logbook-advertised.properties"
    """The file the broker waits for: it carries the advertised listeners."""
    STARTED_LINE = r"Kafka Server started"
    """What the broker logs once it serves (as Kafka's KRaft broker does)."""

    def __init__(self, image: Optional[str] = None, **kwargs: Any) -> None:
        """A container of ``image``; by default ``LOGBOOK_IMAGE`` if set, else ``logbook:latest``.

        The image is a parameter and an environment variable because it is usually built
        locally (``docker build -t logbook:latest .``) or pinned by CI, not pulled.
        """
        super().__init__(image or os.environ.get("LOGBOOK_IMAGE") or "logbook:latest", **kwargs)
        self._plain_users: dict[str, str] = {}
        self._tls_pem: Optional[bytes] = None
        self.with_exposed_ports(self.KAFKA_PORT, self.ADMIN_PORT)
        # Kafka's variable names: the broker reads them itself, so the setup reads like any
        # Kafka container's.
        self.with_env("KAFKA_LISTENERS", f"EXTERNAL://0.0.0.0:{self.KAFKA_PORT},BROKER://0.0.0.0:{self.BROKER_PORT}")
        self.with_env("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "EXTERNAL:PLAINTEXT,BROKER:PLAINTEXT")
        self.with_env("KAFKA_INTER_BROKER_LISTENER_NAME", "BROKER")
        # Tests start a consumer group and expect records now, not after Kafka's 3 s delay.
        self.with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
        self.with_env("LOGBOOK_METRICS_LISTEN", f"0.0.0.0:{self.ADMIN_PORT}")
        # The broker waits (binding nothing) until start() copies this file in.
        self.with_env("LOGBOOK_CONFIG", self.ADVERTISED_FILE)
        self.with_env("LOGBOOK_CONFIG_WAIT_MS", "60000")

    def with_fault_injection(self) -> Self:
        """Serves the fault injector (:meth:`add_fault`).

        Off unless asked for, as on the broker: without it ``/faults`` answers 404 and nothing
        on the request path changes, so a plain container behaves like a plain broker.
        """
        return self.with_env("LOGBOOK_FAULT_INJECTION", "true")

    def with_sasl_plain_user(self, user: str, password: str) -> Self:
        """Makes the host listener ``SASL_PLAINTEXT`` with mechanism PLAIN and adds this user.

        Repeatable: each call adds a user to the JAAS line. Clients then need
        ``security.protocol=SASL_PLAINTEXT``, ``sasl.mechanism=PLAIN`` and the user's
        ``sasl.username``/``sasl.password``. Containers on the network keep the plaintext
        ``BROKER`` listener, as the inter-broker listener of a Kafka cluster usually does.
        The users are given as Kafka's ``listener.name.external.plain.sasl.jaas.config``, a
        ``PlainLoginModule`` line with one ``user_<name>="<password>"`` option each.
        """
        self._plain_users[user] = password
        jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required"
        for name, secret in self._plain_users.items():
            jaas += f' user_{name}="{_escape(secret)}"'
        jaas += ";"
        self.with_env("KAFKA_SASL_ENABLED_MECHANISMS", "PLAIN")
        self.with_env("KAFKA_LISTENER_NAME_EXTERNAL_PLAIN_SASL_JAAS_CONFIG", jaas)
        return self._with_external_protocol()

    def with_tls(self, certificate_chain_pem: str, private_key_pem: str) -> Self:
        """Serves the host listener over TLS with this certificate chain and key (PEM text).

        The chain's first certificate must name the address clients connect to (see
        :meth:`get_bootstrap_server`). Clients then need ``security.protocol=SSL`` (or
        ``SASL_SSL`` with SASL users) and the issuing CA (``ssl.ca.location``). Containers on
        the network keep the plaintext ``BROKER`` listener. The key and chain are copied in
        as one PEM keystore before the broker reads its settings.
        """
        self._tls_pem = (private_key_pem.strip() + "\n" + certificate_chain_pem.strip() + "\n").encode("utf-8")
        self.with_env("KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_TYPE", "PEM")
        self.with_env("KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_LOCATION", self.TLS_KEYSTORE)
        return self._with_external_protocol()

    def _with_external_protocol(self) -> Self:
        """The host listener's protocol from what was asked: SASL users, TLS, both or neither.

        Only the ``EXTERNAL`` entry of the map changes: the others (``BROKER``, and
        ``CONTROLLER`` on a :class:`LogbookCluster` node) stay as they were set.
        """
        protocol = ("SASL_" if self._plain_users else "") + ("SSL" if self._tls_pem else "PLAINTEXT")
        entries = [
            entry
            for entry in self.env.get("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "BROKER:PLAINTEXT").split(",")
            if entry and not entry.startswith("EXTERNAL:")
        ]
        return self.with_env("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", ",".join([f"EXTERNAL:{protocol}", *entries]))

    def start(self, timeout: float = 60) -> Self:
        """Starts the container, gives the broker its advertised listeners, waits until it serves.

        No wait strategy runs inside ``DockerContainer.start``: the broker cannot log
        ``Kafka Server started`` before it has the file, which only this method can write
        (it needs the mapped port). ``timeout`` bounds the wait for the line, in seconds.

        The three phases are separate methods because a :class:`LogbookCluster` must run them
        across all its nodes phase by phase: no node of a cluster logs the line before a
        majority of the quorum's voters run and have their files, so starting the nodes one
        after the other with this method would wait on the first one forever.
        """
        self._start_container()
        self._advertise_listeners()
        self._wait_until_serving(timeout)
        return self

    def _start_container(self) -> None:
        """Phase 1: creates and starts the container; the broker then waits for its file."""
        super().start()

    def _advertise_listeners(self) -> None:
        """Phase 2: copies in the TLS keystore (if any) and the advertised-listener file.

        Needs the mapped port, so it runs after phase 1; the broker binds its listeners as
        soon as the file appears (within ``LOGBOOK_CONFIG_WAIT_MS`` of the container's start).
        """
        host = self.get_container_host_ip()
        port = self.get_exposed_port(self.KAFKA_PORT)
        line = (
            f"advertised.listeners=EXTERNAL://{host}:{port},"
            f"BROKER://{self._network_host()}:{self.BROKER_PORT}\n"
        )
        if self._tls_pem is not None:
            # Before the advertised listeners: the broker reads its keystore once it has them.
            self._put_file(self._tls_pem, self.TLS_KEYSTORE)
        self._put_file(line.encode("utf-8"), self.ADVERTISED_FILE)

    def _wait_until_serving(self, timeout: float) -> None:
        """Phase 3: waits up to ``timeout`` seconds for the broker's ``Kafka Server started`` line."""
        LogMessageWaitStrategy(self.STARTED_LINE).with_startup_timeout(max(1, int(timeout))).wait_until_ready(self)

    def is_running(self) -> bool:
        """Whether the container exists and Docker reports it running (fresh, not cached).

        A node killed by a test (``get_wrapped_container().kill()``) is no longer running, and
        its mapped port is gone: :meth:`LogbookCluster.get_bootstrap_server` skips it.
        """
        if self._container is None:
            return False
        try:
            self._container.reload()
        except Exception:  # removed meanwhile (docker.errors.NotFound) or the engine is gone
            return False
        return self._container.status == "running"

    def _put_file(self, content: bytes, path: str) -> None:
        """Copies ``content`` to ``path`` in the container (an in-memory tar, Docker's copy API).

        ``docker cp`` is the only way in: the image has no shell to ``echo`` into a file.
        Mode 0644 so the broker's user (65532) can read a file owned by root.
        """
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            info = tarfile.TarInfo(name=path.lstrip("/"))
            info.size = len(content)
            info.mode = 0o644
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(content))
        archive.seek(0)
        if not self.get_wrapped_container().put_archive("/", archive.getvalue()):
            raise OSError(f"could not copy {path} into the container")

    def _network_host(self) -> str:
        """The name other containers reach the broker by: its first network alias, else its hostname.

        Docker's DNS on a user-defined network resolves both; the hostname is the short
        container id unless one was set.
        """
        if self._network_aliases:
            return self._network_aliases[0]
        container = self.get_wrapped_container()
        container.reload()
        return container.attrs["Config"]["Hostname"]

    def get_bootstrap_server(self) -> str:
        """``host:port`` for clients on the host (the mapped ``EXTERNAL`` listener).

        Named as testcontainers' ``KafkaContainer`` names it, so tests can swap modules.
        """
        return f"{self.get_container_host_ip()}:{self.get_exposed_port(self.KAFKA_PORT)}"

    def network_bootstrap_server(self) -> str:
        """``<alias or hostname>:9093`` for containers on the same Docker network.

        The host's address and mapped port mean nothing inside another container, so those
        clients use the ``BROKER`` listener, advertised under this same name.
        """
        return f"{self._network_host()}:{self.BROKER_PORT}"

    def fault_url(self) -> str:
        """The fault injector's base URL (``POST``/``GET``/``DELETE /faults``) on the mapped admin port."""
        return f"http://{self.get_container_host_ip()}:{self.get_exposed_port(self.ADMIN_PORT)}"

    def add_fault(self, fault: dict[str, Any]) -> int:
        """Arms a fault from its fields (README "Fault injection"); returns its id.

        For example ``{"kind": "error", "api": "Produce", "topic": "orders",
        "error": "NOT_LEADER_OR_FOLLOWER", "count": 3}``. ``rebalance`` and ``fence`` act at
        once and also return an id. A refused spec raises ``RuntimeError`` with the broker's
        reason, so a typo fails the test instead of arming nothing.
        """
        answer = self._call("POST", "/faults", fault)
        return int(answer["id"])

    def faults(self) -> list[dict[str, Any]]:
        """Every fault with how often it acted (``injected``) and whether it can still act (``armed``)."""
        return self._call("GET", "/faults")

    def clear_faults(self) -> None:
        """Clears every fault."""
        self._call("DELETE", "/faults")

    def clear_fault(self, fault_id: int) -> None:
        """Clears fault ``fault_id`` (``RuntimeError`` if the broker has no such fault)."""
        self._call("DELETE", f"/faults/{int(fault_id)}")

    def _call(self, method: str, path: str, body: Optional[dict[str, Any]] = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            self.fault_url() + path, data=data, method=method, headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace").strip()
            raise RuntimeError(f"{method} {path}: HTTP {e.code} {detail}") from e


class LogbookCluster:
    """Several Logbook nodes on one new Docker network, each a broker and a voter of the metadata
    quorum (KRaft's ``process.roles=broker,controller``), with replication factor
    ``min(size, 3)`` by default: for failover tests (kill a node, and the partitions it led move
    to the others without losing what they acknowledged).

    It mirrors the Java module's ``LogbookCluster``: node ``<id>`` (1-based, its ``node.id``) is
    a :class:`LogbookContainer` with network alias ``logbook-<id>``, reached from the host on
    its own mapped port, from the network as ``logbook-<id>:9093``; the voters talk to each
    other on ``logbook-<id>:9094`` (:attr:`CONTROLLER_PORT`, not mapped).

    Why :meth:`start` does not just start the nodes one by one: no node serves (logs
    ``Kafka Server started``) before a majority of the voters run and have elected a leader,
    so :meth:`LogbookContainer.start`, which waits for that line, would wait on the first node
    forever. The cluster runs the container's start phases across all nodes instead: start
    every container, copy each its advertised-listener file, then wait for each.

    Example::

        with LogbookCluster(3) as cluster:
            producer = Producer({"bootstrap.servers": cluster.get_bootstrap_server(), "acks": "all"})
            ...
            cluster.node(1).get_wrapped_container().kill()   # a leader gone for good
    """

    CONTROLLER_PORT = 9094
    """The quorum's listener on each node (``CONTROLLER``, reached by alias, not mapped)."""

    def __init__(self, size: int = 3, image: Optional[str] = None) -> None:
        """``size`` nodes of ``image`` (by default ``LOGBOOK_IMAGE``, else ``logbook:latest``).

        Nothing is created until :meth:`start`: the network's name is known now (so other
        containers can be given :attr:`network` before the cluster starts), but Docker only
        creates it on start, so a cluster that is never started leaves nothing behind.
        """
        if size < 1:
            raise ValueError("a cluster needs at least one node")
        self._network = Network()
        self._network_created = False
        voters = ",".join(f"{node_id}@{_alias(node_id)}:{self.CONTROLLER_PORT}" for node_id in range(1, size + 1))
        # Three copies where there are three nodes (Kafka's production default); fewer nodes
        # cannot hold more. One copy may be missing and writes with acks=all still succeed.
        replication = min(size, 3)
        self._nodes: list[LogbookContainer] = []
        for node_id in range(1, size + 1):
            node = LogbookContainer(image).with_network(self._network).with_network_aliases(_alias(node_id))
            node.with_env("KAFKA_NODE_ID", str(node_id))
            node.with_env("KAFKA_PROCESS_ROLES", "broker,controller")
            node.with_env(
                "KAFKA_LISTENERS",
                f"EXTERNAL://0.0.0.0:{LogbookContainer.KAFKA_PORT},"
                f"BROKER://0.0.0.0:{LogbookContainer.BROKER_PORT},"
                f"CONTROLLER://0.0.0.0:{self.CONTROLLER_PORT}",
            )
            node.with_env(
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "EXTERNAL:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT"
            )
            node.with_env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
            node.with_env("KAFKA_CONTROLLER_QUORUM_VOTERS", voters)
            node.with_env("KAFKA_DEFAULT_REPLICATION_FACTOR", str(replication))
            node.with_env("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", str(replication))
            node.with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", str(replication))
            node.with_env("KAFKA_MIN_INSYNC_REPLICAS", str(max(1, replication - 1)))
            self._nodes.append(node)

    def with_fault_injection(self) -> Self:
        """Serves the fault injector on every node (each node's own :meth:`LogbookContainer.fault_url`)."""
        for node in self._nodes:
            node.with_fault_injection()
        return self

    def node(self, node_id: int) -> LogbookContainer:
        """Node ``node_id`` (1-based, as its ``node.id`` and as Kafka clients report leaders).

        ``IndexError`` outside ``1..size``: a Python list would silently take ``0`` or ``-1``
        as some other node.
        """
        if not 1 <= node_id <= len(self._nodes):
            raise IndexError(f"no node {node_id}: the cluster has nodes 1..{len(self._nodes)}")
        return self._nodes[node_id - 1]

    @property
    def nodes(self) -> list[LogbookContainer]:
        """Every node, by id (a copy: the cluster's own list stays as built)."""
        return list(self._nodes)

    @property
    def network(self) -> Network:
        """The network the nodes share, for other containers of the test (``with_network``)."""
        return self._network

    def get_bootstrap_server(self) -> str:
        """Every *running* node's ``host:port``, comma-separated, for ``bootstrap.servers``.

        Asked of Docker each time, so a node a test killed or stopped drops out (its mapped
        port is gone, and asking for it would fail or wait).
        """
        return ",".join(node.get_bootstrap_server() for node in self._nodes if node.is_running())

    def network_bootstrap_server(self) -> str:
        """``logbook-1:9093,logbook-2:9093,...`` for containers on :attr:`network`."""
        return ",".join(f"{_alias(node_id)}:{LogbookContainer.BROKER_PORT}" for node_id in range(1, len(self._nodes) + 1))

    def start(self, timeout: float = 60) -> Self:
        """Creates the network, starts every node, waits until every one serves.

        ``timeout`` (seconds) bounds the whole wait for the nodes' ``Kafka Server started``
        lines, not each node's. If anything fails, whatever was started is removed before the
        error is raised, so a failed start leaks no container or network.
        """
        self._network.create()
        self._network_created = True
        try:
            # All containers first: each broker waits (binding nothing) for its file, and the
            # quorum needs a majority of them up before any serves.
            for node in self._nodes:
                node._start_container()
            for node in self._nodes:
                node._advertise_listeners()
            deadline = time.monotonic() + timeout
            for node in self._nodes:
                node._wait_until_serving(deadline - time.monotonic())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Removes every node (running, stopped or killed) and then the network.

        Each node is removed even if removing another failed, and the network last (Docker
        refuses to remove a network that still has containers); the first error is raised
        at the end. Safe to call twice.
        """
        errors: list[BaseException] = []
        for node in self._nodes:
            try:
                node.stop()
            except docker.errors.NotFound:
                pass  # already removed: by an earlier stop(), or by the test itself
            except Exception as e:  # the engine refused: go on with the others
                errors.append(e)
        if self._network_created:
            try:
                self._network.remove()
                self._network_created = False
            except docker.errors.NotFound:
                self._network_created = False
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]

    def __enter__(self) -> Self:
        """Starts the cluster (:meth:`start` cleans up itself if that fails)."""
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        """Removes the nodes and the network."""
        self.stop()


def _alias(node_id: int) -> str:
    """Node ``node_id``'s name on the cluster's network (as the Java module names it)."""
    return f"logbook-{node_id}"


def _escape(value: str) -> str:
    """Escapes a JAAS option value for its double quotes."""
    return re.sub(r'(["\\])', r"\\\1", value)
