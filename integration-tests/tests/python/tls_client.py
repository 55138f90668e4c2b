"""kafka-python over an SSL listener.

Usage: tls_client.py BOOTSTRAP CAFILE [CERTFILE KEYFILE]

Sends 5 records to the topic "tls" with acks=all (the topic is created on first use),
reads them back by assign from offset 0, and prints one line:
  ok values=v0,v1,v2,v3,v4 offsets=0..4
or, when the broker cannot be reached over TLS (the handshake is refused):
  refused: <exception class>
"""

import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

TIMEOUT_MS = 15000


def main():
    bootstrap, cafile = sys.argv[1], sys.argv[2]
    tls = dict(security_protocol="SSL", ssl_cafile=cafile, ssl_check_hostname=True)
    if len(sys.argv) > 4:
        tls.update(ssl_certfile=sys.argv[3], ssl_keyfile=sys.argv[4])
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                 request_timeout_ms=TIMEOUT_MS, max_block_ms=TIMEOUT_MS, **tls)
    except (KafkaError, OSError) as e:  # ssl.SSLError is an OSError
        print("refused: %s" % type(e).__name__)
        return
    offsets = []
    for i in range(5):
        metadata = producer.send("tls", value=("v%d" % i).encode()).get(timeout=TIMEOUT_MS / 1000)
        offsets.append(metadata.offset)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=TIMEOUT_MS, **tls)
    partition = TopicPartition("tls", 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    values = []
    for message in consumer:
        values.append(message.value.decode())
        if len(values) == 5:
            break
    consumer.close()
    print("ok values=%s offsets=%d..%d" % (",".join(values), offsets[0], offsets[-1]))


if __name__ == "__main__":
    main()
