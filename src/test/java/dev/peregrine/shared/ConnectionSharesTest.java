package dev.peregrine.shared;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ConnectionSharesTest {
    private static ConnectionShares worker(Path file, int slot) throws IOException {
        return ConnectionShares.forWorker(Map.of(ConnectionShares.FILE_ENV, file.toString(), ConnectionShares.SLOT_ENV, Integer.toString(slot)),
                ConnectionShares.slotsFor(2));
    }

    private static void open(ConnectionShares shares, int connections) {
        for (int i = 0; i < connections; i++) shares.opened();
    }

    @Test
    void aWorkerPastTheMeanPlusAnEighthIsOverItsShareAndTheOneWithFewestNeverIs(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("shares");
        SharedRegion region = ConnectionShares.create(file, ConnectionShares.slotsFor(2));
        ConnectionShares a = worker(file, 0), b = worker(file, 1);
        a.accepting(true);
        b.accepting(true);
        open(a, 8);
        assertFalse(a.overShare(), "a handful of connections is never an imbalance");
        open(a, 92);
        open(b, 80);
        assertFalse(a.overShare(), "100 against 80: the mean is 90, the bound 101");
        open(a, 4);
        assertTrue(a.overShare(), "104 against 80: the bound is 103");
        assertFalse(b.overShare());
        for (int i = 0; i < 10; i++) a.closed();
        assertFalse(a.overShare(), "94 against 80");

        // A worker that does not accept (busy, draining) leaves the count; so does one whose line the supervisor cleared.
        b.accepting(false);
        assertFalse(a.overShare());
        b.accepting(true);
        open(a, 20);
        assertTrue(a.overShare());
        ConnectionShares.clear(region, 1);
        assertFalse(a.overShare());
    }

    @Test
    void aSingleProcessHasNoShares() throws IOException {
        assertNull(ConnectionShares.forWorker(Map.of(), 2));
    }
}
