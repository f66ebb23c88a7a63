package dev.peregrine.http3;

import io.netty.buffer.ByteBuf;
import io.netty.incubator.codec.quic.QuicChannel;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.function.BiConsumer;

/**
 * Decodes a QPACK field section with Netty's own decoder but without its checks of the field names.
 * The incubator codec (0.0.30) refuses the {@code :protocol} pseudo-header that extended CONNECT needs
 * (RFC 9220), and neither its decoder nor the sink that checks names is public; its QPACK and Huffman
 * code is sound, so it is reached by reflection rather than written again. Netty 4.2's codec accepts
 * {@code :protocol} but does not run against the 4.1 the Quarkus BOM pins (docs/WEBTRANSPORT.md).
 *
 * <p>The server announces no dynamic table (QPACK_MAX_TABLE_CAPACITY 0), so a section refers to the
 * static table and literals only and a fresh decoder decodes it whole.
 */
final class QpackSections {
    private static final MethodHandle NEW_DECODER;
    private static final MethodHandle NEW_ATTRIBUTES;
    private static final MethodHandle DECODE;
    /** Why the decoder cannot be reached, or null when it can. */
    static final String UNAVAILABLE;

    static {
        MethodHandle newDecoder = null, newAttributes = null, decode = null;
        String unavailable = null;
        try {
            Class<?> decoderClass = Class.forName("io.netty.incubator.codec.http3.QpackDecoder");
            Class<?> attributesClass = Class.forName("io.netty.incubator.codec.http3.QpackAttributes");
            MethodHandles.Lookup lookup = MethodHandles.privateLookupIn(decoderClass, MethodHandles.lookup());
            newDecoder = lookup.findConstructor(decoderClass, MethodType.methodType(void.class, long.class, int.class));
            newAttributes = MethodHandles.privateLookupIn(attributesClass, MethodHandles.lookup())
                    .findConstructor(attributesClass, MethodType.methodType(void.class, QuicChannel.class, boolean.class));
            decode = lookup.findVirtual(decoderClass, "decode", MethodType.methodType(boolean.class, attributesClass, long.class,
                    ByteBuf.class, int.class, BiConsumer.class, Runnable.class));
        } catch (ReflectiveOperationException | RuntimeException e) {
            unavailable = e.toString();
        }
        NEW_DECODER = newDecoder;
        NEW_ATTRIBUTES = newAttributes;
        DECODE = decode;
        UNAVAILABLE = unavailable;
    }

    /** A section that does not decode. */
    static final class Malformed extends Exception {
        Malformed(String message, Throwable cause) {
            super(message, cause);
        }
    }

    private QpackSections() {}

    /** Decodes {@code length} bytes of {@code in} (read past), handing each field to {@code sink} in order. */
    static void decode(QuicChannel quic, long streamId, ByteBuf in, int length, BiConsumer<CharSequence, CharSequence> sink)
            throws Malformed {
        if (UNAVAILABLE != null) throw new Malformed("Netty's QPACK decoder is not reachable: " + UNAVAILABLE, null);
        try {
            Object decoder = NEW_DECODER.invoke(0L, 0);
            Object attributes = NEW_ATTRIBUTES.invoke(quic, true);
            boolean complete = (boolean) DECODE.invoke(decoder, attributes, streamId, in, length, sink, (Runnable) () -> { });
            if (!complete) throw new Malformed("a field section that refers to a dynamic table", null);
        } catch (Malformed e) {
            throw e;
        } catch (Throwable e) {
            throw new Malformed("a field section that does not decode: " + e, e);
        }
    }
}
