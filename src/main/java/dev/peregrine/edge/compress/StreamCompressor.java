package dev.peregrine.edge.compress;

import dev.peregrine.edge.ContentCoding;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * The encoder of one response body. Every piece is flushed on its way out, so that the client can
 * decode each send as it arrives (a stream of events must not wait for the next one). Holds native
 * memory: created when a response is compressed, {@link #close}d when it ends, however it ends.
 * Not thread-safe: used on the connection's I/O thread only.
 */
interface StreamCompressor extends AutoCloseable {
    /**
     * Compresses {@code input} (may be null; released here) and flushes, or finishes the stream when
     * {@code last}; returns the bytes to send, possibly none.
     */
    ByteBuf compress(ByteBuf input, boolean last, ByteBufAllocator alloc);

    /** Frees the native state; idempotent. */
    @Override
    void close();

    static StreamCompressor create(ContentCoding coding) {
        return switch (coding) {
            case BR -> new BrotliCompressor();
            case ZSTD -> new ZstdCompressor();
            case GZIP -> new GzipCompressor();
        };
    }
}
