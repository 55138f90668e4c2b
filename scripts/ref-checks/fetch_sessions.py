#!/usr/bin/env python3
"""Fetch sessions (KIP-227) side by side: the same raw Fetch v11 exchange against Logbook
and the reference Kafka prints the same trace (session created, empty incremental answer
when nothing changed, only changed partitions after a produce, 71 for a resent epoch, 70
for an unknown id, session 0 after forgetting every partition, epoch -1 answered in full).

usage: python3 scripts/ref-checks/fetch_sessions.py PORT TOPIC   (TOPIC: 3 partitions, made
first, e.g. with TopicCommand; records are produced with the reference jars' ProducerPerformance)
"""
import socket, struct, sys, subprocess, time
port = int(sys.argv[1]); topic = sys.argv[2]
LIB = "/root/.cache/logbook-reference-kafka/lib/*"
def s16(v): return struct.pack(">h", v)
def s32(v): return struct.pack(">i", v)
def s64(v): return struct.pack(">q", v)
def st(x): b = x.encode(); return s16(len(b)) + b
def arr(items): return s32(len(items)) + b"".join(items)
sock = socket.create_connection(("127.0.0.1", port)); corr = [0]
def call(key, ver, body):
    corr[0] += 1
    req = s16(key) + s16(ver) + s32(corr[0]) + st("sessref") + body
    sock.sendall(s32(len(req)) + req)
    n = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    data = b""
    while len(data) < n: data += sock.recv(n - len(data))
    return data[4:]
class R:
    def __init__(s, b): s.b = b; s.i = 0
    def take(s, f, n): v = struct.unpack(f, s.b[s.i:s.i+n])[0]; s.i += n; return v
    def i16(s): return s.take(">h", 2)
    def i32(s): return s.take(">i", 4)
    def i64(s): return s.take(">q", 8)
    def str(s): n = s.i16(); v = s.b[s.i:s.i+n].decode(); s.i += n; return v
def fetch(sid, epoch, parts, forget=(), wait=0):
    body = s32(-1) + s32(wait) + s32(1) + s32(1 << 20) + b"\x00" + s32(sid) + s32(epoch)
    topics = [st(topic) + arr([s32(p) + s32(-1) + s64(o) + s64(-1) + s32(1 << 20) for p, o in parts])] if parts else []
    body += arr(topics)
    body += arr([st(topic) + arr([s32(p) for p in forget])] if forget else [])
    body += st("")
    r = R(call(1, 11, body))
    r.i32(); err = r.i16(); rsid = r.i32(); out = []
    for _ in range(r.i32()):
        r.str()
        for _ in range(r.i32()):
            p = r.i32(); e = r.i16(); hw = r.i64(); r.i64(); r.i64()
            na = r.i32()
            for _ in range(max(na, 0)): r.i64(); r.i64()
            r.i32(); ln = r.i32(); r.i += max(ln, 0)
            out.append((p, e, hw, ln > 0))
    return err, rsid, out
def produce(n):
    subprocess.run(["java", "-cp", LIB, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(n),
                    "--record-size", "10", "--throughput", "-1", "--producer-props", f"bootstrap.servers=127.0.0.1:{port}", "linger.ms=0", "batch.size=1"],
                   capture_output=True)
produce(6)
e, sid, out = fetch(0, 0, [(0, 0), (1, 0), (2, 0)])
print("full:", e, "session!=0:", sid != 0, [(p, er, rec) for p, er, hw, rec in out])
hws = {p: hw for p, er, hw, rec in out}
e, s2, out = fetch(sid, 1, [(p, hws[p]) for p in hws])
print("incremental, positions at end:", e, "same session:", s2 == sid, out)
produce(3)
time.sleep(1)
e, s2, out = fetch(sid, 2, [])
print("incremental after produce:", e, "same session:", s2 == sid, "partitions with records only:", all(rec or hw != hws[p] for p, er, hw, rec in out), len(out) > 0)
e, s2, out = fetch(sid, 2, [])
print("resent epoch:", e, "session:", s2, out)
e, s2, out = fetch(sid + 1, 1, [])
print("unknown id:", e, "session:", s2, out)
e, s2, out = fetch(sid, 3, [], forget=(0, 1, 2))
print("forget all:", e, "session:", s2, out)
e, s2, out = fetch(sid, 4, [])
print("after forget:", e, "session:", s2, out)
e, s2, out = fetch(0, -1, [(0, 0)])
print("epoch -1:", e, "session:", s2, [(p, er, rec) for p, er, hw, rec in out])
