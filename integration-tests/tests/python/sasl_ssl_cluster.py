"""kafka-python over SASL_SSL (PLAIN) against a cluster.

Usage: sasl_ssl_cluster.py BOOTSTRAP CAFILE USER PASSWORD STEP [ARGS]

Steps (each prints one line):
  create TOPIC           create TOPIC with 1 partition and replication factor 3
                         -> "created TOPIC"
  produce TOPIC FIRST N  send values vFIRST..v(FIRST+N-1) with acks=all
                         -> "produced OFFSETS" (comma-separated offsets acknowledged)
  consume TOPIC GROUP N  read N records as member of GROUP, from its committed offset
                         (earliest without one), commit them
                         -> "consumed VALUES" (comma-separated)
  describe TOPIC         partition 0's leader and ISR -> "leader L isr A,B,C" (ISR sorted)
  login                  fetch metadata only -> "brokers N" or "refused: <exception class>"
  controller             log in on the controller listener BOOTSTRAP names (TLS, then
                         SaslHandshake v1 and SaslAuthenticate v0 with PLAIN, as a node's
                         controller client does) and wait 3 s
                         -> "authenticated, kept open" or "authenticated, closed"
                         or "refused: <error code>"
"""

import socket
import ssl
import struct
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError

TIMEOUT_MS = 30000


def controller_login(bootstrap, cafile, user, password):
    """A node's controller-listener login, by hand: kafka-python cannot speak there."""
    host, port = bootstrap.rsplit(":", 1)
    context = ssl.create_default_context(cafile=cafile)
    sock = context.wrap_socket(socket.create_connection((host, int(port)), 10),
                               server_hostname=host)
    sock.settimeout(10)

    def request(api_key, version, correlation, body):
        header = struct.pack(">hhih", api_key, version, correlation, 4) + b"test"
        frame = header + body
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", read(4))[0]
        answer = read(size)
        assert struct.unpack(">i", answer[:4])[0] == correlation
        return answer[4:]

    def read(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise EOFError("closed")
            data += chunk
        return data

    mechanism = b"PLAIN"
    answer = request(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism)
    if struct.unpack(">h", answer[:2])[0] != 0:
        return "refused: handshake %d" % struct.unpack(">h", answer[:2])[0]
    token = b"\0" + user.encode() + b"\0" + password.encode()
    answer = request(36, 0, 2, struct.pack(">i", len(token)) + token)
    code = struct.unpack(">h", answer[:2])[0]
    if code != 0:
        return "refused: %d" % code
    sock.settimeout(3)
    try:
        return "authenticated, closed" if sock.recv(1) == b"" else "authenticated, answered"
    except socket.timeout:
        return "authenticated, kept open"
    except (ConnectionError, ssl.SSLError):
        return "authenticated, closed"


def main():
    bootstrap, cafile, user, password, step = sys.argv[1:6]
    args = sys.argv[6:]
    security = dict(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=cafile,
        ssl_check_hostname=True,
        sasl_mechanism="PLAIN",
        sasl_plain_username=user,
        sasl_plain_password=password,
        request_timeout_ms=TIMEOUT_MS,
    )
    if step == "controller":
        print(controller_login(bootstrap, cafile, user, password))
        return
    if step == "login":
        try:
            admin = KafkaAdminClient(**security)
            print("brokers %d" % len(admin.describe_cluster()["brokers"]))
            admin.close()
        except (KafkaError, OSError) as e:
            print("refused: %s" % type(e).__name__)
    elif step == "describe":
        admin = KafkaAdminClient(**security)
        partition = [p for t in admin.describe_topics([args[0]]) for p in t["partitions"]
                     if p["partition"] == 0][0]
        admin.close()
        print("leader %d isr %s" % (partition["leader"],
                                    ",".join(str(r) for r in sorted(partition["isr"]))))
    elif step == "create":
        admin = KafkaAdminClient(**security)
        admin.create_topics([NewTopic(args[0], 1, 3)], timeout_ms=TIMEOUT_MS)
        admin.close()
        print("created %s" % args[0])
    elif step == "produce":
        topic, first, count = args[0], int(args[1]), int(args[2])
        producer = KafkaProducer(acks="all", retries=10, max_block_ms=TIMEOUT_MS, **security)
        offsets = []
        for i in range(first, first + count):
            metadata = producer.send(topic, value=("v%d" % i).encode()).get(timeout=TIMEOUT_MS / 1000)
            offsets.append(metadata.offset)
        producer.close()
        print("produced %s" % ",".join(str(o) for o in offsets))
    elif step == "consume":
        topic, group, count = args[0], args[1], int(args[2])
        consumer = KafkaConsumer(topic, group_id=group, enable_auto_commit=False,
                                 auto_offset_reset="earliest", consumer_timeout_ms=TIMEOUT_MS,
                                 **security)
        values = []
        for message in consumer:
            values.append(message.value.decode())
            if len(values) == count:
                break
        consumer.commit()
        consumer.close()
        print("consumed %s" % ",".join(values))
    else:
        raise SystemExit("unknown step " + step)


if __name__ == "__main__":
    main()
