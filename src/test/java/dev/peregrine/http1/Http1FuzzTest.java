package dev.peregrine.http1;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.peregrine.http.RequestHead;
import dev.peregrine.testing.FuzzPieces;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Coverage-guided fuzzing (Jazzer) of the two parsers that read bytes from the network. Under plain
 * {@code mvn test} each method replays its checked-in corpus (src/test/resources/dev/peregrine/http1/
 * Http1FuzzTestInputs/METHOD/) as regression tests; with {@code JAZZER_FUZZ=1} it fuzzes for
 * {@code maxDuration} (see docs/HARDENING.md for the commands). Besides "never throws anything but
 * HttpParseException", each checks properties that catch silent misparsing: a head parsed from one
 * buffer and the same bytes fed in arbitrary pieces give the same result, and what the parser accepts
 * is internally consistent.
 */
class Http1FuzzTest {
    private static final Set<Integer> PARSER_STATUSES = Set.of(400, 417, 431, 501, 505);

    @FuzzTest(maxDuration = "30s")
    void requestHead(FuzzedDataProvider data) {
        int maxHead = data.consumeInt(256, 8192);
        int pieces = data.consumeInt(1, 16);
        byte[] input = data.consumeRemainingAsBytes();

        Outcome whole = parseHead(new RequestHeadParser(maxHead), List.of(input));
        Outcome split = parseHead(new RequestHeadParser(maxHead), FuzzPieces.split(input, pieces));
        assertEquals(whole.describe(), split.describe(), "fed at once and in pieces, the same bytes must parse the same");
        if (whole.head != null) checkHead(whole.head);
    }

    @FuzzTest(maxDuration = "30s")
    void chunkedBody(FuzzedDataProvider data) {
        int pieces = data.consumeInt(1, 16);
        byte[] input = data.consumeRemainingAsBytes();

        Decoded whole = decodeChunked(List.of(input));
        Decoded split = decodeChunked(FuzzPieces.split(input, pieces));
        assertEquals(whole.status, split.status, "fed at once and in pieces, the same body must decode the same");
        assertEquals(whole.done, split.done);
        assertArrayEquals(whole.data, split.data);
        assertTrue(whole.data.length <= input.length, "decoded data cannot outgrow its framing");
    }

    private record Outcome(RequestHead head, int status, int consumed) {
        String describe() {
            if (status != 0) return "refused " + status;
            if (head == null) return "incomplete";
            StringBuilder s = new StringBuilder(head.method()).append(' ').append(consumed).append(' ');
            s.append(new String(head.bytes(), head.pathStart(), head.pathLength(), java.nio.charset.StandardCharsets.ISO_8859_1));
            for (int i = 0; i < head.headerCount(); i++) {
                s.append('|').append(new String(head.bytes(), head.nameStart(i), head.nameLength(i), java.nio.charset.StandardCharsets.ISO_8859_1))
                        .append('=').append(new String(head.bytes(), head.valueStart(i), head.valueLength(i), java.nio.charset.StandardCharsets.ISO_8859_1));
            }
            return s.append(" cl=").append(head.contentLength()).append(" chunked=").append(head.chunked()).toString();
        }
    }

    /** Feeds the pieces one by one into a growing buffer, as the connection does, until a head or an error. */
    private static Outcome parseHead(RequestHeadParser parser, List<byte[]> pieces) {
        ByteBuf buf = Unpooled.buffer();
        try {
            for (byte[] piece : pieces) {
                buf.writeBytes(piece);
                int before = buf.readerIndex();
                RequestHead head = parser.parse(buf);
                if (head != null) return new Outcome(head, 0, buf.readerIndex() - before);
                assertEquals(before, buf.readerIndex(), "an incomplete head consumes nothing");
            }
            return new Outcome(null, 0, 0);
        } catch (HttpParseException e) {
            assertTrue(PARSER_STATUSES.contains(e.status()), "unexpected status " + e.status());
            return new Outcome(null, e.status(), 0);
        } finally {
            buf.release();
        }
    }

    private static void checkHead(RequestHead head) {
        byte[] b = head.bytes();
        assertTrue(!head.method().isEmpty());
        assertTrue(head.pathStart() >= 0 && head.pathStart() + head.pathLength() <= b.length);
        assertTrue(head.queryStart() >= 0 && head.queryStart() + head.queryLength() <= b.length);
        assertTrue(!(head.contentLength() >= 0 && head.chunked()), "never both a length and chunked");
        for (int i = 0; i < head.headerCount(); i++) {
            assertTrue(head.nameLength(i) > 0, "empty header name");
            for (int j = head.nameStart(i); j < head.nameStart(i) + head.nameLength(i); j++) {
                assertTrue(b[j] > ' ' && b[j] != ':' && !(b[j] >= 'A' && b[j] <= 'Z'), "header names are lower-case tokens");
            }
            for (int j = head.valueStart(i); j < head.valueStart(i) + head.valueLength(i); j++) {
                assertTrue(b[j] != '\r' && b[j] != '\n' && b[j] != 0, "no CR, LF or NUL reaches the application");
            }
        }
    }

    private record Decoded(byte[] data, boolean done, int status) {}

    private static Decoded decodeChunked(List<byte[]> pieces) {
        ChunkedDecoder decoder = new ChunkedDecoder(4096, 8192);
        ByteBuf buf = Unpooled.buffer();
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf collected = Unpooled.buffer();
        try {
            for (byte[] piece : pieces) {
                buf.writeBytes(piece);
                boolean done = decoder.decode(buf, out);
                for (ByteBuf part : out) {
                    assertTrue(part.isReadable(), "no empty slices");
                    collected.writeBytes(part);
                    part.release();
                }
                out.clear();
                if (done) return new Decoded(bytes(collected), true, 0);
            }
            return new Decoded(bytes(collected), false, 0);
        } catch (HttpParseException e) {
            assertEquals(400, e.status());
            out.forEach(ByteBuf::release);
            // What was decoded before the error depends on where the pieces end: only the verdict counts.
            return new Decoded(new byte[0], false, 400);
        } finally {
            buf.release();
            collected.release();
        }
    }

    private static byte[] bytes(ByteBuf buf) {
        byte[] b = new byte[buf.readableBytes()];
        buf.getBytes(buf.readerIndex(), b);
        return b;
    }
}
