package dev.peregrine.http;

import io.netty.channel.EventLoop;
import io.netty.channel.epoll.EpollEventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * On the server's own kind of event loop (epoll), where a task queued lazily does not wake the loop's
 * thread: what runs here ran because the batch woke the loop.
 */
class WakeupBatchTest {
    private final EpollEventLoopGroup group = new EpollEventLoopGroup(1);
    private final EventLoop loop = group.next();

    @AfterEach
    void stop() throws InterruptedException {
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).await(5, TimeUnit.SECONDS);
    }

    /** Makes sure the loop's thread has started and is idle, waiting for work. */
    private void idle() throws InterruptedException {
        loop.submit(() -> {}).await(5, TimeUnit.SECONDS);
    }

    /**
     * Submits {@code count} tasks of {@code bytes} each to the idle loop through {@code batch}; the latch
     * counts those that ran.
     */
    private CountDownLatch submitted(WakeupBatch batch, int count, int bytes) throws InterruptedException {
        idle();
        CountDownLatch ran = new CountDownLatch(count);
        for (int i = 0; i < count; i++) batch.submit(loop, ran::countDown, bytes);
        return ran;
    }

    @Test
    void theFirstSubmissionAsksTheOwnerForAFlushOnce() throws InterruptedException {
        idle();
        AtomicInteger asked = new AtomicInteger();
        WakeupBatch batch = new WakeupBatch(asked::incrementAndGet);
        assertTrue(batch.isEmpty());
        batch.submit(loop, () -> {}, 0);
        assertFalse(batch.isEmpty());
        batch.submit(loop, () -> {}, 0);
        assertEquals(1, asked.get());
        batch.flush();
        assertTrue(batch.isEmpty());
        batch.submit(loop, () -> {}, 0);
        assertEquals(2, asked.get());
    }

    @Test
    void aFlushRunsEveryQueuedTask() throws InterruptedException {
        WakeupBatch batch = new WakeupBatch(() -> {});
        CountDownLatch ran = submitted(batch, 3, 100);
        batch.flush();
        assertTrue(ran.await(5, TimeUnit.SECONDS));
    }

    @Test
    void thirtyTwoWaitingTasksAreFlushedWithoutWaitingForTheOwner() throws InterruptedException {
        CountDownLatch ran = submitted(new WakeupBatch(() -> {}), 32, 100);
        // No flush() from the owner: the 32nd submission woke the loop.
        assertTrue(ran.await(5, TimeUnit.SECONDS));
    }

    @Test
    void halfAMebibyteOfResponsesIsFlushedWithoutWaitingForTheOwner() throws InterruptedException {
        CountDownLatch ran = submitted(new WakeupBatch(() -> {}), 4, 128 * 1024);
        // Four responses of 128 KiB, far from 32: the bytes woke the loop.
        assertTrue(ran.await(5, TimeUnit.SECONDS));
    }

    @Test
    void anotherThreadWakesTheLoopForWhatWaitsAndClearsTheTime() throws InterruptedException {
        WakeupBatch batch = new WakeupBatch(() -> {});
        assertEquals(0, batch.waitingSince());
        CountDownLatch ran = submitted(batch, 2, 100);
        long since = batch.waitingSince();
        assertTrue(since != 0);
        Thread other = new Thread(() -> batch.wakeStale(since));
        other.start();
        other.join();
        assertTrue(ran.await(5, TimeUnit.SECONDS), "the other thread's wake ran the queued tasks");
        assertEquals(0, batch.waitingSince());
        // The next task starts a new wait; a wake for the old time no longer applies to it.
        batch.submit(loop, () -> {}, 0);
        long next = batch.waitingSince();
        assertTrue(next != 0);
        batch.wakeStale(since);
        assertEquals(next, batch.waitingSince());
        batch.flush();
        assertEquals(0, batch.waitingSince());
    }
}
