package dev.peregrine.server;

import dev.peregrine.http.Connections;
import org.jboss.logging.Logger;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Keeps the I/O thread and the application's thread on one core while the worker has one or two
 * connections open, and gives both back the cores they had once it has more, or none.
 *
 * <p>Why: with a connection or two, a request or a WebSocket message goes from the I/O thread to the
 * application's thread and back, one after the other, and nothing runs in parallel. On two cores each
 * hand-over wakes a thread that sleeps on the other core, an interrupt between processors, which a
 * virtual machine makes dear: at one connection the hypervisor's wake-up path was most of the Python
 * thread's time. On one core the hand-over is a switch between two threads of that core. WebSocket echo
 * at one connection went from 0.71x-0.87x uvicorn's messages per second to 1.08x-1.21x
 * (docs/benchmarks/websocket.md). With more connections the two threads work in parallel, each on a
 * core of its own, which is where Peregrine's lead at 64 connections comes from; so beyond
 * {@link PollBeforeSleep#MAX_CHANNELS} they are let go.
 *
 * <p>Asked for with --share-core, since a thread inherits the cores of the thread that starts it: a
 * thread pool the application grows while its thread is held (an executor's threads, anyio's for sync
 * routes, OpenMP's, which also sizes itself from the cores it may use) keeps that one core for good.
 * Only for one worker process with one application thread (an ASGI loop, or one WSGI thread): two
 * worker processes would each pick the core their I/O thread is on, and could pick the same one. The
 * kernel's own scheduler has no rule for this: it spreads runnable threads over idle cores, and keeps a
 * woken thread near its waker only when that core is free.
 */
final class CoreSharing {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /** Room for 1,024 CPUs, glibc's cpu_set_t. */
    private static final long MASK_BYTES = 128;
    private static final Natives NATIVES = Natives.find().orElse(null);

    /** Client connections over TCP and QUIC: the I/O thread's channels also count a QUIC socket and the shared store's. */
    private final Connections connections;
    /** The OS thread id of the one application thread; 0 while none started, -1 once a second did. */
    private volatile int partner;
    private final MemorySegment partnerCores = Arena.global().allocate(MASK_BYTES);
    // The I/O thread's own; on that thread only.
    private final MemorySegment ioCores = Arena.global().allocate(MASK_BYTES);
    private final MemorySegment oneCore = Arena.global().allocate(MASK_BYTES);
    private boolean ioCoresKnown;
    private boolean shared;
    private boolean failed;

    private CoreSharing(Connections connections) {
        this.connections = connections;
    }

    /** When asked for and this worker is the only one, on Linux; null otherwise. */
    static CoreSharing forSingleWorker(boolean asked, Connections connections) {
        if (!asked) return null;
        if (NATIVES == null) LOG.warn("--share-core: this system has no sched_setaffinity; the option does nothing here");
        return NATIVES == null ? null : new CoreSharing(connections);
    }

    /** Run first thing on each thread that will run the application. */
    void adoptCurrentThread() {
        synchronized (this) {
            if (partner != 0) {
                if (partner > 0) LOG.warn("--share-core: the application runs on several threads, which keep the cores the kernel gives them");
                partner = -1;
                return;
            }
            if (NATIVES.getAffinity(0, partnerCores) != 0) {
                partner = -1;
                return;
            }
            partner = NATIVES.tid();
        }
    }

    /** On the I/O thread, at each turn of its loop: how many connections the worker serves decides. */
    void update() {
        int open = connections.open();
        boolean want = open > 0 && open <= PollBeforeSleep.MAX_CHANNELS;
        if (want == shared || failed) return;
        int tid = partner;
        if (tid <= 0) return;
        // A thread id is reused once its thread ends: only ever one of this process's threads.
        if (!Files.exists(Path.of("/proc/self/task/" + tid))) {
            partner = -1;
            return;
        }
        shared = want;
        if (want) {
            if (!ioCoresKnown && NATIVES.getAffinity(0, ioCores) != 0) {
                giveUp("sched_getaffinity");
                return;
            }
            ioCoresKnown = true;
            int cpu = NATIVES.cpu();
            if (cpu < 0 || cpu >= MASK_BYTES * 8) {
                giveUp("sched_getcpu");
                return;
            }
            oneCore.fill((byte) 0);
            oneCore.set(JAVA_BYTE, cpu / 8, (byte) (1 << (cpu % 8)));
            if (NATIVES.setAffinity(0, oneCore) != 0 || NATIVES.setAffinity(tid, oneCore) != 0) giveUp("sched_setaffinity");
        } else {
            NATIVES.setAffinity(0, ioCores);
            NATIVES.setAffinity(tid, partnerCores);
        }
    }

    /** A system call refused (a seccomp profile, a thread gone): both threads keep or get back their cores. */
    private void giveUp(String call) {
        failed = true;
        if (ioCoresKnown) NATIVES.setAffinity(0, ioCores);
        int tid = partner;
        if (tid > 0) NATIVES.setAffinity(tid, partnerCores);
        LOG.debugf("%s failed: the I/O thread and the application's thread no longer share a core at few connections", call);
    }

    /** glibc's thread and affinity calls, when this libc has them all. */
    private record Natives(MethodHandle gettid, MethodHandle schedGetcpu, MethodHandle getaffinity, MethodHandle setaffinity) {
        static Optional<Natives> find() {
            if (!System.getProperty("os.name", "").startsWith("Linux")) return Optional.empty();
            Linker linker = Linker.nativeLinker();
            FunctionDescriptor affinity = FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS);
            try {
                return Optional.of(new Natives(
                        handle(linker, "gettid", FunctionDescriptor.of(JAVA_INT)),
                        handle(linker, "sched_getcpu", FunctionDescriptor.of(JAVA_INT)),
                        handle(linker, "sched_getaffinity", affinity),
                        handle(linker, "sched_setaffinity", affinity)));
            } catch (RuntimeException e) {
                return Optional.empty();
            }
        }

        private static MethodHandle handle(Linker linker, String name, FunctionDescriptor descriptor) {
            return linker.downcallHandle(linker.defaultLookup().find(name).orElseThrow(), descriptor);
        }

        int tid() {
            try {
                return (int) gettid.invokeExact();
            } catch (Throwable t) {
                return -1;
            }
        }

        int cpu() {
            try {
                return (int) schedGetcpu.invokeExact();
            } catch (Throwable t) {
                return -1;
            }
        }

        int getAffinity(int tid, MemorySegment mask) {
            try {
                return (int) getaffinity.invokeExact(tid, MASK_BYTES, mask);
            } catch (Throwable t) {
                return -1;
            }
        }

        int setAffinity(int tid, MemorySegment mask) {
            try {
                return (int) setaffinity.invokeExact(tid, MASK_BYTES, mask);
            } catch (Throwable t) {
                return -1;
            }
        }
    }
}
