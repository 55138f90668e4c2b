"""Testcontainers module for Logbook, a broker that speaks Kafka's wire protocol.

:class:`LogbookContainer` starts the shell-less ``logbook`` image (the default target of the
repository's ``Dockerfile``) the way every Logbook module does (``testcontainers/README.md``),
and drives the broker's fault injector (README "Fault injection") when asked to.

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

from testcontainers.core.container import DockerContainer
from testcontainers.core.wait_strategies import LogMessageWaitStrategy

from typing_extensions import Self  # a testcontainers dependency; typing.Self needs 3.11

__all__ = ["LogbookContainer"]
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
        """The host listener's protocol from what was asked: SASL users, TLS, both or neither."""
        protocol = ("SASL_" if self._plain_users else "") + ("SSL" if self._tls_pem else "PLAINTEXT")
        return self.with_env("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", f"EXTERNAL:{protocol},BROKER:PLAINTEXT")

    def start(self, timeout: float = 60) -> Self:
        """Starts the container, gives the broker its advertised listeners, waits until it serves.

        No wait strategy runs inside ``DockerContainer.start``: the broker cannot log
        ``Kafka Server started`` before it has the file, which only this method can write
        (it needs the mapped port). ``timeout`` bounds the wait for the line, in seconds.
        """
        super().start()
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
        LogMessageWaitStrategy(self.STARTED_LINE).with_startup_timeout(int(timeout)).wait_until_ready(self)
        return self

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


def _escape(value: str) -> str:
    """Escapes a JAAS option value for its double quotes."""
    return re.sub(r'(["\\])', r"\\\1", value)
