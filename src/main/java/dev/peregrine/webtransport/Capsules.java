package dev.peregrine.webtransport;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * The capsule protocol (RFC 9297 3.2) as a WebTransport session's CONNECT stream carries it: a type, a
 * length and a payload, one after the other in the stream's DATA. Only the session's close
 * (CLOSE_WEBTRANSPORT_SESSION, draft-ietf-webtrans-http3-02 and later) means something here; the
 * drain capsule and unknown types are skipped, as RFC 9297 asks.
 */
public final class Capsules {
    public static final long CLOSE_WEBTRANSPORT_SESSION = 0x2843;
    public static final long DRAIN_WEBTRANSPORT_SESSION = 0x78ae;
    /** A close reason is at most this many bytes of UTF-8 (draft-ietf-webtrans-http3 5). */
    public static final int MAX_REASON_BYTES = 1024;
    /** Capsules larger than this are refused: none we understand comes near it, and the others are held whole. */
    public static final int MAX_CAPSULE = 64 * 1024;

    /** A capsule that breaks the rules: the session ends with H3_GENERAL_PROTOCOL_ERROR. */
    public static final class Malformed extends Exception {
        public Malformed(String message) {
            super(message);
        }
    }

    /** A close capsule's content. */
    public record Close(long code, String reason) {}

    private Capsules() {}

    /**
     * The next capsule in {@code in}, read past; null when it is not all there yet (nothing is read then).
     * Capsules other than a close give {@link #SKIPPED}.
     */
    public static Object next(ByteBuf in) throws Malformed {
        int start = in.readerIndex();
        if (!Varint.readable(in)) return null;
        long type = Varint.read(in);
        if (!Varint.readable(in)) {
            in.readerIndex(start);
            return null;
        }
        long length = Varint.read(in);
        if (length > MAX_CAPSULE) throw new Malformed("a capsule of " + length + " bytes");
        if (in.readableBytes() < length) {
            in.readerIndex(start);
            return null;
        }
        ByteBuf payload = in.readSlice((int) length);
        if (type != CLOSE_WEBTRANSPORT_SESSION) return SKIPPED;
        if (payload.readableBytes() < 4) throw new Malformed("a close capsule without its 32-bit code");
        long code = payload.readUnsignedInt();
        if (payload.readableBytes() > MAX_REASON_BYTES) throw new Malformed("a close reason longer than " + MAX_REASON_BYTES + " bytes");
        try {
            String reason = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(payload.nioBuffer()).toString();
            return new Close(code, reason);
        } catch (CharacterCodingException e) {
            throw new Malformed("a close reason that is not UTF-8");
        }
    }

    /** What {@link #next} returns for a capsule it read past without meaning. */
    public static final Object SKIPPED = new Object();

    /** A CLOSE_WEBTRANSPORT_SESSION capsule; the caller checked the reason's length. */
    public static ByteBuf close(ByteBufAllocator alloc, long code, String reason) {
        byte[] text = reason.getBytes(StandardCharsets.UTF_8);
        int length = 4 + text.length;
        ByteBuf out = alloc.buffer(Varint.size(CLOSE_WEBTRANSPORT_SESSION) + Varint.size(length) + length);
        Varint.write(out, CLOSE_WEBTRANSPORT_SESSION);
        Varint.write(out, length);
        out.writeInt((int) code);
        out.writeBytes(text);
        return out;
    }
}
