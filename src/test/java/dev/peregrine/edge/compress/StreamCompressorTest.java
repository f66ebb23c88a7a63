package dev.peregrine.edge.compress;

import com.aayushatharva.brotli4j.Brotli4jLoader;
import com.aayushatharva.brotli4j.decoder.Decoder;
import com.github.luben.zstd.ZstdInputStream;
import dev.peregrine.edge.ContentCoding;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import java.util.Random;
import java.util.zip.GZIPInputStream;
import java.util.zip.Inflater;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

class StreamCompressorTest {
    private static final ByteBufAllocator ALLOC = ByteBufAllocator.DEFAULT;

    /** Text-like bytes with some noise, so that a piece does not shrink to nothing. */
    private static byte[] sample(int size, long seed) {
        Random random = new Random(seed);
        byte[] out = new byte[size];
        String words = "{\"id\": 1, \"name\": \"peregrine\", \"tags\": [\"fast\"]}\n";
        for (int i = 0; i < size; i++) out[i] = random.nextInt(8) == 0 ? (byte) ('a' + random.nextInt(26)) : (byte) words.charAt(i % words.length());
        return out;
    }

    private static byte[] decode(ContentCoding coding, byte[] data) throws IOException {
        return switch (coding) {
            case BR -> {
                Brotli4jLoader.ensureAvailability();
                yield Decoder.decompress(data).getDecompressedData();
            }
            case ZSTD -> readAll(new ZstdInputStream(new ByteArrayInputStream(data)));
            case GZIP -> readAll(new GZIPInputStream(new ByteArrayInputStream(data)));
        };
    }

    private static byte[] readAll(InputStream in) throws IOException {
        try (in) {
            return in.readAllBytes();
        }
    }

    private static byte[] drain(ByteBuf out) {
        byte[] bytes = new byte[out.readableBytes()];
        out.readBytes(bytes);
        out.release();
        return bytes;
    }

    @ParameterizedTest
    @EnumSource(ContentCoding.class)
    void piecesOfEveryKindRoundTrip(ContentCoding coding) throws IOException {
        Brotli4jLoader.ensureAvailability();
        byte[] a = sample(100_000, 1), b = sample(10, 2), c = sample(40_000, 3);
        CompositeByteBuf composite = Unpooled.compositeBuffer();
        composite.addComponent(true, Unpooled.wrappedBuffer(c, 0, 20_000));
        composite.addComponent(true, ALLOC.directBuffer().writeBytes(c, 20_000, 20_000));
        ByteArrayOutputStream sent = new ByteArrayOutputStream();
        try (StreamCompressor compressor = StreamCompressor.create(coding)) {
            ByteBuf heap = Unpooled.wrappedBuffer(a);
            ByteBuf direct = ALLOC.directBuffer().writeBytes(b);
            sent.writeBytes(drain(compressor.compress(heap, false, ALLOC)));
            sent.writeBytes(drain(compressor.compress(null, false, ALLOC)));
            sent.writeBytes(drain(compressor.compress(Unpooled.EMPTY_BUFFER, false, ALLOC)));
            sent.writeBytes(drain(compressor.compress(direct, false, ALLOC)));
            sent.writeBytes(drain(compressor.compress(composite, true, ALLOC)));
            assertEquals(0, heap.refCnt(), "inputs are released");
            assertEquals(0, direct.refCnt());
            assertEquals(0, composite.refCnt());
            compressor.close(); // and again by try-with-resources: idempotent
        }
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        expected.writeBytes(a);
        expected.writeBytes(b);
        expected.writeBytes(c);
        assertArrayEquals(expected.toByteArray(), decode(coding, sent.toByteArray()));
    }

    @ParameterizedTest
    @EnumSource(ContentCoding.class)
    void anEmptyBodyIsAValidStream(ContentCoding coding) throws IOException {
        Brotli4jLoader.ensureAvailability();
        try (StreamCompressor compressor = StreamCompressor.create(coding)) {
            assertArrayEquals(new byte[0], decode(coding, drain(compressor.compress(null, true, ALLOC))));
        }
    }

    @Test
    void eachGzipPieceDecodesOnArrival() throws Exception {
        Inflater inflater = new Inflater(true);
        try (StreamCompressor compressor = StreamCompressor.create(ContentCoding.GZIP)) {
            byte[] first = drain(compressor.compress(Unpooled.wrappedBuffer(sample(5000, 4)), false, ALLOC));
            inflater.setInput(first, 10, first.length - 10); // past the gzip header
            byte[] out = new byte[10_000];
            assertEquals(5000, inflater.inflate(out), "a flushed piece is all there");
            assertArrayEquals(sample(5000, 4), Arrays.copyOf(out, 5000));
        } finally {
            inflater.end();
        }
    }
}
