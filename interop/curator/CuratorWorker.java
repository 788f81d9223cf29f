// A small Apache Curator process that Python drives over stdin/stdout, one command per
// line, one reply line per command: "ok [words...]" or "err <class>: <message>".
// It is the Java reference in the benchmarks and the Curator peer in interop tests;
// interop/curator/harness.py compiles it (outside the source tree) and starts it.
//
// Commands (words separated by single spaces; names and paths hold no whitespace):
//   info                          -> ok curator=<v> zookeeper=<v> java=<v>
//   clock                         -> ok <System.nanoTime()>
//   connect HOSTS SESSION_MS      -> ok          (one CuratorFramework = one session)
//   disconnect                    -> ok          (closes the session; locks are forgotten)
//   mutex NAME PATH               -> ok          InterProcessMutex
//   rwlock NAME PATH              -> ok          NAME.read and NAME.write
//   semaphore NAME PATH PERMITS   -> ok          InterProcessSemaphoreV2
//   acquire NAME [TIMEOUT_MS]     -> ok 1 | ok 0 (0: the timeout passed first)
//   release NAME                  -> ok
//   cycles NAME N                 -> ok <ns> ... (N acquire+release, each timed)
//   contend NAME START_NS END_NS  -> ok <acquired_ns>:<released_ns> ...
//                                    (waits until START_NS, then cycles until END_NS)
//   begin NAME                    -> ok          acquire on a thread of its own, and hold
//   held NAME TIMEOUT_MS          -> ok 1 | ok 0 (1: the thread holds NAME now)
//   end NAME                      -> ok          that thread releases; waits until it has
//   count NAME PATH N             -> ok          N times: acquire, read the integer in
//                                    PATH's data, pause 2 ms, write it + 1, release
//                                    (a non-atomic update: only the lock keeps it exact)
//   revocable NAME                -> ok          makeRevocable on mutex NAME (before acquire)
//   revoked NAME TIMEOUT_MS       -> ok 1 | ok 0 (1: NAME's revocation listener was called)
//   revoke NODE_PATH              -> ok          Revoker.attemptRevoke on a holder's node
//   quit                          -> ok, then exits (so does end of input)
//
// Times are System.nanoTime(); the harness maps them onto Python's time.monotonic().

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.RetryNTimes;

public final class CuratorWorker {
    /** What the commands need of any recipe: Curator's mutexes and a semaphore lease. */
    private interface Handle {
        boolean acquire(long timeoutMs) throws Exception; // timeoutMs < 0: no timeout

        void release() throws Exception;
    }

    private static final class MutexHandle implements Handle {
        private final InterProcessMutex mutex;

        MutexHandle(InterProcessMutex mutex) {
            this.mutex = mutex;
        }

        public boolean acquire(long timeoutMs) throws Exception {
            if (timeoutMs < 0) {
                mutex.acquire();
                return true;
            }
            return mutex.acquire(timeoutMs, TimeUnit.MILLISECONDS);
        }

        public void release() throws Exception {
            mutex.release();
        }
    }

    private static final class SemaphoreHandle implements Handle {
        private final InterProcessSemaphoreV2 semaphore;
        private Lease lease;

        SemaphoreHandle(InterProcessSemaphoreV2 semaphore) {
            this.semaphore = semaphore;
        }

        public boolean acquire(long timeoutMs) throws Exception {
            if (lease != null) {
                throw new IllegalStateException("this worker already holds a lease of it");
            }
            lease = timeoutMs < 0
                    ? semaphore.acquire()
                    : semaphore.acquire(timeoutMs, TimeUnit.MILLISECONDS);
            return lease != null;
        }

        public void release() throws Exception {
            if (lease == null) {
                throw new IllegalStateException("no lease held");
            }
            Lease held = lease;
            lease = null;
            semaphore.returnLease(held);
        }
    }

    /** A lock held on a thread of its own (Curator's mutexes belong to a thread). */
    private static final class Background {
        final CountDownLatch held = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        volatile Exception error;
        Thread thread;
    }

    private CuratorFramework client;
    private final Map<String, Handle> handles = new HashMap<>();
    private final Map<String, Background> background = new HashMap<>();
    private final Map<String, CountDownLatch> revocations = new HashMap<>();
    private final Map<String, LeaderLatch> latches = new HashMap<>();
    private final Map<String, Selector> selectors = new HashMap<>();

    /** A LeaderSelector candidate that leads (takeLeadership runs) until told to stop. */
    private static final class Selector extends LeaderSelectorListenerAdapter {
        final CountDownLatch leading = new CountDownLatch(1);
        final CountDownLatch stop = new CountDownLatch(1);
        LeaderSelector selector;

        @Override
        public void takeLeadership(CuratorFramework client) throws Exception {
            leading.countDown();
            stop.await();
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        CuratorWorker worker = new CuratorWorker();
        String line;
        while ((line = in.readLine()) != null) {
            String reply;
            boolean quit = line.equals("quit");
            try {
                reply = quit ? "ok" : worker.run(line.split(" "));
            } catch (Exception e) {
                String message = String.valueOf(e.getMessage()).replace('\n', ' ');
                reply = "err " + e.getClass().getName() + ": " + message;
            }
            out.println(reply);
            out.flush();
            if (quit) {
                break;
            }
        }
        worker.disconnect();
        System.exit(0); // Curator's and ZooKeeper's threads must not keep us alive
    }

    private String run(String[] w) throws Exception {
        switch (w[0]) {
            case "info":
                return "ok curator=" + curatorVersion()
                        + " zookeeper=" + org.apache.zookeeper.Version.getFullVersion()
                                .split("[ ,-]")[0]
                        + " java=" + System.getProperty("java.version");
            case "clock":
                return "ok " + System.nanoTime();
            case "connect":
                connect(w[1], Integer.parseInt(w[2]));
                return "ok";
            case "disconnect":
                disconnect();
                return "ok";
            case "mutex":
                handles.put(w[1], new MutexHandle(new InterProcessMutex(client(), w[2])));
                return "ok";
            case "rwlock": {
                InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client(), w[2]);
                handles.put(w[1] + ".read", new MutexHandle(rw.readLock()));
                handles.put(w[1] + ".write", new MutexHandle(rw.writeLock()));
                return "ok";
            }
            case "semaphore":
                handles.put(w[1], new SemaphoreHandle(
                        new InterProcessSemaphoreV2(client(), w[2], Integer.parseInt(w[3]))));
                return "ok";
            case "acquire": {
                long timeout = w.length > 2 ? Long.parseLong(w[2]) : -1;
                return handle(w[1]).acquire(timeout) ? "ok 1" : "ok 0";
            }
            case "release":
                handle(w[1]).release();
                return "ok";
            case "cycles":
                return cycles(handle(w[1]), Integer.parseInt(w[2]));
            case "contend":
                return contend(handle(w[1]), Long.parseLong(w[2]), Long.parseLong(w[3]));
            case "begin":
                begin(w[1]);
                return "ok";
            case "held": {
                Background b = running(w[1]);
                boolean held = b.held.await(Long.parseLong(w[2]), TimeUnit.MILLISECONDS);
                if (b.error != null) {
                    throw b.error;
                }
                return held ? "ok 1" : "ok 0";
            }
            case "end":
                end(w[1]);
                return "ok";
            case "count":
                count(handle(w[1]), w[2], Integer.parseInt(w[3]));
                return "ok";
            case "revocable": {
                Handle h = handle(w[1]);
                if (!(h instanceof MutexHandle)) {
                    throw new IllegalArgumentException(w[1] + " is not a mutex");
                }
                CountDownLatch told = new CountDownLatch(1);
                revocations.put(w[1], told);
                ((MutexHandle) h).mutex.makeRevocable(lock -> told.countDown());
                return "ok";
            }
            case "revoked": {
                CountDownLatch told = revocations.get(w[1]);
                if (told == null) {
                    throw new IllegalArgumentException(w[1] + " is not revocable");
                }
                return told.await(Long.parseLong(w[2]), TimeUnit.MILLISECONDS) ? "ok 1" : "ok 0";
            }
            case "revoke":
                Revoker.attemptRevoke(client(), w[1]);
                return "ok";
            case "latch": { // latch NAME PATH ID: a LeaderLatch candidate, started
                LeaderLatch latch = new LeaderLatch(client(), w[2], w[3]);
                latches.put(w[1], latch);
                latch.start();
                return "ok";
            }
            case "leads": { // leads NAME MILLIS: leadership within that time?
                LeaderLatch latch = latch(w[1]);
                return latch.await(Long.parseLong(w[2]), TimeUnit.MILLISECONDS) ? "ok 1" : "ok 0";
            }
            case "leader": // leader NAME: the id getLeader() reads (empty: nobody)
                return "ok " + latch(w[1]).getLeader().getId();
            case "unlatch": // unlatch NAME: close (steps down, its node deleted)
                latches.remove(w[1]).close();
                return "ok";
            case "selector": { // selector NAME PATH ID: a LeaderSelector candidate, started
                Selector s = new Selector();
                s.selector = new LeaderSelector(client(), w[2], s);
                s.selector.setId(w[3]);
                selectors.put(w[1], s);
                s.selector.start();
                return "ok";
            }
            case "selects": { // selects NAME MILLIS: leadership within that time?
                Selector s = selector(w[1]);
                return s.leading.await(Long.parseLong(w[2]), TimeUnit.MILLISECONDS)
                        ? "ok 1" : "ok 0";
            }
            case "selected": // selected NAME: the id getLeader() reads
                return "ok " + selector(w[1]).selector.getLeader().getId();
            case "unselect": { // unselect NAME: takeLeadership returns, the selector closes
                Selector s = selectors.remove(w[1]);
                s.stop.countDown();
                s.selector.close();
                return "ok";
            }
            default:
                throw new IllegalArgumentException("unknown command " + w[0]);
        }
    }

    private Selector selector(String name) {
        Selector s = selectors.get(name);
        if (s == null) {
            throw new IllegalArgumentException(name + " is not a selector");
        }
        return s;
    }

    private LeaderLatch latch(String name) {
        LeaderLatch latch = latches.get(name);
        if (latch == null) {
            throw new IllegalArgumentException(name + " is not a latch");
        }
        return latch;
    }

    private void begin(String name) {
        Handle handle = handle(name);
        if (background.containsKey(name)) {
            throw new IllegalStateException(name + " is already begun");
        }
        Background b = new Background();
        b.thread = new Thread(() -> {
            try {
                handle.acquire(-1);
                b.held.countDown();
                b.release.await();
                handle.release();
            } catch (Exception e) {
                b.error = e;
                b.held.countDown();
            }
        });
        b.thread.setDaemon(true);
        background.put(name, b);
        b.thread.start();
    }

    private Background running(String name) {
        Background b = background.get(name);
        if (b == null) {
            throw new IllegalArgumentException(name + " is not begun");
        }
        return b;
    }

    private void end(String name) throws Exception {
        Background b = running(name);
        b.release.countDown();
        if (b.held.getCount() > 0) {
            b.thread.interrupt(); // a waiter gives up its place (Curator deletes its node)
        }
        b.thread.join(60_000);
        background.remove(name);
        if (b.error != null && !(b.error instanceof InterruptedException)) {
            throw b.error;
        }
    }

    private void count(Handle handle, String path, int n) throws Exception {
        for (int i = 0; i < n; i++) {
            handle.acquire(-1);
            try {
                byte[] data = client().getData().forPath(path);
                String text = new String(data, StandardCharsets.UTF_8).trim();
                int value = text.isEmpty() ? 0 : Integer.parseInt(text);
                Thread.sleep(2);
                client().setData().forPath(path, Integer.toString(value + 1)
                        .getBytes(StandardCharsets.UTF_8));
            } finally {
                handle.release();
            }
        }
    }

    private void connect(String hosts, int sessionMs) throws Exception {
        if (client != null) {
            throw new IllegalStateException("already connected; disconnect first");
        }
        CuratorFramework fresh = CuratorFrameworkFactory.builder()
                .connectString(hosts)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(15_000)
                .retryPolicy(new RetryNTimes(3, 100))
                // The ensemble tracker watches /zookeeper/config: a watch per session
                // that has nothing to do with locks and would blur the watch counts.
                .ensembleTracker(false)
                .build();
        fresh.start();
        if (!fresh.blockUntilConnected(30, TimeUnit.SECONDS)) {
            fresh.close();
            throw new IllegalStateException("no connection to " + hosts + " within 30 s");
        }
        client = fresh;
    }

    private void disconnect() {
        handles.clear();
        if (client != null) {
            client.close();
            client = null;
        }
    }

    private CuratorFramework client() {
        if (client == null) {
            throw new IllegalStateException("not connected");
        }
        return client;
    }

    private Handle handle(String name) {
        Handle handle = handles.get(name);
        if (handle == null) {
            throw new IllegalArgumentException("no lock named " + name);
        }
        return handle;
    }

    private static String cycles(Handle handle, int n) throws Exception {
        long[] took = new long[n];
        for (int i = 0; i < n; i++) {
            long t0 = System.nanoTime();
            handle.acquire(-1);
            handle.release();
            took[i] = System.nanoTime() - t0;
        }
        StringBuilder reply = new StringBuilder("ok");
        for (long t : took) {
            reply.append(' ').append(t);
        }
        return reply.toString();
    }

    private static String contend(Handle handle, long start, long end) throws Exception {
        long now;
        while ((now = System.nanoTime()) < start) {
            LockSupport.parkNanos(start - now);
        }
        StringBuilder reply = new StringBuilder("ok");
        while (System.nanoTime() < end) {
            handle.acquire(-1);
            long acquired = System.nanoTime();
            long released = System.nanoTime();
            handle.release();
            reply.append(' ').append(acquired).append(':').append(released);
        }
        return reply.toString();
    }

    /** From the jar's Maven metadata: Debian's jars carry no Implementation-Version. */
    private static String curatorVersion() throws java.io.IOException {
        String resource = "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties";
        try (java.io.InputStream in = InterProcessMutex.class.getResourceAsStream(resource)) {
            if (in == null) {
                return "unknown";
            }
            java.util.Properties pom = new java.util.Properties();
            pom.load(in);
            return pom.getProperty("version", "unknown");
        }
    }
}
