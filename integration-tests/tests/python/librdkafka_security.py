"""librdkafka with OpenSSL (confluent-kafka's wheel) against a secured broker.

Usage: librdkafka_security.py CASES_JSON
CASES_JSON is a list of {"name", "bootstrap", "config", "expect"}; "expect" is
"ok" (produce 3 records acks=all to the topic named after the case, read them
back in a new group) or "refused" (the first error the client reports).
Prints one line per case: "<name> ok offsets=0..2 values=v0,v1,v2" or
"<name> refused <error name>: <message>"; a case that neither works nor is
refused within its time prints "<name> stuck".
"""
import base64
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo,
                                   ScramMechanism, UserScramCredentialUpsertion)


def unsecured_jwt(sub, exp):
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return enc({"alg": "none"}) + "." + enc({"sub": sub, "exp": exp, "iat": int(time.time())}) + "."


def with_token(config):
    """An oauth_cb handing librdkafka the case's own token (an expired one, say):
    librdkafka trusts the lifetime it is given, the broker checks the claims."""
    token = config.pop("test.token", None)
    if token is None:
        return config
    sub, exp = token
    jwt = unsecured_jwt(sub, exp)
    config["oauth_cb"] = lambda _: (jwt, time.time() + 3600, sub)
    return config


def first_error(errors):
    def record(err):
        if not errors:
            errors.append(err)
    return record


def run(case):
    name, bootstrap = case["name"], case["bootstrap"]
    topic = "librdkafka-" + name
    errors = []
    base = dict(case["config"], **{"bootstrap.servers": bootstrap,
                                   "error_cb": first_error(errors)})
    producer = Producer(with_token(dict(base, **{"acks": "all", "linger.ms": 0,
                                                   "message.timeout.ms": 15000})))
    offsets = []

    def delivered(err, msg):
        if err is None:
            offsets.append(msg.offset())
        elif not errors:
            errors.append(err)

    for i in range(3):
        producer.produce(topic, value=b"v%d" % i, callback=delivered)
    deadline = time.time() + 20
    while len(offsets) < 3 and not errors and time.time() < deadline:
        producer.poll(0.1)
    if errors:
        err = errors[0]
        return "%s refused %s: %s" % (name, err.name(), err.str())
    if len(offsets) < 3:
        return "%s stuck" % name
    consumer = Consumer(with_token(dict(base, **{"group.id": "g-" + name,
                                                   "auto.offset.reset": "earliest"})))
    consumer.subscribe([topic])
    values = []
    deadline = time.time() + 20
    while len(values) < 3 and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value().decode())
    consumer.close()
    return "%s ok offsets=%s values=%s" % (
        name, "..".join(str(o) for o in (min(offsets), max(offsets))), ",".join(values))


def main():
    cases = json.loads(sys.argv[1])
    for case in cases:
        if case.get("scram_user"):
            # AlterUserScramCredentials from librdkafka's admin client first.
            user, password, admin_bootstrap = case["scram_user"]
            admin = AdminClient({"bootstrap.servers": admin_bootstrap})
            info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
            futures = admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(user, info, password.encode())])
            for f in futures.values():
                f.result(timeout=20)
            print("%s-admin ok" % case["name"], flush=True)
        print(run(case), flush=True)


main()
