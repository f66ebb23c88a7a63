package dev.peregrine.edge.compress;

import com.github.luben.zstd.EndDirective;
import com.github.luben.zstd.Zstd;
import com.github.luben.zstd.ZstdCompressCtx;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

import java.nio.ByteBuffer;

/** zstd through zstd-jni's streaming context, on direct buffers. */
final class ZstdCompressor implements StreamCompressor {
    /** zstd's default level: faster than gzip 6 with a smaller output. */
    static final int LEVEL = 3;
    /**
     * A 1 MiB window. RFC 9659 caps the window of the HTTP coding at 8 MiB (windowLog 23), and Chromium
     * refuses more; 1 MiB is what level 3 uses for inputs that size, and keeps a long stream small.
     */
    static final int WINDOW_LOG = 20;

    private ZstdCompressCtx context = new ZstdCompressCtx().setLevel(LEVEL).setWindowLog(WINDOW_LOG).setChecksum(false);

    @Override
    public ByteBuf compress(ByteBuf input, boolean last, ByteBufAllocator alloc) {
        ByteBuf direct = null;
        ByteBuf out = null;
        try {
            int length = input == null ? 0 : input.readableBytes();
            ByteBuffer src;
            if (input == null) {
                src = ByteBuffer.allocateDirect(0);
            } else if (input.isDirect() && input.nioBufferCount() == 1) {
                src = input.nioBuffer();
            } else {
                direct = alloc.directBuffer(length);
                direct.writeBytes(input, input.readerIndex(), length);
                src = direct.nioBuffer();
            }
            EndDirective directive = last ? EndDirective.END : EndDirective.FLUSH;
            out = alloc.directBuffer((int) Math.min(Integer.MAX_VALUE - 64, Zstd.compressBound(length) + 64));
            while (true) {
                ByteBuffer dst = out.internalNioBuffer(out.writerIndex(), out.writableBytes());
                int before = dst.position();
                boolean done = context.compressDirectByteBufferStream(dst, src, directive);
                out.writerIndex(out.writerIndex() + dst.position() - before);
                if (done && !src.hasRemaining()) return out;
                out.ensureWritable(Math.max(4096, out.capacity() / 2));
            }
        } catch (RuntimeException e) {
            if (out != null) out.release();
            throw e;
        } finally {
            if (direct != null) direct.release();
            if (input != null) input.release();
        }
    }

    @Override
    public void close() {
        if (context != null) context.close();
        context = null;
    }
}
