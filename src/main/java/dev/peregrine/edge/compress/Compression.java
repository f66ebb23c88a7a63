package dev.peregrine.edge.compress;

import com.aayushatharva.brotli4j.Brotli4jLoader;
import com.github.luben.zstd.util.Native;
import dev.peregrine.config.CompressionSettings;
import dev.peregrine.edge.AcceptEncoding;
import dev.peregrine.edge.ContentCoding;
import dev.peregrine.edge.ContentEncoder;
import dev.peregrine.edge.EdgeStage;
import dev.peregrine.http.Application;
import dev.peregrine.http.HttpChars;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.metrics.RequestMetrics;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;

import java.nio.charset.StandardCharsets;
import java.util.EnumSet;
import java.util.Set;

/**
 * --compress: the stage that compresses the application's responses on their way out, with the coding
 * the request's Accept-Encoding prefers (br, zstd or gzip). It only wraps the exchange; the work happens
 * in {@link CompressingExchange}, on the connection's I/O thread. A request with Range is passed on
 * untouched: a range applies to the representation the application sends, which is the identity one.
 *
 * <p>The response cache, after this stage, stores the application's identity response; it asks
 * {@link #coding} which coding a hit is for and {@link #encode} for the coded variant it keeps beside
 * it, so that a hit in that coding is not compressed again.
 */
public final class Compression implements EdgeStage, ContentEncoder {
    private static final Set<ContentCoding> OFFERED = EnumSet.allOf(ContentCoding.class);

    private final int minSize;
    private final RequestMetrics metrics;

    public Compression(CompressionSettings settings, RequestMetrics metrics) {
        // Load both native libraries now, so that a platform without them fails at startup, not on a request.
        Brotli4jLoader.ensureAvailability();
        Native.load();
        this.minSize = settings.minSize();
        this.metrics = metrics;
    }

    @Override
    public void handle(HttpExchange exchange, Application next) {
        HttpRequestHead head = exchange.head();
        if (header(head, "range") != null) {
            next.dispatch(exchange);
            return;
        }
        next.dispatch(new CompressingExchange(exchange, coding(head), minSize, header(head, "if-none-match"), metrics));
    }

    /** The coding this stage sends the response to {@code head} in; null for identity, and for a request with Range. */
    @Override
    public ContentCoding coding(HttpRequestHead head) {
        if (header(head, "range") != null) return null;
        return AcceptEncoding.choose(header(head, "accept-encoding"), OFFERED);
    }

    /**
     * {@code head} and its whole body compressed in {@code coding} at once, as this stage would send them
     * (the same rules, head and encoder); null when the response is not one it compresses. On the I/O
     * thread, like every compression of this stage.
     */
    @Override
    public Coded encode(ResponseHead head, byte[] body, int offset, int length, ContentCoding coding) {
        if (!CompressionRules.eligible(head, length, minSize)) return null;
        ByteBuf out;
        try (StreamCompressor compressor = StreamCompressor.create(coding)) {
            out = compressor.compress(Unpooled.wrappedBuffer(body, offset, length), true, ByteBufAllocator.DEFAULT);
        }
        try {
            byte[] bytes = new byte[out.readableBytes()];
            out.readBytes(bytes);
            metrics.compressed();
            return new Coded(CompressionRules.compressed(head, coding), bytes);
        } finally {
            out.release();
        }
    }

    /** The request's field {@code name}, several lines joined with commas, or null. */
    static String header(HttpRequestHead head, String name) {
        String value = null;
        byte[] bytes = head.bytes();
        for (int i = 0; i < head.headerCount(); i++) {
            if (!HttpChars.equalsLowerCase(bytes, head.nameStart(i), head.nameLength(i), name)) continue;
            String line = new String(bytes, head.valueStart(i), head.valueLength(i), StandardCharsets.ISO_8859_1);
            value = value == null ? line : value + "," + line;
        }
        return value;
    }
}
