package dev.peregrine.store;

import io.lettuce.core.resource.EventLoopGroupProvider;
import io.netty.channel.EventLoopGroup;
import io.netty.util.concurrent.EventExecutorGroup;
import io.netty.util.concurrent.Future;
import io.netty.util.concurrent.ImmediateEventExecutor;

import java.util.concurrent.TimeUnit;

/**
 * Hands Lettuce the worker's own I/O threads, so that its connection to the store needs no thread of
 * its own and, with one I/O thread per worker, a command and its answer never change threads. Lettuce
 * asks for the group class of the transport it picked (epoll when Netty's native library loads, as
 * the worker's own does); the worker's group is that class. Releasing and shutting down are the
 * worker's business, not Lettuce's.
 */
final class SharedLoops implements EventLoopGroupProvider {
    private final EventLoopGroup loops;
    private final int threads;

    SharedLoops(EventLoopGroup loops, int threads) {
        this.loops = loops;
        this.threads = threads;
    }

    @Override
    public <T extends EventLoopGroup> T allocate(Class<T> type) {
        if (!type.isInstance(loops)) {
            throw new IllegalStateException("Lettuce asked for a " + type.getName() + ", the worker's I/O threads are a " + loops.getClass().getName());
        }
        return type.cast(loops);
    }

    @Override
    public int threadPoolSize() {
        return threads;
    }

    @Override
    public Future<Boolean> release(EventExecutorGroup group, long quietPeriod, long timeout, TimeUnit unit) {
        return ImmediateEventExecutor.INSTANCE.newSucceededFuture(true);
    }

    @Override
    public Future<Boolean> shutdown(long quietPeriod, long timeout, TimeUnit timeUnit) {
        return ImmediateEventExecutor.INSTANCE.newSucceededFuture(true);
    }
}
