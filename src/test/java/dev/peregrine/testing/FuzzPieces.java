package dev.peregrine.testing;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** How the fuzz tests feed one input the way a connection receives it: in pieces. */
public final class FuzzPieces {
    private FuzzPieces() {}

    /** The input cut into about {@code pieces} parts at places derived from its own bytes. */
    public static List<byte[]> split(byte[] input, int pieces) {
        List<byte[]> parts = new ArrayList<>();
        int from = 0;
        for (int i = 1; i < pieces && from < input.length; i++) {
            int step = 1 + Math.floorMod(Arrays.hashCode(Arrays.copyOfRange(input, from, Math.min(input.length, from + 4))) + i, 23);
            int to = Math.min(input.length, from + step);
            parts.add(Arrays.copyOfRange(input, from, to));
            from = to;
        }
        parts.add(Arrays.copyOfRange(input, from, input.length));
        return parts;
    }
}
