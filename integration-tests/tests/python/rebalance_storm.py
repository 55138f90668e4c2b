"""Three kafka-python group consumers share a six-partition topic; one leaves, and the two
that remain must settle into one stable generation that covers every partition.

Usage: rebalance_storm.py BOOTSTRAP [RUNS]

RUNS scenarios run one after another, each on its own topic and group.

Each consumer polls in its own thread and publishes (generation, assignment) after every
poll. A coordinator that forces a rebalance on every JoinGroup of a known member keeps the
survivors rebalancing forever (the generation climbs every half second and the assignments
never cover all partitions); Kafka's coordinator lets a follower with unchanged metadata
rejoin the current generation. Needs kafka-python 3.0 (the test installs 3.0.12). Exits 1 with a message on the first failure; prints one
summary line on success.
"""

import sys
import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic

PARTITIONS = 6
FORM_TIMEOUT_S = 60
# The two members left must own all partitions within 20 s of the leave (issue 23), and
# then hold that generation for STABLE_FOR_S.
CONVERGE_S = 20
STABLE_FOR_S = 3


def check(condition, message):
    if not condition:
        print("MISMATCH: " + message, file=sys.stderr)
        sys.exit(1)


class Member(threading.Thread):
    """One consumer polling in its own thread until told to stop (then it closes, which
    sends LeaveGroup)."""

    def __init__(self, bootstrap, index, topic, group):
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id="storm-%d" % index,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
        )
        # The topic's partitions are known before the member joins, so the leader's first
        # assignment covers all six. Otherwise the leader may assign from metadata that does
        # not list the new topic yet and rejoin once it does; kafka-python 3.0.12 then
        # sometimes stalls inside the client after a successful SyncGroup (its join task
        # never completes although every request it sent was answered, and it sends nothing
        # more), and its session expires. That is a client defect, not the storm guarded
        # here: see docs/plans/issue-11-replication.md, "kafka-python 3 stall".
        check(self.consumer.partitions_for_topic(topic) == set(range(PARTITIONS)),
              "storm-%d does not see %d partitions of %s" % (index, PARTITIONS, topic))
        self.consumer.subscribe([topic])
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.state = (-1, frozenset())
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                self.consumer.poll(timeout_ms=100)
                generation = self.consumer._coordinator.group_metadata().generation_id
                assigned = frozenset(tp.partition for tp in self.consumer.assignment())
                with self.lock:
                    self.state = (generation, assigned)
            self.consumer.close()
        except Exception as e:  # reported by the main thread
            self.error = repr(e)

    def snapshot(self):
        with self.lock:
            return self.state


def converged(members):
    """The common generation if every member is in it and the assignments partition the
    topic, else None."""
    states = [m.snapshot() for m in members]
    generations = {g for g, _ in states}
    sets = [a for _, a in states]
    union = frozenset().union(*sets)
    if (len(generations) == 1 and all(sets)
            and sum(len(a) for a in sets) == len(union)
            and union == frozenset(range(PARTITIONS))):
        return generations.pop()
    return None


def wait_stable(members, timeout_s, what):
    """Waits until the members hold one generation covering every partition, unchanged for
    STABLE_FOR_S; returns (generation, seconds taken, generations seen)."""
    start = time.time()
    seen = set()
    stable_gen, stable_since = None, None
    while time.time() - start < timeout_s:
        for m in members:
            check(m.error is None, "consumer failed: %s" % m.error)
            seen.add(m.snapshot()[0])
        gen = converged(members)
        if gen is not None and gen == stable_gen:
            if time.time() - stable_since >= STABLE_FOR_S:
                return gen, time.time() - start, seen
        else:
            stable_gen, stable_since = gen, time.time()
        time.sleep(0.05)
    check(False, "%s never settled in %ds: states %r, generations seen %r"
          % (what, timeout_s, [m.snapshot() for m in members], sorted(seen)))
    return None


def scenario(bootstrap, run):
    """One formation of three members, a leave, and the settling of the two left; returns
    the survivors' sorted assignments."""
    topic, group = "py-storm-%d" % run, "py-storm-g-%d" % run
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()

    members = [Member(bootstrap, i, topic, group) for i in range(3)]
    for m in members:
        m.start()
    wait_stable(members, FORM_TIMEOUT_S, "run %d: three members" % run)

    leaving = members.pop()
    leaving.stop.set()
    leaving.join(30)
    check(leaving.error is None, "leaving consumer failed: %s" % leaving.error)
    check(not leaving.is_alive(), "leaving consumer did not close")

    _, _, seen = wait_stable(members, CONVERGE_S + STABLE_FOR_S,
                             "run %d: two members after a leave" % run)
    # A storm moves the generation every ~0.5 s; a settled group stays within a few.
    check(len(seen) <= 4, "run %d: generations seen while settling: %r" % (run, sorted(seen)))
    sets = sorted(sorted(m.snapshot()[1]) for m in members)
    for m in members:
        m.stop.set()
    for m in members:
        m.join(30)
    return sets


def main():
    bootstrap = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    results = {repr(scenario(bootstrap, run)) for run in range(runs)}
    check(len(results) == 1, "assignments differ between runs: %r" % sorted(results))
    print("kafka-python 3 rebalance ok: runs=%d members=2 assignments=%s" % (runs, results.pop()))


if __name__ == "__main__":
    main()
