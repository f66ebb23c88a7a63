package dev.peregrine.edge.ratelimit;

import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.shared.SharedRegion;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetAddress;
import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ClientTableTest {
    private static final long START = 1_000_000_000_000L;

    private static ClientTable table(int entries, long interval, int burst) {
        return new ClientTable(SharedRegion.inProcess((long) entries * 16, 1), interval, burst, RequestMetrics.OFF);
    }

    private static long key(String address) throws Exception {
        return ClientKey.of(InetAddress.getByName(address));
    }

    @Test
    void aBurstAtOnceThenOneRequestPerInterval() {
        ClientTable t = table(64, 1000, 3);
        assertEquals(2, t.admit(7, START));
        assertEquals(1, t.admit(7, START));
        assertEquals(0, t.admit(7, START));
        assertEquals(-1000, t.admit(7, START), "limited, allowed again in one interval");
        assertEquals(-400, t.admit(7, START + 600));
        assertEquals(0, t.admit(7, START + 1000));
        assertEquals(2, t.admit(7, START + 10_000), "a client idle long enough has its whole burst again");
        assertEquals(2, t.admit(8, START), "another client has a budget of its own");
    }

    @Test
    void aClientSendingFasterThanTheRateGetsBurstPlusRateTimesTime() {
        ClientTable t = table(64, 1_000, 5);
        SplittableRandom random = new SplittableRandom(17);
        long now = START, allowed = 0;
        for (int i = 0; i < 200_000; i++) {
            now += random.nextLong(0, 300);
            if (t.admit(42, now) >= 0) allowed++;
        }
        long expected = 5 + (now - START) / 1_000;
        assertTrue(Math.abs(allowed - expected) <= 1, allowed + " allowed, expected " + expected);
    }

    @Test
    void twoMappingsOfOneFileAreOneBudgetAcrossThreads(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("shared");
        SharedRegion created = SharedRegion.create(file, 64 * 16, 5);
        SharedRegion opened = SharedRegion.open(file, 64 * 16, 5);
        long interval = 1_000_000; // 1000 a second
        ClientTable[] workers = {new ClientTable(created, interval, 20, RequestMetrics.OFF), new ClientTable(opened, interval, 20, RequestMetrics.OFF)};
        AtomicLong allowed = new AtomicLong();
        CountDownLatch go = new CountDownLatch(1);
        long[] bounds = new long[2];
        Thread[] threads = new Thread[4];
        for (int i = 0; i < threads.length; i++) {
            ClientTable worker = workers[i % 2];
            threads[i] = new Thread(() -> {
                try {
                    go.await();
                } catch (InterruptedException e) {
                    return;
                }
                long end = System.nanoTime() + 200_000_000;
                while (System.nanoTime() < end) {
                    if (worker.admit(99, System.nanoTime()) >= 0) allowed.incrementAndGet();
                }
            });
            threads[i].start();
        }
        bounds[0] = System.nanoTime();
        go.countDown();
        for (Thread thread : threads) thread.join();
        bounds[1] = System.nanoTime();
        // Every request was charged between the two bounds: at most burst + rate × elapsed of them passed.
        long most = 20 + (bounds[1] - bounds[0]) / interval + 1;
        assertTrue(allowed.get() <= most, allowed.get() + " allowed, at most " + most);
        // How much of the rate the threads got depends on the scheduler; the burst they get in any case.
        assertTrue(allowed.get() > 20, allowed.get() + " allowed: not even the burst and one more");
    }

    @Test
    void aLimitedClientIsNeverForgottenWhileOthersChurnThroughTheTable() {
        ClientTable t = table(16, 1_000_000, 2);
        long limited = 1234;
        assertTrue(t.admit(limited, START) >= 0);
        assertTrue(t.admit(limited, START) >= 0);
        assertTrue(t.admit(limited, START) < 0);
        long now = START;
        for (long client = 1; client <= 10_000; client++) {
            now += 10; // far less than an interval: the others stay partly spent
            t.admit(client * 7919 + 1, now);
        }
        assertTrue(t.admit(limited, now) < 0, "the limited client got a fresh budget");
    }

    @Test
    void aWindowFullOfLimitedClientsLetsANewClientThroughUncounted() {
        ClientTable t = table(8, 1_000_000_000, 1);
        for (long client = 1; client <= 8; client++) assertTrue(t.admit(client, START) >= 0);
        for (long client = 1; client <= 8; client++) assertTrue(t.admit(client, START) < 0);
        assertEquals(ClientTable.UNTRACKED, t.admit(9, START));
        assertTrue(t.admit(1, START) < 0, "the limited clients are still limited");
        assertTrue(t.admit(9, START + 1_000_000_000) >= 0, "once a budget is full again its entry can be taken");
        assertTrue(t.admit(9, START + 1_000_000_000) < 0, "and the new client is counted from then on");
    }

    @Test
    void ipv6ClientsAreKeyedByTheirSlash64AndIpv4ByTheirAddress() throws Exception {
        assertEquals(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff:eeee:dddd:cccc"));
        assertNotEquals(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assertEquals(key("192.0.2.1"), key("::ffff:192.0.2.1"));
        assertNotEquals(key("192.0.2.1"), key("192.0.2.2"));
        for (String address : new String[] {"::1", "::", "0.0.0.0", "255.255.255.255", "ff00::", "ffff:ffff:ffff:ffff::"}) {
            assertNotEquals(0, key(address), address + " must not read as a free entry");
        }
        assertNotEquals(ClientKey.UNIX, key("::1"));
        assertEquals(ClientKey.UNIX, ClientKey.of((java.net.InetSocketAddress) null));
    }
}
