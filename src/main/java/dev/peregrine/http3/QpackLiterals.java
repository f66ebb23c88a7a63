package dev.peregrine.http3;

import dev.peregrine.http.ResponseHead;
import dev.peregrine.webtransport.Varint;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.incubator.codec.http3.Http3Headers;

import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * A response HEADERS frame for a stream the HTTP/3 codec no longer owns (a WebTransport session's
 * CONNECT stream, a WebSocket's), QPACK-encoded with the static table and plain literals only: no dynamic table and
 * no Huffman coding, which every decoder reads (RFC 9204 4.5). Netty's encoder is not public.
 */
final class QpackLiterals {
    private static final long HEADERS_FRAME = 0x01;
    /** The static entry {@code :status 200}, and the first {@code :status} entry for a name reference (RFC 9204 Appendix A). */
    private static final int STATIC_STATUS_200 = 25, STATIC_STATUS_NAME = 24;

    private QpackLiterals() {}

    /** The frame, with {@code :status}, then {@code fields} (names lower-cased), then {@code extra}'s headers. */
    static ByteBuf headersFrame(ByteBufAllocator alloc, int status, String[] fields, ResponseHead extra) {
        ByteBuf section = sectionWithStatus(alloc, status);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            literal(section, fields[i].getBytes(StandardCharsets.US_ASCII), fields[i + 1].getBytes(StandardCharsets.ISO_8859_1));
        }
        if (extra != null) {
            byte[] data = extra.data();
            for (int i = 0; i < extra.count(); i++) {
                byte[] name = new byte[extra.nameLength(i)];
                System.arraycopy(data, extra.nameStart(i), name, 0, name.length);
                for (int k = 0; k < name.length; k++) if (name[k] >= 'A' && name[k] <= 'Z') name[k] += 'a' - 'A';
                byte[] value = new byte[extra.valueLength(i)];
                System.arraycopy(data, extra.valueStart(i), value, 0, value.length);
                literal(section, name, value);
            }
        }
        return frame(alloc, section);
    }

    /** The frame for a complete field list, {@code :status} first (names are lower-case already, as HTTP/3 requires). */
    static ByteBuf headersFrame(ByteBufAllocator alloc, Http3Headers headers) {
        ByteBuf section = sectionWithStatus(alloc, Integer.parseInt(headers.status().toString()));
        for (Map.Entry<CharSequence, CharSequence> field : headers) {
            CharSequence name = field.getKey();
            if (name.length() > 0 && name.charAt(0) == ':') continue;
            literal(section, name.toString().getBytes(StandardCharsets.US_ASCII), field.getValue().toString().getBytes(StandardCharsets.ISO_8859_1));
        }
        return frame(alloc, section);
    }

    /** A field section's prefix (no dynamic table) and its {@code :status}. */
    private static ByteBuf sectionWithStatus(ByteBufAllocator alloc, int status) {
        ByteBuf section = alloc.buffer(128);
        section.writeByte(0).writeByte(0); // Required Insert Count 0, Base 0: no dynamic table
        if (status == 200) {
            prefixed(section, 0xc0, 6, STATIC_STATUS_200); // indexed field line, static (11xxxxxx)
        } else {
            prefixed(section, 0x50, 4, STATIC_STATUS_NAME); // literal with a static name reference (01N1xxxx)
            string(section, 0x00, 7, Integer.toString(status).getBytes(StandardCharsets.US_ASCII));
        }
        return section;
    }

    /** The HEADERS frame around {@code section}, which it releases. */
    private static ByteBuf frame(ByteBufAllocator alloc, ByteBuf section) {
        ByteBuf frame = alloc.buffer(16 + section.readableBytes());
        Varint.write(frame, HEADERS_FRAME);
        Varint.write(frame, section.readableBytes());
        frame.writeBytes(section);
        section.release();
        return frame;
    }

    /** A literal field line with a literal name (001NHxxx), neither Huffman-coded. */
    private static void literal(ByteBuf out, byte[] name, byte[] value) {
        string(out, 0x20, 3, name);
        string(out, 0x00, 7, value);
    }

    private static void string(ByteBuf out, int pattern, int prefixBits, byte[] bytes) {
        prefixed(out, pattern, prefixBits, bytes.length);
        out.writeBytes(bytes);
    }

    /** An integer with an N-bit prefix (RFC 7541 5.1, as QPACK uses it), the first byte's upper bits set to {@code pattern}. */
    static void prefixed(ByteBuf out, int pattern, int prefixBits, long value) {
        int max = (1 << prefixBits) - 1;
        if (value < max) {
            out.writeByte(pattern | (int) value);
            return;
        }
        out.writeByte(pattern | max);
        value -= max;
        while (value >= 0x80) {
            out.writeByte((int) (value & 0x7f) | 0x80);
            value >>>= 7;
        }
        out.writeByte((int) value);
    }
}
