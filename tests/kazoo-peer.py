#!/usr/bin/python3
"""kazoo-peer.py: a tiny kazoo client driven by the zkit C test-suite (tests/test_kazoo.c),
so that zkit's locks can be checked for mutual exclusion against kazoo's own recipes, and its
counters and barriers against kazoo's Counter, Barrier and DoubleBarrier.

Usage (run with the Python that has kazoo: Debian's python3-kazoo is for /usr/bin/python3):

  kazoo-peer.py probe
  kazoo-peer.py CONNECT hold  KIND PATH TIMEOUT_MS
  kazoo-peer.py CONNECT loop  KIND PATH ITERATIONS COUNTER_FILE LOG_FILE
  kazoo-peer.py CONNECT order KIND PATH
  kazoo-peer.py CONNECT cache tree-cache PATH
  kazoo-peer.py CONNECT counter PATH curator|text INCREMENTS
  kazoo-peer.py CONNECT barrier PATH
  kazoo-peer.py CONNECT dbarrier PATH MEMBERS TIMEOUT_MS

KIND: mutex (kazoo Lock), read (ReadLock), write (WriteLock), each with the settings that
make kazoo see zkit's (Curator-layout) nodes, as docs/recipes.md gives them:
  Lock(client, path, extra_lock_patterns=["-lock-"])
  ReadLock(client, path, extra_lock_patterns=["__WRIT__"])
  WriteLock(client, path, extra_lock_patterns=["__READ__", "__WRIT__"])

stdout: one line per event, flushed at once; stderr: errors.  Exit codes: 0 ok, 1 error,
2 timeout, 3 refused by an ACL (hold: "NOAUTH"), 77 kazoo is not installed (probe, or any
mode).

Credentials: with ZKIT_PEER_AUTH=user:password in the environment the client adds them as a
digest identity (KazooClient's auth_data); its nodes keep kazoo's default ACL (world-open).

probe: exit 0 when kazoo can be imported (prints "KAZOO <version>").
hold:  acquire (TIMEOUT_MS < 0 = wait forever, 0 = try once), print "ACQUIRED <our node>"
       (full path) or "TIMEOUT" (exit 2).  Then commands on stdin, one a line:
         release       -> release, print "RELEASED", exit 0
         participants  -> "PARTICIPANT <node name>" per contender in kazoo's order, then "END"
         EOF           -> release silently, exit 0
loop:  ITERATIONS times: acquire (forever), append "ENTER <pid> <ns>" to LOG_FILE, read the
       integer in COUNTER_FILE (missing or empty = 0), sleep 1-3 ms, write it back plus one
       (deliberately not atomic), append "EXIT <pid> <ns>", release.  For read / write the
       lines are "ENTER R ..." / "ENTER W ..." and readers never write the counter.  <ns> is
       time.monotonic_ns(), CLOCK_MONOTONIC as the C side's.  Each line is one write(2) on an
       O_APPEND descriptor.  Prints "DONE" at the end.
order: "NODE <node name>" for every contender in kazoo's order, then "END".

cache: (run by bench/zkit-bench --caches; the Curator peer's cache mode speaks the same)
       connects, prints "READY", then commands on stdin, one a line:
         load        -> a new kazoo TreeCache of PATH, started and waited for until its
                        INITIALIZED event: "LOADED <ms from start() to INITIALIZED> <nodes
                        added before it> <bytes>", bytes being this process's resident set
                        (/proc/self/statm) after gc.collect() once loaded, minus the same just
                        before start()
         close       -> closes the cache, "CLOSED"
         events SEQ  -> waits (up to 10 s) until an update carrying SEQ or a later one was
                        heard, then "EVENTS <n>", n lines "E <seq> <ns>" (every NODE_UPDATED
                        since the load whose data starts with a decimal number: that number,
                        and time.monotonic_ns() on entry to the listener), "END"
         quit or EOF -> exit 0

counter: a kazoo Counter at PATH, Counter(client, PATH, default=0, support_curator=True) for
       "curator" (a 4-byte big-endian int, Curator's SharedCount bytes) or
       Counter(client, PATH) for "text" (decimal text); prints "READY", then commands on
       stdin, one a line:
         go          -> INCREMENTS times counter += 1, then "DONE <INCREMENTS>"
         add N       -> counter += N, "ADDED <post_value>"
         get         -> "VALUE <value>"
         close / EOF -> exit 0
       A command that raises prints "ERROR <exception type>: <message>" and the peer goes on.
barrier: a kazoo Barrier at PATH (Curator's DistributedBarrier layout: up while the node
       exists); prints "READY", then commands, one a line (Curator's peer speaks the same):
         set         -> create(), "SET"
         remove      -> remove(), "REMOVED"
         wait MS     -> "WAITING", then wait(MS / 1000): "RELEASED" once the barrier is down,
                        or "TIMEOUT"
         close / EOF -> exit 0
dbarrier: a kazoo DoubleBarrier of MEMBERS at PATH: prints "NODE <its node name>", then
       enter(), "ENTERED" (or "TIMEOUT", exit 2, when not entered within TIMEOUT_MS: kazoo's
       enter has no timeout of its own, so it runs in a thread; "FAILED", exit 1, when kazoo
       gave up on an error); then the command "leave" (or EOF) -> leave(), "LEFT" (or
       "TIMEOUT", exit 2).

Contenders are listed as kazoo's Lock.contenders() orders them (its pattern, its sort key),
with node names instead of node data.

A kazoo lock object creates its path once (ensure_path) and fails with NoNodeError when the
path is gone later; zkit (as Curator) creates lock paths as containers, which the server
deletes once they are empty.  So each acquisition here is made with a fresh lock object, and
made again on NoNodeError, as docs/recipes.md advises kazoo users sharing paths with zkit.

kazoo 2.8 (Debian 12's python3-kazoo) has a read-lock bug: a ReadLock waits for the last
writer in the queue, even one queued behind it, which then waits for the reader: both wait
forever (fixed in kazoo 2.9.0, python-zk/kazoo#650).  On kazoo < 2.9 the peer's ReadLock
carries 2.9's predecessor rule, so that the tests see zkit's behaviour, not that deadlock;
node names, patterns and order are the same in both versions.
"""

import gc
import os
import random
import re
import sys
import threading
import time

EXIT_OK, EXIT_ERROR, EXIT_TIMEOUT, EXIT_NOAUTH, EXIT_SKIP = 0, 1, 2, 3, 77

try:
    import kazoo
    from kazoo.client import KazooClient
    from kazoo.exceptions import LockTimeout, NoAuthError, NoNodeError
    from kazoo.recipe.lock import Lock, ReadLock, WriteLock
except ImportError as e:
    print("kazoo-peer: kazoo not importable (%s): install python3-kazoo" % e, file=sys.stderr)
    sys.exit(EXIT_SKIP)

try:
    from kazoo.version import __version__ as KAZOO_VERSION
except ImportError:
    KAZOO_VERSION = "0"

# The patterns that make kazoo count zkit's nodes as contenders (see the module's doc).
EXTRA_PATTERNS = {
    "mutex": ["-lock-"],
    "read": ["__WRIT__"],
    "write": ["__READ__", "__WRIT__"],
}


def version_tuple(text):
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


class FixedReadLock(ReadLock):
    """kazoo 2.9's predecessor rule for a reader: the nearest contender with a smaller
    sequence (kazoo < 2.9 takes the last contender, even one behind us)."""

    def _get_predecessor(self, node):
        from kazoo.retry import ForceRetryError
        node_sequence = node[len(self.prefix):]
        children = self.client.get_children(self.path)
        found_self = False
        contender_matches = []
        for child in children:
            match = self._contenders_re.search(child)
            if match is not None:
                if match.group(1) < node_sequence:
                    contender_matches.append(match)
            if child == node:
                found_self = match
        if found_self is False:
            raise ForceRetryError()
        if not contender_matches:
            return None
        return sorted(contender_matches, key=lambda m: m.groups())[-1].string


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def err(line):
    sys.stderr.write("kazoo-peer: " + line + "\n")
    sys.stderr.flush()


def make_lock(client, kind, path):
    extra = EXTRA_PATTERNS[kind]
    ident = "host=%s pid=%d kazoo" % (os.uname()[1], os.getpid())
    if kind == "mutex":
        return Lock(client, path, ident, extra_lock_patterns=extra)
    if kind == "write":
        return WriteLock(client, path, ident, extra_lock_patterns=extra)
    read_lock = ReadLock if version_tuple(KAZOO_VERSION) >= (2, 9) else FixedReadLock
    return read_lock(client, path, ident, extra_lock_patterns=extra)


# How often one acquisition is made again after its path vanished under it.
PATH_RETRIES = 20


def acquire_fresh(client, kind, path, **kwargs):
    """A new lock object, acquired (kwargs for acquire): the lock, or None when not acquired.
    A NoNodeError (the path, a container, was reaped between two uses) makes it again."""
    for attempt in range(PATH_RETRIES):
        lock = make_lock(client, kind, path)
        try:
            return lock if lock.acquire(**kwargs) else None
        except NoNodeError:
            if attempt == PATH_RETRIES - 1:
                raise
    return None


def contenders(lock):
    """Node names in the order of kazoo's Lock.contenders() (same pattern, same key)."""
    names = lock._exclude_names | {lock._NODE_NAME}
    pattern = re.compile(r"(?:{patterns})(-?\d{{10}})$".format(patterns="|".join(names)))
    matches = [m for m in (pattern.search(c) for c in lock.client.get_children(lock.path)) if m]
    return [m.string for m in sorted(matches, key=lambda m: m.groups())]


def hold(client, kind, path, timeout_ms):
    try:
        if timeout_ms == 0:
            lock = acquire_fresh(client, kind, path, blocking=False)
        else:
            lock = acquire_fresh(client, kind, path,
                                 timeout=None if timeout_ms < 0 else timeout_ms / 1000.0)
    except LockTimeout:
        lock = None
    except NoAuthError:
        out("NOAUTH")
        return EXIT_NOAUTH
    if lock is None:
        out("TIMEOUT")
        return EXIT_TIMEOUT
    out("ACQUIRED " + lock.path + "/" + lock.node)
    for line in sys.stdin:
        cmd = line.strip()
        if not cmd:
            continue
        if cmd == "release":
            lock.release()
            out("RELEASED")
            return EXIT_OK
        if cmd == "participants":
            out("\n".join(["PARTICIPANT " + n for n in contenders(lock)] + ["END"]))
        else:
            err("unknown command '%s' (release, participants)" % cmd)
    lock.release()
    return EXIT_OK


def append(fd, line):
    os.write(fd, line.encode("ascii"))


def read_counter(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except FileNotFoundError:
        return 0
    return int(text) if text else 0


def loop(client, kind, path, iterations, counter, log):
    tag = {"read": "R ", "write": "W "}.get(kind, "")
    pid = os.getpid()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for _ in range(iterations):
            lock = acquire_fresh(client, kind, path)
            try:
                append(fd, "ENTER %s%d %d\n" % (tag, pid, time.monotonic_ns()))
                value = read_counter(counter)
                time.sleep(random.randint(1, 3) / 1000.0)
                if kind != "read":
                    with open(counter, "w") as f:
                        f.write("%d\n" % (value + 1))
                append(fd, "EXIT %s%d %d\n" % (tag, pid, time.monotonic_ns()))
            finally:
                lock.release()
    finally:
        os.close(fd)
    out("DONE")
    return EXIT_OK


def resident_bytes():
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class CacheEvents(object):
    """The update events one cache heard, for the benchmark's event lag."""

    def __init__(self):
        self.heard = []
        self.newest = -1
        self.lock = threading.Lock()

    def update(self, data, now):
        match = re.match(rb"[0-9]+", data or b"")
        if match is None:
            return
        seq = int(match.group(0))
        with self.lock:
            self.heard.append((seq, now))
            if seq > self.newest:
                self.newest = seq


def cache(client, path):
    from kazoo.recipe.cache import TreeCache, TreeEvent
    current, events = None, CacheEvents()
    out("READY")
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "load":
            if current is not None:
                current.close()
            ev, initialized, added = CacheEvents(), threading.Event(), [0]

            def listener(event, ev=ev, initialized=initialized, added=added):
                now = time.monotonic_ns()
                if event.event_type == TreeEvent.NODE_UPDATED:
                    ev.update(event.event_data.data, now)
                elif event.event_type == TreeEvent.NODE_ADDED and not initialized.is_set():
                    added[0] += 1
                elif event.event_type == TreeEvent.INITIALIZED:
                    initialized.set()

            before = resident_bytes()
            current = TreeCache(client, path)
            current.listen(listener)
            t0 = time.monotonic_ns()
            current.start()
            if not initialized.wait(300):
                err("cache: not initialized in 300 s")
                return EXIT_TIMEOUT
            t1 = time.monotonic_ns()
            events = ev
            out("LOADED %.3f %d %d" % ((t1 - t0) / 1e6, added[0], resident_bytes() - before))
        elif words[0] == "close":
            if current is not None:
                current.close()
                current = None
            out("CLOSED")
        elif words[0] == "events" and len(words) == 2:
            want, deadline = int(words[1]), time.monotonic() + 10
            while events.newest < want and time.monotonic() < deadline:
                time.sleep(0.005)
            with events.lock:
                heard = list(events.heard)
            out("\n".join(["EVENTS %d" % len(heard)] +
                          ["E %d %d" % h for h in heard] + ["END"]))
        elif words[0] == "quit":
            break
        else:
            err("cache: unknown command '%s' (load, close, events SEQ, quit)" % line.strip())
    if current is not None:
        current.close()
    return EXIT_OK


def counter(client, path, form, increments):
    from kazoo.recipe.counter import Counter
    if form == "curator":
        c = Counter(client, path, default=0, support_curator=True)
    else:
        c = Counter(client, path)
    out("READY")
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words == ["go"]:
                for _ in range(increments):
                    c += 1
                out("DONE %d" % increments)
            elif words[0] == "add" and len(words) == 2:
                c += int(words[1])
                out("ADDED %r" % c.post_value)
            elif words == ["get"]:
                out("VALUE %r" % c.value)
            elif words == ["close"]:
                break
            else:
                err("counter: unknown command '%s' (go, add N, get, close)" % line.strip())
        except Exception as e:  # the format disagreements the tests look for
            out("ERROR %s: %s" % (type(e).__name__, e))
    return EXIT_OK


def barrier(client, path):
    from kazoo.recipe.barrier import Barrier
    b = Barrier(client, path)
    out("READY")
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words == ["set"]:
            b.create()
            out("SET")
        elif words == ["remove"]:
            b.remove()
            out("REMOVED")
        elif words[0] == "wait" and len(words) == 2:
            out("WAITING")
            out("RELEASED" if b.wait(int(words[1]) / 1000.0) else "TIMEOUT")
        elif words == ["close"]:
            break
        else:
            err("barrier: unknown command '%s' (set, remove, wait MS, close)" % line.strip())
    return EXIT_OK


def in_thread(fn, timeout_s):
    """fn() in a daemon thread: whether it returned within timeout_s."""
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(timeout_s)
    return not t.is_alive()


def dbarrier(client, path, members, timeout_ms):
    from kazoo.recipe.barrier import DoubleBarrier
    b = DoubleBarrier(client, path, members)
    out("NODE " + b.node_name)
    if not in_thread(b.enter, timeout_ms / 1000.0):
        out("TIMEOUT")
        return EXIT_TIMEOUT
    if not b.participating:
        out("FAILED")
        return EXIT_ERROR
    out("ENTERED")
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "leave":
            break
        if cmd:
            err("dbarrier: unknown command '%s' (leave)" % cmd)
    if not in_thread(b.leave, timeout_ms / 1000.0):
        out("TIMEOUT")
        return EXIT_TIMEOUT
    out("LEFT")
    return EXIT_OK


def own_modes(argv):
    """The modes with arguments of their own (no KIND): (function, args) or None."""
    if len(argv) < 4 or not argv[3].startswith("/"):
        return None
    mode, path, rest = argv[2], argv[3], argv[4:]
    if mode == "counter" and len(rest) == 2 and rest[0] in ("curator", "text"):
        return lambda client: counter(client, path, rest[0], int(rest[1]))
    if mode == "barrier" and not rest:
        return lambda client: barrier(client, path)
    if mode == "dbarrier" and len(rest) == 2:
        return lambda client: dbarrier(client, path, int(rest[0]), int(rest[1]))
    return None


def connect(hosts):
    auth = os.environ.get("ZKIT_PEER_AUTH")
    client = KazooClient(hosts=hosts, timeout=10.0,
                         auth_data=[("digest", auth)] if auth else None)
    client.start(timeout=15)
    return client


def main(argv):
    if len(argv) == 2 and argv[1] == "probe":
        out("KAZOO " + KAZOO_VERSION)
        return EXIT_OK
    run = own_modes(argv)
    if run is not None:
        client = connect(argv[1])
        try:
            return run(client)
        finally:
            client.stop()
            client.close()
    cache_mode = len(argv) == 5 and argv[2] == "cache" and argv[3] == "tree-cache"
    if not cache_mode and (len(argv) < 5 or argv[3] not in EXTRA_PATTERNS or
                           not ((argv[2] == "hold" and len(argv) == 6) or
                                (argv[2] == "loop" and len(argv) == 8) or
                                (argv[2] == "order" and len(argv) == 5))):
        err("usage: kazoo-peer.py CONNECT hold|loop|order|cache|counter|barrier|dbarrier ..."
            " (see its header)")
        return EXIT_ERROR
    mode, kind, path = argv[2], argv[3], argv[4]
    client = connect(argv[1])
    try:
        if mode == "cache":
            return cache(client, path)
        if mode == "hold":
            return hold(client, kind, path, int(argv[5]))
        if mode == "loop":
            return loop(client, kind, path, int(argv[5]), argv[6], argv[7])
        lock = make_lock(client, kind, path)
        client.ensure_path(path)
        out("\n".join(["NODE " + n for n in contenders(lock)] + ["END"]))
        return EXIT_OK
    finally:
        client.stop()
        client.close()


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except KeyboardInterrupt:
        sys.exit(EXIT_ERROR)
