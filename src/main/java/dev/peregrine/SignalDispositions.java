package dev.peregrine;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Gives the server back the signals it is driven by when the process was started with them ignored.
 *
 * <p>{@code nohup}, some init systems and a shell's background jobs start a program with SIGHUP (or
 * SIGINT) ignored, and an ignored disposition survives exec. HotSpot then refuses to handle the
 * signal: {@code sun.misc.Signal.handle} silently installs nothing, so SIGHUP would never replace the
 * workers and nothing would say so. The server asks for these signals itself, so it takes them back
 * (to the default action, until its own handlers are installed a moment later). bin/peregrine cannot
 * do it, since a non-interactive bash cannot un-ignore a signal that was ignored when it started.
 */
final class SignalDispositions {
    private static final int SIGHUP = 1;
    private static final int SIGINT = 2;
    private static final int SIGTERM = 15;
    /** glibc's {@code struct sigaction} is 152 bytes on x86-64 and aarch64; the handler is its first field. */
    private static final long SIGACTION_SIZE = 256;
    private static final long SIG_IGN = 1;

    private SignalDispositions() {}

    /** Resets SIGHUP, SIGINT and SIGTERM to their default action where they are ignored; the names of those that were. */
    static List<String> resetIgnored() {
        List<String> reset = new ArrayList<>();
        try {
            Linker linker = Linker.nativeLinker();
            MethodHandle sigaction = linker.downcallHandle(linker.defaultLookup().find("sigaction").orElseThrow(),
                    FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
            MethodHandle signal = linker.downcallHandle(linker.defaultLookup().find("signal").orElseThrow(),
                    FunctionDescriptor.of(ADDRESS, JAVA_INT, ADDRESS));
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment old = arena.allocate(SIGACTION_SIZE, 16);
                for (int sig : new int[] {SIGHUP, SIGINT, SIGTERM}) {
                    // Only a query first: a disposition that is not "ignore" (the JVM's own handler) stays as it is.
                    if ((int) sigaction.invokeExact(sig, MemorySegment.NULL, old) != 0) continue;
                    if (old.get(JAVA_LONG, 0) != SIG_IGN) continue;
                    MemorySegment previous = (MemorySegment) signal.invokeExact(sig, MemorySegment.NULL);
                    if (previous.address() == SIG_IGN) reset.add(sig == SIGHUP ? "SIGHUP" : sig == SIGINT ? "SIGINT" : "SIGTERM");
                }
            }
        } catch (Throwable e) {
            // Not Linux/glibc-like: the signals keep whatever disposition they came with.
        }
        return reset;
    }
}
