package dev.peregrine.python;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;

/** Copies between Netty buffers and Python objects, with one memcpy each way. */
public final class NativeBuffers {
    private NativeBuffers() {}

    /** A new bytes object holding the readable bytes of {@code buf} (the buffer is not released). */
    public static MemorySegment toBytes(ByteBuf buf) {
        int length = buf.readableBytes();
        if (buf.hasArray()) return Py.bytes(buf.array(), buf.arrayOffset() + buf.readerIndex(), length);
        if (buf.nioBufferCount() == 1) {
            ByteBuffer nio = buf.nioBuffer(buf.readerIndex(), length);
            if (nio.isDirect()) return Py.bytes(MemorySegment.ofBuffer(nio), length);
        }
        byte[] copy = new byte[length];
        buf.getBytes(buf.readerIndex(), copy);
        return Py.bytes(copy, 0, length);
    }

    /** A new str decoded from the readable bytes of {@code buf}, which hold UTF-8 (the buffer is not released). */
    public static MemorySegment toStr(ByteBuf buf) {
        int length = buf.readableBytes();
        if (buf.nioBufferCount() == 1) {
            ByteBuffer nio = buf.nioBuffer(buf.readerIndex(), length);
            if (nio.isDirect()) return Py.utf8(MemorySegment.ofBuffer(nio), length);
        }
        byte[] copy = new byte[length];
        buf.getBytes(buf.readerIndex(), copy);
        return Py.utf8(copy, 0, length);
    }

    /**
     * Up to this size a copy for the I/O threads goes to the Java heap. The threads that run Python are
     * not Netty threads, so the pooled allocator gives them no thread cache: each direct buffer they took
     * came from a locked arena, 0.6 % of the ASGI thread's time on a small response (perf, 2026-12-03),
     * where a heap array costs a bump of the thread's allocation pointer. The I/O thread moves the bytes
     * into a direct buffer from its own cache as it writes them: a second copy, and garbage for the young
     * generation, which is why larger bodies still take the locked path.
     */
    static final int HEAP_COPY_MAX = 2 * 1024;

    /**
     * A buffer holding a copy of native memory (the contents of a Python object): on the heap when small
     * ({@link #HEAP_COPY_MAX}), else a pooled direct buffer.
     */
    public static ByteBuf fromNative(ByteBufAllocator alloc, MemorySegment data) {
        int length = (int) data.byteSize();
        if (length <= HEAP_COPY_MAX) return Unpooled.wrappedBuffer(data.toArray(ValueLayout.JAVA_BYTE));
        ByteBuf buf = alloc.directBuffer(length);
        if (buf.nioBufferCount() == 1) {
            ByteBuffer target = buf.nioBuffer(0, length);
            MemorySegment.copy(data, 0, MemorySegment.ofBuffer(target), 0, length);
        } else {
            byte[] copy = data.toArray(ValueLayout.JAVA_BYTE);
            buf.setBytes(0, copy);
        }
        buf.writerIndex(length);
        return buf;
    }
}
