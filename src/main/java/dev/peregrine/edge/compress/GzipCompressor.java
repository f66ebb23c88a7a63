package dev.peregrine.edge.compress;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

import java.nio.ByteBuffer;
import java.util.zip.CRC32;
import java.util.zip.Deflater;

/**
 * gzip through the JDK's Deflater. The gzip wrapping (RFC 1952: a 10-byte header, then the CRC-32 and
 * the length) is written here because the JDK only offers it as a blocking OutputStream, and Netty's
 * JdkZlibEncoder is a channel handler, not something to call per buffer.
 */
final class GzipCompressor implements StreamCompressor {
    /** Level 5: within 1 % of zlib's default 6 on text, and faster (docs/EDGE.md has the figures). */
    static final int LEVEL = 5;
    /** Magic, deflate, no flags, no modification time, no extra flags, unknown OS. */
    private static final byte[] HEADER = {0x1f, (byte) 0x8b, 8, 0, 0, 0, 0, 0, 0, (byte) 0xff};

    private Deflater deflater = new Deflater(LEVEL, true);
    private final CRC32 crc = new CRC32();
    private boolean headerWritten;

    @Override
    public ByteBuf compress(ByteBuf input, boolean last, ByteBufAllocator alloc) {
        int length = input == null ? 0 : input.readableBytes();
        ByteBuf out = alloc.directBuffer(length / 2 + 64);
        try {
            if (!headerWritten) {
                out.writeBytes(HEADER);
                headerWritten = true;
            }
            if (input != null) {
                for (ByteBuffer piece : input.nioBuffers()) {
                    crc.update(piece.duplicate());
                    deflater.setInput(piece);
                    deflate(out, Deflater.NO_FLUSH);
                }
            }
            if (last) {
                deflater.finish();
                while (!deflater.finished()) drain(out, Deflater.NO_FLUSH);
                out.writeIntLE((int) crc.getValue());
                out.writeIntLE((int) deflater.getBytesRead());
            } else {
                deflate(out, Deflater.SYNC_FLUSH);
            }
            return out;
        } catch (RuntimeException e) {
            out.release();
            throw e;
        } finally {
            if (input != null) input.release();
        }
    }

    /** Deflates until the input is taken and, when flushing, until the flush is out (it is when the output was not filled). */
    private void deflate(ByteBuf out, int flush) {
        while (true) {
            int room = drain(out, flush);
            if (deflater.needsInput() && room > 0) return;
        }
    }

    /** One deflate call into out's free space; returns the space it left. */
    private int drain(ByteBuf out, int flush) {
        out.ensureWritable(4096);
        ByteBuffer dst = out.internalNioBuffer(out.writerIndex(), out.writableBytes());
        int before = dst.position();
        deflater.deflate(dst, flush);
        out.writerIndex(out.writerIndex() + dst.position() - before);
        return dst.remaining();
    }

    @Override
    public void close() {
        if (deflater != null) deflater.end();
        deflater = null;
    }
}
