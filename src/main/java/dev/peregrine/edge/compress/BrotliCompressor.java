package dev.peregrine.edge.compress;

import com.aayushatharva.brotli4j.encoder.Encoder;
import com.aayushatharva.brotli4j.encoder.EncoderJNI;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;

/**
 * br through brotli4j's streaming encoder (its {@code EncoderJNI.Wrapper}: the library's stream
 * classes work on Java streams and channels, not on buffers handed in pieces).
 */
final class BrotliCompressor implements StreamCompressor {
    /**
     * Quality 3: on 100 KiB of JSON, 3 ms for a ratio of 0.138, where 4 takes 2.5 times longer for 0.136
     * (docs/EDGE.md has the figures); the I/O thread that compresses also serves other connections.
     */
    static final int QUALITY = 3;
    /** A 256 KiB window: responses are rarely larger, and a stream that lives long holds less. */
    static final int WINDOW_LOG = 18;
    private static final int INPUT_BUFFER = 16 * 1024;

    private EncoderJNI.Wrapper encoder;

    BrotliCompressor() {
        try {
            encoder = new EncoderJNI.Wrapper(INPUT_BUFFER, QUALITY, WINDOW_LOG, Encoder.Mode.TEXT);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public ByteBuf compress(ByteBuf input, boolean last, ByteBufAllocator alloc) {
        ByteBuf out = alloc.directBuffer(input == null ? 64 : Math.max(64, input.readableBytes() / 2));
        try {
            if (input != null) {
                ByteBuffer in = encoder.getInputBuffer();
                while (input.isReadable()) {
                    in.clear();
                    int n = Math.min(in.remaining(), input.readableBytes());
                    in.limit(n);
                    input.readBytes(in);
                    run(EncoderJNI.Operation.PROCESS, n, out);
                }
            }
            run(last ? EncoderJNI.Operation.FINISH : EncoderJNI.Operation.FLUSH, 0, out);
            return out;
        } catch (RuntimeException e) {
            out.release();
            throw e;
        } finally {
            if (input != null) input.release();
        }
    }

    /** Pushes {@code length} bytes of the input buffer with {@code operation}, and collects what comes out. */
    private void run(EncoderJNI.Operation operation, int length, ByteBuf out) {
        encoder.push(operation, length);
        while (true) {
            if (!encoder.isSuccess()) throw new IllegalStateException("brotli encoder failed");
            if (encoder.hasMoreOutput()) out.writeBytes(encoder.pull());
            else if (encoder.hasRemainingInput()) encoder.push(operation, 0);
            else return;
        }
    }

    @Override
    public void close() {
        if (encoder != null) encoder.destroy();
        encoder = null;
    }
}
