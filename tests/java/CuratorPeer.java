/*
 * CuratorPeer: a tiny Apache Curator (5.x) lock client driven by the zkit C test-suite, so
 * that zkit's locks can be checked for mutual exclusion against Curator's own recipes.
 *
 * Started through tests/curator-peer.sh, which compiles this file on demand. Usage:
 *
 *   CuratorPeer CONNECT hold  KIND PATH TIMEOUT_MS [revocable|gated]
 *   CuratorPeer CONNECT loop  KIND PATH ITERATIONS COUNTER_FILE LOG_FILE [gated]
 *   CuratorPeer CONNECT order KIND PATH
 *   CuratorPeer CONNECT revoke NODE_PATH...
 *   CuratorPeer CONNECT bench KIND PATH CYCLES WARMUP
 *   CuratorPeer CONNECT contend mutex|semaphore|rwlock|multi PATH CLIENTS ACQUISITIONS
 *   CuratorPeer CONNECT cache curator-cache|tree-cache PATH
 *   CuratorPeer CONNECT latch PATH ID LOG_FILE
 *   CuratorPeer CONNECT selector PATH ID LOG_FILE
 *   CuratorPeer CONNECT count PATH SEED
 *   CuratorPeer CONNECT atomic PATH LOCK_PATH|- INCREMENTS
 *   CuratorPeer CONNECT dbarrier PATH MEMBERS TIMEOUT_MS
 *   CuratorPeer CONNECT barrier PATH
 *   CuratorPeer CONNECT group PATH ID DATA
 *   CuratorPeer CONNECT discovery BASE SERVICE ID
 *   CuratorPeer CONNECT discobench BASE
 *
 * KIND: mutex (InterProcessMutex), read / write (InterProcessReadWriteLock halves),
 *       semaphore (InterProcessSemaphoreMutex); contend has kinds of its own (below).
 *
 * stdout: one line per event, flushed at once. stderr: errors (and nothing else, logging is
 * silenced with slf4j-nop). Exit codes: 0 ok, 1 error, 2 timeout.
 * With ZKIT_PEER_AUTH=user:password in the environment, the session adds those digest
 * credentials (CuratorFrameworkFactory.Builder.authorization); an ACL that refuses a request
 * is then an error (exit 1, "NoAuth" on stderr).
 *
 * hold:  acquire (TIMEOUT_MS < 0 = wait forever, 0 = try once), print "ACQUIRED <our node>"
 *        (full path; "-" if it cannot be found) or "TIMEOUT" (exit 2). Then commands on
 *        stdin, one a line:
 *          release       -> release, print "RELEASED", exit 0
 *          participants  -> "PARTICIPANT <node name>" per participant, then "END"
 *          EOF           -> release silently, exit 0
 *        While holding, connection state changes other than the first connect are reported
 *        as "STATE SUSPENDED" / "STATE RECONNECTED" / "STATE LOST" / "STATE READ_ONLY".
 *        revocable: the lock is made revocable before acquiring (InterProcessMutex
 *        .makeRevocable; mutex, read and write only, Curator's semaphore mutex is not
 *        Revocable). On a revocation request print "REVOKE_REQUESTED", then release, print
 *        "RELEASED" and exit 0. The listener runs on Curator's event thread and only hands
 *        the release to the main thread: InterProcessMutex must be released by the thread
 *        that acquired it.
 * gated (hold, loop): once connected, print "READY" and wait for one line on stdin before the
 *        first acquire, so that a test can start the JVMs ahead and form its queue without
 *        their start-up in it.
 * loop:  ITERATIONS times: acquire (forever), append "ENTER <pid> <nanoTime>" to LOG_FILE,
 *        read the integer in COUNTER_FILE (missing or empty = 0), sleep 1-3 ms, write it back
 *        plus one (deliberately not atomic), append "EXIT <pid> <nanoTime>", release.
 *        For read / write the log lines are "ENTER R ..." / "ENTER W ..." (and EXIT alike) and
 *        readers only read the counter, never write it. Prints "DONE" at the end.
 *        nanoTime is CLOCK_MONOTONIC on Linux, comparable across processes of one host.
 * order: "NODE <node name>" for every participant in Curator's order, then "END".
 * revoke: Revoker.attemptRevoke(client, NODE_PATH) for each full node path (it writes
 *        "__REVOKE__" into the node; a missing node is ignored, as Revoker does), then print
 *        "REVOKED".
 * bench: (KIND mutex or semaphore only) WARMUP unmeasured uncontended acquire() + release()
 *        cycles (they warm the JIT as well as the connection), then CYCLES timed ones, each
 *        with System.nanoTime; prints one line "BENCH <cycles per second> <p50 ms> <p99 ms>"
 *        (the rate over all timed cycles, the percentiles nearest-rank, as bench/zkit-bench
 *        computes its own figures). Run by bench/zkit-bench.
 * contend: CLIENTS sessions of their own in this JVM, a thread each, loop on one lock:
 *        ACQUISITIONS / 2 unmeasured acquisitions in all (the JIT), then ACQUISITIONS timed
 *        ones, each released at once. mutex: an InterProcessMutex; each holder stamps
 *        System.nanoTime just before release, the next holder (another client) measures from
 *        it to its return from acquire() (hand-off). The others, as bench/zkit-bench's recipe
 *        rows, time acquire() alone: semaphore, one lease of an InterProcessSemaphoreV2 of 4
 *        (returnLease); rwlock, an InterProcessReadWriteLock whose write half takes every
 *        tenth acquisition (counted over all clients) and its read half the others; multi, an
 *        InterProcessMultiLock of InterProcessMutexes at PATH/part-0 ... PATH/part-3. Prints
 *        "BENCH <acquisitions per second> <p50 ms> <p99 ms> <samples> <acquisitions>
 *        <timed acquisitions> <timed requests>", <acquisitions> being all this run made, the
 *        unmeasured ones included, and <timed requests> the server's zk_packets_received
 *        (mntr) from the start of the timed part to its end, before any close (-1 when mntr
 *        cannot be read).
 *
 * cache: connects and prints "READY", then commands on stdin, one a line (run by bench/zkit-bench
 *        --caches; kazoo-peer.py's cache mode speaks the same):
 *          load        -> a new cache of PATH (curator-cache: CuratorCache; tree-cache:
 *                         TreeCache, unlimited depth, data cached), started, waited for until
 *                         initialized: "LOADED <ms from start() to the initialized event>
 *                         <nodes added before it> <heap bytes>", the heap bytes being the heap
 *                         used after System.gc() once loaded minus the same just before start()
 *          close       -> closes the cache, "CLOSED"
 *          events SEQ  -> waits (up to 10 s) until a change event carrying SEQ or a later one
 *                         was heard, then "EVENTS <n>", n lines "E <seq> <nanoTime>" (every
 *                         change event since the load whose data starts with a decimal number:
 *                         that number, and System.nanoTime on entry to the listener), "END"
 *          quit or EOF -> exit 0
 * latch: a LeaderLatch at PATH with participant id ID, started at once ("STARTED").  Its
 *        listener prints "LEADER" (after appending "ENTER <pid> <nanoTime>" to LOG_FILE) and
 *        "NOTLEADER" (after appending "EXIT ...").  Commands on stdin, one a line:
 *          leader  -> "LEADERID <getLeader().getId()>" ("LEADERID -" when there is none)
 *          has     -> "HAS true" / "HAS false" (hasLeadership())
 *          close   -> EXIT appended if leader, close(), "CLOSED", exit 0
 *          EOF     -> the same without printing
 * selector: a LeaderSelector at PATH with id ID and autoRequeue, started at once
 *        ("STARTED").  takeLeadership appends ENTER, prints "LEADER", waits for the command
 *        "yield" (or an interrupt: the connection was SUSPENDED or LOST, or close), appends
 *        EXIT, prints "YIELDED" and returns.  Commands: leader (as for latch), yield, close
 *        (close() and wait for a running takeLeadership to end, "CLOSED", exit 0), EOF (the
 *        same without printing).
 *
 * count: a SharedCount at PATH seeded with SEED, started ("STARTED").  Commands: get ->
 *        "COUNT <count> <version>"; set N -> "SET"; tryset N -> "TRYSET true|false" (trySetCount with the
 *        VersionedValue the last get read, or start); close / EOF.
 * atomic: a DistributedAtomicLong at PATH (retry: RetryNTimes(10, 1)), promoted to an
 *        InterProcessMutex at LOCK_PATH (PromotedToLock, wait forever, RetryNTimes(1000, 1)
 *        under the lock) unless it is "-"; prints "READY", waits for a line "go" on stdin,
 *        then increments INCREMENTS times and prints "DONE <succeeded> <failed>
 *        <optimistic tries> <promoted tries> <increments per second>".
 * dbarrier: a DistributedDoubleBarrier of MEMBERS at PATH: enter(TIMEOUT_MS) prints "ENTERED"
 *        or "TIMEOUT" (exit 2); then the command "leave" -> leave(TIMEOUT_MS), "LEFT" or
 *        "TIMEOUT"; EOF leaves too.
 * barrier: a DistributedBarrier at PATH; prints "READY", then commands on stdin, one a line:
 *          set       -> setBarrier(), "SET"
 *          remove    -> removeBarrier(), "REMOVED"
 *          wait MS   -> "WAITING", then waitOnBarrier(MS ms): "RELEASED" once the barrier is
 *                       down, or "TIMEOUT" when MS passed with it up (MS 0: look once)
 *          close / EOF -> exit 0
 * group: a GroupMember at PATH with id ID and payload DATA (UTF-8), started at once
 *        ("STARTED").  Commands on stdin, one a line:
 *          members -> "MEMBER <id> <data>" per member of getCurrentMembers(), sorted by id,
 *                     then "END"
 *          data D  -> setThisData(D), "DATA"
 *          close   -> close() (its node deleted), "CLOSED", exit 0
 *          EOF     -> the same without printing
 * discovery: a ServiceDiscovery (curator-x-discovery, its default serializer) at BASE that
 *        registers instance ID of SERVICE: address 10.1.2.3, port 7001, sslPort 7443, payload a
 *        LinkedHashMap {zone=eu}, registrationTimeUTC 1700000000999, DYNAMIC, uriSpec
 *        "{scheme}://{address}:{port}" ("REGISTERED").  Commands on stdin, one a line:
 *          query   -> "INSTANCE <json>" per queryForInstances(SERVICE), the JSON written with
 *                     every field (JsonInstanceSerializer in its non-compatible mode), then "END"
 *          pick    -> "PICK <id>" from a ServiceProvider of SERVICE (round robin), or
 *                     "PICK -" when it has none
 *          close   -> close() (its instance unregistered), "CLOSED", exit 0
 *          EOF     -> the same without printing
 * discobench: a ServiceDiscovery at BASE with no instance of its own (run by bench/zkit-bench
 *        --discovery); prints "READY" once connected, then commands on stdin, one a line:
 *          register SERVICE ID  -> registerService of a DYNAMIC instance (address 127.0.0.1,
 *                                  port 8080): "REGISTERED <nanoTime before> <nanoTime after>"
 *          unregister ID        -> unregisterService of it, "UNREGISTERED"
 *          lookup SERVICE ID N  -> N timed queryForInstance calls
 *          list SERVICE N       -> N timed queryForInstances calls
 *             both: "SAMPLES <instances the first call found> <ms> ..." (one figure per call)
 *          quit or EOF          -> close(), exit 0
 *
 * Participants: mutex, read, write: getParticipantNodes() of that lock, i.e. the children
 * of PATH sorted by Curator's sorter; the read half lists only __READ__ nodes and the write
 * half only __WRIT__ nodes (Curator filters by its lock name). semaphore: the children of
 * PATH/leases as ZooKeeper returns them (InterProcessSemaphoreV2.getParticipantNodes()).
 */

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.cache.TreeCache;
import org.apache.curator.framework.recipes.cache.TreeCacheEvent;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.RevocationListener;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZKPaths;

public class CuratorPeer {
    static final int EXIT_OK = 0;
    static final int EXIT_ERROR = 1;
    static final int EXIT_TIMEOUT = 2;

    /* ---- lock wrappers: the same recipes Curator builds, subclassed only to reach the
     * protected getLockPath() (our own node, kept per thread by InterProcessMutex). ---- */

    static final class PeerMutex extends InterProcessMutex {
        PeerMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String ourNode() {
            return getLockPath();
        }
    }

    static final class PeerWriteLock extends InterProcessReadWriteLock.WriteLock {
        PeerWriteLock(CuratorFramework client, String path) {
            super(client, path, null);
        }

        String ourNode() {
            return getLockPath();
        }
    }

    static final class PeerReadLock extends InterProcessReadWriteLock.ReadLock {
        PeerReadLock(CuratorFramework client, String path, InterProcessReadWriteLock.WriteLock w) {
            super(client, path, null, w);
        }

        String ourNode() {
            return getLockPath();
        }
    }

    /** One lock of the requested KIND, with uniform access to our node and participants. */
    static final class Peer {
        final String kind;
        final String path;
        final CuratorFramework client;
        final InterProcessLock lock;

        Peer(CuratorFramework client, String kind, String path) {
            this.client = client;
            this.kind = kind;
            this.path = path;
            switch (kind) {
            case "mutex":
                lock = new PeerMutex(client, path);
                break;
            case "write":
                lock = new PeerWriteLock(client, path);
                break;
            case "read":
                /* Exactly what new InterProcessReadWriteLock(client, path) builds: the read
                 * half needs its write half (for downgrade), which stays unused here. */
                lock = new PeerReadLock(client, path, new PeerWriteLock(client, path));
                break;
            case "semaphore":
                lock = new InterProcessSemaphoreMutex(client, path);
                break;
            default:
                throw new IllegalArgumentException("unknown KIND '" + kind
                        + "' (mutex, read, write, semaphore)");
            }
        }

        boolean acquire(long timeoutMs) throws Exception {
            if (timeoutMs < 0) {
                lock.acquire();
                return true;
            }
            return lock.acquire(timeoutMs, TimeUnit.MILLISECONDS);
        }

        void release() throws Exception {
            lock.release();
        }

        /** Curator's makeRevocable; only its InterProcessMutex (and the read-write halves,
         *  which are mutexes) is Revocable. The listener runs on Curator's event thread. */
        void makeRevocable(Runnable onRequest) {
            if (!(lock instanceof InterProcessMutex)) {
                throw new IllegalArgumentException("KIND '" + kind
                        + "' is not revocable in Curator (mutex, read, write)");
            }
            RevocationListener<InterProcessMutex> listener = forLock -> onRequest.run();
            ((InterProcessMutex) lock).makeRevocable(listener);
        }

        /** Full path of our lock node (lease node for the semaphore), or null. */
        String ourNode() {
            if (lock instanceof PeerMutex) {
                return ((PeerMutex) lock).ourNode();
            }
            if (lock instanceof PeerWriteLock) {
                return ((PeerWriteLock) lock).ourNode();
            }
            if (lock instanceof PeerReadLock) {
                return ((PeerReadLock) lock).ourNode();
            }
            /* InterProcessSemaphoreMutex keeps its Lease in a private field; the lease's
             * node name is the name of the lease node under PATH/leases. */
            try {
                Field f = InterProcessSemaphoreMutex.class.getDeclaredField("lease");
                f.setAccessible(true);
                Object lease = f.get(lock);
                if (lease instanceof Lease) {
                    String name = ((Lease) lease).getNodeName();
                    if (name != null && !name.isEmpty()) {
                        return name.startsWith("/") ? name
                                : ZKPaths.makePath(ZKPaths.makePath(path, "leases"), name);
                    }
                }
            } catch (ReflectiveOperationException | RuntimeException e) {
                /* fall through: unknown */
            }
            return null;
        }

        /** Participant node names (not paths), in Curator's order. */
        List<String> participants() throws Exception {
            Collection<String> nodes;
            if (lock instanceof InterProcessMutex) {
                nodes = ((InterProcessMutex) lock).getParticipantNodes();
            } else {
                /* InterProcessSemaphoreMutex = InterProcessSemaphoreV2(client, path, 1); a
                 * second instance only to list PATH/leases (creates nothing). */
                nodes = new InterProcessSemaphoreV2(client, path, 1).getParticipantNodes();
            }
            /* Paths for the locks, bare names for the semaphore: keep the last component. */
            List<String> names = new ArrayList<>();
            for (String n : nodes) {
                names.add(n.substring(n.lastIndexOf('/') + 1));
            }
            return names;
        }
    }

    /* ---- output ---- */

    static synchronized void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static void err(String line) {
        System.err.println("CuratorPeer: " + line);
        System.err.flush();
    }

    static void usage() {
        err("usage: CuratorPeer CONNECT hold KIND PATH TIMEOUT_MS [revocable]\n"
                + "       CuratorPeer CONNECT loop KIND PATH ITERATIONS COUNTER_FILE LOG_FILE\n"
                + "       CuratorPeer CONNECT order KIND PATH\n"
                + "       CuratorPeer CONNECT revoke NODE_PATH...\n"
                + "       CuratorPeer CONNECT bench KIND PATH CYCLES WARMUP\n"
                + "       CuratorPeer CONNECT contend mutex|semaphore|rwlock|multi PATH CLIENTS"
                + " ACQUISITIONS\n"
                + "       CuratorPeer CONNECT cache curator-cache|tree-cache PATH\n"
                + "       CuratorPeer CONNECT latch PATH ID LOG_FILE\n"
                + "       CuratorPeer CONNECT selector PATH ID LOG_FILE\n"
                + "       CuratorPeer CONNECT count PATH SEED\n"
                + "       CuratorPeer CONNECT atomic PATH LOCK_PATH N\n"
                + "       CuratorPeer CONNECT dbarrier PATH MEMBERS TIMEOUT_MS\n"
                + "       CuratorPeer CONNECT barrier PATH\n"
                + "       CuratorPeer CONNECT group PATH ID DATA\n"
                + "KIND: mutex | read | write | semaphore (bench: mutex | semaphore;"
                + " contend: see above)");
    }

    /* ---- main ---- */

    public static void main(String[] args) {
        int rc;
        CuratorFramework client = null;
        try {
            if (args.length == 1 && args[0].equals("--warm-up")) {
                warmUp();
                System.exit(EXIT_OK);
            }
            if (args.length < 3) {
                usage();
                System.exit(EXIT_ERROR);
            }
            String connect = args[0];
            String mode = args[1];
            /* revoke takes node paths only; the other modes KIND PATH and their own args. */
            boolean revocable = mode.equals("hold") && args.length == 6 && args[5].equals("revocable");
            boolean gated = (mode.equals("hold") && args.length == 6 && args[5].equals("gated"))
                    || (mode.equals("loop") && args.length == 8 && args[7].equals("gated"));
            boolean leader = mode.equals("latch") || mode.equals("selector")
                    || mode.equals("count") || mode.equals("dbarrier") || mode.equals("group")
                    || mode.equals("discovery") || mode.equals("discobench");
            if (mode.equals("atomic")) {
                leader = true; /* PATH LOCK_PATH N: the same shape once LOCK_PATH is taken */
            }
            if (mode.equals("barrier")) {
                leader = true; /* PATH alone */
            }
            boolean ok = mode.equals("revoke") || (leader && args.length == 5)
                    || (mode.equals("barrier") && args.length == 3)
                    || (mode.equals("count") && args.length == 4)
                    || (mode.equals("hold") && (args.length == 5 || revocable || gated))
                    || (mode.equals("loop") && (args.length == 7 || gated))
                    || (mode.equals("order") && args.length == 4)
                    || (mode.equals("bench") && args.length == 6)
                    || (mode.equals("contend") && args.length == 6)
                    || (mode.equals("cache") && args.length == 4)
                    || (mode.equals("discobench") && args.length == 3);
            if (!ok) {
                usage();
                System.exit(EXIT_ERROR);
            }
            boolean revoke = mode.equals("revoke");
            String kind = revoke || leader ? null : args[2];
            String path = revoke ? null : leader ? args[2] : args[3];
            int firstPath = revoke || leader ? 2 : 3;
            int endPaths = revoke ? args.length : leader ? 3 : 4;
            for (int i = firstPath; i < endPaths; i++) {
                if (!args[i].startsWith("/")) {
                    throw new IllegalArgumentException("paths must be absolute: " + args[i]);
                }
            }
            if (mode.equals("contend")) {
                /* Sessions of its own, one per contending client. */
                System.exit(contend(connect, kind, path, Integer.parseInt(args[4]),
                        Integer.parseInt(args[5])));
            }
            CuratorFrameworkFactory.Builder builder = CuratorFrameworkFactory.builder()
                    .connectString(connect)
                    .sessionTimeoutMs(10000)
                    .retryPolicy(new ExponentialBackoffRetry(100, 3));
            /* Digest credentials from the environment (never argv); the ACL provider stays
             * Curator's default (world-open nodes). */
            String auth = System.getenv("ZKIT_PEER_AUTH");
            if (auth != null && !auth.isEmpty()) {
                builder.authorization("digest", auth.getBytes(StandardCharsets.UTF_8));
            }
            client = builder.build();
            final CuratorFramework c = client;
            /* SIGTERM / SIGINT: close the session so our ephemeral nodes go at once. */
            Runtime.getRuntime().addShutdownHook(new Thread(c::close));
            client.start();
            if (revoke) {
                for (int i = 2; i < args.length; i++) {
                    Revoker.attemptRevoke(client, args[i]);
                }
                out("REVOKED");
                rc = EXIT_OK;
            } else if (mode.equals("cache")) {
                rc = cache(client, kind, path);
            } else if (mode.equals("count")) {
                rc = count(client, path, Integer.parseInt(args[3]));
            } else if (mode.equals("atomic")) {
                rc = atomic(client, path, args[3], Integer.parseInt(args[4]));
            } else if (mode.equals("dbarrier")) {
                rc = dbarrier(client, path, Integer.parseInt(args[3]), Long.parseLong(args[4]));
            } else if (mode.equals("barrier")) {
                rc = barrier(client, path);
            } else if (mode.equals("group")) {
                rc = group(client, path, args[3], args[4]);
            } else if (mode.equals("discovery")) {
                rc = discovery(client, path, args[3], args[4]);
            } else if (mode.equals("discobench")) {
                rc = discobench(client, path);
            } else if (leader) {
                Path log = Paths.get(args[4]);
                rc = mode.equals("latch") ? latch(client, path, args[3], log)
                                          : selector(client, path, args[3], log);
            } else {
                Peer peer = new Peer(client, kind, path);
                if (gated) {
                    awaitGo(client);
                }
                rc = run(peer, mode, args, revocable);
            }
        } catch (Exception e) {
            err("error: " + e);
            rc = EXIT_ERROR;
        }
        if (client != null) {
            try {
                client.close();
            } catch (RuntimeException e) {
                /* closing anyway */
            }
        }
        System.out.flush();
        System.exit(rc);
    }

    /* ---- cache (bench/zkit-bench --caches) ---- */

    static final int MAX_CACHE_EVENTS = 1 << 20;

    /** The change events one cache heard, for the benchmark's event lag. */
    static final class CacheEvents {
        final long[] seq = new long[MAX_CACHE_EVENTS];
        final long[] ns = new long[MAX_CACHE_EVENTS];
        final AtomicInteger count = new AtomicInteger();
        volatile long newest = -1;

        /** Data starting with a decimal number: that number, heard at `now`. */
        void heard(byte[] data, long now) {
            long s = 0;
            int i = 0;
            if (data == null || data.length == 0 || data[0] < '0' || data[0] > '9') {
                return;
            }
            while (i < data.length && data[i] >= '0' && data[i] <= '9') {
                s = s * 10 + (data[i++] - '0');
            }
            int n = count.getAndIncrement();
            if (n < MAX_CACHE_EVENTS) {
                seq[n] = s;
                ns[n] = now;
            }
            synchronized (this) {
                if (s > newest) {
                    newest = s;
                }
            }
        }
    }

    /** Heap in use after full collections (the serial collector compacts on System.gc()). */
    static long heapUsed() {
        Runtime r = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return r.totalMemory() - r.freeMemory();
    }

    @SuppressWarnings("deprecation") /* TreeCache: deprecated in Curator 5, still measured */
    static int cache(CuratorFramework client, String kind, String path) throws Exception {
        if (!kind.equals("curator-cache") && !kind.equals("tree-cache")) {
            throw new IllegalArgumentException("cache: KIND must be curator-cache or tree-cache");
        }
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("cache: not connected in 30 s");
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in,
                StandardCharsets.UTF_8));
        AutoCloseable current = null;
        CacheEvents events = new CacheEvents();
        out("READY");
        for (String line; (line = in.readLine()) != null;) {
            String[] w = line.trim().split(" ");
            switch (w[0]) {
            case "load": {
                if (current != null) {
                    current.close();
                }
                final CacheEvents ev = new CacheEvents();
                final java.util.concurrent.CountDownLatch initialized =
                        new java.util.concurrent.CountDownLatch(1);
                final AtomicInteger added = new AtomicInteger();
                events = ev; /* the last load's arrays go before the heap is measured */
                long before = heapUsed();
                long t0 = System.nanoTime(), t1;
                if (kind.equals("curator-cache")) {
                    CuratorCache c = CuratorCache.build(client, path);
                    c.listenable().addListener(CuratorCacheListener.builder()
                            .forCreates(node -> {
                                if (initialized.getCount() > 0) {
                                    added.incrementAndGet();
                                }
                            })
                            .forChanges((old, node) -> ev.heard(node.getData(), System.nanoTime()))
                            .forInitialized(initialized::countDown)
                            .build());
                    t0 = System.nanoTime();
                    c.start();
                    current = c;
                } else {
                    TreeCache c = TreeCache.newBuilder(client, path).build();
                    c.getListenable().addListener((cl, e) -> {
                        long now = System.nanoTime();
                        switch (e.getType()) {
                        case NODE_ADDED:
                            if (initialized.getCount() > 0) {
                                added.incrementAndGet();
                            }
                            break;
                        case NODE_UPDATED:
                            ev.heard(e.getData().getData(), now);
                            break;
                        case INITIALIZED:
                            initialized.countDown();
                            break;
                        default:
                            break;
                        }
                    });
                    t0 = System.nanoTime();
                    c.start();
                    current = c;
                }
                if (!initialized.await(300, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("cache: not initialized in 300 s");
                }
                t1 = System.nanoTime();
                long after = heapUsed();
                out(String.format(Locale.ROOT, "LOADED %.3f %d %d", (t1 - t0) / 1e6, added.get(),
                        after - before));
                break;
            }
            case "close":
                if (current != null) {
                    current.close();
                    current = null;
                }
                out("CLOSED");
                break;
            case "events": {
                long want = Long.parseLong(w[1]);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (events.newest < want && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                int n = Math.min(events.count.get(), MAX_CACHE_EVENTS);
                StringBuilder sb = new StringBuilder(32 * n + 32);
                sb.append("EVENTS ").append(n).append('\n');
                for (int i = 0; i < n; i++) {
                    sb.append("E ").append(events.seq[i]).append(' ').append(events.ns[i])
                            .append('\n');
                }
                sb.append("END");
                out(sb.toString());
                break;
            }
            case "quit":
                if (current != null) {
                    current.close();
                }
                return EXIT_OK;
            default:
                err("cache: unknown command '" + line + "' (load, close, events SEQ, quit)");
                break;
            }
        }
        if (current != null) {
            current.close();
        }
        return EXIT_OK;
    }

    /**
     * gated: "READY" once connected, then one line on stdin.  Read byte by byte from System.in
     * itself (buffered once, for every reader), so that hold's reader of commands starts at the
     * next line.
     */
    static void awaitGo(CuratorFramework client) throws Exception {
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection in 30 s");
        }
        out("READY");
        int b;
        while ((b = System.in.read()) != -1 && b != '\n') {
            /* the rest of the line */
        }
    }

    /** The modes that work on one lock (hold, loop, order, bench). */
    static int run(Peer peer, String mode, String[] args, boolean revocable) throws Exception {
        switch (mode) {
        case "hold":
            return hold(peer, Long.parseLong(args[4]), revocable);
        case "loop":
            return loop(peer, Integer.parseInt(args[4]), Paths.get(args[5]), Paths.get(args[6]));
        case "bench":
            return bench(peer, Integer.parseInt(args[4]), Integer.parseInt(args[5]));
        default:
            return order(peer);
        }
    }

    /**
     * Used by curator-peer.sh only, to record a class-data-sharing archive right after
     * compiling: load the classes a real run needs by running every kind against a port
     * where no server listens. All failures are expected and ignored; the operations run in
     * parallel (each fails after the client's one-second reconnect pause) and whatever has
     * not finished after two seconds is abandoned. Prints nothing.
     */
    static void warmUp() throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString("127.0.0.1:1")
                .sessionTimeoutMs(100)
                .connectionTimeoutMs(100)
                .retryPolicy(new ExponentialBackoffRetry(1, 1))
                .build();
        client.start();
        client.getConnectionStateListenable().addListener((cl, state) -> { });
        List<Thread> threads = new ArrayList<>();
        for (String kind : new String[] {"mutex", "read", "write", "semaphore"}) {
            Peer peer = new Peer(client, kind, "/curator-peer-warm-up");
            peer.ourNode();
            if (!kind.equals("semaphore")) {
                peer.makeRevocable(() -> { });
            }
            threads.add(new Thread(() -> {
                try {
                    peer.acquire(50);
                } catch (Exception e) {
                    /* expected: no server */
                }
            }));
            threads.add(new Thread(() -> {
                try {
                    peer.participants();
                } catch (Exception e) {
                    /* expected: no server */
                }
            }));
        }
        threads.add(new Thread(() -> {
            try {
                Revoker.attemptRevoke(client, "/curator-peer-warm-up/node");
            } catch (Exception e) {
                /* expected: no server */
            }
        }));
        for (Thread t : threads) {
            t.setDaemon(true);
            t.start();
        }
        try {
            readCounter(Paths.get("/nonexistent/curator-peer-warm-up"));
        } catch (IOException e) {
            /* not reached */
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
        for (Thread t : threads) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            if (left > 0) {
                t.join(left);
            }
        }
        client.close();
    }

    /** What the holding main thread is told: a line from stdin, its end, or a revocation. */
    static final class Command {
        static final Command EOF = new Command(null);
        static final Command REVOKE = new Command(null);
        final String line;

        Command(String line) {
            this.line = line;
        }
    }

    static int hold(Peer peer, long timeoutMs, boolean revocable) throws Exception {
        /* stdin and the revocation listener both feed one queue, so that the main thread,
         * which acquired the lock (and so must release it), hears whichever comes first. */
        BlockingQueue<Command> commands = new LinkedBlockingQueue<>();
        if (revocable) {
            peer.makeRevocable(() -> {
                out("REVOKE_REQUESTED");
                commands.add(Command.REVOKE);
            });
        }
        if (!peer.acquire(timeoutMs)) {
            out("TIMEOUT");
            return EXIT_TIMEOUT;
        }
        String node = peer.ourNode();
        out("ACQUIRED " + (node != null ? node : "-"));
        peer.client.getConnectionStateListenable().addListener((cl, state) -> {
            if (state != ConnectionState.CONNECTED) {
                out("STATE " + state.name());
            }
        });
        Thread reader = new Thread(() -> {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            try {
                String line;
                while ((line = in.readLine()) != null) {
                    commands.add(new Command(line));
                }
            } catch (IOException e) {
                err("reading stdin: " + e);
            }
            commands.add(Command.EOF);
        });
        reader.setDaemon(true); /* System.exit must not wait for a blocked read */
        reader.start();
        for (;;) {
            Command command = commands.take();
            if (command == Command.EOF) {
                peer.release();
                return EXIT_OK;
            }
            String cmd = command == Command.REVOKE ? "release" : command.line.trim();
            if (cmd.isEmpty()) {
                continue;
            }
            if (cmd.equals("release")) {
                peer.release();
                out("RELEASED");
                return EXIT_OK;
            } else if (cmd.equals("participants")) {
                StringBuilder sb = new StringBuilder();
                for (String n : peer.participants()) {
                    sb.append("PARTICIPANT ").append(n).append('\n');
                }
                sb.append("END");
                out(sb.toString());
            } else {
                err("unknown command '" + cmd + "' (release, participants)");
            }
        }
    }

    /* ---- leadership ---- */

    static String entry(String what) {
        return what + " " + ProcessHandle.current().pid() + " " + System.nanoTime() + "\n";
    }

    /** stdin, one line at a time, on a daemon thread; null at EOF. */
    static BlockingQueue<Command> stdinCommands() {
        BlockingQueue<Command> commands = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            try {
                String line;
                while ((line = in.readLine()) != null) {
                    commands.add(new Command(line.trim()));
                }
            } catch (IOException e) {
                err("reading stdin: " + e);
            }
            commands.add(Command.EOF);
        });
        reader.setDaemon(true);
        reader.start();
        return commands;
    }

    static String leaderLine(Participant p) {
        return "LEADERID " + (p != null && p.isLeader() ? p.getId() : "-");
    }

    static int latch(CuratorFramework client, String path, String id, Path log) throws Exception {
        LeaderLatch latch = new LeaderLatch(client, path, id);
        Object mu = new Object();
        latch.addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
                synchronized (mu) {
                    try {
                        append(log, entry("ENTER"));
                    } catch (IOException e) {
                        err("log: " + e);
                    }
                    out("LEADER");
                }
            }

            @Override
            public void notLeader() {
                synchronized (mu) {
                    try {
                        append(log, entry("EXIT"));
                    } catch (IOException e) {
                        err("log: " + e);
                    }
                    out("NOTLEADER");
                }
            }
        });
        BlockingQueue<Command> commands = stdinCommands();
        latch.start();
        out("STARTED");
        for (;;) {
            Command command = commands.take();
            if (command == Command.EOF || command.line.equals("close")) {
                synchronized (mu) {
                    if (latch.hasLeadership()) {
                        append(log, entry("EXIT"));
                    }
                    /* SILENT: the listener is not called by close */
                    latch.close(LeaderLatch.CloseMode.SILENT);
                }
                if (command != Command.EOF) {
                    out("CLOSED");
                }
                return EXIT_OK;
            } else if (command.line.equals("leader")) {
                out(leaderLine(latch.getLeader()));
            } else if (command.line.equals("has")) {
                out("HAS " + latch.hasLeadership());
            } else if (!command.line.isEmpty()) {
                err("unknown command '" + command.line + "' (leader, has, close)");
            }
        }
    }

    static int group(CuratorFramework client, String path, String id, String data) throws Exception {
        GroupMember member = new GroupMember(client, path, id,
                data.getBytes(StandardCharsets.UTF_8));
        BlockingQueue<Command> commands = stdinCommands();
        member.start();
        out("STARTED");
        for (;;) {
            Command command = commands.take();
            if (command == Command.EOF || command.line.equals("close")) {
                member.close();
                if (command != Command.EOF) {
                    out("CLOSED");
                }
                return EXIT_OK;
            } else if (command.line.equals("members")) {
                java.util.TreeMap<String, byte[]> sorted =
                        new java.util.TreeMap<>(member.getCurrentMembers());
                for (java.util.Map.Entry<String, byte[]> e : sorted.entrySet()) {
                    out("MEMBER " + e.getKey() + " "
                            + new String(e.getValue(), StandardCharsets.UTF_8));
                }
                out("END");
            } else if (command.line.startsWith("data ")) {
                member.setThisData(command.line.substring(5).getBytes(StandardCharsets.UTF_8));
                out("DATA");
            } else if (!command.line.isEmpty()) {
                err("unknown command '" + command.line + "' (members, data D, close)");
            }
        }
    }

    static int discovery(CuratorFramework client, String base, String service, String id)
            throws Exception {
        java.util.Map<String, Object> payload = new java.util.LinkedHashMap<>();
        payload.put("zone", "eu");
        org.apache.curator.x.discovery.ServiceInstance<Object> instance =
                org.apache.curator.x.discovery.ServiceInstance.builder()
                        .name(service).id(id).address("10.1.2.3").port(7001).sslPort(7443)
                        .payload((Object) payload).registrationTimeUTC(1700000000999L)
                        .serviceType(org.apache.curator.x.discovery.ServiceType.DYNAMIC)
                        .uriSpec(new org.apache.curator.x.discovery.UriSpec(
                                "{scheme}://{address}:{port}"))
                        .build();
        org.apache.curator.x.discovery.ServiceDiscovery<Object> discovery =
                org.apache.curator.x.discovery.ServiceDiscoveryBuilder.builder(Object.class)
                        .client(client).basePath(base).thisInstance(instance).build();
        org.apache.curator.x.discovery.details.JsonInstanceSerializer<Object> full =
                new org.apache.curator.x.discovery.details.JsonInstanceSerializer<>(
                        Object.class, false);
        BlockingQueue<Command> commands = stdinCommands();
        discovery.start();
        out("REGISTERED");
        for (;;) {
            Command command = commands.take();
            if (command == Command.EOF || command.line.equals("close")) {
                discovery.close();
                if (command != Command.EOF) {
                    out("CLOSED");
                }
                return EXIT_OK;
            } else if (command.line.equals("query")) {
                for (org.apache.curator.x.discovery.ServiceInstance<Object> i
                        : discovery.queryForInstances(service)) {
                    out("INSTANCE " + new String(full.serialize(i), StandardCharsets.UTF_8));
                }
                out("END");
            } else if (command.line.equals("pick")) {
                org.apache.curator.x.discovery.ServiceProvider<Object> provider =
                        discovery.serviceProviderBuilder().serviceName(service).build();
                provider.start();
                org.apache.curator.x.discovery.ServiceInstance<Object> i = provider.getInstance();
                out("PICK " + (i == null ? "-" : i.getId()));
                provider.close();
            } else if (!command.line.isEmpty()) {
                err("unknown command '" + command.line + "' (query, pick, close)");
            }
        }
    }

    static int discobench(CuratorFramework client, String base) throws Exception {
        org.apache.curator.x.discovery.ServiceDiscovery<Object> discovery =
                org.apache.curator.x.discovery.ServiceDiscoveryBuilder.builder(Object.class)
                        .client(client).basePath(base).build();
        java.util.Map<String, org.apache.curator.x.discovery.ServiceInstance<Object>> mine =
                new java.util.HashMap<>();
        BlockingQueue<Command> commands = stdinCommands();
        discovery.start();
        client.blockUntilConnected();
        out("READY");
        for (;;) {
            Command command = commands.take();
            if (command == Command.EOF || command.line.equals("quit")) {
                discovery.close();
                return EXIT_OK;
            }
            String[] w = command.line.split(" ");
            if (w[0].equals("register") && w.length == 3) {
                org.apache.curator.x.discovery.ServiceInstance<Object> instance =
                        org.apache.curator.x.discovery.ServiceInstance.builder()
                                .name(w[1]).id(w[2]).address("127.0.0.1").port(8080)
                                .serviceType(org.apache.curator.x.discovery.ServiceType.DYNAMIC)
                                .build();
                long t0 = System.nanoTime();
                discovery.registerService(instance);
                long t1 = System.nanoTime();
                mine.put(w[2], instance);
                out("REGISTERED " + t0 + " " + t1);
            } else if (w[0].equals("unregister") && w.length == 2) {
                discovery.unregisterService(mine.remove(w[1]));
                out("UNREGISTERED");
            } else if ((w[0].equals("lookup") && w.length == 4)
                    || (w[0].equals("list") && w.length == 3)) {
                boolean one = w[0].equals("lookup");
                int n = Integer.parseInt(w[w.length - 1]);
                StringBuilder line = new StringBuilder();
                int found = -1;
                for (int i = 0; i < n; i++) {
                    long t0 = System.nanoTime();
                    int k;
                    if (one) {
                        k = discovery.queryForInstance(w[1], w[2]) == null ? 0 : 1;
                    } else {
                        k = discovery.queryForInstances(w[1]).size();
                    }
                    long t1 = System.nanoTime();
                    if (found < 0) {
                        found = k;
                    }
                    line.append(' ').append(String.format(Locale.ROOT, "%.4f", (t1 - t0) / 1e6));
                }
                out("SAMPLES " + found + line);
            } else if (!command.line.isEmpty()) {
                err("unknown command '" + command.line + "' (register, unregister, lookup, list, quit)");
            }
        }
    }

    static int selector(CuratorFramework client, String path, String id, Path log) throws Exception {
        BlockingQueue<String> yields = new LinkedBlockingQueue<>();
        Object mu = new Object();
        boolean[] leading = { false };
        LeaderSelector selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework c) throws Exception {
                synchronized (mu) {
                    leading[0] = true;
                }
                append(log, entry("ENTER"));
                out("LEADER");
                try {
                    yields.take();
                } finally {
                    append(log, entry("EXIT"));
                    out("YIELDED");
                    synchronized (mu) {
                        leading[0] = false;
                        mu.notifyAll();
                    }
                }
            }
        });
        selector.setId(id);
        selector.autoRequeue();
        BlockingQueue<Command> commands = stdinCommands();
        selector.start();
        out("STARTED");
        for (;;) {
            Command command = commands.take();
            if (command == Command.EOF || command.line.equals("close")) {
                /* close() interrupts a running takeLeadership; wait for it to have logged. */
                selector.close();
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                synchronized (mu) {
                    while (leading[0] && System.nanoTime() < end) {
                        mu.wait(100);
                    }
                }
                if (command != Command.EOF) {
                    out("CLOSED");
                }
                return EXIT_OK;
            } else if (command.line.equals("leader")) {
                out(leaderLine(selector.getLeader()));
            } else if (command.line.equals("yield")) {
                yields.add("yield");
            } else if (!command.line.isEmpty()) {
                err("unknown command '" + command.line + "' (leader, yield)");
            }
        }
    }

    /* ---- counters and barriers ---- */

    static int count(CuratorFramework client, String path, int seed) throws Exception {
        BlockingQueue<Command> commands = stdinCommands();
        try (SharedCount sc = new SharedCount(client, path, seed)) {
            sc.start();
            VersionedValue<Integer> last = sc.getVersionedValue();
            out("STARTED");
            for (;;) {
                Command command = commands.take();
                if (command == Command.EOF || command.line.equals("close")) {
                    return EXIT_OK;
                }
                String[] w = command.line.split(" ");
                if (w[0].equals("get")) {
                    last = sc.getVersionedValue();
                    out("COUNT " + last.getValue() + " " + last.getVersion());
                } else if (w[0].equals("set") && w.length == 2) {
                    sc.setCount(Integer.parseInt(w[1]));
                    out("SET");
                } else if (w[0].equals("tryset") && w.length == 2) {
                    out("TRYSET " + sc.trySetCount(last, Integer.parseInt(w[1])));
                } else if (!command.line.isEmpty()) {
                    err("unknown command '" + command.line + "' (get, set N, tryset N)");
                }
            }
        }
    }

    static int atomic(CuratorFramework client, String path, String lockPath, int n)
            throws Exception {
        DistributedAtomicLong al = lockPath.equals("-")
                ? new DistributedAtomicLong(client, path, new RetryNTimes(10, 1))
                : new DistributedAtomicLong(client, path, new RetryNTimes(10, 1),
                        PromotedToLock.builder().lockPath(lockPath)
                                .retryPolicy(new RetryNTimes(1000, 1)).build());
        BlockingQueue<Command> commands = stdinCommands();
        out("READY");
        Command go = commands.take();
        if (go == Command.EOF) {
            return EXIT_OK;
        }
        int ok = 0, failed = 0;
        long optimistic = 0, promoted = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            AtomicValue<Long> v = al.increment();
            optimistic += v.getStats().getOptimisticTries();
            promoted += v.getStats().getPromotedLockTries();
            if (v.succeeded()) {
                ok++;
            } else {
                failed++;
            }
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        out(String.format(Locale.ROOT, "DONE %d %d %d %d %.3f", ok, failed, optimistic, promoted,
                secs > 0 ? n / secs : 0.0));
        return EXIT_OK;
    }

    static int dbarrier(CuratorFramework client, String path, int members, long timeoutMs)
            throws Exception {
        DistributedDoubleBarrier b = new DistributedDoubleBarrier(client, path, members);
        BlockingQueue<Command> commands = stdinCommands();
        if (!b.enter(timeoutMs, TimeUnit.MILLISECONDS)) {
            out("TIMEOUT");
            return EXIT_TIMEOUT;
        }
        out("ENTERED");
        for (;;) {
            Command command = commands.take();
            if (command == Command.EOF || command.line.equals("leave")) {
                boolean left = b.leave(timeoutMs, TimeUnit.MILLISECONDS);
                out(left ? "LEFT" : "TIMEOUT");
                return left ? EXIT_OK : EXIT_TIMEOUT;
            } else if (!command.line.isEmpty()) {
                err("unknown command '" + command.line + "' (leave)");
            }
        }
    }

    static int barrier(CuratorFramework client, String path) throws Exception {
        DistributedBarrier b = new DistributedBarrier(client, path);
        BlockingQueue<Command> commands = stdinCommands();
        out("READY");
        for (;;) {
            Command command = commands.take();
            if (command == Command.EOF || command.line.equals("close")) {
                return EXIT_OK;
            }
            String[] w = command.line.split(" ");
            if (w[0].equals("set") && w.length == 1) {
                b.setBarrier();
                out("SET");
            } else if (w[0].equals("remove") && w.length == 1) {
                b.removeBarrier();
                out("REMOVED");
            } else if (w[0].equals("wait") && w.length == 2) {
                out("WAITING");
                boolean down = b.waitOnBarrier(Long.parseLong(w[1]), TimeUnit.MILLISECONDS);
                out(down ? "RELEASED" : "TIMEOUT");
            } else if (!command.line.isEmpty()) {
                err("unknown command '" + command.line + "' (set, remove, wait MS, close)");
            }
        }
    }

    static int order(Peer peer) throws Exception {
        StringBuilder sb = new StringBuilder();
        for (String n : peer.participants()) {
            sb.append("NODE ").append(n).append('\n');
        }
        sb.append("END");
        out(sb.toString());
        return EXIT_OK;
    }

    static int loop(Peer peer, int iterations, Path counter, Path log) throws Exception {
        long pid = ProcessHandle.current().pid();
        String tag = peer.kind.equals("read") ? "R " : peer.kind.equals("write") ? "W " : "";
        boolean writes = !peer.kind.equals("read");
        for (int i = 0; i < iterations; i++) {
            peer.acquire(-1);
            try {
                append(log, "ENTER " + tag + pid + " " + System.nanoTime() + "\n");
                long value = readCounter(counter);
                Thread.sleep(1 + ThreadLocalRandom.current().nextInt(3));
                if (writes) {
                    Files.write(counter, (Long.toString(value + 1) + "\n").getBytes(StandardCharsets.US_ASCII));
                }
                append(log, "EXIT " + tag + pid + " " + System.nanoTime() + "\n");
            } finally {
                peer.release();
            }
        }
        out("DONE");
        return EXIT_OK;
    }

    static int bench(Peer peer, int cycles, int warmup) throws Exception {
        if (!peer.kind.equals("mutex") && !peer.kind.equals("semaphore")) {
            throw new IllegalArgumentException("bench: KIND must be mutex or semaphore, not '"
                    + peer.kind + "'");
        }
        if (cycles < 1 || warmup < 0) {
            throw new IllegalArgumentException("bench: CYCLES must be >= 1 and WARMUP >= 0");
        }
        for (int i = 0; i < warmup; i++) {
            peer.acquire(-1);
            peer.release();
        }
        double[] ms = new double[cycles];
        /* Start the timed cycles on an empty young generation. */
        System.gc();
        long t0 = System.nanoTime();
        for (int i = 0; i < cycles; i++) {
            long c0 = System.nanoTime();
            peer.acquire(-1);
            peer.release();
            ms[i] = (System.nanoTime() - c0) / 1e6;
        }
        long elapsed = System.nanoTime() - t0;
        Arrays.sort(ms);
        double rate = elapsed > 0 ? cycles / (elapsed / 1e9) : 0.0;
        out(String.format(Locale.ROOT, "BENCH %.3f %.6f %.6f", rate, percentile(ms, 50),
                percentile(ms, 99)));
        return EXIT_OK;
    }

    /** What the contending threads share; last* are written by the holder only. */
    static final class Contention {
        volatile long lastRelease;
        volatile int lastHolder = -1;
        final double[] ms;
        /* Hand-offs recorded (mutex), or acquisitions started in this phase (recipes). */
        final AtomicInteger count = new AtomicInteger();
        volatile boolean measuring;

        Contention(int capacity) {
            ms = new double[capacity];
        }

        void held(int me) {
            long now = System.nanoTime();
            int prev = lastHolder;
            if (measuring && prev >= 0 && prev != me) {
                int i = count.getAndIncrement();
                if (i < ms.length) {
                    ms[i] = (now - lastRelease) / 1e6;
                }
            }
            lastHolder = me;
            lastRelease = System.nanoTime();
        }
    }

    /** One contending client's lock: what acquisition n (counted over all clients within
     *  the phase) takes, and its release. */
    interface Contended {
        void acquire(long n) throws Exception;

        void release() throws Exception;
    }

    /** Paths of the multi-lock's parts, as bench/zkit-bench lays out its own. */
    static List<String> multiLockPaths(String path) {
        List<String> paths = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            paths.add(ZKPaths.makePath(path, "part-" + i));
        }
        return paths;
    }

    /** The lock of one client for contend KIND; zkit-bench's recipe rows do the same. */
    static Contended contended(String kind, CuratorFramework client, String path) {
        switch (kind) {
        case "mutex": {
            InterProcessMutex m = new InterProcessMutex(client, path);
            return new Contended() {
                public void acquire(long n) throws Exception {
                    m.acquire();
                }

                public void release() throws Exception {
                    m.release();
                }
            };
        }
        case "semaphore": {
            InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(client, path, 4);
            return new Contended() {
                Lease lease;

                public void acquire(long n) throws Exception {
                    lease = s.acquire();
                }

                public void release() throws Exception {
                    s.returnLease(lease);
                    lease = null;
                }
            };
        }
        case "rwlock": {
            InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
            return new Contended() {
                InterProcessMutex held;

                /* A writer on every tenth acquisition, as zkit-bench's rwlock row. */
                public void acquire(long n) throws Exception {
                    InterProcessMutex half = n % 10 == 0 ? rw.writeLock() : rw.readLock();
                    half.acquire();
                    held = half;
                }

                public void release() throws Exception {
                    held.release();
                    held = null;
                }
            };
        }
        case "multi": {
            InterProcessMultiLock m = new InterProcessMultiLock(client, multiLockPaths(path));
            return new Contended() {
                public void acquire(long n) throws Exception {
                    m.acquire();
                }

                public void release() throws Exception {
                    m.release();
                }
            };
        }
        default:
            throw new IllegalArgumentException("contend: unknown KIND '" + kind
                    + "' (mutex, semaphore, rwlock, multi)");
        }
    }

    static int contend(String connect, String kind, String path, int clients, int total)
            throws Exception {
        if (clients < 1 || total < clients) {
            throw new IllegalArgumentException("contend: CLIENTS >= 1, ACQUISITIONS >= CLIENTS");
        }
        final boolean handoff = kind.equals("mutex");
        final int per = (total + clients - 1) / clients;
        final int warm = Math.max(1, per / 2);
        final Contention c = new Contention(per * clients);
        final CuratorFramework[] cs = new CuratorFramework[clients];
        final Contended[] locks = new Contended[clients];
        final CyclicBarrier barrier = new CyclicBarrier(clients);
        final long[] span = new long[2];
        final long[] packets = { -1, -1 };
        final AtomicReference<Exception> failure = new AtomicReference<>();
        Thread[] ts = new Thread[clients];
        /* SIGTERM / SIGINT: close the sessions so their nodes go at once. */
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (CuratorFramework f : cs) {
                if (f != null) {
                    f.close();
                }
            }
        }));
        for (int i = 0; i < clients; i++) {
            cs[i] = CuratorFrameworkFactory.builder().connectString(connect)
                    .sessionTimeoutMs(10000).retryPolicy(new ExponentialBackoffRetry(100, 3))
                    .build();
            cs[i].start();
            cs[i].blockUntilConnected(30, TimeUnit.SECONDS);
            locks[i] = contended(kind, cs[i], path);
        }
        for (int i = 0; i < clients; i++) {
            final int me = i;
            ts[i] = new Thread(() -> {
                Contended lock = locks[me];
                try {
                    for (int phase = 0; phase < 2; phase++) {
                        if (barrier.await() == 0) {
                            c.measuring = phase == 1;
                            c.lastHolder = -1;
                            c.count.set(0);
                            if (phase == 1) {
                                packets[0] = packetsReceived(connect);
                                span[0] = System.nanoTime();
                            }
                        }
                        barrier.await();
                        for (int j = 0; j < (phase == 0 ? warm : per); j++) {
                            if (handoff) {
                                lock.acquire(j);
                                c.held(me);
                            } else {
                                int n = c.count.getAndIncrement();
                                long t0 = System.nanoTime();
                                lock.acquire(n);
                                if (c.measuring && n < c.ms.length) {
                                    c.ms[n] = (System.nanoTime() - t0) / 1e6;
                                }
                            }
                            lock.release();
                        }
                        if (barrier.await() == 0 && phase == 1) {
                            /* every client done, none closed yet */
                            packets[1] = packetsReceived(connect);
                        }
                        if (phase == 1) {
                            synchronized (span) {
                                span[1] = Math.max(span[1], System.nanoTime());
                            }
                        }
                    }
                } catch (Exception e) {
                    failure.compareAndSet(null, e);
                    barrier.reset();
                }
            });
            ts[i].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        for (CuratorFramework f : cs) {
            f.close();
        }
        if (failure.get() != null) {
            throw failure.get();
        }
        int n = Math.min(c.count.get(), c.ms.length);
        if (n == 0) {
            throw new IllegalStateException("contend: nothing measured");
        }
        double[] ms = Arrays.copyOf(c.ms, n);
        Arrays.sort(ms);
        out(String.format(Locale.ROOT, "BENCH %.3f %.6f %.6f %d %d %d %d",
                (double) per * clients / ((span[1] - span[0]) / 1e9), percentile(ms, 50),
                percentile(ms, 99), n, (long) (warm + per) * clients, (long) per * clients,
                packets[0] >= 0 && packets[1] >= packets[0] ? packets[1] - packets[0] : -1));
        return EXIT_OK;
    }

    /**
     * zk_packets_received of the first server in CONNECT (host:port[,...][/chroot]), read with
     * the mntr four-letter word as bench/server_stats.c reads it; -1 when it cannot be read.
     */
    static long packetsReceived(String connect) {
        String first = connect.split(",")[0];
        int slash = first.indexOf('/');
        if (slash >= 0) {
            first = first.substring(0, slash);
        }
        int colon = first.lastIndexOf(':');
        try (java.net.Socket s = new java.net.Socket(first.substring(0, colon),
                Integer.parseInt(first.substring(colon + 1)))) {
            s.setSoTimeout(5000);
            s.getOutputStream().write("mntr".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            s.getOutputStream().flush();
            java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(
                    s.getInputStream(), java.nio.charset.StandardCharsets.US_ASCII));
            for (String line; (line = in.readLine()) != null;) {
                if (line.startsWith("zk_packets_received\t")) {
                    return Long.parseLong(line.substring(line.indexOf('\t') + 1).trim());
                }
            }
        } catch (Exception e) {
            return -1;
        }
        return -1;
    }

    /** Nearest rank over sorted samples, as demo_percentile in examples/demo_util.c. */
    static double percentile(double[] sorted, double p) {
        int n = sorted.length;
        int rank = (int) ((p / 100.0) * n + 0.999999);
        rank = Math.max(1, Math.min(n, rank));
        return sorted[rank - 1];
    }

    /** One write(2) on an O_APPEND descriptor, so lines of concurrent peers never mix. */
    static void append(Path file, String line) throws IOException {
        try (OutputStream os = new FileOutputStream(file.toFile(), true)) {
            os.write(line.getBytes(StandardCharsets.US_ASCII));
        }
    }

    static long readCounter(Path counter) throws IOException {
        String s;
        try {
            s = new String(Files.readAllBytes(counter), StandardCharsets.US_ASCII).trim();
        } catch (NoSuchFileException e) {
            return 0;
        }
        if (s.isEmpty()) {
            return 0;
        }
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new IOException("counter file " + counter + " holds '" + s + "'");
        }
    }
}
