package dev.peregrine.edge.compress;

import com.aayushatharva.brotli4j.Brotli4jLoader;
import com.github.luben.zstd.util.Native;
import dev.peregrine.config.CompressionSettings;
import dev.peregrine.edge.AcceptEncoding;
import dev.peregrine.edge.ContentCoding;
import dev.peregrine.edge.EdgeStage;
import dev.peregrine.http.Application;
import dev.peregrine.http.HttpChars;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;

import java.nio.charset.StandardCharsets;
import java.util.EnumSet;
import java.util.Set;

/**
 * --compress: the stage that compresses the application's responses on their way out, with the coding
 * the request's Accept-Encoding prefers (br, zstd or gzip). It only wraps the exchange; the work happens
 * in {@link CompressingExchange}, on the connection's I/O thread. A request with Range is passed on
 * untouched: a range applies to the representation the application sends, which is the identity one.
 */
public final class Compression implements EdgeStage {
    private static final Set<ContentCoding> OFFERED = EnumSet.allOf(ContentCoding.class);

    private final int minSize;

    public Compression(CompressionSettings settings) {
        // Load both native libraries now, so that a platform without them fails at startup, not on a request.
        Brotli4jLoader.ensureAvailability();
        Native.load();
        this.minSize = settings.minSize();
    }

    @Override
    public void handle(HttpExchange exchange, Application next) {
        HttpRequestHead head = exchange.head();
        if (header(head, "range") != null) {
            next.dispatch(exchange);
            return;
        }
        ContentCoding coding = AcceptEncoding.choose(header(head, "accept-encoding"), OFFERED);
        next.dispatch(new CompressingExchange(exchange, coding, minSize, header(head, "if-none-match")));
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
