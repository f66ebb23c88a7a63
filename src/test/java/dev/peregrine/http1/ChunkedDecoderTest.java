package dev.peregrine.http1;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

class ChunkedDecoderTest {

    private static final int MAX_LINE = 4096;
    private static final int MAX_TRAILERS = 8192;

    /** Three chunks with extensions (token, quoted with escapes, BWS), a last chunk with an extension, trailers. */
    private static final String BODY = "5\r\nhello\r\n"
            + "6;name=value\r\n, wide\r\n"
            + "00009 ; a ; b=\"q \\\"x\\\" ;\" ;c = d\r\n world of\r\n"
            + "1\r\n!\r\n"
            + "0;last=yes\r\n"
            + "X-Checksum: abc123\r\n"
            + "X-Empty:\r\n"
            + "X-Spaced:  v  \r\n"
            + "\r\n";
    private static final String DECODED = "hello, wide world of!";
    private static final String NEXT_REQUEST = "GET /next HTTP/1.1\r\nHost: h\r\n\r\n";

    private static ByteBuf buf(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.ISO_8859_1);
    }

    private static String drain(List<ByteBuf> out) {
        StringBuilder sb = new StringBuilder();
        for (ByteBuf b : out) {
            assertTrue(b.isReadable(), "no empty buffers in the output");
            sb.append(b.toString(StandardCharsets.ISO_8859_1));
            b.release();
        }
        out.clear();
        return sb.toString();
    }

    /**
     * Feeds input split at the given positions, each piece in its own buffer, checking that every piece is fully
     * consumed while the body is unfinished, and that what is left once it is finished is exactly the suffix.
     */
    private static void decodeInPieces(String input, int[] cuts, String expectedData, String expectedRest) {
        ChunkedDecoder decoder = new ChunkedDecoder(MAX_LINE, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        StringBuilder data = new StringBuilder();
        StringBuilder rest = new StringBuilder();
        boolean done = false;
        int from = 0;
        for (int i = 0; i <= cuts.length; i++) {
            int to = i < cuts.length ? cuts[i] : input.length();
            ByteBuf piece = buf(input.substring(from, to));
            try {
                if (done) {
                    assertTrue(decoder.decode(piece, out));
                    assertEquals(0, piece.readerIndex(), "nothing is consumed after the end");
                } else {
                    done = decoder.decode(piece, out);
                    if (!done) {
                        assertFalse(piece.isReadable(), "an unfinished body consumes all its input");
                    }
                }
                data.append(drain(out));
                if (done) {
                    rest.append(piece.toString(StandardCharsets.ISO_8859_1));
                }
            } finally {
                piece.release();
            }
            from = to;
        }
        assertTrue(done, "body complete");
        assertEquals(expectedData, data.toString());
        assertEquals(expectedRest, rest.toString());
    }

    private static void assertRefused(String input) {
        ChunkedDecoder decoder = new ChunkedDecoder(MAX_LINE, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf in = buf(input);
        try {
            HttpParseException e = assertThrows(HttpParseException.class, () -> decoder.decode(in, out));
            assertEquals(400, e.status());
        } finally {
            in.release();
            drain(out);
        }
    }

    @Test
    void decodesSingleChunk() {
        ChunkedDecoder decoder = new ChunkedDecoder(MAX_LINE, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf in = buf("5\r\nhello\r\n0\r\n\r\n");
        try {
            assertTrue(decoder.decode(in, out));
            assertEquals(1, out.size());
            assertEquals("hello", drain(out));
            assertFalse(in.isReadable());
        } finally {
            in.release();
        }
    }

    @Test
    void decodesEmptyBody() {
        decodeInPieces("0\r\n\r\n", new int[0], "", "");
    }

    @Test
    void decodesWholeBodyAndLeavesThePipelinedRequest() {
        decodeInPieces(BODY + NEXT_REQUEST, new int[0], DECODED, NEXT_REQUEST);
    }

    @Test
    void decodesBodyFedOneByteAtATime() {
        String input = BODY + NEXT_REQUEST;
        int[] cuts = new int[input.length() - 1];
        for (int i = 0; i < cuts.length; i++) {
            cuts[i] = i + 1;
        }
        decodeInPieces(input, cuts, DECODED, NEXT_REQUEST);
    }

    @Test
    void decodesBodySplitInTwoAtEveryPosition() {
        String input = BODY + NEXT_REQUEST;
        for (int cut = 0; cut <= input.length(); cut++) {
            decodeInPieces(input, new int[]{cut}, DECODED, NEXT_REQUEST);
        }
    }

    @Test
    void decodesBodyInRandomSplits() {
        String input = BODY + NEXT_REQUEST;
        Random random = new Random(20240611);
        for (int round = 0; round < 500; round++) {
            int[] cuts = random.ints(random.nextInt(1, 12), 0, input.length() + 1).sorted().toArray();
            decodeInPieces(input, cuts, DECODED, NEXT_REQUEST);
        }
    }

    @Test
    void decodesInOneCumulativeBuffer() {
        // The usual way a channel handler feeds it: bytes appended to one buffer between calls.
        String input = BODY + NEXT_REQUEST;
        ChunkedDecoder decoder = new ChunkedDecoder(MAX_LINE, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        StringBuilder data = new StringBuilder();
        ByteBuf in = Unpooled.buffer();
        try {
            boolean done = false;
            for (int i = 0; i < input.length(); i += 7) {
                in.writeCharSequence(input.substring(i, Math.min(i + 7, input.length())), StandardCharsets.ISO_8859_1);
                done = decoder.decode(in, out);
                data.append(drain(out));
                if (done) {
                    in.writeCharSequence(input.substring(Math.min(i + 7, input.length())), StandardCharsets.ISO_8859_1);
                    break;
                }
            }
            assertTrue(done);
            assertEquals(DECODED, data.toString());
            assertEquals(NEXT_REQUEST, in.toString(StandardCharsets.ISO_8859_1));
        } finally {
            in.release();
        }
    }

    @Test
    void emitsPartialChunkDataAsSoonAsItArrives() {
        ChunkedDecoder decoder = new ChunkedDecoder(MAX_LINE, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf first = buf("a\r\n01234");
        ByteBuf second = buf("56789\r\n0\r\n\r\n");
        try {
            assertFalse(decoder.decode(first, out));
            assertEquals("01234", drain(out));
            assertTrue(decoder.decode(second, out));
            assertEquals("56789", drain(out));
        } finally {
            first.release();
            second.release();
        }
    }

    @Test
    void outputSlicesShareTheInputAndAreRetained() {
        ChunkedDecoder decoder = new ChunkedDecoder(MAX_LINE, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf in = buf("3\r\nabc\r\n0\r\n\r\n");
        assertTrue(decoder.decode(in, out));
        in.release();
        assertEquals(1, in.refCnt(), "the slice keeps the input alive");
        assertEquals("abc", drain(out));
        assertEquals(0, in.refCnt());
    }

    @Test
    void consumesNothingOnceDone() {
        ChunkedDecoder decoder = new ChunkedDecoder(MAX_LINE, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf in = buf("0\r\n\r\n");
        ByteBuf next = buf("1\r\nx\r\n0\r\n\r\n");
        try {
            assertTrue(decoder.decode(in, out));
            assertTrue(decoder.decode(next, out));
            assertEquals(0, next.readerIndex());
            assertTrue(out.isEmpty());
        } finally {
            in.release();
            next.release();
        }
    }

    @Test
    void resetAllowsDecodingTheNextBody() {
        ChunkedDecoder decoder = new ChunkedDecoder(MAX_LINE, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf in = buf("2\r\nab\r\n0\r\n\r\n3\r\ncde\r\n0\r\n\r\n");
        try {
            assertTrue(decoder.decode(in, out));
            assertEquals("ab", drain(out));
            decoder.reset();
            assertTrue(decoder.decode(in, out));
            assertEquals("cde", drain(out));
            assertFalse(in.isReadable());
        } finally {
            in.release();
        }
    }

    @Test
    void resetDiscardsAHalfDecodedBody() {
        ChunkedDecoder decoder = new ChunkedDecoder(MAX_LINE, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf partial = buf("ff;x=\"y");
        ByteBuf whole = buf("1\r\nz\r\n0\r\n\r\n");
        try {
            assertFalse(decoder.decode(partial, out));
            decoder.reset();
            assertTrue(decoder.decode(whole, out));
            assertEquals("z", drain(out));
        } finally {
            partial.release();
            whole.release();
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {
            "7fffffffffffffff", "7FFFFFFFFFFFFFFF", "0000000000000003", "3", "03", "3 ;x", "3\t;x", "3;x", "3;x=1",
            "3;x=\"\"", "3;x=\"a b\\\\c\\\"\"", "3 ; x ; y = z ; w=\"v\"", "3;x=\"\u00e9\"", "3;!#$%&'*+-.^_`|~=v",
    })
    void acceptsChunkSizeLines(String sizeLine) {
        ChunkedDecoder decoder = new ChunkedDecoder(MAX_LINE, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf in = buf(sizeLine + "\r\nabc");
        try {
            assertFalse(decoder.decode(in, out));
            assertEquals("abc", drain(out));
        } finally {
            in.release();
        }
    }

    static Stream<String> malformedBodies() {
        return Stream.of(
                // chunk-size
                "\r\n",
                ";x\r\n",
                "g\r\n",
                "-1\r\n",
                "+1\r\n",
                " 1\r\nx\r\n0\r\n\r\n",
                "\t1\r\nx\r\n0\r\n\r\n",
                "1 \r\nx\r\n0\r\n\r\n",
                "1\t\r\nx\r\n0\r\n\r\n",
                "0x1\r\nx\r\n0\r\n\r\n",
                "1.0\r\nx\r\n0\r\n\r\n",
                "1,2\r\n",
                "00000000000000001\r\n",
                "8000000000000000\r\n",
                "ffffffffffffffff\r\n",
                "10000000000000000\r\n",
                // line endings of the size line
                "1\nx\r\n0\r\n\r\n",
                "1\rx\r\n0\r\n\r\n",
                "1\r\r\nx\r\n0\r\n\r\n",
                "1;a\nx\r\n0\r\n\r\n",
                "1;a=\"b\nc\"\r\nx\r\n",
                // chunk extensions
                "1;\r\nx\r\n0\r\n\r\n",
                "1; \r\nx\r\n0\r\n\r\n",
                "1;;a\r\nx\r\n0\r\n\r\n",
                "1;=v\r\nx\r\n0\r\n\r\n",
                "1;a=\r\nx\r\n0\r\n\r\n",
                "1;a =\r\nx\r\n0\r\n\r\n",
                "1;a \r\nx\r\n0\r\n\r\n",
                "1;a=b \r\nx\r\n0\r\n\r\n",
                "1;a=b c\r\nx\r\n0\r\n\r\n",
                "1;a=b=c\r\nx\r\n0\r\n\r\n",
                "1;a(b)\r\nx\r\n0\r\n\r\n",
                "1;a=\"unterminated\r\nx\r\n0\r\n\r\n",
                "1;a=\"q\"x\r\nx\r\n0\r\n\r\n",
                "1;a=\"\u0001\"\r\nx\r\n0\r\n\r\n",
                "1;a=\"\\\u0000\"\r\nx\r\n0\r\n\r\n",
                "1;a\u0000\r\nx\r\n0\r\n\r\n",
                "1;a=b\u007f\r\nx\r\n0\r\n\r\n",
                "0;\r\n\r\n",
                // CRLF after chunk data
                "1\r\nxy\r\n0\r\n\r\n",
                "1\r\nxy\n0\r\n\r\n",
                "1\r\nx\r00\r\n\r\n",
                "1\r\nx\n0\r\n\r\n",
                "1\r\nx\r0\r\n\r\n",
                "1\r\nx0\r\n\r\n",
                "2\r\nx\r\n\r\n0\r\n\r\n",
                // trailer section
                "0\r\nX-A: b\r\n c\r\n\r\n",
                "0\r\nX-A: b\r\n\tc\r\n\r\n",
                "0\r\n X-A: b\r\n\r\n",
                "0\r\nX-A : b\r\n\r\n",
                "0\r\nX-A\t: b\r\n\r\n",
                "0\r\n: b\r\n\r\n",
                "0\r\nNoColon\r\n\r\n",
                "0\r\nX(A): b\r\n\r\n",
                "0\r\nX-A: b\u0000c\r\n\r\n",
                "0\r\nX-A: b\u007f\r\n\r\n",
                "0\r\nX-A: b\nX-B: c\r\n\r\n",
                "0\r\nX-A: b\rc\r\n\r\n",
                "0\r\n\n",
                "0\r\n\rX",
                "0\r\n\r\r\n",
                "0\r\nX-A: b\r\n\n");
    }

    @ParameterizedTest
    @MethodSource("malformedBodies")
    void refusesMalformedBody(String input) {
        assertRefused(input);
    }

    @Test
    void refusesUnboundedChunkExtensionWithoutBufferingIt() {
        ChunkedDecoder decoder = new ChunkedDecoder(100, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        int fed = 0;
        ByteBuf start = buf("1;ext=");
        try {
            assertFalse(decoder.decode(start, out));
            fed += start.readerIndex();
        } finally {
            start.release();
        }
        for (int i = 0; i < 1000; i++) {
            ByteBuf piece = buf("v".repeat(10));
            try {
                decoder.decode(piece, out);
                assertFalse(piece.isReadable(), "consumed, not held back");
                fed += 10;
            } catch (HttpParseException e) {
                assertEquals(400, e.status());
                assertTrue(fed <= 100, "refused once the line passed the limit, after " + fed + " bytes");
                return;
            } finally {
                piece.release();
            }
        }
        fail("the extension was never refused");
    }

    @Test
    void chunkSizeLineLimitIncludesExtensions() {
        String ext = ";" + "e".repeat(40);
        ChunkedDecoder fits = new ChunkedDecoder(("1" + ext + "\r\n").length(), MAX_TRAILERS);
        ChunkedDecoder tooLong = new ChunkedDecoder(("1" + ext + "\r\n").length() - 1, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf a = buf("1" + ext + "\r\nx\r\n0\r\n\r\n");
        ByteBuf b = buf("1" + ext + "\r\nx\r\n0\r\n\r\n");
        try {
            assertTrue(fits.decode(a, out));
            assertEquals("x", drain(out));
            assertEquals(400, assertThrows(HttpParseException.class, () -> tooLong.decode(b, out)).status());
        } finally {
            a.release();
            b.release();
            drain(out);
        }
    }

    @Test
    void limitsEachTrailerLine() {
        ChunkedDecoder decoder = new ChunkedDecoder(32, MAX_TRAILERS);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf ok = buf("0\r\nX-A: " + "v".repeat(20) + "\r\n\r\n");
        ByteBuf tooLong = buf("0\r\nX-A: " + "v".repeat(40) + "\r\n\r\n");
        try {
            assertTrue(decoder.decode(ok, out));
            decoder.reset();
            assertEquals(400, assertThrows(HttpParseException.class, () -> decoder.decode(tooLong, out)).status());
        } finally {
            ok.release();
            tooLong.release();
        }
    }

    @Test
    void limitsTheTrailerSection() {
        String trailers = "X-A: 1234567890\r\n".repeat(10) + "\r\n";
        ChunkedDecoder fits = new ChunkedDecoder(MAX_LINE, trailers.length());
        ChunkedDecoder tooSmall = new ChunkedDecoder(MAX_LINE, trailers.length() - 1);
        List<ByteBuf> out = new ArrayList<>();
        ByteBuf a = buf("0\r\n" + trailers);
        ByteBuf b = buf("0\r\n" + trailers);
        try {
            assertTrue(fits.decode(a, out));
            assertEquals(400, assertThrows(HttpParseException.class, () -> tooSmall.decode(b, out)).status());
        } finally {
            a.release();
            b.release();
        }
    }

    @Test
    void decodesLargeChunkInPieces() {
        String data = "0123456789abcdef".repeat(4096);
        String input = Integer.toHexString(data.length()) + "\r\n" + data + "\r\n0\r\n\r\n";
        decodeInPieces(input, new int[]{3, 1000, 1001, 30000, input.length() - 3}, data, "");
    }
}
