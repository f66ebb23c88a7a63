package dev.peregrine.store;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A Lua script the store runs atomically, sent by its SHA-1 (EVALSHA) and in full only when the store
 * does not know it yet (after a restart, or on a replica's first use).
 */
public record StoreScript(byte[] body, String sha) {
    /** Every script made so far: loaded into the store when a connection is made. */
    private static final List<StoreScript> REGISTERED = new CopyOnWriteArrayList<>();

    public static StoreScript of(String lua) {
        byte[] body = lua.getBytes(StandardCharsets.UTF_8);
        StoreScript script;
        try {
            script = new StoreScript(body, HexFormat.of().formatHex(MessageDigest.getInstance("SHA-1").digest(body)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-1", e);
        }
        REGISTERED.add(script);
        return script;
    }

    static List<StoreScript> registered() {
        return REGISTERED;
    }
}
