package dev.peregrine.workers;

import io.netty.channel.Channel;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** One worker child process as the supervisor sees it. Touched only by the supervisor's thread, except the control channel. */
final class WorkerProcess {
    final int position;
    /** Where this process counts in the shared metrics file, or -1 without metrics. */
    final int metricsSlot;
    final Process process;
    final long startedNanos = System.nanoTime();
    volatile Channel control;
    boolean ready;
    boolean draining;

    private WorkerProcess(int position, int metricsSlot, Process process) {
        this.position = position;
        this.metricsSlot = metricsSlot;
        this.process = process;
    }

    /**
     * Starts this very program again, with the same JVM, JVM options and arguments, as worker
     * {@code position + 1}: the child parses the same command line and configuration, and the
     * environment tells it that it is a worker and where its supervisor listens.
     */
    static WorkerProcess start(int position, String controlSocket, Map<String, String> environment, int metricsSlot) throws IOException {
        ProcessHandle.Info self = ProcessHandle.current().info();
        List<String> command = new ArrayList<>();
        command.add(self.command().orElseThrow(() -> new IOException("cannot tell which java runs this process")));
        command.addAll(List.of(self.arguments().orElseThrow(() -> new IOException("cannot read this process's arguments"))));
        ProcessBuilder builder = new ProcessBuilder(command)
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                .redirectOutput(ProcessBuilder.Redirect.INHERIT)
                .redirectError(ProcessBuilder.Redirect.INHERIT);
        builder.environment().put(ControlServer.SOCKET_ENV, controlSocket);
        builder.environment().put(ControlServer.WORKER_ID_ENV, Integer.toString(position + 1));
        builder.environment().putAll(environment);
        return new WorkerProcess(position, metricsSlot, builder.start());
    }

    long pid() {
        return process.pid();
    }

    String name() {
        return "worker " + (position + 1) + " (pid " + pid() + ")";
    }

    /** Asks the worker to stop accepting and finish what it serves, without its drain delay. */
    void drain() {
        draining = true;
        Channel channel = control;
        if (channel != null && channel.isActive()) channel.writeAndFlush(ControlServer.DRAIN + "\n");
        else process.destroy();
    }

    /** SIGTERM: the worker's own shutdown, with its drain delay. */
    void terminate() {
        draining = true;
        process.destroy();
    }

    void kill() {
        process.destroyForcibly();
    }

    double ageSeconds() {
        return (System.nanoTime() - startedNanos) / 1e9;
    }
}
